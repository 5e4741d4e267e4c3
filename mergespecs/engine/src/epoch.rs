//! The clock behind epoch interruption: a thread that bumps the wasmtime engine's epoch every
//! tick, so a spec call past its deadline traps. Only CPU time is bounded this way; the
//! flows' own clock is always the caller's.
//!
//! The ticker backs off while the engine makes no calls: after a quiet tick it sleeps two
//! ticks, then four, ... up to [`DOZE`]; any call brings it back to one tick, and a call that
//! finds it dozing wakes it at once. A network of 220 routers and 200 hosts runs 420 engines
//! on two cores; ticking every millisecond, engines that call their spec only a few times a
//! second kept both cores busy in the kernel (measured: 67 % system time).
//! A call that runs away makes no further calls, so the ticker backs off during it too: its
//! budget is then checked at ticks 1, 3, 7, 15, ... ms after it started, which stops it
//! within about twice its budget. If a call starts just as the ticker dozes off and the
//! wake-up is missed (the two race without a lock), it is checked within one [`DOZE`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

/// The longest a backed-off ticker sleeps between epochs.
pub const DOZE: Duration = Duration::from_millis(50);

/// What calls tell the ticker: that they happen, and to wake up if it dozes.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    calls: AtomicU64,
    dozing: AtomicBool,
    ticker: OnceLock<Thread>,
}

impl Activity {
    /// Called before every spec call: plain loads and stores, no read-modify-write, on the
    /// fast path (a lost count between threads only delays dozing by a tick).
    #[inline]
    pub fn note_call(&self) {
        let n = self.calls.load(Ordering::Relaxed);
        self.calls.store(n.wrapping_add(1), Ordering::Relaxed);
        if self.dozing.load(Ordering::Relaxed) {
            self.dozing.store(false, Ordering::Relaxed);
            if let Some(t) = self.ticker.get() {
                t.unpark();
            }
        }
    }
}

pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
    pub activity: Arc<Activity>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub fn start(engines: Vec<wasmtime::Engine>, tick: Duration) -> std::io::Result<EpochTicker> {
        let stop = Arc::new(AtomicBool::new(false));
        let activity = Arc::new(Activity::default());
        let (flag, act) = (stop.clone(), activity.clone());
        let thread = std::thread::Builder::new()
            .name("concast-epoch".into())
            .spawn(move || {
                let _ = act.ticker.set(std::thread::current());
                let mut seen = act.calls.load(Ordering::Relaxed);
                let most = (DOZE.as_nanos() / tick.as_nanos().max(1)).max(1) as u32;
                let mut ticks = 1u32;
                while !flag.load(Ordering::Relaxed) {
                    if ticks > 1 {
                        act.dozing.store(true, Ordering::SeqCst);
                        if act.calls.load(Ordering::SeqCst) == seen {
                            std::thread::park_timeout(tick * ticks);
                        }
                        act.dozing.store(false, Ordering::SeqCst);
                    } else {
                        std::thread::sleep(tick);
                    }
                    for engine in &engines {
                        engine.increment_epoch();
                    }
                    let now = act.calls.load(Ordering::Relaxed);
                    if now == seen {
                        ticks = (ticks * 2).min(most);
                    } else {
                        (seen, ticks) = (now, 1);
                    }
                }
            })?;
        Ok(EpochTicker {
            stop,
            activity,
            thread: Some(thread),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}
