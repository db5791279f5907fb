// The engine's message handler, shared by the worker (worker.js) and the same-thread mode:
// owns the wasm module and the loaded model. One request runs at a time (the engine is
// synchronous); an abort arrives through a SharedArrayBuffer flag read after every token.
import init, { Engine, compileSchema } from "./wasm/stampo_wasm.js";

function fail(code, message) {
  return Object.assign(new Error(message), { code });
}

/** A handler of index.js's messages; `post` sends replies (chunks, done, error). */
export function createHost(post) {
  const ready = init({ module_or_path: new URL("./wasm/stampo_wasm_bg.wasm", import.meta.url) });
  let engine = null;
  const loaded = () => {
    if (!engine) throw fail("not_loaded", "no model is loaded: call Stampo.load first");
    return engine;
  };

  async function handle(msg) {
    await ready;
    switch (msg.type) {
      case "load": {
        engine?.free();
        engine = null;
        const started = performance.now();
        engine = new Engine(new Uint8Array(msg.buffer), msg.contextSize);
        return { info: JSON.parse(engine.info()), loadMs: performance.now() - started };
      }
      case "run": {
        const abort = msg.abort ? new Int32Array(msg.abort) : undefined;
        const onChunk = (chunk) => {
          post({ id: msg.id, type: "chunk", chunk });
          return false;
        };
        return { response: loaded().run(msg.body, msg.customJson ?? "", onChunk, abort) };
      }
      case "tokenize":
        return {
          ids: Array.from(loaded().tokenize(msg.text, msg.addSpecial ?? true, msg.parseSpecial ?? false)),
        };
      case "detokenize":
        return { text: loaded().detokenize(Uint32Array.from(msg.ids)) };
      case "compileSchema":
        return { result: compileSchema(msg.schema, msg.strict ?? false) };
      case "unload":
        engine?.free();
        engine = null;
        return {};
      default:
        throw fail("invalid_argument", `unknown message type ${msg.type}`);
    }
  }

  return async (msg) => {
    try {
      post({ id: msg.id, type: "done", ...(await handle(msg)) });
    } catch (err) {
      post({
        id: msg.id,
        type: "error",
        error: { message: err?.message ?? String(err), code: err?.code ?? "internal" },
      });
    }
  };
}
