//! Running an async generation to its end on the calling thread. The loop is async because
//! WebGPU reads logits back only asynchronously; every other source (the CPU device, native
//! wgpu, test models) hands its logits over at once, and native callers may block anyway.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` on this thread, parking between wake-ups, until it is ready.
///
/// # Panics
/// In wasm, if the future is not ready at once: a browser thread cannot wait for a device
/// there (its event loop would have to run). Await the async form instead
/// ([`crate::generate_async`], [`crate::Session::run_async`]).
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(value) => return value,
            #[cfg(target_family = "wasm")]
            Poll::Pending => {
                panic!("block_on: a pending future in wasm (await the async form instead)")
            }
            #[cfg(not(target_family = "wasm"))]
            Poll::Pending => thread::park(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A future that is pending once and wakes itself from another thread.
    struct WokenLater(bool);

    impl Future for WokenLater {
        type Output = u32;
        fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
            if self.0 {
                return Poll::Ready(7);
            }
            self.0 = true;
            let waker = cx.waker().clone();
            thread::spawn(move || {
                thread::sleep(std::time::Duration::from_millis(10));
                waker.wake();
            });
            Poll::Pending
        }
    }

    #[test]
    fn waits_for_a_wake_from_another_thread() {
        assert_eq!(block_on(WokenLater(false)), 7);
    }

    #[test]
    fn a_ready_future_returns_at_once() {
        assert_eq!(block_on(std::future::ready(3)), 3);
    }
}
