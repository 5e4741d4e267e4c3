//! `gather`: collects one message per sender into one datagram. Each sender (by IPv4
//! source) contributes one UDP message per round; a router forwards the round as one UDP
//! datagram listing every message with its sender ([`payload`]) once `n` senders are in,
//! `timeout_us` after the round opened, or early when the next message would not fit the
//! path MTU or a sender sends a second message (its first round leaves first).
//!
//! One datagram equivalence class per flow (tag [`TAG`]): rounds follow one another, and
//! the round being filled lives in the spec value.
#![no_std]

// Native builds link std for its panic handler; the .wasm stays no_std.
#[cfg(not(target_arch = "wasm32"))]
extern crate std;

pub mod payload;

use concast_sdk::{AfterBuild, Host, Merge, MergeSpec, OutHeader, Tag};
use concast_speckit::bundle::Bundle;
use concast_speckit::config::{children_or_two, number};
use concast_speckit::{payload_limit, udp, MAX_BUNDLE};

/// The one tag: the round being filled.
pub const TAG: u64 = 0;

/// Bytes reserved at the start of a round for the UDP and gather headers.
const HEADERS: usize = udp::HEADER_LEN + payload::HEADER_LEN;

/// Source-set slots: rounds of up to 384 senders.
const SOURCE_SLOTS: usize = 512;

/// Flow parameters (`key=value` text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Senders per round; 0 (the default) follows the node's current children, else 2.
    pub n: u32,
    /// Longest a round waits for its senders (µs).
    pub timeout_us: u64,
    /// TTL of gathered datagrams (0 = the largest TTL gathered).
    pub ttl: u8,
}

impl Config {
    pub fn parse(raw: &[u8]) -> Result<Config, &'static str> {
        const WHY: &str =
            "gather spec: a parameter (n up to 384, timeout_us, ttl) is not a number in range";
        let most = concast_speckit::sources::SourceSet::<SOURCE_SLOTS>::CAPACITY as u64;
        Ok(Config {
            n: number(raw, "n", 0, most, WHY)? as u32,
            timeout_us: number(raw, "timeout_us", 10_000, 3_600_000_000, WHY)?,
            ttl: number(raw, "ttl", 0, 255, WHY)? as u8,
        })
    }

    /// Senders per round when the node has `children` CSP children (they come and go).
    pub fn senders(&self, children: u32) -> usize {
        let most = concast_speckit::sources::SourceSet::<SOURCE_SLOTS>::CAPACITY as u64;
        match self.n {
            0 => children_or_two(children).min(most) as usize,
            n => n as usize,
        }
    }
}

pub struct Gather {
    config: Config,
    round: Bundle<MAX_BUNDLE, SOURCE_SLOTS>,
    /// Messages in the round (a gathered datagram from upstream brings several).
    messages: u16,
    /// UDP ports of the round's first message, used for the gathered datagram.
    ports: (u16, u16),
}

impl Gather {
    pub fn config(&self) -> Config {
        self.config
    }

    fn reset(&mut self, host: &impl Host) {
        self.round.reset(HEADERS, payload_limit(host.path_mtu()));
        self.messages = 0;
    }
}

impl MergeSpec for Gather {
    type State = ();

    fn init(host: &mut impl Host) -> Result<Self, &'static str> {
        Ok(Gather {
            config: Config::parse(host.params())?,
            round: Bundle::new(),
            messages: 0,
            ports: (0, 0),
        })
    }

    fn get_tag(&mut self, msg: &[u8], _host: &mut impl Host) -> Tag {
        match udp::parse(msg) {
            Some(_) => Tag::Merge(TAG),
            None => Tag::Pass,
        }
    }

    fn new_state(&mut self, _tag: u64, host: &mut impl Host) {
        self.reset(host);
    }

    fn merge(&mut self, _: &mut (), msg: &[u8], host: &mut impl Host) -> Merge {
        let Some((ip, u)) = udp::parse(msg) else {
            return Merge::Pass;
        };
        let src = ip.src_addr().to_bits();
        let gathered = payload::entries(u.body);
        let (count, bytes) = match &gathered {
            Some(e) => (e.count(), e.bytes().len()),
            None => (1, payload::ENTRY_HEADER_LEN + u.body.len()),
        };
        let round = &mut self.round;
        let refused = round.sources.contains(src) // a second message: this round goes first
            || round.sources.is_full()
            || bytes > round.buf.remaining();
        if refused {
            return if round.is_empty() {
                Merge::Pass
            } else {
                Merge::FlushFirst
            };
        }
        let Some(out) = round.buf.reserve(bytes) else {
            return Merge::Pass;
        };
        match gathered {
            Some(e) => out.copy_from_slice(e.bytes()),
            None => payload::write_entry(out, src, u.body),
        }
        if round.is_empty() {
            self.ports = (u.src_port, u.dst_port);
        }
        round.sources.insert(src);
        round.note_arrival(host.now_us(), ip.ttl());
        self.messages += count;
        Merge::Merged
    }

    fn done(&mut self, _: &mut (), host: &mut impl Host) -> bool {
        let Some(opened) = self.round.opened_at() else {
            return true; // nothing held
        };
        if self.round.sources.len() >= self.config.senders(host.children()) {
            return true;
        }
        self.round
            .arm(host, opened.saturating_add(self.config.timeout_us));
        false
    }

    fn build(&mut self, _: &mut (), host: &mut impl Host) -> AfterBuild {
        if !self.round.is_empty() {
            let body_len = self.round.buf.len() - udp::HEADER_LEN;
            let headers = &mut self.round.buf.as_mut_slice()[..HEADERS];
            udp::write_header(headers, self.ports.0, self.ports.1, body_len);
            payload::write_header(&mut headers[udp::HEADER_LEN..], self.messages);
            let ttl = match self.config.ttl {
                0 => self.round.max_ttl.max(1),
                ttl => ttl,
            };
            host.emit(self.round.buf.as_slice(), OutHeader::udp().with_ttl(ttl));
        }
        self.reset(host);
        AfterBuild::Free
    }
}

concast_sdk::export_spec!(Gather);

#[cfg(test)]
mod tests;
