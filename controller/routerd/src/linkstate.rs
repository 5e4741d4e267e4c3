//! The link emulator's shared transmitter state, as routerd uses it for queue access
//! (docs/multiplex.md, "Queue access"). The file's layout, its reader and its writer are
//! defined once, in `concast_daemon::linkstate` (docs/linkemu.md), which the emulator uses too.

pub use concast_daemon::linkstate::{monotonic_ns, LinkState, Slot, HEADER_LEN, MAGIC, SLOT_LEN, VERSION};

/// Writes a state file in the emulator's layout (tests, and tools that fake a link).
pub mod writer {
    pub use concast_daemon::linkstate::StateFile as Writer;

    /// A fresh file with `slots` zeroed slots.
    pub fn create(path: &std::path::Path, slots: u32) -> std::io::Result<()> {
        Writer::create(path, slots).map(drop)
    }
}
