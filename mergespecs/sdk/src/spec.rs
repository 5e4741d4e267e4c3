//! The merge-spec model of Calvert et al.: `getTag`, `merge`, `done`, `buildMsg`, plus the
//! [`Host`] services a spec may use while one of them runs.

use crate::abi;

/// What [`MergeSpec::get_tag`] decides for a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// Merge with datagrams of the same tag (the datagram equivalence class). Values above
    /// [`abi::TAG_MAX`] are reserved and become `TAG_MAX`.
    Merge(u64),
    /// Forward unchanged (not mergeable: a fragment, a foreign format, ...).
    Pass,
    /// Swallow it: nothing is forwarded.
    Drop,
}

impl Tag {
    /// The ABI encoding of this decision.
    pub fn to_abi(self) -> u64 {
        match self {
            Tag::Merge(t) => t.min(abi::TAG_MAX),
            Tag::Pass => abi::TAG_PASS,
            Tag::Drop => abi::TAG_DROP,
        }
    }
}

/// What [`MergeSpec::merge`] did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// Folded into the state.
    Merged,
    /// The state cannot take it (a bundle is full): build and forward the state first, then
    /// offer the message again. A second `FlushFirst` for the same message forwards it unmerged.
    FlushFirst,
    /// Not merged: forward it unchanged.
    Pass,
    /// Consumed without being kept (for example a suppressed duplicate).
    Drop,
}

impl Merge {
    pub fn to_abi(self) -> i32 {
        match self {
            Merge::Merged => abi::merge::MERGED,
            Merge::FlushFirst => abi::merge::FLUSH_FIRST,
            Merge::Pass => abi::merge::PASS,
            Merge::Drop => abi::merge::DROP,
        }
    }
}

/// What happens to a state after [`MergeSpec::build`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterBuild {
    /// Forget it: the tag starts afresh with the next message.
    Free,
    /// Keep it under its tag (the datagrams merged so far count as forwarded).
    Keep,
}

impl AfterBuild {
    pub fn to_abi(self) -> i32 {
        match self {
            AfterBuild::Free => abi::build::FREE,
            AfterBuild::Keep => abi::build::KEEP,
        }
    }
}

/// IPv4 fields of an emitted datagram that the spec chooses. The engine fills in the rest:
/// source = this node, destination = R, the Concast ID option with G, length, ID, checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutHeader {
    pub protocol: u8,
    pub ttl: u8,
    pub dont_fragment: bool,
}

impl OutHeader {
    /// UDP, TTL 64, fragmentable.
    pub const fn udp() -> OutHeader {
        OutHeader {
            protocol: 17,
            ttl: 64,
            dont_fragment: false,
        }
    }

    pub const fn with_ttl(mut self, ttl: u8) -> OutHeader {
        self.ttl = ttl;
        self
    }

    pub fn abi_flags(&self) -> i32 {
        if self.dont_fragment {
            abi::emit_flags::DONT_FRAGMENT
        } else {
            0
        }
    }
}

/// Log levels of [`Host::log`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
}

impl Level {
    pub fn from_abi(level: i32) -> Level {
        match level {
            i32::MIN..=0 => Level::Error,
            1 => Level::Warn,
            2 => Level::Info,
            _ => Level::Debug,
        }
    }
}

/// What the engine offers a spec while one of its functions runs. In a `.wasm` module each
/// method is one `concast` import; natively the engine implements it directly.
///
/// Calls are checked: `set_timer`/`cancel_timer`/`pending_take` need a live current state
/// (`new_state`, `merge`, `done`, `build`, `timeout`), `emit` is only allowed in `build`. A
/// misuse stops the spec and quarantines its flow, like a trap.
pub trait Host {
    /// The engine's clock, in microseconds (real time in a daemon, virtual time offline).
    fn now_us(&self) -> u64;
    /// R, the flow's receiver, as an IPv4 address in network order read as a big-endian u32.
    fn receiver(&self) -> u32;
    /// G, the flow's group ID.
    fn group(&self) -> u32;
    /// This node's IPv4 address (the source of what the spec emits).
    fn node(&self) -> u32;
    /// Path MTU toward R, in bytes.
    fn path_mtu(&self) -> u32;
    /// Number of downstream children joined to this flow at this node (0 = unknown).
    fn children(&self) -> u32;
    /// The receiver-given parameters of the flow (opaque bytes; see [`crate::params`]).
    fn params(&self) -> &[u8];

    /// Arms the current state's one timer at `at_us` (engine clock); replaces an armed one.
    /// When it expires the engine calls [`MergeSpec::timeout`].
    fn set_timer(&mut self, at_us: u64);
    /// Disarms the current state's timer.
    fn cancel_timer(&mut self);
    /// The latest time (engine clock, µs) the current state may still be held after `done`
    /// or `timeout` said "build": an embedder's egress gate may hold a finished state while
    /// the output link is busy (so later datagrams still merge into it), never past this.
    /// Without a call the engine never holds a finished state. Hosts that have no gate may
    /// ignore it.
    fn hold_limit(&mut self, at_us: u64) {
        let _ = at_us;
    }
    /// When the output link toward R will have sent what is queued on it (engine clock,
    /// µs), as the embedder's egress gate last saw it before this `done` or `timeout` call;
    /// 0 when it is idle or unknown (no gate). A state built while `egress_free_at() >
    /// now_us()` waits in that queue anyway: the paper's "queue access".
    fn egress_free_at(&self) -> u64 {
        0
    }

    /// Datagrams of this flow already received but not yet processed.
    fn pending_count(&self) -> usize;
    /// Copies pending datagram `index` (0 = next) into `buf` as far as it fits; returns its
    /// full length, or `None` if there is no such datagram.
    fn pending_peek(&self, index: usize, buf: &mut [u8]) -> Option<usize>;
    /// Removes pending datagram `index` and copies it into `buf`; it then belongs to the
    /// current state as if merged. `None` (nothing taken) if there is no such datagram or
    /// `buf` is too short (peek with an empty buffer to learn the length).
    fn pending_take(&mut self, index: usize, buf: &mut [u8]) -> Option<usize>;
    /// Pending datagrams `first`, `first + 1`, ... (at most `out.len()`), in one go: each as
    /// its bytes where the host can show them without a copy (a `.wasm` spec: in its ABI v2
    /// batch area), else `None` (then [`Host::pending_peek`] it). Returns how many entries it
    /// wrote; fewer than asked means the queue ends there or the host shows at most that
    /// many at once (ask again from `first + n`).
    fn pending_scan<'a>(&'a self, first: usize, out: &mut [Option<&'a [u8]>]) -> usize {
        let n = self.pending_count().saturating_sub(first).min(out.len());
        out[..n].fill(None);
        n
    }
    /// Takes the pending datagrams at `indices` (strictly ascending, positions in the queue
    /// as it is before this call) into the current state as [`Host::pending_take`] does, in
    /// one go and without copying them. False, and nothing taken, if an index is missing
    /// or out of order.
    fn pending_take_list(&mut self, indices: &[u32]) -> bool {
        let count = self.pending_count();
        if indices.windows(2).any(|w| w[0] >= w[1]) || indices.last().is_some_and(|&i| i as usize >= count) {
            return false;
        }
        // In queue order; each take moves the later ones a place forward.
        let mut buf = [0u8; 65_535];
        (0..).zip(indices).all(|(k, &i)| self.pending_take(i as usize - k, &mut buf).is_some())
    }

    /// Forwards `payload` as a new concast datagram of this flow (in `build` only).
    fn emit(&mut self, payload: &[u8], header: OutHeader);
    /// Leaves a line in the flow's log (bounded; the engine keeps the last few).
    fn log(&mut self, level: Level, msg: &str);
}

/// A merge specification. One value exists per flow (created by [`MergeSpec::init`]); one
/// [`MergeSpec::State`] exists per datagram equivalence class (per tag) while it is open.
///
/// Every message is a whole IPv4 datagram (header and payload), as received.
pub trait MergeSpec: Sized {
    /// The merge state of one datagram equivalence class.
    type State;

    /// States leave in creation order (`abi::flags::ORDERED_STATES`): building a state
    /// first builds every older open state of the flow.
    const ORDERED_STATES: bool = false;

    /// Called once when the flow is created, after the flow info and parameters are set.
    /// An error refuses the flow (the message is reported to whoever installed it).
    fn init(host: &mut impl Host) -> Result<Self, &'static str>;

    /// `getTag(m)`: datagrams may merge iff their tags are equal.
    fn get_tag(&mut self, msg: &[u8], host: &mut impl Host) -> Tag;

    /// One step of a batched run (ABI v2's `concast_run`): `getTag(m)`, then, if the tag is
    /// `Tag::Merge(t)` with `t` (as [`Tag::to_abi`] encodes it) equal to the run's tag `into.1`,
    /// `merge(into.0, m)`. Returns the tag and what the merge did (`None`: not merged, the
    /// tag is not the run's or there is no state). A spec may override it to parse `msg`
    /// once for both; it must give exactly what the default gives. The default calls
    /// [`MergeSpec::get_tag`] then [`MergeSpec::merge`].
    fn tag_and_merge(
        &mut self,
        msg: &[u8],
        into: Option<(&mut Self::State, u64)>,
        host: &mut impl Host,
    ) -> (Tag, Option<Merge>) {
        let tag = self.get_tag(msg, host);
        match (tag, into) {
            (Tag::Merge(_), Some((state, run_tag))) if tag.to_abi() == run_tag => {
                (tag, Some(self.merge(state, msg, host)))
            }
            _ => (tag, None),
        }
    }

    /// A fresh state for `tag`, created when the first datagram of the class arrives.
    fn new_state(&mut self, tag: u64, host: &mut impl Host) -> Self::State;

    /// `merge(s, m)`: folds `msg` into `state`.
    fn merge(&mut self, state: &mut Self::State, msg: &[u8], host: &mut impl Host) -> Merge;

    /// `done(s)`: forward now? May arm a timer (`host.set_timer`) to forward later instead.
    fn done(&mut self, state: &mut Self::State, host: &mut impl Host) -> bool;

    /// `buildMsg(s)`: emits the merged datagram(s) with `host.emit` and says whether the
    /// state persists.
    fn build(&mut self, state: &mut Self::State, host: &mut impl Host) -> AfterBuild;

    /// The state's timer expired: build now? The default says yes.
    fn timeout(&mut self, state: &mut Self::State, host: &mut impl Host) -> bool {
        let _ = (state, host);
        true
    }
}
