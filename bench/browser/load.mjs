// Time to first token in headless Chromium, cold (the model downloaded from localhost, the
// cache emptied first) and warm (a second load, from the model cache), and the engine's wasm
// memory after each load. The npm package in its worker, on the CPU path; per model, the
// person extraction of tests/browser/package.test.mjs, streamed: the first token is the first
// chunk with content. Not a test: numbers depend on the machine and its load.
//
//   scripts/build-pkg.sh && node bench/browser/load.mjs [MODEL.gguf ...]
//
// Models are read from $STAMPO_MODELS (default ~/.cache/stampo/models); the wasm from
// $STAMPO_WASM_DIR (default ~/.cache/stampo/wasm/release).
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { launchChromium } from "../../tests/browser/chromium.mjs";
import { serve } from "../../scripts/lib/static-server.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const cache = process.env.STAMPO_CACHE ?? join(homedir(), ".cache/stampo");
const models = process.env.STAMPO_MODELS ?? join(cache, "models");
const wasmDir = process.env.STAMPO_WASM_DIR ?? join(cache, "wasm/release");
const names = process.argv.slice(2).length > 0 ? process.argv.slice(2) : [
  "SmolLM2-135M-Instruct.Q4_1.gguf",
  "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
  "gemma-3-270m-q4_k_m.gguf",
];

const PERSON = {
  messages: [
    { role: "system", content: "Estrai la persona dal testo come JSON." },
    { role: "user", content: "Mi chiamo Giulia Rossi, ho 34 anni e vivo a Torino." },
  ],
  temperature: 0,
  max_tokens: 8,
  stream: true,
  response_format: {
    type: "json_schema",
    json_schema: {
      name: "persona",
      schema: {
        type: "object",
        properties: { nome: { type: "string" }, eta: { type: "integer" }, citta: { type: "string" } },
        required: ["nome", "eta", "citta"],
        additionalProperties: false,
      },
    },
  },
};

const server = await serve({
  "/pkg/wasm/": wasmDir,
  "/pkg/": join(root, "pkg/src"),
  "/models/": models,
  "/": join(root, "tests/browser/pages"),
});
const browser = await launchChromium();
const mib = (b) => (b / 2 ** 20).toFixed(0);
try {
  const page = await browser.context.newPage();
  await page.goto(`${server.origin}/blank.html`);
  await page.evaluate(async () => { window.stampo = await import("/pkg/index.js"); });
  console.log("| model | file MiB | cold: load s, first token s | warm (cache): load s, first token s | wasm memory MiB (weights MiB) |");
  console.log("|---|---|---|---|---|");
  for (const name of names) {
    if (!existsSync(join(models, name))) {
      console.log(`SKIPPED: ${name} not in ${models}`);
      continue;
    }
    const r = await page.evaluate(async ({ url, body }) => {
      const { Stampo } = window.stampo;
      await Stampo.cache.delete(url).catch(() => {});
      const once = async () => {
        const t0 = performance.now();
        const engine = await Stampo.load({ model: url, contextSize: 512, device: "cpu" });
        const loaded = performance.now();
        let first = null;
        for await (const chunk of engine.chat.completions.create(body)) {
          if (first === null && chunk.choices?.[0]?.delta?.content) first = performance.now();
        }
        await engine.unload();
        return { load: (loaded - t0) / 1000, first: (first - t0) / 1000, info: engine.info };
      };
      const cold = await once();
      const warm = await once();
      await Stampo.cache.delete(url).catch(() => {});
      return { cold, warm };
    }, { url: `/models/${name}`, body: PERSON });
    const { cold, warm } = r;
    if (cold.info.source !== "network" || warm.info.source !== "cache") {
      throw new Error(`${name}: sources ${cold.info.source}, ${warm.info.source}`);
    }
    console.log(`| ${name} | ${mib(cold.info.bytes)} | ${cold.load.toFixed(2)}, ${cold.first.toFixed(2)} | ${warm.load.toFixed(2)}, ${warm.first.toFixed(2)} | ${mib(cold.info.wasm_memory_bytes)} (${mib(cold.info.weight_bytes)}) |`);
  }
} finally {
  await browser.close();
  await server.close();
}
