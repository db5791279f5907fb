//! A small pool of worker threads that park (block on a channel) between jobs.
//!
//! Spinning pools collapse on a machine whose few cores are shared, so a worker here sleeps in
//! the kernel until a job arrives. The caller runs one share of the work itself and waits for
//! the rest, so a pool of `n` threads keeps `n` cores busy with `n - 1` workers.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Mutex, OnceLock};
use std::thread;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Workers waiting for jobs; each has its own channel.
pub struct Pool {
    workers: Vec<Mutex<Sender<Job>>>,
}

impl Pool {
    /// A pool that runs jobs on `threads` threads: the caller plus `threads - 1` workers.
    pub fn new(threads: usize) -> Pool {
        let workers = (1..threads.max(1))
            .filter_map(|i| {
                let (tx, rx) = channel::<Job>();
                thread::Builder::new()
                    .name(format!("stampo-matmul-{i}"))
                    .spawn(move || worker(rx))
                    .ok()
                    .map(|_| Mutex::new(tx))
            })
            .collect();
        Pool { workers }
    }

    /// The process-wide pool: `STAMPO_THREADS` threads, else the available parallelism.
    pub fn global() -> &'static Pool {
        static POOL: OnceLock<Pool> = OnceLock::new();
        POOL.get_or_init(|| Pool::new(default_threads()))
    }

    /// Threads that work on a job: the caller and the workers.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `tasks`, the first on the calling thread, and returns their results in order.
    pub fn run<R: Send + 'static>(&self, tasks: Vec<Box<dyn FnOnce() -> R + Send>>) -> Vec<R> {
        let mut tasks = tasks.into_iter();
        let Some(first) = tasks.next() else {
            return Vec::new();
        };
        let (tx, rx) = channel::<(usize, R)>();
        let mut pending = 0;
        for (i, task) in tasks.enumerate() {
            let tx = tx.clone();
            let job: Job = Box::new(move || {
                // The receiver outlives every job: `run` waits for all of them below.
                let _ = tx.send((i + 1, task()));
            });
            pending += 1;
            // A job no worker can take (no workers, or a worker gone) runs here instead.
            let refused = match self.workers.get(i % self.workers.len().max(1)) {
                Some(worker) => match worker.lock() {
                    Ok(sender) => sender.send(job).err().map(|e| e.0),
                    Err(_) => Some(job),
                },
                None => Some(job),
            };
            if let Some(job) = refused {
                job();
            }
        }
        let mut results: Vec<Option<R>> = (0..=pending).map(|_| None).collect();
        results[0] = Some(first());
        for _ in 0..pending {
            if let Ok((i, r)) = rx.recv() {
                results[i] = Some(r);
            }
        }
        results.into_iter().flatten().collect()
    }
}

fn worker(rx: Receiver<Job>) {
    while let Ok(job) = rx.recv() {
        job();
    }
}

fn default_threads() -> usize {
    std::env::var("STAMPO_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| thread::available_parallelism().map_or(1, |n| n.get()))
}
