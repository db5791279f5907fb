// The engine's message handler, shared by the worker (worker.js) and the same-thread mode:
// owns the wasm module and the loaded model. Messages are handled one at a time, in order:
// the engine's calls return promises (WebGPU reads logits back asynchronously), and a second
// call into the engine while one is pending would be refused. An abort arrives through a
// SharedArrayBuffer flag read after every token.
//
// A model arrives as "loadBegin", one "loadChunk" per piece of the file, then "loadEnd": each
// tensor goes onto the device as soon as its bytes are in, so the file is never held whole.
//
// Three runtimes: `stampo_wasm` (the CPU path and the grammar engine, on one thread),
// `stampo_threads` (the same built with wasm threads: its products run on a pool of Web Workers
// sharing its memory) and `stampo_webgpu` (the same engine with the WebGPU device, three times
// larger). Each is fetched only when needed: the threaded one for a model loaded on the CPU
// with more than one thread, where it can run (see `threadsUnavailable`); the WebGPU one for
// a model loaded on WebGPU.

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

/**
 * Why the threaded runtime cannot run here, or null. Its memory is a SharedArrayBuffer, which
 * only a cross-origin isolated page has (COOP and COEP headers), and its threads park between
 * jobs (`Atomics.wait`), which a page's main thread may not.
 */
function threadsUnavailable() {
  if (typeof WorkerGlobalScope === "undefined" || !(globalThis instanceof WorkerGlobalScope)) {
    return "the engine runs on the page's thread (worker: false)";
  }
  if (!globalThis.crossOriginIsolated) {
    return "the page is not cross-origin isolated (it needs the COOP and COEP headers)";
  }
  return null;
}

async function startSingleThread() {
  const runtime = await import("./wasm/stampo_wasm.js");
  const exports = await runtime.default({ module_or_path: new URL("./wasm/stampo_wasm_bg.wasm", import.meta.url) });
  return { runtime, memory: exports.memory, threadsFallback: null };
}

/** How long a thread may take to start before the load goes on with one thread. */
const THREAD_START_MS = 30_000;

/**
 * The threaded runtime with a pool of `threads` threads: this one and `threads - 1` Web Workers
 * (thread.js), each given the compiled module and the shared memory. Resolves once every one
 * runs the pool's loop; a thread that fails or does not start in time fails it all (the pool
 * would queue work for it for good).
 */
async function startThreads(threads) {
  const runtime = await import("./wasm/stampo_threads.js");
  const module = await WebAssembly.compileStreaming(fetch(new URL("./wasm/stampo_threads_bg.wasm", import.meta.url)));
  // The glue makes the shared memory; the module exports it too.
  const { memory } = await runtime.default({ module_or_path: module });
  const workers = [];
  const start = () =>
    new Promise((resolve, reject) => {
      const worker = new Worker(new URL("./thread.js", import.meta.url), { type: "module", name: "stampo-matmul" });
      workers.push(worker);
      const timer = setTimeout(() => reject(new Error(`a thread did not start in ${THREAD_START_MS / 1000} s`)), THREAD_START_MS);
      worker.onmessage = ({ data }) => {
        clearTimeout(timer);
        if (data.ready) resolve();
        else reject(new Error(`a thread failed to start: ${data.error}`));
      };
      worker.onerror = (event) => {
        clearTimeout(timer);
        reject(new Error(`a thread failed to start: ${event.message ?? "its script did not load"}`));
      };
      worker.postMessage({ module, memory });
    });
  try {
    await Promise.all(Array.from({ length: runtime.startPool(threads) }, start));
  } catch (err) {
    for (const worker of workers) worker.terminate();
    throw err;
  }
  return { runtime, memory, threadsFallback: null };
}

/**
 * The CPU runtime, chosen once per host by the first call: the threaded one for `threads > 1`
 * where it can run and starts, else the single-threaded one with the reason kept.
 */
function cpuRuntimeChooser() {
  let chosen = null;
  return (threads) => {
    chosen ??= (async () => {
      if (threads <= 1) return startSingleThread();
      const unavailable = threadsUnavailable();
      if (!unavailable) {
        try {
          return await startThreads(threads);
        } catch (err) {
          return { ...(await startSingleThread()), threadsFallback: `the threaded runtime did not start: ${err?.message ?? err}` };
        }
      }
      return { ...(await startSingleThread()), threadsFallback: unavailable };
    })();
    return chosen;
  };
}

function fail(code, message) {
  return Object.assign(new Error(message), { code });
}

/**
 * The device for `requested`. "auto" takes WebGPU only from a hardware adapter: a software
 * fallback adapter (SwiftShader) runs slower than the CPU path. Any adapter grants what the
 * WebGPU path binds: its kernels keep within WebGPU's default limits (8 storage buffers a
 * shader stage; crates/model/tests/webgpu_limits.rs). Returns the device to ask the engine for and, when "auto" passes WebGPU over, why.
 */
export async function chooseDevice(requested) {
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
  const cpuRuntime = cpuRuntimeChooser();
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
    switch (msg.type) {
      case "loadBegin": {
        engine?.free();
        engine = null;
        dropLoad();
        const started = performance.now();
        const { device, fallback } = await chooseDevice(msg.device ?? "auto");
        let begin, memory, threadsFallback = null;
        if (device === "cpu") {
          const cpu = await cpuRuntime(msg.threads ?? 1);
          ({ memory, threadsFallback } = cpu);
          begin = cpu.runtime.beginLoad;
        } else {
          ({ begin, memory } = await webgpuLoader());
          // Should "auto" find the WebGPU device unable to start after all, the WebGPU
          // runtime loads on its own CPU path, which has no threads.
          if ((msg.threads ?? 1) > 1) threadsFallback = "WebGPU did not start, and the WebGPU runtime's CPU path runs on one thread";
        }
        // Called once with 0 when the header is parsed, then as each tensor goes onto the
        // device: index.js reports them as the "parse" and "upload" phases.
        let parsed = false;
        const onUpload = (loaded, total) => {
          const phase = parsed ? "upload" : "parse";
          parsed = true;
          post({ id: current, type: "chunk", chunk: JSON.stringify({ phase, loaded, total }) });
        };
        loading = { loader: await begin(msg.contextSize, device, onUpload, msg.sha256 ?? null), fallback, threadsFallback, started, memory };
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
        const { loader, fallback, threadsFallback, started, memory } = loading;
        loading = null;
        engine = loader.finish(); // consumes the loader, whether it succeeds or not
        const info = JSON.parse(engine.info());
        info.webgpu_fallback ??= fallback;
        info.threads_fallback = info.device === "cpu" ? threadsFallback : null;
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
        const warmUpMs = performance.now() - started;
        // The warm-up's one token is a decoding step: on WebGPU it records the step's launches.
        return { warmUpMs, stepGraphs: JSON.parse(loaded().info()).step_graphs ?? null };
      }
      case "tokenize":
        return {
          ids: Array.from(loaded().tokenize(msg.text, msg.addSpecial ?? true, msg.parseSpecial ?? false)),
        };
      case "detokenize":
        return { text: loaded().detokenize(Uint32Array.from(msg.ids)) };
      case "compileSchema":
        return { result: (await cpuRuntime(1)).runtime.compileSchema(msg.schema, msg.strict ?? false) };
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
