// The engine's message handler, shared by the worker (worker.js) and the same-thread mode:
// owns the wasm module and the loaded model. Messages are handled one at a time, in order:
// the engine's calls return promises (WebGPU reads logits back asynchronously), and a second
// call into the engine while one is pending would be refused. An abort arrives through a
// SharedArrayBuffer flag read after every token.
//
// Two runtimes: `stampo_wasm` (the CPU path and the grammar engine, always loaded) and
// `stampo_webgpu` (the same engine with the WebGPU device, three times larger), fetched only
// when a model is loaded on WebGPU.
import init, { loadEngine as loadOnCpu, compileSchema } from "./wasm/stampo_wasm.js";

let webgpuRuntime = null;
/** The WebGPU runtime's `loadEngine`, fetched and started on first use. */
function webgpuLoader() {
  if (!webgpuRuntime) {
    webgpuRuntime = import("./wasm/stampo_webgpu.js").then(async (runtime) => {
      await runtime.default({ module_or_path: new URL("./wasm/stampo_webgpu_bg.wasm", import.meta.url) });
      return runtime.loadEngine;
    });
    // A failed fetch is not remembered: the next load tries again.
    webgpuRuntime.catch(() => {
      webgpuRuntime = null;
    });
  }
  return webgpuRuntime;
}

function fail(code, message) {
  return Object.assign(new Error(message), { code });
}

/**
 * The device for `requested`. "auto" takes WebGPU only from a hardware adapter: a software
 * fallback adapter (SwiftShader) runs slower than the CPU path. Returns the device to ask the
 * engine for and, when "auto" passes WebGPU over, why.
 */
async function chooseDevice(requested) {
  if (requested !== "auto") return { device: requested, fallback: null };
  if (!globalThis.navigator?.gpu) return { device: "cpu", fallback: "this browser has no WebGPU" };
  const adapter = await navigator.gpu.requestAdapter().catch(() => null);
  if (!adapter) return { device: "cpu", fallback: "no WebGPU adapter" };
  const info = adapter.info ?? {};
  if (info.isFallbackAdapter ?? adapter.isFallbackAdapter) {
    const name = [info.vendor, info.architecture].filter(Boolean).join(" ") || "unnamed";
    return { device: "cpu", fallback: `the WebGPU adapter (${name}) is a software fallback, slower than the CPU path` };
  }
  return { device: "auto", fallback: null };
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
        const { device, fallback } = await chooseDevice(msg.device ?? "auto");
        const load = device === "cpu" ? loadOnCpu : await webgpuLoader();
        // The weights' way onto the device, as "chunk" messages: index.js reports them as the
        // "upload" phase.
        const onUpload = (loaded, total) => post({ id: msg.id, type: "chunk", chunk: JSON.stringify({ loaded, total }) });
        engine = await load(new Uint8Array(msg.buffer), msg.contextSize, device, onUpload);
        const info = JSON.parse(engine.info());
        info.webgpu_fallback ??= fallback;
        return { info, loadMs: performance.now() - started };
      }
      case "run": {
        const abort = msg.abort ? new Int32Array(msg.abort) : undefined;
        const onChunk = (chunk) => {
          post({ id: msg.id, type: "chunk", chunk });
          return false;
        };
        return { response: await loaded().run(msg.body, msg.customJson ?? "", onChunk, abort) };
      }
      case "warmUp": {
        const started = performance.now();
        await loaded().warmUp();
        return { warmUpMs: performance.now() - started };
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

  async function reply(msg) {
    try {
      post({ id: msg.id, type: "done", ...(await handle(msg)) });
    } catch (err) {
      post({
        id: msg.id,
        type: "error",
        error: { message: err?.message ?? String(err), code: err?.code ?? "internal" },
      });
    }
  }

  // `reply` never rejects, so the chain never breaks.
  let queue = Promise.resolve();
  return (msg) => {
    queue = queue.then(() => reply(msg));
    return queue;
  };
}
