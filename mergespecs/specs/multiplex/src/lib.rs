//! `multiplex`: the multiplexing service of Calvert et al. (ICNP 2000) as a merge spec.
//!
//! Small datagrams toward R travel as MplexPkts (IPv4 protocol 254, Concast ID option,
//! normally G = 1; docs/protocol.md section 3). At every concast-capable router this spec
//! bundles what arrives for the flow (R, G) — one-record MplexPkts from senders' hosts,
//! bundles from upstream routers, and for robustness plain small datagrams — into one
//! MplexPkt, and forwards it when a delay bound is due, when the next record would not fit
//! the path MTU, or when a record's source is already in the bundle. The receiver's hostd
//! unbundles.
//!
//! One datagram equivalence class per flow (tag [`TAG`]): the bundle is per (R, G). It lives
//! in the spec value, not in a per-tag state, because there is only ever one.
#![no_std]

// Native builds (the rlib used by the engine's tests and benchmark, and the cdylib cargo
// builds alongside it) link std for its panic handler; the .wasm stays no_std.
#[cfg(not(target_arch = "wasm32"))]
extern crate std;

pub mod bundle;
pub mod config;
pub mod delays;
pub mod input;

use concast_sdk::wire::ipv4::{self, protocol};
use concast_sdk::{AfterBuild, Host, Level, Merge, MergeSpec, OutHeader, Tag};
use concast_speckit::log::log;
use concast_speckit::sources::SourceSet;
use concast_speckit::{payload_limit, MAX_BUNDLE};

use bundle::{MplexBundle, Refusal};
use config::Config;
use input::{classify_datagram, Input, Origin};

/// The one tag: every bundleable datagram of the flow joins the same bundle.
pub const TAG: u64 = 0;

/// Room to look at a pending datagram: anything longer could not join a bundle anyway.
const SCRATCH: usize = MAX_BUNDLE + ipv4::MAX_HEADER_LEN;

/// What the pending-queue scan does with one pending datagram.
enum Verdict {
    Take,
    Skip,
    Stop,
}

pub struct Multiplex {
    config: Config,
    bundle: MplexBundle,
    /// Where pending datagrams are peeked at and taken to.
    scratch: [u8; SCRATCH],
    /// Sources of pending datagrams the scan left behind: a later datagram of theirs must
    /// not overtake them in this bundle.
    blocked: SourceSet<64>,
    expired: u64,
}

impl Multiplex {
    pub fn config(&self) -> Config {
        self.config
    }

    /// Records dropped so far because their TTL ran out.
    pub fn expired_records(&self) -> u64 {
        self.expired
    }

    fn count_expired(&mut self, n: u32, host: &mut impl Host) {
        if n == 0 {
            return;
        }
        self.expired += u64::from(n);
        let total = self.expired;
        log(
            host,
            Level::Info,
            format_args!("multiplex: dropped {n} record(s) whose TTL ran out ({total} so far)"),
        );
    }

    /// True if `origin` carries a source already in the open bundle: it must then leave
    /// after the bundle, never before it.
    fn follows_bundle(&self, origin: &Origin) -> bool {
        !self.bundle.is_empty() && origin.any(|src| self.bundle.contains_source(src))
    }

    /// Zero added delay: before a bundle leaves, fold in the datagrams of this flow that
    /// have already arrived (the rest of the batch), keeping each source's order.
    fn fill_from_pending(&mut self, host: &mut impl Host) {
        self.blocked.clear();
        let now = host.now_us();
        let mut index = 0;
        while index < host.pending_count() && !self.bundle.is_full() {
            let len = match host.pending_peek(index, &mut self.scratch) {
                Some(len) if len <= SCRATCH => len,
                _ => break, // too long to look at: stop rather than reorder around it
            };
            match self.consider(len) {
                Verdict::Skip => index += 1,
                Verdict::Stop => break,
                Verdict::Take => {
                    if host.pending_take(index, &mut self.scratch).is_none() {
                        break;
                    }
                    let msg = &self.scratch[..len];
                    if let Input::Records(packet) = classify_datagram(msg, &self.config) {
                        let expired = packet.expired;
                        self.bundle.add(&packet, len, now);
                        self.count_expired(expired, host);
                    }
                }
            }
        }
    }

    /// Whether the pending datagram in `scratch[..len]` can join the bundle now.
    fn consider(&mut self, len: usize) -> Verdict {
        let msg = &self.scratch[..len];
        let blocked = &mut self.blocked;
        let block_all = |blocked: &mut SourceSet<64>, origin: &Origin| -> Verdict {
            if matches!(origin, Origin::Unknown) || origin.any(|src| !blocked.insert(src)) {
                Verdict::Stop
            } else {
                Verdict::Skip
            }
        };
        match classify_datagram(msg, &self.config) {
            Input::Records(packet) => {
                let origin = packet.origin();
                if origin.any(|src| blocked.contains(src)) {
                    return block_all(blocked, &origin);
                }
                match self.bundle.admits(&packet, len) {
                    Ok(()) => Verdict::Take,
                    Err(Refusal::SameSource) => block_all(blocked, &origin),
                    Err(Refusal::NoRoom) => Verdict::Stop,
                }
            }
            // Dropped when its turn comes; nothing of it is forwarded, so nothing to order.
            Input::Expired(_) => Verdict::Skip,
            Input::Unbundleable(origin) => block_all(blocked, &origin),
        }
    }
}

impl MergeSpec for Multiplex {
    /// Nothing per tag: the flow's one bundle is in the spec value.
    type State = ();

    fn init(host: &mut impl Host) -> Result<Self, &'static str> {
        let config = Config::parse(host.params())?;
        Ok(Multiplex {
            config,
            bundle: MplexBundle::new(config.max_held_bytes),
            scratch: [0; SCRATCH],
            blocked: SourceSet::new(),
            expired: 0,
        })
    }

    /// Constant: every datagram is offered to the flow's one bundle, and `merge`, which reads
    /// it once, decides whether it joins, passes (after the bundle if it carries one of the
    /// bundle's sources), or is dropped (every record expired).
    fn get_tag(&mut self, _msg: &[u8], _host: &mut impl Host) -> Tag {
        Tag::Merge(TAG)
    }

    fn new_state(&mut self, _tag: u64, host: &mut impl Host) {
        self.bundle.reset(payload_limit(host.path_mtu()));
    }

    fn merge(&mut self, _: &mut (), msg: &[u8], host: &mut impl Host) -> Merge {
        match classify_datagram(msg, &self.config) {
            Input::Records(packet) => match self.bundle.admits(&packet, msg.len()) {
                Ok(()) => {
                    let expired = packet.expired;
                    self.bundle.add(&packet, msg.len(), host.now_us());
                    self.count_expired(expired, host);
                    Merge::Merged
                }
                // Too big for even an empty bundle (a small path MTU): as it is.
                Err(_) if self.bundle.is_empty() => Merge::Pass,
                Err(_) => Merge::FlushFirst,
            },
            Input::Expired(n) => {
                self.count_expired(n, host);
                Merge::Drop
            }
            Input::Unbundleable(origin) if self.follows_bundle(&origin) => Merge::FlushFirst,
            Input::Unbundleable(_) => Merge::Pass,
        }
    }

    fn done(&mut self, _: &mut (), host: &mut impl Host) -> bool {
        let Some(deadline) = self.bundle.deadline() else {
            return true; // nothing held: let the engine close the state
        };
        if deadline <= host.now_us() {
            self.fill_from_pending(host);
            return true;
        }
        if self.bundle.is_full() {
            return true;
        }
        self.bundle.arm(host, deadline);
        false
    }

    fn build(&mut self, _: &mut (), host: &mut impl Host) -> AfterBuild {
        if !self.bundle.is_empty() {
            let (body, ttl) = self.bundle.finish(host.now_us());
            let header = OutHeader {
                protocol: protocol::MPLEX,
                ttl,
                dont_fragment: true,
            };
            host.emit(body, header);
        }
        // Forget the sources now: the next datagram's tag must not see them.
        self.bundle.reset(payload_limit(host.path_mtu()));
        AfterBuild::Free
    }
}

concast_sdk::export_spec!(Multiplex);

#[cfg(test)]
mod tests;
