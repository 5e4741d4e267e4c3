//! ABI v2's run loop (`concast_run`), written once for every host: the Wasm glue runs it on
//! the batch area in linear memory, the engine's native sandbox on its own copy of the
//! table, so a native spec and its `.wasm` build do the same work per datagram.

use crate::abi::{self, batch};
use crate::spec::{Host, MergeSpec};

/// The entry table a run works through (ABI v2's batch area, or a native copy of it).
/// `'m`: how long the laid-out datagrams stay where they are (the whole run).
pub trait RunTable<'m, H: Host> {
    /// Entry `i` was taken from the pending queue during this run: skip it. Called first for
    /// each entry (a table may read the entry's flags here for [`RunTable::known_tag`]).
    fn taken(&mut self, i: usize, host: &H) -> bool;
    /// The tag the engine gave entry `i` already (`TAG_KNOWN`), if any.
    fn known_tag(&self, i: usize) -> Option<u64>;
    /// The spec starts on entry `i` (ABI v2: written to the header's `CURRENT`).
    fn begin(&mut self, i: usize, host: &mut H);
    /// The datagram of entry `i`.
    fn message(&self, i: usize) -> &'m [u8];
    fn set_tag(&mut self, i: usize, tag: u64);
    fn set_result(&mut self, i: usize, result: u32);
}

/// `concast_run`: tags, merges and asks `done` for entries `first..count`, in order, into
/// `state` (whose tag is `tag`; `None`: no state yet). Stops at the first entry that needs
/// the engine (another tag, a merge result other than MERGED/DROP, or `done` said build)
/// and returns its index; returns `count` when all are through. An entry whose tag is not
/// known yet is tagged and, if the tag is the run's, merged in one
/// [`MergeSpec::tag_and_merge`] step.
pub fn run<'m, S: MergeSpec, H: Host>(
    spec: &mut S,
    mut state: Option<&mut S::State>,
    table: &mut impl RunTable<'m, H>,
    host: &mut H,
    first: usize,
    count: usize,
    tag: u64,
) -> usize {
    for i in first..count {
        if table.taken(i, host) {
            continue;
        }
        table.begin(i, host);
        let msg = table.message(i);
        let (t, merged) = match table.known_tag(i) {
            Some(t) => (t, None),
            None => {
                let into = state.as_deref_mut().map(|s| (s, tag));
                let (t, merged) = spec.tag_and_merge(msg, into, host);
                let t = t.to_abi();
                table.set_tag(i, t);
                (t, merged)
            }
        };
        if t == abi::TAG_PASS || t == abi::TAG_DROP {
            continue;
        }
        let Some(state) = state.as_deref_mut().filter(|_| t == tag) else {
            table.set_result(i, batch::NEEDS_STATE);
            return i;
        };
        let r = match merged {
            Some(m) => m,
            None => spec.merge(state, msg, host),
        }
        .to_abi();
        if r == abi::merge::MERGED || r == abi::merge::DROP {
            if spec.done(state, host) {
                table.set_result(i, r as u32 | batch::DONE);
                return i;
            }
            table.set_result(i, r as u32);
        } else {
            table.set_result(i, r as u32);
            return i;
        }
    }
    count
}
