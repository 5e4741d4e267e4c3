//! What an arriving datagram is to the multiplex spec: records to bundle, records that all
//! expired, or something never multiplexed (docs/protocol.md section 3.4).

use concast_sdk::wire::ipv4::{self, protocol};
use concast_sdk::wire::mplex::{self, RecordRepr};
use concast_sdk::wire::options::Opt;
use concast_sdk::wire::{classify, Datagram};

use crate::config::Config;
use crate::delays::Delays;
use crate::keys::{key_of, KeyKind};

/// The decision for one datagram.
pub enum Input<'a> {
    /// Records to bundle.
    Records(Incoming<'a>),
    /// An MplexPkt whose records' TTLs all ran out on the way (`n` records): drop it.
    Expired(u32),
    /// Forwarded as it is. `Origin` names the sources it carries, for the ordering rule.
    Unbundleable(Origin<'a>),
}

/// The original sources an unbundleable datagram carries.
pub enum Origin<'a> {
    /// Not a datagram the spec can read (the engine forwards it as it is).
    Unknown,
    /// A plain datagram. `exact`: its payload starts with the transport header (not a later
    /// fragment), so its flow key can be read.
    Plain {
        src: u32,
        protocol: u8,
        payload: &'a [u8],
        exact: bool,
    },
    /// An MplexPkt that is not bundled again (a record over the threshold, say).
    Records(mplex::Packet<&'a [u8]>),
}

impl Origin<'_> {
    /// True if any key it carries satisfies `f`; `None` if a key cannot be known (a later
    /// fragment when keys are flows): the caller must then assume the worst.
    pub fn any_key(&self, kind: KeyKind, mut f: impl FnMut(u64) -> bool) -> Option<bool> {
        match self {
            Origin::Unknown => Some(false),
            Origin::Plain { exact: false, .. } if kind == KeyKind::Flow => None,
            Origin::Plain {
                src,
                protocol,
                payload,
                ..
            } => Some(f(key_of(kind, *src, *protocol, payload))),
            Origin::Records(p) => Some(p.records().any(|r| {
                f(key_of(
                    kind,
                    r.src_addr().to_bits(),
                    r.protocol(),
                    r.payload(),
                ))
            })),
        }
    }
}

fn plain_origin<'a>(ip: &ipv4::Packet<&'a [u8]>) -> Origin<'a> {
    let range = ip.payload_range();
    Origin::Plain {
        src: ip.src_addr().to_bits(),
        protocol: ip.protocol(),
        payload: &ip.into_inner()[range],
        exact: ip.frag_offset() == 0,
    }
}

/// A datagram that can be bundled: a plain small datagram (one record) or an MplexPkt whose
/// records all pass the threshold.
pub struct Incoming<'a> {
    source: Source<'a>,
    pub delays: Delays,
    /// Records that survive the TTL update, and the bytes they take in a bundle.
    pub live: u32,
    pub record_bytes: usize,
    /// Records dropped because their TTL ran out.
    pub expired: u32,
}

enum Source<'a> {
    /// One record: a plain datagram's, or the one record of an MplexPkt (TTL updated).
    Plain(RecordRepr<'a>),
    Mplex {
        body: mplex::Packet<&'a [u8]>,
        hops: u8,
    },
}

impl<'a> Incoming<'a> {
    /// The records to bundle, TTLs brought up to date, expired ones left out.
    pub fn records(&self) -> LiveRecords<'a> {
        match &self.source {
            Source::Plain(r) => LiveRecords {
                plain: Some(*r),
                records: mplex::RecordIter::new(&[]),
                hops: 0,
            },
            Source::Mplex { body, hops } => LiveRecords {
                plain: None,
                records: mplex::RecordIter::new(records_of(body)),
                hops: *hops,
            },
        }
    }
}

/// The records area of an MplexPkt body, for the body's whole lifetime.
fn records_of<'a>(body: &mplex::Packet<&'a [u8]>) -> &'a [u8] {
    &body.into_inner()[mplex::HEADER_LEN..]
}

pub struct LiveRecords<'a> {
    plain: Option<RecordRepr<'a>>,
    records: mplex::RecordIter<'a>,
    hops: u8,
}

impl<'a> Iterator for LiveRecords<'a> {
    type Item = RecordRepr<'a>;

    fn next(&mut self) -> Option<RecordRepr<'a>> {
        if let Some(r) = self.plain.take() {
            return Some(r);
        }
        for r in self.records.by_ref() {
            let r = r.ok()?;
            if let Some(ttl) = r.ttl_after(self.hops) {
                return Some(live_record(r, ttl));
            }
        }
        None
    }
}

/// Any option but the Concast ID option, NOP and EOL keeps a datagram out of bundles: the
/// receiver rebuilds datagrams without options, so they would be lost.
fn has_foreign_options<T: AsRef<[u8]>>(ip: &ipv4::Packet<T>) -> bool {
    ip.options_iter()
        .any(|o| !matches!(o, Ok(Opt::Eol | Opt::Nop | Opt::ConcastId { .. })))
}

/// The datagram as the multiplex spec sees it, checked in section 3.4's terms.
pub fn classify_datagram<'a>(msg: &'a [u8], cfg: &Config) -> Input<'a> {
    let Ok(datagram) = classify(msg) else {
        return Input::Unbundleable(Origin::Unknown);
    };
    let ip = *datagram.ip();
    let dst = ip.dst_addr();
    if ip.is_fragment() || has_foreign_options(&ip) || dst.is_multicast() || dst.is_broadcast() {
        return Input::Unbundleable(plain_origin(&ip));
    }
    match datagram {
        Datagram::Mplex { ip, mplex, .. } => bundled(ip, mplex, cfg),
        Datagram::Csp { .. } => Input::Unbundleable(plain_origin(&ip)),
        Datagram::Ipv4(ip) | Datagram::Concast { ip, .. } => plain(ip, cfg),
    }
}

fn plain<'a>(ip: ipv4::Packet<&'a [u8]>, cfg: &Config) -> Input<'a> {
    if u32::from(ip.total_len()) > cfg.size_threshold || ip.protocol() == protocol::MPLEX {
        return Input::Unbundleable(plain_origin(&ip));
    }
    if ip.ttl() == 0 {
        return Input::Expired(1);
    }
    let range = ip.payload_range();
    let record = RecordRepr {
        src: ip.src_addr(),
        ttl: ip.ttl(),
        protocol: ip.protocol(),
        tos: ip.tos(),
        payload: &ip.into_inner()[range],
    };
    Input::Records(Incoming {
        delays: Delays {
            max_total: cfg.max_total_delay_us,
            delayed_so_far: 0,
            max_local: cfg.max_local_delay_us,
        },
        live: 1,
        record_bytes: record.record_len(),
        expired: 0,
        source: Source::Plain(record),
    })
}

/// An arriving MplexPkt: hops since it was bundled age every record (section 3.3).
fn bundled<'a>(
    ip: ipv4::Packet<&'a [u8]>,
    body: mplex::Packet<&'a [u8]>,
    cfg: &Config,
) -> Input<'a> {
    let hops = body.initial_ttl().saturating_sub(ip.ttl());
    let (mut live, mut expired, mut record_bytes) = (0u32, 0u32, 0usize);
    // The first live record, TTL brought up to date: a body of one record (the common
    // case: a sender's MplexPkt) is then handed on as that record, not walked again.
    let mut first = None;
    // `body.records()`, for the body's lifetime (the first record outlives this function).
    for r in mplex::RecordIter::new(records_of(&body)).map_while(Result::ok) {
        if ipv4::HEADER_LEN as u32 + u32::from(r.payload_len()) > cfg.size_threshold {
            return Input::Unbundleable(Origin::Records(body));
        }
        if let Some(ttl) = r.ttl_after(hops) {
            live += 1;
            record_bytes += r.record_len();
            if first.is_none() {
                first = Some(live_record(r, ttl));
            }
        } else {
            expired += 1;
        }
    }
    let source = match first {
        None => return Input::Expired(expired),
        Some(r) if live == 1 && expired == 0 => Source::Plain(r),
        Some(_) => Source::Mplex { body, hops },
    };
    Input::Records(Incoming {
        delays: Delays {
            max_total: body.max_total_delay(),
            delayed_so_far: body.delayed_so_far(),
            max_local: body.max_local_delay(),
        },
        live,
        record_bytes,
        expired,
        source,
    })
}

/// A live record as it is bundled again: its TTL after the hops travelled is `ttl`.
#[inline]
fn live_record<'a>(r: mplex::Record<&'a [u8]>, ttl: u8) -> RecordRepr<'a> {
    let bytes = r.into_inner();
    RecordRepr {
        src: r.src_addr(),
        ttl,
        protocol: r.protocol(),
        tos: r.tos(),
        payload: &bytes[mplex::record_field::PAYLOAD..],
    }
}
