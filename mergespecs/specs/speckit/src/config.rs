//! Numeric flow parameters (`key=value` text, see `concast_sdk::params`) with range checks.

use concast_sdk::params;

/// `key` as a number in `0..=max`, `default` when absent, `Err(why)` when present but not a
/// number in range (the spec then refuses the flow with `why`).
pub fn number(
    raw: &[u8],
    key: &str,
    default: u64,
    max: u64,
    why: &'static str,
) -> Result<u64, &'static str> {
    match params::get_u64(raw, key) {
        None => Ok(default),
        Some(Ok(v)) if v <= max => Ok(v),
        Some(_) => Err(why),
    }
}

/// The default round size of the specs that wait for one message per child: the node's
/// number of children, else 2.
pub fn children_or_two(children: u32) -> u64 {
    if children > 0 {
        u64::from(children)
    } else {
        2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_ranges_and_errors() {
        assert_eq!(number(b"a=3", "b", 7, 10, "bad"), Ok(7));
        assert_eq!(number(b"a=3", "a", 7, 10, "bad"), Ok(3));
        assert_eq!(number(b"a=11", "a", 7, 10, "bad"), Err("bad"));
        assert_eq!(number(b"a=x", "a", 7, 10, "bad"), Err("bad"));
        assert_eq!((children_or_two(0), children_or_two(5)), (2, 5));
    }
}
