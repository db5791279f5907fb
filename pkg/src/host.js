// The engine's message handler, shared by the worker (worker.js) and the same-thread mode:
// owns the wasm module and the loaded model. Messages are handled one at a time, in order:
// the engine's calls return promises (WebGPU reads logits back asynchronously), and a second
// call into the engine while one is pending would be refused. An abort arrives through a
// SharedArrayBuffer flag read after every token.
//
// A model arrives as "loadBegin", one "loadChunk" per piece of the file, then "loadEnd": each
// tensor goes onto the device as soon as its bytes are in, so the file is never held whole.
//
// Two runtimes: `stampo_wasm` (the CPU path and the grammar engine, always loaded) and
// `stampo_webgpu` (the same engine with the WebGPU device, three times larger), fetched only
// when a model is loaded on WebGPU.
import init, { beginLoad as beginOnCpu, compileSchema } from "./wasm/stampo_wasm.js";

let webgpuRuntime = null;
/** The WebGPU runtime's `beginLoad`, fetched and started on first use. */
function webgpuLoader() {
  if (!webgpuRuntime) {
    webgpuRuntime = import("./wasm/stampo_webgpu.js").then(async (runtime) => {
      const exports = await runtime.default({ module_or_path: new URL("./wasm/stampo_webgpu_bg.wasm", import.meta.url) });
      return { begin: runtime.beginLoad, memory: exports.memory };
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
  // The model being loaded: the wasm loader, why "auto" passed WebGPU over, when it began.
  let loading = null;
  // The message being handled: progress during a load is reported under its id.
  let current = null;
  const dropLoad = () => {
    loading?.loader.free();
    loading = null;
  };
  const loaded = () => {
    if (!engine) throw fail("not_loaded", "no model is loaded: call Stampo.load first");
    return engine;
  };

  async function handle(msg) {
    await ready;
    switch (msg.type) {
      case "loadBegin": {
        engine?.free();
        engine = null;
        dropLoad();
        const started = performance.now();
        const { device, fallback } = await chooseDevice(msg.device ?? "auto");
        const { begin, memory } = device === "cpu" ? { begin: beginOnCpu, memory: (await ready).memory } : await webgpuLoader();
        // Called once with 0 when the header is parsed, then as each tensor goes onto the
        // device: index.js reports them as the "parse" and "upload" phases.
        let parsed = false;
        const onUpload = (loaded, total) => {
          const phase = parsed ? "upload" : "parse";
          parsed = true;
          post({ id: current, type: "chunk", chunk: JSON.stringify({ phase, loaded, total }) });
        };
        loading = { loader: await begin(msg.contextSize, device, onUpload, msg.sha256 ?? null), fallback, started, memory };
        return {};
      }
      case "loadChunk": {
        if (!loading) throw fail("not_loading", "a piece of a model arrived with no load begun");
        try {
          loading.loader.push(msg.chunk);
        } catch (err) {
          dropLoad();
          throw err;
        }
        return {};
      }
      case "loadEnd": {
        if (!loading) throw fail("not_loading", "no load was begun");
        const { loader, fallback, started, memory } = loading;
        loading = null;
        engine = loader.finish(); // consumes the loader, whether it succeeds or not
        const info = JSON.parse(engine.info());
        info.webgpu_fallback ??= fallback;
        // The module's memory never shrinks: its size now is the most the load ever took.
        info.wasm_memory_bytes = memory?.buffer.byteLength ?? null;
        return { info, loadMs: performance.now() - started };
      }
      case "loadAbort":
        dropLoad();
        return {};
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
    current = msg.id;
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
