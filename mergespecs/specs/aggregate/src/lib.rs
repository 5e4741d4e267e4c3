//! The shared core of the `sum`, `count`, `min` and `max` merge specs: one payload format,
//! one merge logic, and a [`Fold`] that is the only thing the four specs differ in.
//!
//! Payload of an aggregate datagram (after the IPv4 header; all fields big-endian):
//!
//! ```text
//!  0       2       4       6       8
//!  +-------+-------+-------+-------+      UDP header (checksum may be 0)
//!  | sport | dport |  len  | csum  |
//!  +---+---+---+---+-------+-------+----------------+-----------------+
//!  |'C'|'A'|ver|rsv|    key u32    |   count u32    |  reserved u32   |  aggregate header
//!  +---+---+---+---+---------------+----------------+-----------------+
//!  |                           value i64                             |
//!  +-----------------------------------------------------------------+
//! ```
//!
//! `ver` = 1; `count` = how many original contributions the value stands for (a sender sends
//! 1; 0 is read as 1). The tag is the key: contributions with the same key merge.
#![no_std]

use concast_sdk::wire::ipv4::{protocol, Packet};
use concast_sdk::{params, AfterBuild, Host, Level, Merge, MergeSpec, OutHeader, Tag};

pub mod payload;

use payload::Contribution;

/// How one aggregate folds values. `count` is the contribution count a message stands for.
pub trait Fold {
    /// The value of a state holding just this message.
    fn first(value: i64, count: u32) -> i64;
    /// `acc` folded with one more message.
    fn fold(acc: i64, value: i64, count: u32) -> i64;
}

/// Sum of the values (wrapping, so a hostile sender cannot make the spec trap).
pub struct Sum;
/// Number of contributions (values are ignored).
pub struct Count;
pub struct Min;
pub struct Max;

impl Fold for Sum {
    fn first(value: i64, _: u32) -> i64 {
        value
    }
    fn fold(acc: i64, value: i64, _: u32) -> i64 {
        acc.wrapping_add(value)
    }
}
impl Fold for Count {
    fn first(_: i64, count: u32) -> i64 {
        i64::from(count)
    }
    fn fold(acc: i64, _: i64, count: u32) -> i64 {
        acc.saturating_add(i64::from(count))
    }
}
impl Fold for Min {
    fn first(value: i64, _: u32) -> i64 {
        value
    }
    fn fold(acc: i64, value: i64, _: u32) -> i64 {
        acc.min(value)
    }
}
impl Fold for Max {
    fn first(value: i64, _: u32) -> i64 {
        value
    }
    fn fold(acc: i64, value: i64, _: u32) -> i64 {
        acc.max(value)
    }
}

/// Flow parameters (`key=value` text, see `concast_sdk::params`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Forward once the state stands for this many contributions (0 = no such rule).
    pub k: u32,
    /// Forward once this many messages were merged here; 0 (the default) follows the node's
    /// current number of children, else 2, so a router waits for exactly the subtrees it has.
    pub fanin: u32,
    /// Forward what there is this long after the first message of a round.
    pub timeout_us: u64,
    /// TTL of merged datagrams (0 = the largest TTL among the merged ones).
    pub ttl: u8,
}

impl Config {
    pub fn parse(raw: &[u8]) -> Result<Config, &'static str> {
        let num = |key: &str, default: u64, max: u64| -> Result<u64, &'static str> {
            match params::get_u64(raw, key) {
                None => Ok(default),
                Some(Ok(v)) if v <= max => Ok(v),
                Some(_) => Err("aggregate spec: a parameter (k, fanin, timeout_us, ttl) is not a number in range"),
            }
        };
        Ok(Config {
            k: num("k", 0, u64::from(u32::MAX))? as u32,
            fanin: num("fanin", 0, u64::from(u32::MAX))? as u32,
            timeout_us: num("timeout_us", 10_000, 3_600_000_000)?,
            ttl: num("ttl", 0, 255)? as u8,
        })
    }
}

impl Config {
    /// The fan-in in force when the node has `children` CSP children (they come and go).
    pub fn fanin(&self, children: u32) -> u32 {
        match (self.fanin, children) {
            (0, 0) => 2,
            (0, c) => c,
            (f, _) => f,
        }
    }
}

/// One open round of one key.
#[derive(Debug, Clone)]
pub struct State {
    key: u32,
    /// Contributions folded in (sum of the messages' counts).
    count: u32,
    /// Messages merged at this node.
    messages: u32,
    value: i64,
    sport: u16,
    dport: u16,
    ttl: u8,
    timer_armed: bool,
}

/// The aggregate merge spec for one [`Fold`].
pub struct Aggregate<F: Fold> {
    config: Config,
    fold: core::marker::PhantomData<F>,
}

impl<F: Fold> Aggregate<F> {
    pub fn config(&self) -> Config {
        self.config
    }
}

/// The contribution carried by `msg`, if it is an unfragmented UDP aggregate datagram.
fn contribution(msg: &[u8]) -> Option<(Packet<&[u8]>, Contribution)> {
    let ip = Packet::new_checked(msg).ok()?;
    if ip.is_fragment() || ip.protocol() != protocol::UDP {
        return None;
    }
    let c = Contribution::parse(ip.payload())?;
    Some((ip, c))
}

impl<F: Fold> MergeSpec for Aggregate<F> {
    type State = State;

    fn init(host: &mut impl Host) -> Result<Self, &'static str> {
        let config = Config::parse(host.params())?;
        Ok(Aggregate {
            config,
            fold: core::marker::PhantomData,
        })
    }

    fn get_tag(&mut self, msg: &[u8], _host: &mut impl Host) -> Tag {
        match contribution(msg) {
            Some((_, c)) => Tag::Merge(u64::from(c.key)),
            None => Tag::Pass,
        }
    }

    fn new_state(&mut self, tag: u64, _host: &mut impl Host) -> State {
        State {
            key: tag as u32,
            count: 0,
            messages: 0,
            value: 0,
            sport: 0,
            dport: 0,
            ttl: 0,
            timer_armed: false,
        }
    }

    fn merge(&mut self, s: &mut State, msg: &[u8], _host: &mut impl Host) -> Merge {
        let Some((ip, c)) = contribution(msg) else {
            return Merge::Pass;
        };
        let count = c.count.max(1);
        if s.messages == 0 {
            s.value = F::first(c.value, count);
            s.sport = c.sport;
            s.dport = c.dport;
        } else {
            s.value = F::fold(s.value, c.value, count);
        }
        s.count = s.count.saturating_add(count);
        s.messages += 1;
        s.ttl = s.ttl.max(ip.ttl());
        Merge::Merged
    }

    fn done(&mut self, s: &mut State, host: &mut impl Host) -> bool {
        let cfg = &self.config;
        if (cfg.k > 0 && s.count >= cfg.k) || s.messages >= cfg.fanin(host.children()) {
            return true;
        }
        if !s.timer_armed {
            host.set_timer(host.now_us().saturating_add(cfg.timeout_us));
            s.timer_armed = true;
        }
        false
    }

    fn build(&mut self, s: &mut State, host: &mut impl Host) -> AfterBuild {
        let c = Contribution {
            sport: s.sport,
            dport: s.dport,
            key: s.key,
            count: s.count,
            value: s.value,
        };
        let ttl = if self.config.ttl > 0 {
            self.config.ttl
        } else {
            s.ttl.max(1)
        };
        host.emit(&c.encode(), OutHeader::udp().with_ttl(ttl));
        if s.messages < self.config.fanin(host.children()) && (self.config.k == 0 || s.count < self.config.k) {
            host.log(
                Level::Debug,
                "aggregate: timeout, forwarding a partial round",
            );
        }
        AfterBuild::Free
    }
}
