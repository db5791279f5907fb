//! A small pool of worker threads that park between jobs.
//!
//! Spinning pools collapse on a machine whose few cores are shared: a thread that spins until
//! the others reach a barrier holds a core the late thread needs (llama.cpp, SmolLM2, two
//! threads on two cores that two busy processes also want: decode 18–24 tokens/s and prefill
//! 5–17, against 69–81 and 170–190 idle). Here a thread waits in the kernel, after a short
//! poll that gives the core away between looks and is skipped while the machine is busy:
//! - a worker polls for its next job for 100 µs (`STAMPO_POOL_POLL_US`). A decode step is a
//!   hundred products with 5–50 µs of the caller's own work between them; waking a parked
//!   worker takes tens of microseconds on these VMs, so a worker that parked after every
//!   product joined each one late (SmolLM2, two threads, idle: 60–63 tokens/s without the
//!   poll, 71–81 with it);
//! - [`Pool::map`] never waits for a worker to start: the work is cut into pieces that the
//!   caller and the workers take one at a time, and a worker that comes late finds less (or
//!   nothing) left to do. The caller then polls up to 50 µs for the pieces still being
//!   computed (a piece is a few microseconds) before it parks;
//! - a thread that finds it was descheduled while polling (another thread ran on its core)
//!   parks without polling for the next 50 ms: on a busy core a poll is charged to the
//!   poller, and the thread with the work waits behind it. With two busy processes on the two
//!   cores, SmolLM2 decodes at 30–49 tokens/s with the poll and 33–44 without.
//!
//! In the browser (the threaded wasm runtime) std has no clock: the runtime gives the pool
//! `performance.now()` ([`Pool::set_clock`]) and the threads poll as above (SmolLM2, two
//! threads, Chromium: decoding 56 → 62 tokens/s, medians of six runs); without a clock they
//! park at once.

use std::any::Any;
use std::cell::Cell;
use std::collections::VecDeque;
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, Thread};
use std::time::Duration;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// The workers, each with the queue of jobs it has been given.
pub struct Pool {
    workers: Vec<Arc<Inbox>>,
}

static GLOBAL: OnceLock<Pool> = OnceLock::new();

/// One worker's jobs, and how to wake it.
///
/// Not a std channel: in the browser its receiver spent a quarter of a worker's time in the
/// channel's own code and its lock between two threads (Chromium's profile of SmolLM2
/// decoding on two threads), where a queue under a lock held for a push or a pop, and
/// `park`/`unpark` (one atomic each way, and a futex only while parked), do the same job.
#[derive(Default)]
struct Inbox {
    jobs: Mutex<VecDeque<Job>>,
    /// The worker's thread, once its loop runs.
    thread: OnceLock<Thread>,
    /// Set when the pool is dropped: the loop ends.
    closed: AtomicBool,
}

impl Inbox {
    fn send(&self, job: Job) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.push_back(job);
        }
        // A loop not running yet finds the job when it starts.
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }

    fn next(&self) -> Option<Job> {
        self.jobs.lock().ok().and_then(|mut jobs| jobs.pop_front())
    }

    /// Runs the jobs on this thread, parked between them, until the pool is dropped.
    fn run(&self) {
        let _ = self.thread.set(thread::current());
        let poll = worker_poll();
        loop {
            if let Some(job) = poll_for(poll, || self.next()) {
                job();
                continue;
            }
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            // `unpark` before `park` makes `park` return at once: no job is missed.
            thread::park();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for inbox in &self.workers {
            inbox.closed.store(true, Ordering::Release);
            if let Some(thread) = inbox.thread.get() {
                thread.unpark();
            }
        }
    }
}

/// A worker of a pool made by [`Pool::with_worker_loops`], to be run on a thread of its own.
pub struct WorkerLoop(Arc<Inbox>);

impl WorkerLoop {
    /// Runs the pool's jobs on this thread, parked between them, until the pool is dropped.
    pub fn run(self) {
        self.0.run();
    }
}

impl Pool {
    /// A pool that runs jobs on `threads` threads: the caller plus `threads - 1` workers.
    pub fn new(threads: usize) -> Pool {
        let workers = (1..threads.max(1))
            .filter_map(|i| {
                let inbox = Arc::new(Inbox::default());
                let run = Arc::clone(&inbox);
                thread::Builder::new()
                    .name(format!("stampo-matmul-{i}"))
                    .spawn(move || run.run())
                    .ok()
                    .map(|_| inbox)
            })
            .collect();
        Pool { workers }
    }

    /// A pool of `threads` threads whose `threads - 1` workers run on threads the caller
    /// starts, one [`WorkerLoop`] each: for the browser, where std cannot start a thread and
    /// Web Workers are started from JS. A job sent to a loop that is not running yet waits
    /// for it, and [`Pool::map`] never waits for a worker to start, so the pool works (on
    /// fewer threads) while they come up.
    pub fn with_worker_loops(threads: usize) -> (Pool, Vec<WorkerLoop>) {
        let (workers, loops) = (1..threads.max(1))
            .map(|_| {
                let inbox = Arc::new(Inbox::default());
                (Arc::clone(&inbox), WorkerLoop(inbox))
            })
            .unzip();
        (Pool { workers }, loops)
    }

    /// The process-wide pool: the one given to [`Pool::set_global`], else `STAMPO_THREADS`
    /// threads, else the available parallelism.
    pub fn global() -> &'static Pool {
        GLOBAL.get_or_init(|| Pool::new(default_threads()))
    }

    /// Makes `pool` the process-wide pool, unless [`Pool::global`] already made one: then
    /// `pool` comes back.
    pub fn set_global(pool: Pool) -> Result<(), Pool> {
        GLOBAL.set(pool)
    }

    /// Gives the pool a clock where std has none (the browser: `performance.now()`, in
    /// microseconds), so that its threads poll briefly before they park, as they do natively.
    /// Without one they park at once. The first clock given stays.
    #[cfg(target_arch = "wasm32")]
    pub fn set_clock(now_us: fn() -> f64) {
        let _ = CLOCK.set(now_us);
    }

    /// Threads that work on a job: the caller and the workers.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// `0..n` cut into runs for [`Pool::map`], at most two per thread and none shorter than
    /// `min_run` (but the last); `None` where the caller had better do it all (one thread,
    /// or too little for two runs).
    pub fn runs(&self, n: usize, min_run: usize) -> Option<Vec<Range<usize>>> {
        let runs = (n / min_run.max(1)).min(2 * self.threads());
        if self.threads() < 2 || runs < 2 {
            return None;
        }
        let per = n.div_ceil(runs);
        Some(
            (0..n.div_ceil(per))
                .map(|i| i * per..((i + 1) * per).min(n))
                .collect(),
        )
    }
}

impl Pool {
    /// `f(0)`, …, `f(n - 1)`, in order, computed by the caller and the workers together:
    /// each takes the next index until none is left.
    ///
    /// When none is left the caller waits for the pieces the workers still hold. A piece is a
    /// few microseconds of work, less than a park and a wake cost here, so the caller first
    /// polls for a bounded time (`JOIN_POLL`, see `poll_for`) and only then parks.
    pub fn map<R: Send + 'static>(
        &self,
        n: usize,
        f: Arc<dyn Fn(usize) -> R + Send + Sync>,
    ) -> Vec<R> {
        let shared = Arc::new(Shared {
            n,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            results: (0..n).map(|_| Mutex::new(None)).collect(),
            panic: Mutex::new(None),
            f,
            caller: thread::current(),
        });
        let helpers = self.workers.len().min(n.saturating_sub(1));
        for inbox in &self.workers[..helpers] {
            // A job waiting for its worker to wake holds the call weakly: once the caller has
            // every result and returns, the call and what `f` captured are dropped, even while
            // the job still waits. Where `f` captured a KV cache, a strong hold past the call
            // made the next token's write find the cache shared and copy it whole (and keep
            // the copies while the worker slept: a stalled worker grew memory without bound).
            let shared = Arc::downgrade(&shared);
            inbox.send(Box::new(move || {
                if let Some(shared) = shared.upgrade() {
                    shared.work();
                }
            }));
        }
        shared.work();
        let finished = || (shared.done.load(Ordering::Acquire) >= n).then_some(());
        if poll_for(JOIN_POLL, finished).is_none() {
            // Woken by the worker that finishes the last piece (or spuriously: look again).
            while finished().is_none() {
                thread::park();
            }
        }
        if let Some(payload) = shared.panic.lock().ok().and_then(|mut p| p.take()) {
            panic::resume_unwind(payload);
        }
        shared
            .results
            .iter()
            .filter_map(|slot| slot.lock().ok().and_then(|mut r| r.take()))
            .collect()
    }
}

/// How long a caller polls for the workers' last pieces before it parks.
const JOIN_POLL: Duration = Duration::from_micros(50);

/// How long a worker polls for its next job before it parks: `STAMPO_POOL_POLL_US`, else
/// [`DEFAULT_WORKER_POLL_US`].
fn worker_poll() -> Duration {
    static POLL: OnceLock<Duration> = OnceLock::new();
    *POLL.get_or_init(|| {
        let us = std::env::var("STAMPO_POOL_POLL_US")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_WORKER_POLL_US);
        Duration::from_micros(us)
    })
}

const DEFAULT_WORKER_POLL_US: u64 = 100;

/// Looks at `ready` until it gives a value or `limit` has passed, giving the core away
/// between looks (`yield_now`); at once, without polling, while the machine is busy or where
/// there is no clock.
///
/// Between two looks a few microseconds pass, unless the thread was descheduled: another
/// thread wanted this core and ran for its time slice. Polling then costs more than parking
/// (the scheduler charges the poll to this thread, and the thread with the work waits behind
/// it), so this thread stops polling for [`QUIET`].
fn poll_for<T>(limit: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    // Ready at once (always so where no worker was woken): no clock needed.
    if let Some(value) = ready() {
        return Some(value);
    }
    let start = now()?;
    if QUIET_UNTIL
        .with(Cell::get)
        .is_some_and(|until| start < until)
    {
        return ready();
    }
    let mut before = start;
    loop {
        if let Some(value) = ready() {
            return Some(value);
        }
        let now = now()?;
        if now.saturating_sub(before) > DESCHEDULED {
            QUIET_UNTIL.with(|q| q.set(Some(now + QUIET)));
            return None;
        }
        if now.saturating_sub(start) >= limit {
            return None;
        }
        before = now;
        thread::yield_now();
    }
}

/// The time since a fixed moment: std's `Instant` natively; in the browser, where std has no
/// clock (its `Instant` panics there), the one given to [`Pool::set_clock`], else none.
fn now() -> Option<Duration> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
        Some(ORIGIN.get_or_init(std::time::Instant::now).elapsed())
    }
    #[cfg(target_arch = "wasm32")]
    {
        let micros = CLOCK.get()?();
        Some(Duration::from_secs_f64(micros.max(0.0) / 1e6))
    }
}

/// The browser's clock, in microseconds ([`Pool::set_clock`]).
#[cfg(target_arch = "wasm32")]
static CLOCK: OnceLock<fn() -> f64> = OnceLock::new();

/// A gap between two looks this long means the thread was descheduled (a time slice is a
/// millisecond or more; a look and a yield on a free core take a microsecond or two).
const DESCHEDULED: Duration = Duration::from_micros(200);

/// How long a thread that found the machine busy parks without polling.
const QUIET: Duration = Duration::from_millis(50);

thread_local! {
    static QUIET_UNTIL: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// One [`Pool::map`] call, shared by the caller and the workers it woke.
struct Shared<R> {
    n: usize,
    /// The next index to take.
    next: AtomicUsize,
    /// Indices computed (or panicked).
    done: AtomicUsize,
    results: Vec<Mutex<Option<R>>>,
    /// The first panic of a worker, raised again on the caller.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    f: Arc<dyn Fn(usize) -> R + Send + Sync>,
    caller: Thread,
}

impl<R> Shared<R> {
    /// Takes indices until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.n {
                return;
            }
            match panic::catch_unwind(AssertUnwindSafe(|| (self.f)(i))) {
                Ok(r) => {
                    if let Ok(mut slot) = self.results[i].lock() {
                        *slot = Some(r);
                    }
                }
                Err(payload) => {
                    if let Ok(mut first) = self.panic.lock() {
                        first.get_or_insert(payload);
                    }
                }
            }
            if self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
                self.caller.unpark();
            }
        }
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
    use std::time::Instant;

    #[test]
    fn map_returns_every_result_in_order() {
        let pool = Pool::new(3);
        for n in [0usize, 1, 2, 7, 100] {
            let out = pool.map(n, Arc::new(|i| i * i));
            assert_eq!(out, (0..n).map(|i| i * i).collect::<Vec<_>>());
        }
    }

    #[test]
    fn worker_loops_started_late_or_never_leave_every_result_in_place() {
        let (pool, mut loops) = Pool::with_worker_loops(3);
        assert_eq!(pool.threads(), 3);
        assert_eq!(loops.len(), 2);
        // No loop runs yet: the caller computes every piece.
        assert_eq!(pool.map(5, Arc::new(|i| i + 1)), vec![1, 2, 3, 4, 5]);
        let started = loops.pop().map(|l| thread::spawn(move || l.run()));
        let seen = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let record = Arc::clone(&seen);
        // Each piece waits (a while, not forever) until two threads have taken pieces.
        let deadline = Instant::now() + Duration::from_secs(10);
        let out = pool.map(
            8,
            Arc::new(move |i| {
                loop {
                    let threads = record.lock().map_or(0, |mut ids| {
                        ids.insert(thread::current().id());
                        ids.len()
                    });
                    if threads >= 2 || Instant::now() > deadline {
                        return i * 2;
                    }
                    thread::sleep(Duration::from_millis(1));
                }
            }),
        );
        assert_eq!(out, (0..8).map(|i| i * 2).collect::<Vec<_>>());
        // The started loop took pieces: two threads computed them.
        assert_eq!(seen.lock().map(|s| s.len()).ok(), Some(2));
        drop(pool);
        // Dropping the pool ends the loop.
        assert!(started.is_some_and(|h| h.join().is_ok()));
    }

    #[test]
    fn a_worker_that_comes_late_holds_nothing_the_pieces_captured() {
        // The loops never run: each job waits in its worker's queue, as a job does while
        // its worker wakes up.
        let (pool, _loops) = Pool::with_worker_loops(3);
        let captured = Arc::new(vec![0u8; 16]);
        let held = Arc::clone(&captured);
        let out = pool.map(4, Arc::new(move |i| i + held.len()));
        assert_eq!(out, vec![16, 17, 18, 19]);
        // Only this test holds the value: a KV cache captured so is written in place at the
        // next token, not copied.
        assert_eq!(Arc::strong_count(&captured), 1);
    }

    #[test]
    fn runs_cover_the_range_in_order() {
        let pool = Pool::new(2);
        assert_eq!(pool.runs(31, 16), None);
        assert_eq!(pool.runs(32, 16), Some(vec![0..16, 16..32]));
        assert_eq!(pool.runs(37, 4), Some(vec![0..10, 10..20, 20..30, 30..37]));
        assert_eq!(Pool::new(1).runs(1000, 16), None);
    }

    #[test]
    fn the_caller_waits_for_slow_pieces_past_its_polling() {
        let pool = Pool::new(2);
        let out = pool.map(
            4,
            Arc::new(|i| {
                thread::sleep(JOIN_POLL * 4);
                i + 1
            }),
        );
        assert_eq!(out, vec![1, 2, 3, 4]);
    }

    #[test]
    fn a_panic_in_a_worker_reaches_the_caller_and_the_pool_still_works() {
        let pool = Pool::new(2);
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            pool.map(
                64,
                Arc::new(|i| {
                    assert!(i != 40, "piece 40");
                    thread::sleep(Duration::from_micros(20));
                    i
                }),
            )
        }));
        assert!(caught.is_err());
        assert_eq!(pool.map(3, Arc::new(|i| i)), vec![0, 1, 2]);
    }
}
