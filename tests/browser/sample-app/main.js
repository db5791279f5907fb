import { Stampo } from "stampo";

const out = document.getElementById("out");

try {
  const engine = await Stampo.load({ model: "/models/SmolLM2-135M-Instruct.Q4_1.gguf", contextSize: 1024 });
  const reply = await engine.chat.completions.create({
    messages: [
      { role: "system", content: "Estrai la persona dal testo come JSON." },
      { role: "user", content: "Mi chiamo Giulia Rossi, ho 34 anni e vivo a Torino." },
    ],
    temperature: 0,
    max_tokens: 96,
    response_format: {
      type: "json_schema",
      json_schema: {
        name: "persona",
        schema: {
          type: "object",
          properties: {
            nome: { type: "string" },
            eta: { type: "integer", minimum: 0, maximum: 120 },
            citta: { type: "string" },
          },
          required: ["nome", "eta", "citta"],
          additionalProperties: false,
        },
      },
    },
  });
  out.textContent = reply.choices[0].message.content;
  window.result = {
    content: reply.choices[0].message.content,
    device: engine.device,
    threads: engine.info.threads,
    threadsFallback: engine.info.threads_fallback,
    cores: navigator.hardwareConcurrency,
  };
} catch (err) {
  out.textContent = String(err);
  window.result = { error: `${err.name}: ${err.message}` };
}
