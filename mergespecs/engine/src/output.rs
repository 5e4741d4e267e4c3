//! What the engine hands back: datagrams to forward, merged or unmerged. They live in one
//! reusable buffer so a batch costs no allocation per datagram.

use crate::ipv4::FlowId;

/// Why a datagram leaves the engine unmerged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unmerged {
    /// The spec asked for it (`TAG_PASS` or merge result `PASS`).
    Passed,
    /// Too short or too long to be an IPv4 datagram: never shown to the spec.
    Malformed,
    /// The flow is quarantined (or just was): forwarded unchanged instead of merged.
    FailOpen,
    /// `ingest_mixed`: not a concast datagram of a flow this engine has.
    NoFlow,
}

impl Unmerged {
    pub fn name(self) -> &'static str {
        match self {
            Unmerged::Passed => "passed",
            Unmerged::Malformed => "malformed",
            Unmerged::FailOpen => "fail_open",
            Unmerged::NoFlow => "no_flow",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputKind {
    /// Built by the spec; header written by the engine (source = this node).
    Merged,
    /// An input datagram, byte for byte.
    Unmerged(Unmerged),
}

impl OutputKind {
    pub fn name(self) -> &'static str {
        match self {
            OutputKind::Merged => "merged",
            OutputKind::Unmerged(why) => why.name(),
        }
    }
}

/// One datagram to forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output<'a> {
    pub flow: FlowId,
    /// Engine clock of the call that produced it.
    pub at_us: u64,
    pub kind: OutputKind,
    pub datagram: &'a [u8],
}

#[derive(Debug, Clone)]
struct Item {
    flow: FlowId,
    at_us: u64,
    kind: OutputKind,
    start: usize,
    end: usize,
}

/// Datagrams produced by `ingest`/`advance`, in order. Clear it between batches to reuse it.
#[derive(Debug, Default, Clone)]
pub struct Outputs {
    bytes: Vec<u8>,
    items: Vec<Item>,
}

impl Outputs {
    pub fn new() -> Outputs {
        Outputs::default()
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.items.clear();
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn get(&self, index: usize) -> Option<Output<'_>> {
        let item = self.items.get(index)?;
        Some(Output {
            flow: item.flow,
            at_us: item.at_us,
            kind: item.kind,
            datagram: &self.bytes[item.start..item.end],
        })
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = Output<'_>> + '_ {
        (0..self.items.len()).map(|i| self.get(i).expect("index in range"))
    }

    /// Appends a datagram copied from `datagram`.
    pub(crate) fn push(&mut self, flow: FlowId, at_us: u64, kind: OutputKind, datagram: &[u8]) {
        self.push_with(flow, at_us, kind, |bytes| bytes.extend_from_slice(datagram));
    }

    /// Appends a datagram written in place by `write` (which appends to the buffer).
    pub(crate) fn push_with(
        &mut self,
        flow: FlowId,
        at_us: u64,
        kind: OutputKind,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        let start = self.bytes.len();
        write(&mut self.bytes);
        self.items.push(Item {
            flow,
            at_us,
            kind,
            start,
            end: self.bytes.len(),
        });
    }
}
