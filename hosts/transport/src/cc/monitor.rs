//! CCC's performance monitor (UDT/CCC §2.2.4): the session's traces an algorithm or a tester
//! reads, in the paper's three views: aggregate since the connection started, local since the
//! last query, and the instant values at the query. The counters are kept by the host of the
//! algorithm (`micro::cchost`); `Session::perf_trace` reads them.

/// Counters the host bumps as it calls the algorithm's callbacks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub pkts_sent: u64,
    pub bytes_sent: u64,
    pub pkts_received: u64,
    pub bytes_received: u64,
    /// Segments declared lost (onLoss ranges, summed).
    pub pkts_lost: u64,
    /// Acknowledgements that advanced the cumulative ACK (onACK calls).
    pub acks: u64,
    /// Loss reports (onLoss calls: a NAK, a third duplicate ACK, a SACK hole).
    pub naks: u64,
    pub timeouts: u64,
}

impl Counters {
    fn minus(&self, o: &Counters) -> Counters {
        Counters {
            pkts_sent: self.pkts_sent - o.pkts_sent,
            bytes_sent: self.bytes_sent - o.bytes_sent,
            pkts_received: self.pkts_received - o.pkts_received,
            bytes_received: self.bytes_received - o.bytes_received,
            pkts_lost: self.pkts_lost - o.pkts_lost,
            acks: self.acks - o.acks,
            naks: self.naks - o.naks,
            timeouts: self.timeouts - o.timeouts,
        }
    }
}

/// One view over a span of time: its counters and the rates they give.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct View {
    pub duration_us: u64,
    pub counters: Counters,
    pub send_mbps: f64,
    pub recv_mbps: f64,
    /// Lost over sent in the span (0 when nothing was sent).
    pub loss_rate: f64,
}

impl View {
    fn over(counters: Counters, duration_us: u64) -> View {
        let per_us = |bytes: u64| if duration_us == 0 { 0.0 } else { bytes as f64 * 8.0 / duration_us as f64 };
        let loss_rate = if counters.pkts_sent == 0 { 0.0 } else { counters.pkts_lost as f64 / counters.pkts_sent as f64 };
        View { duration_us, counters, send_mbps: per_us(counters.bytes_sent), recv_mbps: per_us(counters.bytes_received), loss_rate }
    }
}

/// A query's answer: the aggregate and local views and the instant values.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Trace {
    pub aggregate: View,
    pub local: View,
    pub rtt_us: f64,
    pub pkt_snd_period_us: f64,
    pub cwnd: f64,
    /// The peer's advertised window (Windowed flow control), segments.
    pub flow_wnd: u32,
}

/// The monitor: counters plus where the connection and the last local view started.
#[derive(Clone, Copy, Debug, Default)]
pub struct PerfMon {
    pub now: Counters,
    start_us: Option<u64>,
    local_from: (u64, Counters),
}

impl PerfMon {
    /// The connection starts (first callback); views count from here.
    pub fn start(&mut self, now_us: u64) {
        if self.start_us.is_none() {
            self.start_us = Some(now_us);
            self.local_from = (now_us, Counters::default());
        }
    }

    /// The aggregate and local views at `now_us`; the local view restarts from here.
    pub fn query(&mut self, now_us: u64) -> (View, View) {
        let start = self.start_us.unwrap_or(now_us);
        let agg = View::over(self.now, now_us.saturating_sub(start));
        let (from, base) = self.local_from;
        let local = View::over(self.now.minus(&base), now_us.saturating_sub(from));
        self.local_from = (now_us, self.now);
        (agg, local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_view_restarts_at_each_query_and_aggregate_does_not() {
        let mut m = PerfMon::default();
        m.start(1_000);
        m.now.pkts_sent = 100;
        m.now.bytes_sent = 125_000; // 1 Mbit in 1 s
        m.now.pkts_lost = 5;
        let (agg, local) = m.query(1_001_000);
        assert_eq!(agg.duration_us, 1_000_000);
        assert!((agg.send_mbps - 1.0).abs() < 1e-9);
        assert!((agg.loss_rate - 0.05).abs() < 1e-12);
        assert_eq!(local, agg);
        m.now.pkts_sent = 150;
        m.now.bytes_sent = 375_000; // 2 Mbit more in the next second
        let (agg, local) = m.query(2_001_000);
        assert!((agg.send_mbps - 1.5).abs() < 1e-9);
        assert!((local.send_mbps - 2.0).abs() < 1e-9);
        assert_eq!(local.counters.pkts_sent, 50);
        assert_eq!(local.counters.pkts_lost, 0);
        assert_eq!(local.loss_rate, 0.0);
    }

    #[test]
    fn an_empty_span_gives_zero_rates_not_nan() {
        let mut m = PerfMon::default();
        let (agg, local) = m.query(5);
        assert_eq!(agg.send_mbps, 0.0);
        assert_eq!(local.loss_rate, 0.0);
    }
}
