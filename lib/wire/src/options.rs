//! Walking the IPv4 options area exactly as `docs/protocol.md` section 1.1 says.
//!
//! Every concast parser (P4, Rust, Scapy, Wireshark) must find the Concast ID option anywhere
//! in the area and reject the same malformed lists with the same names, so the walk is written
//! once here as an iterator and every other function is a fold over it.

use crate::error::Error;

/// End of option list; everything after it is padding and is not looked at.
pub const EOL: u8 = 0x00;
/// No operation (one byte).
pub const NOP: u8 = 0x01;
/// Concast ID option type (copy = 1, class = 0, number = 30).
pub const CONCAST_ID: u8 = 0x9E;
/// Length of the Concast ID option, type and length bytes included.
pub const CONCAST_ID_LEN: u8 = 6;
/// Router Alert option type (RFC 2113).
pub const ROUTER_ALERT: u8 = 0x94;
/// Length of the Router Alert option.
pub const ROUTER_ALERT_LEN: u8 = 4;

/// The options area concast senders emit: the option first, EOL padding, IHL 7.
pub const fn concast_area(group: u32) -> [u8; 8] {
    let g = group.to_be_bytes();
    [CONCAST_ID, CONCAST_ID_LEN, g[0], g[1], g[2], g[3], EOL, EOL]
}

/// The options area CSP senders emit: Router Alert with value 0, IHL 6.
pub const ROUTER_ALERT_AREA: [u8; 4] = [ROUTER_ALERT, ROUTER_ALERT_LEN, 0, 0];

/// One item of the options area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opt<'a> {
    /// End of the list; the iterator stops after yielding it.
    Eol,
    Nop,
    ConcastId {
        group: u32,
    },
    /// Any value is accepted; RFC 2113 defines 0 ("examine packet"), which CSP sends.
    RouterAlert {
        value: u16,
    },
    /// An option concast does not interpret, skipped whole. `data` excludes type and length.
    Other {
        kind: u8,
        data: &'a [u8],
    },
}

/// Iterator over an options area, yielding `Ok(item)` until the end, an EOL, or the first
/// error (then it yields that `Err` once and stops).
///
/// It also carries the one piece of cross-option state the walk has, "a Concast ID option was
/// already seen", so a duplicate is reported at the second option just like the spec says.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    area: &'a [u8],
    pos: usize,
    seen_concast: bool,
    done: bool,
}

impl<'a> Iter<'a> {
    /// Walks `area` (bytes `20 .. IHL*4` of the header; any length is accepted).
    pub const fn new(area: &'a [u8]) -> Iter<'a> {
        Iter {
            area,
            pos: 0,
            seen_concast: false,
            done: false,
        }
    }

    /// Offset in the area of the next item.
    pub const fn position(&self) -> usize {
        self.pos
    }

    #[inline]
    fn step(&mut self) -> Option<Result<Opt<'a>, Error>> {
        let area = self.area;
        let i = self.pos;
        let kind = *area.get(i)?;
        match kind {
            EOL => {
                self.done = true;
                return Some(Ok(Opt::Eol));
            }
            NOP => {
                self.pos = i + 1;
                return Some(Ok(Opt::Nop));
            }
            _ => {}
        }
        let Some(&len) = area.get(i + 1) else {
            return Some(Err(Error::OptionTruncated));
        };
        let len = usize::from(len);
        if len < 2 {
            return Some(Err(Error::OptionBadLength));
        }
        if i + len > area.len() {
            return Some(Err(Error::OptionOverflow));
        }
        let data = &area[i + 2..i + len];
        let item = match kind {
            CONCAST_ID => {
                if len != usize::from(CONCAST_ID_LEN) {
                    return Some(Err(Error::ConcastOptionBadLength));
                }
                if self.seen_concast {
                    return Some(Err(Error::ConcastOptionDuplicate));
                }
                self.seen_concast = true;
                Opt::ConcastId {
                    group: u32::from_be_bytes([data[0], data[1], data[2], data[3]]),
                }
            }
            ROUTER_ALERT => {
                if len != usize::from(ROUTER_ALERT_LEN) {
                    return Some(Err(Error::OptionBadLength));
                }
                Opt::RouterAlert {
                    value: u16::from_be_bytes([data[0], data[1]]),
                }
            }
            _ => Opt::Other { kind, data },
        };
        self.pos = i + len;
        Some(Ok(item))
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = Result<Opt<'a>, Error>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.step();
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }
}

impl core::iter::FusedIterator for Iter<'_> {}

/// What one walk of the options area learned; the input of every classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Summary {
    /// The group `G` of the Concast ID option, if there is one before any EOL.
    pub concast_group: Option<u32>,
    /// A Router Alert option before any EOL.
    pub router_alert: bool,
    /// Any option other than NOP and EOL (section 3.4: such datagrams are never multiplexed).
    pub has_options: bool,
}

/// Walks the whole area once and summarises it, or returns the first error.
pub fn scan(area: &[u8]) -> Result<Summary, Error> {
    let mut s = Summary::default();
    for item in Iter::new(area) {
        match item? {
            Opt::Eol | Opt::Nop => {}
            Opt::ConcastId { group } => {
                s.concast_group = Some(group);
                s.has_options = true;
            }
            Opt::RouterAlert { .. } => {
                s.router_alert = true;
                s.has_options = true;
            }
            Opt::Other { .. } => s.has_options = true,
        }
    }
    Ok(s)
}

/// Checks the area per section 1.1.
pub fn validate(area: &[u8]) -> Result<(), Error> {
    scan(area).map(|_| ())
}

/// The group of the Concast ID option, if any. Walks the whole area: a malformed option after
/// the Concast ID option still makes the datagram malformed.
pub fn find_concast_group(area: &[u8]) -> Result<Option<u32>, Error> {
    scan(area).map(|s| s.concast_group)
}

/// True if the area holds a Router Alert option (before any EOL).
pub fn has_router_alert(area: &[u8]) -> Result<bool, Error> {
    scan(area).map(|s| s.router_alert)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_area() {
        let a = concast_area(0x0102_0304);
        let items: [_; 2] = {
            let mut it = Iter::new(&a);
            [it.next(), it.next()]
        };
        assert_eq!(items[0], Some(Ok(Opt::ConcastId { group: 0x0102_0304 })));
        assert_eq!(items[1], Some(Ok(Opt::Eol)));
        assert_eq!(Iter::new(&a).count(), 2);
        assert_eq!(find_concast_group(&a), Ok(Some(0x0102_0304)));
        assert_eq!(has_router_alert(&a), Ok(false));
    }

    #[test]
    fn option_after_eol_is_padding() {
        let a = [0, 0, 0x9E, 6, 0, 0, 0, 12];
        assert_eq!(find_concast_group(&a), Ok(None));
        // Garbage after EOL is not looked at either.
        assert_eq!(validate(&[1, 0, 0x9E, 0xFF]), Ok(()));
    }

    #[test]
    fn errors_per_section_1_1() {
        assert_eq!(validate(&[1, 1, 1, 0x9E]), Err(Error::OptionTruncated));
        assert_eq!(validate(&[7, 1, 0, 0]), Err(Error::OptionBadLength));
        assert_eq!(validate(&[0x9E, 0, 0, 0]), Err(Error::OptionBadLength));
        assert_eq!(validate(&[0x9E, 6, 0, 7]), Err(Error::OptionOverflow));
        assert_eq!(
            validate(&[0x9E, 4, 0, 7]),
            Err(Error::ConcastOptionBadLength)
        );
        assert_eq!(validate(&[0x94, 3, 0, 0]), Err(Error::OptionBadLength));
        let mut two = [0u8; 12];
        two[..6].copy_from_slice(&concast_area(7)[..6]);
        two[6..].copy_from_slice(&concast_area(8)[..6]);
        assert_eq!(validate(&two), Err(Error::ConcastOptionDuplicate));
        // The error is yielded once, then the iterator is fused.
        let mut it = Iter::new(&two);
        assert!(matches!(it.next(), Some(Ok(Opt::ConcastId { group: 7 }))));
        assert_eq!(it.next(), Some(Err(Error::ConcastOptionDuplicate)));
        assert_eq!(it.next(), None);
    }

    #[test]
    fn other_options_are_skipped_whole() {
        // NOP, Record Route with one empty slot, then the option.
        let a = [1, 7, 7, 4, 0, 0, 0, 0, 0x9E, 6, 0, 0, 0, 10, 0, 0];
        let mut it = Iter::new(&a);
        assert_eq!(it.next(), Some(Ok(Opt::Nop)));
        assert_eq!(
            it.next(),
            Some(Ok(Opt::Other {
                kind: 7,
                data: &[4, 0, 0, 0, 0]
            }))
        );
        assert_eq!(it.next(), Some(Ok(Opt::ConcastId { group: 10 })));
        assert_eq!(
            scan(&a),
            Ok(Summary {
                concast_group: Some(10),
                router_alert: false,
                has_options: true
            })
        );
    }
}
