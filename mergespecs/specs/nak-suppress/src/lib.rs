//! `nak-suppress`: reliable-multicast feedback implosion control. Receivers of a multicast
//! send NAKs (payload in [`nak`]) toward the source R; when one packet is lost near the
//! source, every receiver NAKs the same sequence number. Each router forwards the first NAK
//! for a sequence number and drops the others that arrive within `window_us` of it, so R
//! sees one NAK per loss and window instead of one per receiver.
//!
//! The tag is the sequence number. Its state is kept (`AfterBuild::Keep`) with a timer for
//! the end of the window; when the timer fires the state is freed, so a NAK for the same
//! number after the window (the repair was lost too) is forwarded again.
#![no_std]

// Native builds link std for its panic handler; the .wasm stays no_std.
#[cfg(not(target_arch = "wasm32"))]
extern crate std;

pub mod nak;

use concast_sdk::{AfterBuild, Host, Level, Merge, MergeSpec, OutHeader, Tag};
use concast_speckit::buf::FixedBuf;
use concast_speckit::config::number;
use concast_speckit::log::log;
use concast_speckit::udp;

/// Flow parameters (`key=value` text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// How long after a forwarded NAK its duplicates are dropped (µs).
    pub window_us: u64,
}

impl Config {
    pub fn parse(raw: &[u8]) -> Result<Config, &'static str> {
        let window_us = number(
            raw,
            "window_us",
            100_000,
            3_600_000_000,
            "nak-suppress spec: window_us is not a number of microseconds up to an hour",
        )?;
        Ok(Config {
            window_us: window_us.max(1),
        })
    }
}

/// The NAK as it will be forwarded: UDP header and NAK body.
type NakCopy = FixedBuf<{ udp::HEADER_LEN + nak::MAX_BODY }>;

/// One sequence number's window.
pub struct Window {
    seq: u32,
    first: NakCopy,
    ttl: u8,
    /// Set once the first NAK went out; from then on the window is open.
    forwarded: bool,
    duplicates: u32,
}

pub struct NakSuppress {
    config: Config,
}

impl NakSuppress {
    pub fn config(&self) -> Config {
        self.config
    }
}

/// The sequence number and UDP datagram of a NAK.
fn parse(msg: &[u8]) -> Option<(u32, u8, udp::Udp<'_>)> {
    let (ip, u) = udp::parse(msg)?;
    Some((nak::seq(u.body)?, ip.ttl(), u))
}

impl MergeSpec for NakSuppress {
    type State = Window;

    fn init(host: &mut impl Host) -> Result<Self, &'static str> {
        Ok(NakSuppress {
            config: Config::parse(host.params())?,
        })
    }

    fn get_tag(&mut self, msg: &[u8], _host: &mut impl Host) -> Tag {
        match parse(msg) {
            Some((seq, _, _)) => Tag::Merge(u64::from(seq)),
            None => Tag::Pass,
        }
    }

    fn new_state(&mut self, tag: u64, _host: &mut impl Host) -> Window {
        Window {
            seq: tag as u32,
            first: NakCopy::new(),
            ttl: 0,
            forwarded: false,
            duplicates: 0,
        }
    }

    fn merge(&mut self, w: &mut Window, msg: &[u8], _host: &mut impl Host) -> Merge {
        let Some((_, ttl, u)) = parse(msg) else {
            return Merge::Pass;
        };
        if w.forwarded {
            w.duplicates += 1;
            return Merge::Drop;
        }
        // The first NAK of the window: kept to be forwarded in `build`, right away.
        w.first.reset(udp::HEADER_LEN, usize::MAX);
        udp::write_header(w.first.as_mut_slice(), u.src_port, u.dst_port, u.body.len());
        w.first.push(u.body);
        w.ttl = ttl;
        Merge::Merged
    }

    fn done(&mut self, w: &mut Window, _host: &mut impl Host) -> bool {
        !w.forwarded
    }

    fn build(&mut self, w: &mut Window, host: &mut impl Host) -> AfterBuild {
        if w.forwarded {
            // The window's timer fired (or the flow is flushed): forget the number.
            if w.duplicates > 0 {
                let (seq, n) = (w.seq, w.duplicates);
                log(
                    host,
                    Level::Debug,
                    format_args!("nak-suppress: seq {seq}: {n} duplicate(s) suppressed"),
                );
            }
            return AfterBuild::Free;
        }
        host.emit(w.first.as_slice(), OutHeader::udp().with_ttl(w.ttl.max(1)));
        w.forwarded = true;
        host.set_timer(host.now_us().saturating_add(self.config.window_us));
        AfterBuild::Keep
    }
}

concast_sdk::export_spec!(NakSuppress);

#[cfg(test)]
mod tests;
