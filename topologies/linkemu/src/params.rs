//! Link parameters as the control socket states them (TCLink's names and units) and as the
//! model uses them (nanoseconds, bits per second, a probability).

use serde_json::Value;

/// The drop-tail limit when none is given (TCLink's default for max_queue_size).
pub const DEFAULT_QUEUE: u32 = 1000;

/// The kernel's transmit queue for a new device (txqueuelen), in frames.
pub const KERNEL_TAP_QUEUE: u32 = 1000;

/// Seconds of frames at a direction's rate its sending TAP holds (*ours*): what a host sends
/// while the emulator is off the CPU waits there, and past it the kernel drops, outside the
/// link's model. The kernel's 1,000 frames last 12 ms at 1 Gbit/s; on a loaded 2-core machine
/// ccc2 lost thousands of frames a run there (issue #23, docs/experiments.md "Session 16").
pub const TAP_STALL_ABSORBED_S: f64 = 0.25;

/// The transmit queue, in frames of 1,514 bytes, that absorbs an emulator stall of
/// TAP_STALL_ABSORBED_S at `rate_bps`; never below the kernel's 1,000 (unlimited or slow links).
pub fn tap_queue_for(rate_bps: u64) -> u32 {
    let frames = (rate_bps as f64 / 8.0 * TAP_STALL_ABSORBED_S / 1514.0) as u64;
    frames.clamp(KERNEL_TAP_QUEUE as u64, u32::MAX as u64) as u32
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    pub delay_ns: u64,
    /// Probability in [0, 1] that a frame is dropped at random.
    pub loss: f64,
    /// 0 = unlimited: no serialisation time.
    pub rate_bps: u64,
    pub queue: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params { delay_ns: 0, loss: 0.0, rate_bps: 0, queue: DEFAULT_QUEUE }
    }
}

/// "10ms", "250us", "1.5s", "10" (ms) or a number of milliseconds, like TCLink's delay=.
pub fn parse_delay(v: &Value) -> Result<u64, String> {
    let ms = match v {
        Value::Null => 0.0,
        Value::Number(n) => n.as_f64().unwrap_or(-1.0),
        Value::String(s) => {
            let s = s.trim();
            let (num, scale) = if let Some(x) = s.strip_suffix("us") {
                (x, 1e-3)
            } else if let Some(x) = s.strip_suffix("ms") {
                (x, 1.0)
            } else if let Some(x) = s.strip_suffix('s') {
                (x, 1e3)
            } else {
                (s, 1.0)
            };
            num.trim().parse::<f64>().map_err(|_| format!("delay {s:?}: want e.g. \"10ms\", \"250us\" or a number of ms"))? * scale
        }
        _ => return Err(format!("delay {v}: want a string like \"10ms\" or a number of ms")),
    };
    if !(0.0..=3_600_000.0).contains(&ms) {
        return Err(format!("delay {v}: must be between 0 and one hour"));
    }
    Ok((ms * 1e6).round() as u64)
}

fn number(v: &Value, what: &str) -> Result<Option<f64>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => Ok(n.as_f64()),
        _ => Err(format!("{what} {v}: want a number or null")),
    }
}

impl Params {
    /// These parameters with the keys present in `obj` changed (`set` changes only what it
    /// names). Keys: delay, loss (percent), bw (Mbit/s), max_queue_size (packets).
    pub fn updated(&self, obj: &Value) -> Result<Params, String> {
        let Some(map) = obj.as_object() else {
            return Err(format!("link parameters {obj}: want an object"));
        };
        let mut p = *self;
        for (k, v) in map {
            match k.as_str() {
                "delay" => p.delay_ns = parse_delay(v)?,
                "loss" => {
                    let pct = number(v, "loss")?.unwrap_or(0.0);
                    if !(0.0..=100.0).contains(&pct) {
                        return Err(format!("loss {v}: a percentage between 0 and 100"));
                    }
                    p.loss = pct / 100.0;
                }
                "bw" => {
                    let mbit = number(v, "bw")?.unwrap_or(0.0);
                    if !(0.0..=1e6).contains(&mbit) {
                        return Err(format!("bw {v}: Mbit/s between 0 (unlimited) and 1000000"));
                    }
                    p.rate_bps = (mbit * 1e6).round() as u64;
                }
                "max_queue_size" => {
                    p.queue = match v {
                        Value::Null => DEFAULT_QUEUE,
                        _ => match v.as_u64() {
                            Some(n) if (1..=1_000_000).contains(&n) => n as u32,
                            _ => return Err(format!("max_queue_size {v}: packets, 1 to 1000000")),
                        },
                    }
                }
                other => return Err(format!("unknown link parameter {other:?} (delay, loss, bw, max_queue_size)")),
            }
        }
        Ok(p)
    }

    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "delay_us": self.delay_ns as f64 / 1000.0,
            "loss": self.loss * 100.0,
            "bw": self.rate_bps as f64 / 1e6,
            "max_queue_size": self.queue,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tap_queue_holds_a_quarter_second_at_the_rate_and_never_less_than_the_kernels() {
        assert_eq!(tap_queue_for(1_000_000_000), 20_640);
        assert_eq!(tap_queue_for(100_000_000), 2_064);
        assert_eq!(tap_queue_for(10_000_000), KERNEL_TAP_QUEUE);
        assert_eq!(tap_queue_for(0), KERNEL_TAP_QUEUE);
    }

    #[test]
    fn tclink_units() {
        let p = Params::default()
            .updated(&json!({"delay": "10ms", "loss": 5, "bw": 10, "max_queue_size": 20}))
            .unwrap();
        assert_eq!(p, Params { delay_ns: 10_000_000, loss: 0.05, rate_bps: 10_000_000, queue: 20 });
        assert_eq!(parse_delay(&json!("250us")).unwrap(), 250_000);
        assert_eq!(parse_delay(&json!(1.5)).unwrap(), 1_500_000);
        assert_eq!(parse_delay(&json!("2s")).unwrap(), 2_000_000_000);
        // set changes only what it names
        let q = p.updated(&json!({"delay": 0})).unwrap();
        assert_eq!(q, Params { delay_ns: 0, ..p });
        assert_eq!(p.updated(&json!({"max_queue_size": null})).unwrap().queue, DEFAULT_QUEUE);
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        let d = Params::default();
        assert!(d.updated(&json!({"loss": 101})).unwrap_err().contains("percentage"));
        assert!(d.updated(&json!({"delay": "fast"})).unwrap_err().contains("delay"));
        assert!(d.updated(&json!({"jitter": 1})).unwrap_err().contains("unknown link parameter"));
        assert!(d.updated(&json!({"max_queue_size": 0})).unwrap_err().contains("max_queue_size"));
        assert!(d.updated(&json!({"bw": "10M"})).unwrap_err().contains("bw"));
    }
}
