//! `CONCAST_PERF_TRACE=PREFIX`: each CTP sender and receiver writes one line every
//! TRACE_US to PREFIX.<role>.<pid> (time, window, RTT estimate, counters, and the longest gap
//! between two pumps of the loop, to see a process not scheduled), to read a run by.
use std::fs::File;
use std::io::{BufWriter, Write};

use concast_transport::Session;

const TRACE_US: u64 = 20_000;

pub struct Trace {
    out: Option<BufWriter<File>>,
    next_us: u64,
    last_pump_us: Option<u64>,
    max_gap_us: u64,
}

impl Trace {
    pub fn from_env(role: &str) -> Trace {
        let out = std::env::var("CONCAST_PERF_TRACE").ok().and_then(|p| {
            File::create(format!("{p}.{role}.{}", std::process::id())).ok().map(BufWriter::new)
        });
        Trace { out, next_us: 0, last_pump_us: None, max_gap_us: 0 }
    }

    /// A trace that writes nothing.
    pub fn none() -> Trace {
        Trace { out: None, next_us: 0, last_pump_us: None, max_gap_us: 0 }
    }

    /// Called once per loop turn; writes the sessions' lines when one is due.
    pub fn pumped<'a>(&mut self, now: u64, sessions: impl IntoIterator<Item = (String, &'a Session)>) {
        let Some(w) = self.out.as_mut() else { return };
        if let Some(l) = self.last_pump_us {
            self.max_gap_us = self.max_gap_us.max(now.saturating_sub(l));
        }
        self.last_pump_us = Some(now);
        if now < self.next_us {
            return;
        }
        self.next_us = now + TRACE_US;
        for (who, s) in sessions {
            let (sh, st) = (s.shared(), s.stats());
            let _ = writeln!(
                w,
                "{now} {who} cwnd={:.1} srtt={:.0} rttvar={:.0} rto={} una={} max={} unacked={} peer_wnd={} \
                 sent={} rcvd={} rtx={} to={} spur={} dup={} gap={} rtx_cause={} rtx_early={}",
                sh.cwnd, sh.srtt_us, sh.rttvar_us, sh.rto(), sh.snd_una, sh.snd_max, sh.unacked.len(), sh.peer_wnd,
                st.segs_sent, st.segs_received, st.retransmits, st.timeouts, st.spurious_timeouts, st.duplicates,
                self.max_gap_us, slashed(&st.rtx_by_cause), slashed(&st.rtx_early)
            );
        }
        self.max_gap_us = 0;
    }
}

/// Counts per loss detector as one field, "dupack/rack/rack_timer/timeout".
fn slashed(n: &[u64]) -> String {
    n.iter().map(u64::to_string).collect::<Vec<_>>().join("/")
}

impl Drop for Trace {
    fn drop(&mut self) {
        if let Some(w) = self.out.as_mut() {
            let _ = w.flush();
        }
    }
}
