// One thread of the engine's matmul pool, in the threaded CPU runtime (`stampo_threads`, see
// host.js): a Web Worker started by the engine's worker, which sends it the compiled module and
// the module's shared memory. It instantiates the module over that memory, says it is ready,
// and runs the pool's worker loop for good (parked between jobs). It ends with the engine's
// worker.
import { initSync, runPoolWorker } from "./wasm/stampo_threads.js";

self.onmessage = ({ data: { module, memory } }) => {
  try {
    initSync({ module, memory });
    runPoolWorker(() => self.postMessage({ ready: true }));
  } catch (err) {
    self.postMessage({ ready: false, error: String(err?.message ?? err) });
  }
};
