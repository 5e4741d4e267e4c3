//! Whether an active flow's diversion is in the data plane, and when to try again if not.
//!
//! Installing a diversion can fail for reasons outside routerd (BMv2: another P4Runtime client
//! holds a higher election id, so our write is refused as "backup"; docs/dataplane-bmv2.md
//! "Arbitration"). A flow whose diversion failed is not merging, so it must not look active:
//! `concast router flows` shows it as `divert_failed` with the error, and routerd tries again
//! with a doubling wait until the install succeeds or the flow goes.

use serde_json::{json, Value};

/// The first retry comes this long after a failure (µs); each later one waits twice as long
/// as the one before, up to [`RETRY_MAX_US`].
pub const RETRY_FIRST_US: u64 = 500_000;
/// The longest wait between two tries (µs).
pub const RETRY_MAX_US: u64 = 8_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Diversion {
    /// The data plane diverts the flow to routerd.
    Installed,
    /// The last try failed with `error`; `attempts` tries so far; the next at `retry_at`.
    Failed { error: String, attempts: u32, retry_at: u64 },
}

impl Diversion {
    /// The state after the first try at `now`.
    pub fn after_first_try(result: Result<(), String>, now: u64) -> Diversion {
        match result {
            Ok(()) => Diversion::Installed,
            Err(error) => Diversion::Failed { error, attempts: 1, retry_at: now + RETRY_FIRST_US },
        }
    }

    /// When to try again (`None`: installed).
    pub fn retry_at(&self) -> Option<u64> {
        match self {
            Diversion::Installed => None,
            Diversion::Failed { retry_at, .. } => Some(*retry_at),
        }
    }

    /// Whether a retry is due at `now`.
    pub fn due(&self, now: u64) -> bool {
        self.retry_at().is_some_and(|t| t <= now)
    }

    /// The state after a retry at `now` that gave `result`.
    pub fn after_retry(&self, result: Result<(), String>, now: u64) -> Diversion {
        let attempts = match self {
            Diversion::Installed => 0,
            Diversion::Failed { attempts, .. } => *attempts,
        };
        match result {
            Ok(()) => Diversion::Installed,
            Err(error) => {
                let wait = RETRY_FIRST_US.saturating_mul(1 << attempts.min(20)).min(RETRY_MAX_US);
                Diversion::Failed { error, attempts: attempts + 1, retry_at: now + wait }
            }
        }
    }

    pub fn is_installed(&self) -> bool {
        *self == Diversion::Installed
    }

    /// As `concast router flows` shows it.
    pub fn to_json(&self) -> Value {
        match self {
            Diversion::Installed => json!({ "installed": true }),
            Diversion::Failed { error, attempts, retry_at } => json!({
                "installed": false, "error": error, "attempts": attempts, "retry_at_us": retry_at,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_install_is_retried_with_a_doubling_wait_up_to_the_cap() {
        let mut d = Diversion::after_first_try(Err("Is backup".into()), 1_000);
        assert_eq!(d.retry_at(), Some(1_000 + RETRY_FIRST_US));
        assert!(!d.due(1_000 + RETRY_FIRST_US - 1) && d.due(1_000 + RETRY_FIRST_US));
        let mut now = 1_000 + RETRY_FIRST_US;
        let mut waits = Vec::new();
        for _ in 0..6 {
            d = d.after_retry(Err("Is backup".into()), now);
            let at = d.retry_at().unwrap();
            waits.push(at - now);
            now = at;
        }
        assert_eq!(waits, [1_000_000, 2_000_000, 4_000_000, 8_000_000, 8_000_000, 8_000_000]);
        assert!(matches!(d, Diversion::Failed { attempts: 7, .. }));
        assert_eq!(d.after_retry(Ok(()), now), Diversion::Installed);
        assert_eq!(Diversion::Installed.retry_at(), None);
    }

    #[test]
    fn the_json_says_whether_it_is_installed_and_why_not() {
        let d = Diversion::after_first_try(Err("Is backup".into()), 0);
        let j = d.to_json();
        assert_eq!((j["installed"].as_bool(), j["error"].as_str(), j["attempts"].as_u64()),
                   (Some(false), Some("Is backup"), Some(1)));
        assert_eq!(Diversion::Installed.to_json()["installed"], true);
    }
}
