// What the browser benchmarks share: where the models and the wasm build are, which models
// to run (the command line's, else the three defaults), the person-extraction request, and
// a local server for the package, its wasm and the models.
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { serve } from "../../scripts/lib/static-server.mjs";

export const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const cache = process.env.STAMPO_CACHE ?? join(homedir(), ".cache/stampo");
/** $STAMPO_MODELS, default ~/.cache/stampo/models. */
export const models = process.env.STAMPO_MODELS ?? join(cache, "models");
/** $STAMPO_WASM_DIR, default ~/.cache/stampo/wasm/release. */
export const wasmDir = process.env.STAMPO_WASM_DIR ?? join(cache, "wasm/release");

/** The GGUF files named on the command line, else the three default models. */
export const modelNames = process.argv.slice(2).length > 0 ? process.argv.slice(2) : [
  "SmolLM2-135M-Instruct.Q4_1.gguf",
  "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
  "gemma-3-270m-q4_k_m.gguf",
];

/** The person extraction of tests/browser/package.test.mjs, without its schema. */
export const PERSON_MESSAGES = [
  { role: "system", content: "Estrai la persona dal testo come JSON." },
  { role: "user", content: "Mi chiamo Giulia Rossi, ho 34 anni e vivo a Torino." },
];
export const PERSON_SCHEMA = {
  type: "object",
  properties: { nome: { type: "string" }, eta: { type: "integer" }, citta: { type: "string" } },
  required: ["nome", "eta", "citta"],
  additionalProperties: false,
};
/** The greedy person extraction under its schema, with `extra` fields over it. */
export function personRequest(extra = {}) {
  return {
    messages: PERSON_MESSAGES,
    temperature: 0,
    max_tokens: 64,
    response_format: { type: "json_schema", json_schema: { name: "persona", schema: PERSON_SCHEMA } },
    ...extra,
  };
}

/** A paragraph of filler text (about 60 tokens) that a long prompt repeats. */
const FILLER = "Il comune ha approvato il nuovo piano per le piste ciclabili, che collegheranno " +
  "la stazione al centro storico entro la fine dell'anno; i lavori inizieranno a marzo e " +
  "costeranno circa due milioni di euro, secondo l'assessore ai trasporti. ";

/**
 * The person extraction with `pad` copies of the filler before the user's message (none when
 * `pad` is 0), and the context it needs: 4,096 for a padded prompt, 512 otherwise.
 */
export function paddedPersonRequest(pad, extra = {}) {
  const messages = PERSON_MESSAGES.map((m) =>
    m.role === "user" && pad > 0 ? { ...m, content: FILLER.repeat(pad) + m.content } : m);
  return { request: personRequest({ messages, ...extra }), contextSize: pad > 0 ? 4096 : 512 };
}

/** Serves the package (pkg/src over the wasm build), the models and the blank test page. */
export function servePackage(extraRoutes = {}) {
  return serve({
    "/pkg/wasm/": wasmDir,
    "/pkg/": join(root, "pkg/src"),
    "/models/": models,
    ...extraRoutes,
    "/": join(root, "tests/browser/pages"),
  });
}
