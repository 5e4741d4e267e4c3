//! The multiplex spec's flow parameters.

use concast_sdk::params;
use concast_speckit::config::number;

use crate::keys::KeyKind;

/// Most bundles a flow may keep open at once (`max_bundles`).
pub const MAX_BUNDLES: usize = 64;

/// Flow parameters (`key=value` text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Largest datagram (IPv4 total length) that is bundled; for an arriving MplexPkt, the
    /// largest record, counted as the datagram it stands for (20 + PayloadLength).
    pub size_threshold: u32,
    /// MaxLocalDelay given to plain datagrams (µs).
    pub max_local_delay_us: u32,
    /// MaxTotalDelay given to plain datagrams (µs).
    pub max_total_delay_us: u32,
    /// Raw bytes the engine may hold for all open bundles together (the ABI does not tell a
    /// spec the engine's held-bytes limit, so an operator who lowers it lowers this too).
    pub max_held_bytes: u32,
    /// What counts as one source for the never-two-in-one-bundle rule (`key=host|flow`).
    pub key: KeyKind,
    /// Bundles open at once (1..=64); when a record needs one more, the oldest leaves.
    pub max_bundles: u32,
    /// When a bundle whose delay is up may take datagrams already received but not yet
    /// processed (`fold_pending=link_busy|always`).
    pub fold_pending: FoldPending,
}

/// Queue access at zero added delay (docs/multiplex.md "Queue access"): the paper combines
/// only packets that wait for a busy output link. Datagrams that merely sit together in the
/// daemon's read batch did not wait for the link, so by default they are folded into a
/// finished bundle only while the egress gate reports the link busy; `always` folds the
/// whole batch (the behaviour before, kept to measure the difference).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldPending {
    LinkBusy,
    Always,
}

impl Config {
    pub fn parse(raw: &[u8]) -> Result<Config, &'static str> {
        const WHY: &str = "multiplex spec: a parameter (size_threshold, max_local_delay_us, \
                           max_total_delay_us, max_held_bytes, max_bundles) is not a number in range";
        let u32_max = u64::from(u32::MAX);
        let key = match params::get(raw, "key") {
            None | Some(b"flow") => KeyKind::Flow,
            Some(b"host") => KeyKind::Host,
            Some(_) => return Err("multiplex spec: key must be host or flow"),
        };
        let fold_pending = match params::get(raw, "fold_pending") {
            None | Some(b"link_busy") => FoldPending::LinkBusy,
            Some(b"always") => FoldPending::Always,
            Some(_) => return Err("multiplex spec: fold_pending must be link_busy or always"),
        };
        let max_bundles = number(raw, "max_bundles", 16, MAX_BUNDLES as u64, WHY)? as u32;
        if max_bundles == 0 {
            return Err("multiplex spec: max_bundles must be 1 or more");
        }
        Ok(Config {
            size_threshold: number(raw, "size_threshold", 128, 65_535, WHY)? as u32,
            max_local_delay_us: number(raw, "max_local_delay_us", 2_000, u32_max, WHY)? as u32,
            max_total_delay_us: number(raw, "max_total_delay_us", 10_000, u32_max, WHY)? as u32,
            max_held_bytes: number(raw, "max_held_bytes", 1 << 20, u32_max, WHY)? as u32,
            key,
            max_bundles,
            fold_pending,
        })
    }
}
