//! `multiplex`: the multiplexing service of Calvert et al. (ICNP 2000) as a merge spec.
//!
//! Small datagrams toward R travel as MplexPkts (IPv4 protocol 254, Concast ID option,
//! normally G = 1; docs/protocol.md section 3). At every concast-capable router this spec
//! bundles what arrives for the flow (R, G) — one-record MplexPkts from senders' hosts,
//! bundles from upstream routers, and for robustness plain small datagrams — into MplexPkts.
//! The receiver's hostd unbundles.
//!
//! **Parallel bundles.** Two records of one key (a flow, or a host: [`keys::KeyKind`]) never
//! share a bundle. A record joins the oldest open bundle that is newer than every bundle
//! already holding its key and has room; if none has, it opens the next bundle, while the
//! earlier ones keep waiting for other keys. Each bundle is one merge state (tag = its index
//! in the arena) with its own deadline (section 3.2), and the spec asks the engine to build
//! states in creation order ([`MergeSpec::ORDERED_STATES`]): a bundle leaving takes every
//! older one along, so a later bundle never overtakes an earlier one and no key's records
//! are reordered. At most `max_bundles` are open; a record needing one more sends the oldest
//! first, and one that would pass the held-bytes budget sends them all first.
//!
//! The bundles and the key index live in [`concast_speckit::arena::Arena`]s set up by
//! `init`; the spec value itself stays small.
#![no_std]

// Native builds (the rlib used by the engine's tests and benchmark, and the cdylib cargo
// builds alongside it) link std for its panic handler; the .wasm stays no_std.
#[cfg(not(target_arch = "wasm32"))]
extern crate std;

pub mod bundle;
pub mod config;
pub mod delays;
pub mod input;
pub mod keys;
mod order;

use concast_sdk::wire::ipv4::{self, protocol};
use concast_sdk::wire::mplex;
use concast_sdk::{AfterBuild, Host, Level, Merge, MergeSpec, OutHeader, Tag};
use concast_speckit::arena::Arena;
use concast_speckit::log::log;
use concast_speckit::payload_limit;

use bundle::{fits_empty, max_records, MplexBundle};
use config::{Config, FoldPending};
use input::{classify_datagram, Incoming, Input, Origin};
use keys::{key_of, KeyIndex};
use order::Order;

/// Keys of pending datagrams the zero-delay scan left behind (their later datagrams must not
/// overtake them); a scan that would block more stops.
const BLOCKED: usize = 64;

/// What the pending-queue scan does with one pending datagram.
enum Verdict {
    Take,
    Skip,
    Stop,
}

/// The open bundles and what the ordering rule needs to know about them.
struct BundleSet {
    config: Config,
    /// Bundle `tag` of the flow; open ones are in `order`.
    bundles: Arena<MplexBundle>,
    order: Order,
    keys: KeyIndex,
    next_seq: u64,
    /// Raw bytes the engine holds for all open bundles.
    held: u64,
}

/// Keys of datagrams a fill skipped: later datagrams with them must not overtake them.
struct Blocked {
    keys: [u64; BLOCKED],
    len: usize,
}

impl Blocked {
    fn has(&self, key: u64) -> bool {
        self.keys[..self.len].contains(&key)
    }
}

/// Pending datagrams one `pending_scan` is asked for.
const SCAN_AT_ONCE: usize = concast_sdk::abi::pending::SCAN_MAX;
use concast_sdk::abi::pending::TAKE_LIST_MAX;

pub struct Multiplex {
    config: Config,
    set: BundleSet,
    /// Payload bytes a bundle can ever hold: what the path MTU allowed at init.
    capacity: usize,
    /// Where pending datagrams are peeked at and taken to: room for a bundle's payload and
    /// the largest header, as anything longer could not join a bundle anyway.
    scratch: Arena<u8>,
    /// Keys a fill from the pending queue may no longer take (order would break).
    blocked: Blocked,
    expired: u64,
}

impl BundleSet {
    /// The newest open bundle holding any key of `packet` (0: none).
    fn newest_holding(&self, packet: &Incoming) -> u64 {
        let kind = self.config.key;
        packet
            .records()
            .filter_map(|r| {
                self.keys
                    .get(key_of(kind, r.src.to_bits(), r.protocol, r.payload))
            })
            .max()
            .unwrap_or(0)
    }

    /// The tag of the newest open bundle an unbundleable datagram must leave after, if any.
    fn must_follow(&self, origin: &Origin) -> Option<u64> {
        let kind = self.config.key;
        let mut newest = 0;
        match origin.any_key(kind, |k| {
            newest = newest.max(self.keys.get(k).unwrap_or(0));
            false
        }) {
            Some(_) if newest == 0 => None,
            Some(_) => self
                .order
                .iter()
                .find(|&t| self.bundles[t as usize].seq == newest),
            None => self.order.newest(), // its key is unknown: after everything open
        }
        .map(u64::from)
    }

    /// Whether bundle `tag` can take `packet` (`raw_len` bytes as it arrived) now.
    fn admits(&self, tag: usize, packet: &Incoming, raw_len: usize, newest: u64) -> bool {
        let b = &self.bundles[tag];
        let seq = if b.is_empty() { self.next_seq } else { b.seq };
        newest < seq
            && b.has_room(packet)
            && self.held + raw_len as u64 <= u64::from(self.config.max_held_bytes)
    }

    /// Which bundle a bundleable packet goes to (section "Parallel bundles" above).
    /// `newest`: [`BundleSet::newest_holding`] of `packet`.
    fn place(&self, packet: &Incoming, raw_len: usize, newest: u64) -> u64 {
        if self.held + raw_len as u64 > u64::from(self.config.max_held_bytes) {
            // Over the held budget: every open bundle leaves first (building the newest
            // takes the older ones along), then it starts a bundle of its own.
            if let Some(t) = self.order.newest() {
                return u64::from(t);
            }
        }
        for t in self.order.iter() {
            let b = &self.bundles[t as usize];
            if b.seq <= newest {
                continue; // holds (or precedes a bundle holding) one of its keys
            }
            if !b.has_room(packet) {
                // It would have gone here but the path MTU is reached: this bundle (and
                // the older ones) leave now, as a lone bundle would (merge says so).
                return u64::from(t);
            }
            if self.admits(t as usize, packet, raw_len, newest) {
                return u64::from(t);
            }
        }
        if self.order.len() < self.config.max_bundles as usize {
            if let Some(free) = (0..self.config.max_bundles as usize)
                .find(|&t| self.bundles[t].is_empty() && !self.order.contains(t as u8))
            {
                return free as u64;
            }
        }
        // As many bundles open as allowed: the oldest leaves first (merge says so).
        self.order.oldest().map_or(0, u64::from)
    }

    /// Whether the pending datagram `msg` can join bundle `tag` now; one that
    /// cannot blocks its keys for the rest of the scan.
    fn consider(&self, blocked: &mut Blocked, tag: usize, msg: &[u8]) -> Verdict {
        let kind = self.config.key;
        let len = msg.len();
        let mut keys = [0u64; 8];
        let mut n = 0;
        let mut unknown = false;
        let verdict = match classify_datagram(msg, &self.config) {
            Input::Records(packet) => {
                for r in packet.records() {
                    if n == keys.len() {
                        unknown = true; // more keys than we track: stop rather than guess
                        break;
                    }
                    keys[n] = key_of(kind, r.src.to_bits(), r.protocol, r.payload);
                    n += 1;
                }
                let newest = self.newest_holding(&packet);
                if !unknown
                    && !keys[..n].iter().any(|&k| blocked.has(k))
                    && self.admits(tag, &packet, len, newest)
                    && self.bundles[tag].seq > newest
                {
                    return Verdict::Take;
                }
                if !unknown && !self.bundles[tag].has_room(&packet) {
                    return Verdict::Stop;
                }
                Verdict::Skip
            }
            // Dropped when its turn comes; nothing of it is forwarded, so nothing to order.
            Input::Expired(_) => return Verdict::Skip,
            Input::Unbundleable(origin) => {
                let found = origin.any_key(kind, |k| {
                    if n < keys.len() {
                        keys[n] = k;
                        n += 1;
                    } else {
                        unknown = true;
                    }
                    false
                });
                if found.is_none() || matches!(origin, Origin::Unknown) {
                    unknown = true;
                }
                Verdict::Skip
            }
        };
        if unknown || blocked.len + n > BLOCKED {
            return Verdict::Stop;
        }
        for &k in &keys[..n] {
            if !blocked.has(k) {
                blocked.keys[blocked.len] = k;
                blocked.len += 1;
            }
        }
        verdict
    }

    /// Adds `packet` to bundle `tag` (after `admits` said yes), arrived at `now`.
    fn add(&mut self, tag: usize, packet: &Incoming, raw_len: usize, now: u64) {
        let kind = self.config.key;
        let b = &mut self.bundles[tag];
        if b.is_empty() {
            b.seq = self.next_seq;
            self.next_seq += 1;
            self.order.push(tag as u8);
        }
        let seq = b.seq;
        let keys = &mut self.keys;
        b.add(packet, raw_len, now, |r| {
            // The index is sized for every record the open bundles can hold.
            let _ = keys.set(key_of(kind, r.src.to_bits(), r.protocol, r.payload), seq);
        });
        self.held += raw_len as u64;
    }
}

impl Multiplex {
    pub fn config(&self) -> Config {
        self.config
    }

    /// Records dropped so far because their TTL ran out.
    pub fn expired_records(&self) -> u64 {
        self.expired
    }

    /// Bundles open now, oldest first (their tags).
    pub fn open_bundles(&self) -> impl Iterator<Item = u64> + '_ {
        self.set.order.iter().map(u64::from)
    }

    /// Payload bytes a bundle may take now: what the path MTU allows, within the capacity
    /// set at init (a path MTU that grew since is used up to that).
    fn limit(&self, host: &impl Host) -> usize {
        payload_limit(host.path_mtu()).min(self.capacity)
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

    /// Zero added delay: before bundle `tag` leaves a busy link's queue, fold in the
    /// datagrams of this flow that have already arrived (the rest of the batch), keeping each
    /// key's order. One `pending_scan` shows many queued datagrams at once (in a `.wasm`
    /// spec of ABI v2 they are read where the engine laid them out, no copy; others are
    /// peeked), and one `pending_take_list` takes every one chosen: two host calls per fill
    /// instead of three per datagram.
    fn fill_from_pending(&mut self, tag: usize, host: &mut impl Host) {
        let now = host.now_us();
        let Multiplex { set, scratch, blocked, .. } = self;
        blocked.len = 0;
        let mut chosen = [0u32; TAKE_LIST_MAX];
        let mut taking = 0;
        let mut expired = 0;
        let mut views: [Option<&[u8]>; SCAN_AT_ONCE] = [None; SCAN_AT_ONCE];
        let mut first = 0;
        'scan: while !set.bundles[tag].is_full() && taking < chosen.len() {
            let n = host.pending_scan(first, &mut views);
            if n == 0 {
                break;
            }
            for (index, view) in (first..).zip(&views[..n]) {
                if set.bundles[tag].is_full() || taking == chosen.len() {
                    break 'scan;
                }
                let msg = match *view {
                    Some(bytes) => bytes,
                    None => match host.pending_peek(index, &mut scratch[..]) {
                        Some(len) if len <= scratch.len() => &scratch[..len],
                        _ => break 'scan, // too long to look at: stop rather than reorder around it
                    },
                };
                match set.consider(blocked, tag, msg) {
                    Verdict::Skip => {}
                    Verdict::Stop => break 'scan,
                    Verdict::Take => {
                        if let Input::Records(packet) = classify_datagram(msg, &set.config) {
                            expired += packet.expired;
                            set.add(tag, &packet, msg.len(), now);
                        }
                        chosen[taking] = index as u32;
                        taking += 1;
                    }
                }
            }
            first += n;
        }
        if taking > 0 && !host.pending_take_list(&chosen[..taking]) {
            // The indices came from this scan, ascending: only a host that breaks the ABI
            // refuses them (the engine then quarantines the flow).
            log(host, Level::Error, format_args!("multiplex: pending_take_list refused {taking} datagram(s)"));
        }
        self.count_expired(expired, host);
    }

    /// `merge` of bundleable records into bundle `tag`: `newest` is
    /// [`BundleSet::newest_holding`] of `packet`, `fits` whether it fits an empty bundle now.
    fn merge_records(
        &mut self,
        tag: usize,
        packet: &Incoming,
        raw_len: usize,
        newest: u64,
        fits: bool,
        host: &mut impl Host,
    ) -> Merge {
        if tag >= self.set.bundles.len() {
            return Merge::Pass;
        }
        if fits && self.set.admits(tag, packet, raw_len, newest) {
            let expired = packet.expired;
            self.set.add(tag, packet, raw_len, host.now_us());
            self.count_expired(expired, host);
            Merge::Merged
        } else if !self.set.bundles[tag].is_empty() {
            Merge::FlushFirst
        } else {
            Merge::Pass // fits no bundle, and nothing of its keys waits
        }
    }

    /// The bundle is finished: tell the engine how long an egress gate may still hold it.
    fn allow_hold(&self, tag: usize, host: &mut impl Host) {
        if let Some(at) = self.set.bundles[tag].budget_deadline() {
            host.hold_limit(at);
        }
    }
}

impl MergeSpec for Multiplex {
    /// The bundle's index (its tag) in the spec's arena.
    type State = u32;

    const ORDERED_STATES: bool = true;

    fn init(host: &mut impl Host) -> Result<Self, &'static str> {
        let config = Config::parse(host.params())?;
        let n = config.max_bundles as usize;
        // Buffers are sized once, for the path MTU the flow starts with (docs/multiplex.md
        // "Bundle size"): the bundles' payloads side by side in one arena, the key index
        // for every record they can hold.
        let capacity = payload_limit(host.path_mtu()).max(mplex::HEADER_LEN);
        let mut buffers = Arena::<u8>::zeroed(n * capacity)?; // one memory.grow for all
        Ok(Multiplex {
            config,
            set: BundleSet {
                config,
                bundles: Arena::try_new(n, || Ok(MplexBundle::new(buffers.carve(capacity)?)))?,
                order: Order::new(),
                keys: KeyIndex::new(n * max_records(capacity))?,
                next_seq: 1,
                held: 0,
            },
            capacity,
            scratch: Arena::zeroed(capacity + ipv4::MAX_HEADER_LEN)?,
            blocked: Blocked { keys: [0; BLOCKED], len: 0 },
            expired: 0,
        })
    }

    /// The bundle the datagram goes to, chosen once here; `merge` re-checks it (a datagram
    /// offered again after a flush lands in a fresh bundle under the same tag).
    fn get_tag(&mut self, msg: &[u8], host: &mut impl Host) -> Tag {
        self.tag_and_merge(msg, None, host).0
    }

    /// `get_tag` and, for the run's tag, `merge`, on one parse of the datagram: what the two
    /// compute again for the same datagram (its class, the newest bundle holding its keys,
    /// whether it fits an empty bundle) is computed once, as nothing changes between them.
    fn tag_and_merge(
        &mut self,
        msg: &[u8],
        into: Option<(&mut u32, u64)>,
        host: &mut impl Host,
    ) -> (Tag, Option<Merge>) {
        let is_run = |tag: Tag| match (tag, &into) {
            (Tag::Merge(_), Some((_, run))) => tag.to_abi() == *run,
            _ => false,
        };
        match classify_datagram(msg, &self.config) {
            Input::Records(packet) => {
                let newest = self.set.newest_holding(&packet);
                let fits = fits_empty(&packet, self.limit(host));
                let tag = if fits {
                    Tag::Merge(self.set.place(&packet, msg.len(), newest))
                } else {
                    // Too big for any bundle on this path: forwarded as it is, after the
                    // bundles holding its keys.
                    match self
                        .set
                        .order
                        .iter()
                        .find(|&t| self.set.bundles[t as usize].seq == newest)
                    {
                        Some(t) => Tag::Merge(u64::from(t)),
                        None => Tag::Pass,
                    }
                };
                if !is_run(tag) {
                    return (tag, None);
                }
                let Some((state, _)) = into else { return (tag, None) };
                let merged = self.merge_records(*state as usize, &packet, msg.len(), newest, fits, host);
                (tag, Some(merged))
            }
            Input::Expired(n) => {
                self.count_expired(n, host);
                (Tag::Drop, None)
            }
            Input::Unbundleable(origin) => {
                let tag = match self.set.must_follow(&origin) {
                    Some(tag) => Tag::Merge(tag),
                    None => Tag::Pass,
                };
                let run = is_run(tag);
                match into {
                    // `merge` of an unbundleable datagram that must follow a bundle.
                    Some((state, _)) if run => {
                        let merged = if (*state as usize) < self.set.bundles.len() {
                            Merge::FlushFirst
                        } else {
                            Merge::Pass
                        };
                        (tag, Some(merged))
                    }
                    _ => (tag, None),
                }
            }
        }
    }

    fn new_state(&mut self, tag: u64, host: &mut impl Host) -> u32 {
        // Tags come from get_tag (< max_bundles); clamp anything else into the arena.
        let tag = (tag as usize).min(self.set.bundles.len() - 1);
        if !self.set.order.contains(tag as u8) {
            let limit = self.limit(host);
            self.set.bundles[tag].reset(limit);
        }
        tag as u32
    }

    fn merge(&mut self, tag: &mut u32, msg: &[u8], host: &mut impl Host) -> Merge {
        let tag = *tag as usize;
        if tag >= self.set.bundles.len() {
            return Merge::Pass;
        }
        match classify_datagram(msg, &self.config) {
            Input::Records(packet) => {
                let newest = self.set.newest_holding(&packet);
                let fits = fits_empty(&packet, self.limit(host));
                self.merge_records(tag, &packet, msg.len(), newest, fits, host)
            }
            Input::Expired(n) => {
                self.count_expired(n, host);
                Merge::Drop
            }
            Input::Unbundleable(origin) if self.set.must_follow(&origin).is_some() => {
                Merge::FlushFirst
            }
            Input::Unbundleable(_) => Merge::Pass,
        }
    }

    fn done(&mut self, tag: &mut u32, host: &mut impl Host) -> bool {
        let tag = *tag as usize;
        let Some(deadline) = self.set.bundles[tag].deadline() else {
            return true; // nothing held: let the engine close the state
        };
        if deadline <= host.now_us() {
            let link_busy = host.egress_free_at() > host.now_us();
            if link_busy || self.config.fold_pending == FoldPending::Always {
                self.fill_from_pending(tag, host);
            }
            self.allow_hold(tag, host);
            return true;
        }
        if self.set.bundles[tag].is_full() {
            return true;
        }
        self.set.bundles[tag].arm(host, deadline);
        false
    }

    fn timeout(&mut self, tag: &mut u32, host: &mut impl Host) -> bool {
        self.allow_hold(*tag as usize, host);
        true
    }

    fn build(&mut self, tag: &mut u32, host: &mut impl Host) -> AfterBuild {
        let tag = *tag as usize;
        let kind = self.config.key;
        let limit = self.limit(host);
        let b = &mut self.set.bundles[tag];
        if !b.is_empty() {
            let (body, ttl) = b.finish(host.now_us());
            let header = OutHeader {
                protocol: protocol::MPLEX,
                ttl,
                dont_fragment: true,
            };
            host.emit(body, header);
            let seq = b.seq;
            for r in b.record_iter().flatten() {
                let key = key_of(kind, r.src_addr().to_bits(), r.protocol(), r.payload());
                self.set.keys.remove_if(key, seq);
            }
            self.set.held -= u64::from(b.held_bytes());
        }
        self.set.order.remove(tag as u8);
        b.reset(limit);
        AfterBuild::Free
    }
}

// State is a bundle index (no drop): the engine need not call in when a bundle is freed.
concast_sdk::export_spec!(Multiplex, without_state_free);

#[cfg(test)]
mod tests;
