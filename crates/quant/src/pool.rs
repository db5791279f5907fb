//! A small pool of worker threads that park (block on a channel) between jobs.
//!
//! Spinning pools collapse on a machine whose few cores are shared, so a worker here sleeps in
//! the kernel until a job arrives. Waking one takes tens of microseconds — as long as a small
//! matmul — so [`Pool::map`] never waits for a worker to start: the work is cut into pieces
//! that the caller and the workers take one at a time, and a worker that wakes late finds
//! less (or nothing) left to do.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};
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
}

impl Pool {
    /// `f(0)`, …, `f(n - 1)`, in order, computed by the caller and the workers together:
    /// each takes the next index until none is left.
    pub fn map<R: Send + 'static>(
        &self,
        n: usize,
        f: Arc<dyn Fn(usize) -> R + Send + Sync>,
    ) -> Vec<R> {
        let next = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = channel::<(usize, R)>();
        let helpers = self.workers.len().min(n.saturating_sub(1));
        for worker in &self.workers[..helpers] {
            let (next, f, tx) = (Arc::clone(&next), Arc::clone(&f), tx.clone());
            let job: Job = Box::new(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n || tx.send((i, f(i))).is_err() {
                        break;
                    }
                }
            });
            // A worker gone (its thread ended) leaves its share to the others.
            if let Ok(sender) = worker.lock() {
                let _ = sender.send(job);
            }
        }
        drop(tx);
        let mut results: Vec<Option<R>> = (0..n).map(|_| None).collect();
        let mut done = 0;
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            results[i] = Some(f(i));
            done += 1;
        }
        // Pieces a worker took: wait for them (the channel closes when every worker is done).
        while done < n {
            match rx.recv() {
                Ok((i, r)) => {
                    results[i] = Some(r);
                    done += 1;
                }
                Err(_) => break,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_returns_every_result_in_order() {
        let pool = Pool::new(3);
        for n in [0usize, 1, 2, 7, 100] {
            let out = pool.map(n, Arc::new(|i| i * i));
            assert_eq!(out, (0..n).map(|i| i * i).collect::<Vec<_>>());
        }
    }
}
