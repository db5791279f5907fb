//! Threads in the browser, for the runtime built with wasm's `atomics` (`stampo_threads`, see
//! scripts/build-wasm.sh): its memory is a `SharedArrayBuffer`, which a page has only when it
//! is cross-origin isolated (served with COOP and COEP headers).
//!
//! std cannot start a thread in the browser, so the matmul pool's workers are Web Workers the
//! package starts (pkg/src/host.js, pkg/src/thread.js): the engine's worker calls
//! `startPool(n)`, which makes the process-wide pool of `n` threads with `n - 1` worker loops
//! waiting to be run; each Web Worker instantiates the module over the same memory and calls
//! `runPoolWorker`, which takes one loop and runs it for good, parked between jobs
//! (`memory.atomic.wait32`, which a Web Worker may do and a page's main thread may not: the
//! engine therefore runs this runtime only in a worker).

use std::sync::Mutex;

use stampo_model::quant::pool::{Pool, WorkerLoop};
use wasm_bindgen::prelude::*;

use crate::error::{ErrorCode, js_error};

#[wasm_bindgen]
extern "C" {
    /// `performance.now()` (milliseconds), which a Web Worker has too: each thread's instance
    /// imports its own.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

/// The worker loops `startPool` made and no Web Worker has taken yet.
static LOOPS: Mutex<Vec<WorkerLoop>> = Mutex::new(Vec::new());

/// Makes the pool the model's products run on: `threads` threads, this one and `threads - 1`
/// to be started by calling `runPoolWorker` from as many Web Workers. Returns how many such
/// calls it waits for: `threads - 1`, or 0 when the pool was made before (it is made once
/// per module instance, on first use at the latest).
#[wasm_bindgen(js_name = startPool)]
pub fn start_pool(threads: usize) -> usize {
    // With a clock the threads poll for work a while before they park, as natively: waking a
    // parked thread (`memory.atomic.notify`) takes longer than the pieces of a decoding
    // step's products.
    Pool::set_clock(|| performance_now() * 1e3);
    let (pool, loops) = Pool::with_worker_loops(threads.max(1));
    if Pool::set_global(pool).is_err() {
        return 0;
    }
    let count = loops.len();
    if let Ok(mut waiting) = LOOPS.lock() {
        waiting.extend(loops);
    }
    count
}

/// Runs one of `startPool`'s worker loops on this thread (a Web Worker sharing the module's
/// memory) and never returns while the pool lives. `on_ready()` is called once the loop is
/// taken, before it starts waiting for work.
#[wasm_bindgen(js_name = runPoolWorker)]
pub fn run_pool_worker(on_ready: &js_sys::Function) -> Result<(), JsValue> {
    let taken = LOOPS.lock().ok().and_then(|mut waiting| waiting.pop());
    let Some(worker) = taken else {
        return Err(js_error(
            ErrorCode::InvalidArgument,
            "runPoolWorker: no worker loop is waiting (call startPool first, once per thread)",
        ));
    };
    on_ready.call0(&JsValue::NULL)?;
    worker.run();
    Ok(())
}
