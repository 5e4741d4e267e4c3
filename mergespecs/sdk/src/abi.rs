//! The numbers of the merge-spec ABI (docs/mergespec-abi.md), shared by the SDK and the engine.

/// The ABI version this SDK builds by default: 2, batched (`concast_run`).
pub const VERSION: u32 = 2;

/// ABI version 1: one call per datagram (`concast_get_tag`, `concast_merge`). The engine
/// still runs it; the SDK builds it with `--cfg concast_abi_v1` (or `export_spec_v1!`).
pub const VERSION_1: u32 = 1;

/// ABI version 2: version 1's state calls, with tagging, merging and `done` of a whole batch
/// of one flow's datagrams in one `concast_run` call (docs/mergespec-abi.md section 12).
pub const VERSION_2: u32 = 2;

/// The versions this engine runs.
pub const SUPPORTED_VERSIONS: &[u32] = &[VERSION_1, VERSION_2];

/// Module name of every import a merge spec may have.
pub const IMPORT_MODULE: &str = "concast";

/// Bytes of the guest's message buffer (`concast_init` returns its address): every IPv4 datagram fits.
pub const MSG_BUFFER_LEN: usize = 65_536;

/// `concast_get_tag` result: forward this datagram unchanged, merge nothing.
pub const TAG_PASS: u64 = u64::MAX;
/// `concast_get_tag` result: the spec swallows this datagram.
pub const TAG_DROP: u64 = u64::MAX - 1;
/// Largest tag a spec may use for merging.
pub const TAG_MAX: u64 = u64::MAX - 2;

/// `concast_merge` results.
pub mod merge {
    /// The message is folded into the state; the engine holds it until the state is built.
    pub const MERGED: i32 = 0;
    /// Build and forward the state first, then offer the message again (once).
    pub const FLUSH_FIRST: i32 = 1;
    /// Not merged: forward the message unchanged.
    pub const PASS: i32 = 2;
    /// Consumed without being held (duplicate suppression): nothing is forwarded for it.
    pub const DROP: i32 = 3;
}

/// `concast_build` results.
pub mod build {
    /// The state is finished: the engine frees its slot.
    pub const FREE: i32 = 0;
    /// The state persists under its tag (for example a duplicate-suppression window).
    pub const KEEP: i32 = 1;
}

/// `emit` flag bits.
pub mod emit_flags {
    /// Set Don't Fragment on the outgoing datagram.
    pub const DONT_FRAGMENT: i32 = 1;
}

/// `log` levels.
pub mod level {
    pub const ERROR: i32 = 0;
    pub const WARN: i32 = 1;
    pub const INFO: i32 = 2;
    pub const DEBUG: i32 = 3;
}

/// `pending_peek` / `pending_take` results below zero.
pub mod pending {
    /// No pending datagram at that index.
    pub const NO_SUCH: i32 = -1;
    /// `pending_take`: the buffer is shorter than the datagram; nothing was taken.
    pub const TOO_SMALL: i32 = -2;

    /// `pending_scan` writes one record of this many bytes per pending datagram:
    /// `at: u32` (where its bytes are in linear memory, or [`NOT_IN_MEMORY`]) and `len: u32`.
    pub const SCAN_RECORD_LEN: usize = 8;
    pub const SCAN_AT: usize = 0;
    pub const SCAN_LEN: usize = 4;
    /// `at` of a datagram the engine has not laid out in the batch area (ABI v1, or beyond
    /// the layout): `pending_peek` it.
    pub const NOT_IN_MEMORY: u32 = 0;
    /// Most records one `pending_scan` writes (its `cap` is clamped to this).
    pub const SCAN_MAX: usize = 64;
    /// Most indices one `pending_take_list` takes.
    pub const TAKE_LIST_MAX: usize = 64;
}

/// The batch area of ABI v2 (`concast_init` returns its address): a header, a table of
/// [`batch::MAX`] entries, then the datagrams' bytes. All integers little-endian.
pub mod batch {
    /// Bytes of the whole area.
    pub const AREA_LEN: usize = DATA + super::MSG_BUFFER_LEN;
    /// Header: `u32` at offset 0, the index of the entry the guest is working on (the guest
    /// writes it before each datagram; the engine reads it for the pending queue and the
    /// per-datagram CPU budget).
    pub const CURRENT: usize = 0;
    /// Offset of the entry table.
    pub const TABLE: usize = 64;
    /// Entries in the table: at most this many datagrams per batch.
    pub const MAX: usize = 64;
    /// Bytes of one entry: `off: u32, len: u32, tag: u64, flags: u32, result: u32`.
    pub const ENTRY_LEN: usize = 24;
    /// Offsets inside an entry.
    pub const OFF: usize = 0;
    pub const LEN: usize = 4;
    pub const TAG: usize = 8;
    pub const FLAGS: usize = 16;
    pub const RESULT: usize = 20;
    /// Offset of the datagrams' bytes (`off` counts from here); 65,536 bytes follow.
    pub const DATA: usize = 2048;
    /// `flags` (written by the engine): `tag` holds the datagram's tag already; do not call
    /// `get_tag` again.
    pub const TAG_KNOWN: u32 = 1;
    /// `flags`: the datagram was taken from the pending queue (`pending_take`); skip it.
    pub const TAKEN: u32 = 2;
    /// `result` (written by the guest): the datagram's tag is not the run's; the engine finds
    /// or creates its state and runs again from it.
    pub const NEEDS_STATE: u32 = 4;
    /// `result` bit: after `MERGED` or `DROP`, `done` said build.
    pub const DONE: u32 = 0x100;
}

/// What a module must export, with its Wasm signature (params -> results), for validation
/// messages and docs. `i32`/`i64` are Wasm value types.
/// Required by every version.
pub const REQUIRED_EXPORTS: &[(&str, &str)] = &[
    ("concast_abi_version", "() -> i32"),
    ("concast_init", "() -> i32"),
    ("concast_state_new", "(i32, i64) -> ()"),
    ("concast_done", "(i32) -> i32"),
    ("concast_build", "(i32) -> i32"),
];

/// Required by version 1 only (version 2 tags and merges in `concast_run`).
pub const REQUIRED_EXPORTS_V1: &[(&str, &str)] = &[
    ("concast_get_tag", "(i32) -> i64"),
    ("concast_merge", "(i32, i32) -> i32"),
];

/// Required by version 2 only: `concast_run(first, count, slot, tag) -> stop`.
pub const REQUIRED_EXPORTS_V2: &[(&str, &str)] = &[("concast_run", "(i32, i32, i32, i64) -> i32")];

/// Exports a module may have; the engine uses a default when one is absent.
pub const OPTIONAL_EXPORTS: &[(&str, &str)] = &[
    ("concast_timeout", "(i32) -> i32"),
    ("concast_state_free", "(i32) -> ()"),
    ("concast_flags", "() -> i32"),
];

/// `concast_flags` bits: properties of the whole spec the engine reads once per flow.
pub mod flags {
    /// States leave in the order they were created: before building a state the engine
    /// builds every older open state of the flow (a spec that keeps several bundles open
    /// and must never let a later one overtake an earlier one).
    pub const ORDERED_STATES: i32 = 1;
}

/// Everything a module may import from [`IMPORT_MODULE`], with its signature. Nothing else
/// is importable: no WASI, no clock but the engine's, no I/O.
pub const IMPORTS: &[(&str, &str)] = &[
    ("now_us", "() -> i64"),
    ("flow_receiver", "() -> i32"),
    ("flow_group", "() -> i32"),
    ("flow_node", "() -> i32"),
    ("flow_mtu", "() -> i32"),
    ("flow_children", "() -> i32"),
    ("flow_params", "(i32, i32) -> i32"),
    ("set_timer", "(i64) -> ()"),
    ("hold_limit", "(i64) -> ()"),
    ("egress_free_at", "() -> i64"),
    ("cancel_timer", "() -> ()"),
    ("pending_count", "() -> i32"),
    ("pending_peek", "(i32, i32, i32) -> i32"),
    ("pending_take", "(i32, i32, i32) -> i32"),
    ("pending_scan", "(i32, i32, i32) -> i32"),
    ("pending_take_list", "(i32, i32) -> i32"),
    ("emit", "(i32, i32, i32, i32, i32) -> ()"),
    ("log", "(i32, i32, i32) -> ()"),
    ("abort", "(i32, i32) -> ()"),
];
