//! Property tests: no input makes a parser panic or a view reach outside its buffer, and
//! what the builders write parses back to what they were given.
//!
//! Inputs are arbitrary bytes, IPv4-shaped bytes with random option lists (to get past the
//! version check), and random mutations of the shared vectors (to reach the CSP and MplexPkt
//! checks). 2000 cases per property keep `cargo test` fast.

mod common;

use std::net::Ipv4Addr;
use std::sync::OnceLock;

use concast_wire::build::{self, MplexBuilder};
use concast_wire::csp::{self, Body, BodyRepr};
use concast_wire::ipv4::{self, Params};
use concast_wire::mplex::{self, HeaderRepr, RecordRepr};
use concast_wire::{classify, options, Datagram, Error};
use proptest::prelude::*;

const CASES: u32 = 2000;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn vectors() -> &'static [Vec<u8>] {
    static V: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    V.get_or_init(|| common::load().into_iter().map(|v| v.bytes).collect())
}

/// `inner` lies inside `outer` (empty slices included: they must point into it too).
fn within(outer: &[u8], inner: &[u8]) -> bool {
    let o = outer.as_ptr_range();
    let i = inner.as_ptr_range();
    o.start <= i.start && i.end <= o.end
}

macro_rules! inside {
    ($outer:expr, $inner:expr) => {
        prop_assert!(
            within($outer, $inner),
            "{} escapes its buffer",
            stringify!($inner)
        )
    };
}

fn exercise_options(buf: &[u8], area: &[u8]) -> Result<(), TestCaseError> {
    let mut n = 0;
    let mut failed = false;
    for item in options::Iter::new(area) {
        n += 1;
        prop_assert!(n <= area.len() + 1, "options walk does not terminate");
        prop_assert!(!failed, "item after an error");
        match item {
            Ok(options::Opt::Other { data, .. }) => inside!(buf, data),
            Ok(_) => {}
            Err(_) => failed = true,
        }
    }
    let scan = options::scan(area);
    prop_assert_eq!(scan.is_err(), failed);
    Ok(())
}

fn exercise_csp(buf: &[u8], payload: &[u8]) -> Result<(), TestCaseError> {
    let checked = csp::Packet::new_checked(payload);
    let parsed = csp::Message::parse(payload);
    prop_assert_eq!(checked.err(), parsed.err());
    if let Ok(p) = checked {
        inside!(buf, p.body());
        let _ = (
            p.version(),
            p.msg_type(),
            p.length(),
            p.group(),
            p.receiver(),
            p.seq(),
        );
        prop_assert!(p.decode_body().is_ok());
    }
    if let Ok(m) = parsed {
        prop_assert_eq!(usize::from(m.header.length()), payload.len());
        match m.body {
            Body::Join(b) | Body::Refresh(b) => {
                let _ = (
                    b.hold_time(),
                    b.selector_proto(),
                    b.selector_dport(),
                    b.holds_spec(),
                );
                inside!(buf, b.spec_hash());
            }
            Body::JoinAck(b) => {
                let _ = (b.hold_time(), b.path_mtu(), b.spec_size());
                inside!(buf, b.spec_hash());
            }
            Body::Leave => {}
            Body::SpecRequest(b) => {
                prop_assert!(b.chunk_index() < csp::MAX_CHUNKS);
                inside!(buf, b.spec_hash());
            }
            Body::SpecChunk(b) => {
                inside!(buf, b.spec_hash());
                inside!(buf, b.data());
                prop_assert!(b.offset() + b.data().len() <= b.spec_size() as usize);
                prop_assert!(b.spec_size() <= csp::MAX_SPEC_SIZE);
            }
            Body::SpecUpdate(b) => {
                let _ = b.spec_size();
                inside!(buf, b.spec_hash());
            }
            Body::Error(b) => {
                let _ = (b.code(), b.error_code(), b.offending_type(), b.reason_str());
                inside!(buf, b.reason());
                prop_assert!(b.reason().len() <= csp::MAX_REASON_LEN);
            }
        }
        // A parsed message re-emits to the same bytes (reserved fields aside: compare by parse).
        let repr = csp::Repr::parse(&m);
        let mut out = vec![0u8; repr.buffer_len()];
        prop_assert_eq!(repr.emit(&mut out), Ok(payload.len()));
        prop_assert_eq!(csp::Repr::parse(&csp::Message::parse(&out).unwrap()), repr);
    }
    // The body views alone, on the same bytes.
    for t in 1..=8 {
        if let Ok(b) = csp::Body::parse(csp::MessageType::from_u8(t).unwrap(), payload) {
            prop_assert_eq!(b.msg_type() as u8, t);
        }
    }
    Ok(())
}

fn exercise_mplex(buf: &[u8], payload: &[u8]) -> Result<(), TestCaseError> {
    let mut covered = 0;
    let mut failed = false;
    for r in mplex::RecordIter::new(payload) {
        prop_assert!(!failed);
        match r {
            Ok(r) => {
                inside!(buf, r.as_bytes());
                inside!(buf, r.payload());
                prop_assert_eq!(r.payload().len(), usize::from(r.payload_len()));
                prop_assert!(mplex::Record::new_checked(r.as_bytes()).is_ok());
                let _ = (r.src_addr(), r.ttl(), r.protocol(), r.ttl_after(3));
                covered += r.record_len();
            }
            Err(e) => {
                prop_assert_eq!(e, Error::MplexRecordTruncated);
                failed = true;
            }
        }
    }
    prop_assert!(failed || covered == payload.len());
    if let Ok(p) = mplex::Packet::new_checked(payload) {
        let _ = p.header_repr();
        inside!(buf, p.records_bytes());
        let len: usize = p.records().map(|r| r.record_len()).sum();
        prop_assert_eq!(len + mplex::HEADER_LEN, payload.len());
        prop_assert!(p.records().count() > 0);
    }
    Ok(())
}

/// Runs every view and iterator of the crate over `buf` and checks what they expose.
fn exercise(buf: &[u8]) -> Result<(), TestCaseError> {
    // Unchecked IPv4 view: the slice accessors clamp, whatever IHL and total length say.
    if buf.len() >= ipv4::HEADER_LEN {
        let p = ipv4::Packet::new_unchecked(buf);
        inside!(buf, p.header());
        inside!(buf, p.options());
        inside!(buf, p.payload());
        inside!(buf, p.datagram());
        let _ = (p.compute_checksum(), p.verify_checksum(), p.is_fragment());
    }
    let ip = ipv4::Packet::new_checked(buf);
    if let Ok(p) = &ip {
        exercise_options(buf, p.options())?;
        prop_assert!(p.header_len() <= usize::from(p.total_len()));
        prop_assert!(usize::from(p.total_len()) <= buf.len());
        let _ = (
            p.src_addr(),
            p.dst_addr(),
            p.ttl(),
            p.protocol(),
            p.ident(),
            p.tos(),
        );
    }
    // The options walk, the CSP and MplexPkt views on arbitrary bytes, not only on the right
    // part of a datagram.
    exercise_options(buf, buf)?;
    exercise_csp(buf, buf)?;
    exercise_mplex(buf, buf)?;

    let class = classify(buf);
    // classify and the IPv4 view agree about the IPv4 layer (section 1.2 errors are the first
    // ten variants).
    match (&class, &ip) {
        (Err(e), Err(f)) => prop_assert_eq!(e, f),
        (Err(e), Ok(_)) => prop_assert!(!Error::ALL[..10].contains(e)),
        (Ok(_), Ok(_)) => {}
        (Ok(_), Err(f)) => prop_assert!(false, "classify accepted what the ipv4 view rejects: {f}"),
    }
    if let Ok(d) = class {
        let ip = d.ip();
        inside!(buf, ip.payload());
        inside!(buf, ip.options());
        match d {
            Datagram::Ipv4(ip) => {
                prop_assert_eq!(options::find_concast_group(ip.options()), Ok(None));
                // CSP and MplexPkt are always classified as such, unless fragments (spec 1.2).
                prop_assert!(ip.is_fragment() || (ip.protocol() != 253 && ip.protocol() != 254));
            }
            Datagram::Concast { ip, group } => {
                prop_assert_eq!(options::find_concast_group(ip.options()), Ok(Some(group)));
                prop_assert_eq!(d.flow().unwrap().receiver, ip.dst_addr());
            }
            Datagram::Csp { ip, message } => {
                prop_assert_eq!(options::has_router_alert(ip.options()), Ok(true));
                inside!(buf, message.header.as_bytes());
                exercise_csp(buf, ip.payload())?;
            }
            Datagram::Mplex { ip, group, mplex } => {
                prop_assert_eq!(options::find_concast_group(ip.options()), Ok(Some(group)));
                inside!(buf, mplex.as_bytes());
                exercise_mplex(buf, ip.payload())?;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- strategies

fn addr() -> impl Strategy<Value = Ipv4Addr> {
    any::<[u8; 4]>().prop_map(Ipv4Addr::from)
}

/// One item of an options area, well-formed or not.
fn option_atom() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(vec![options::NOP]),
        Just(vec![options::EOL]),
        any::<u32>().prop_map(|g| options::concast_area(g)[..6].to_vec()),
        Just(options::ROUTER_ALERT_AREA.to_vec()),
        (
            any::<u8>(),
            0u8..12,
            prop::collection::vec(any::<u8>(), 0..10)
        )
            .prop_map(|(k, l, d)| {
                let mut v = vec![k, l];
                v.extend(d);
                v
            }),
        any::<u8>().prop_map(|b| vec![b]),
    ]
}

/// Bytes shaped like an IPv4 datagram: version 4, an options list from `option_atom`, a
/// chosen protocol, IHL and total length usually right and sometimes not.
fn ipv4_like() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(option_atom(), 0..6),
        prop_oneof![Just(17u8), Just(253), Just(254), any::<u8>()],
        prop::collection::vec(any::<u8>(), 0..96),
        prop_oneof![4 => Just(None), 1 => (0u8..16).prop_map(Some)],
        prop_oneof![4 => Just(0i32), 1 => -8i32..8],
        addr(),
        addr(),
    )
        .prop_map(|(atoms, proto, payload, ihl, len_delta, src, dst)| {
            let mut opts: Vec<u8> = atoms.concat();
            opts.truncate(ipv4::MAX_OPTIONS_LEN);
            let mut buf = vec![0u8; ipv4::MAX_HEADER_LEN + payload.len()];
            let n = ipv4::emit_header(
                &mut buf,
                &Params::new(src, dst, proto),
                &opts,
                payload.len(),
            )
            .unwrap();
            buf.truncate(n);
            buf.extend_from_slice(&payload);
            let mut p = ipv4::Packet::new_unchecked(&mut buf[..]);
            if let Some(ihl) = ihl {
                p.set_ihl(ihl);
            }
            let total = (i32::from(p.total_len()) + len_delta).clamp(0, 0xFFFF);
            p.set_total_len(total as u16);
            buf
        })
}

#[derive(Debug, Clone)]
enum Mutation {
    Set(usize, u8),
    Flip(usize, u8),
    Truncate(usize),
    Append(Vec<u8>),
    Insert(usize, u8),
    Remove(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        4 => (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, 1 << b)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => prop::collection::vec(any::<u8>(), 1..16).prop_map(Mutation::Append),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => any::<usize>().prop_map(Mutation::Remove),
    ]
}

fn apply(buf: &mut Vec<u8>, m: &Mutation) {
    let len = buf.len();
    match m {
        Mutation::Set(i, b) if len > 0 => buf[i % len] = *b,
        Mutation::Flip(i, b) if len > 0 => buf[i % len] ^= *b,
        Mutation::Truncate(i) => buf.truncate(i % (len + 1)),
        Mutation::Append(tail) => buf.extend_from_slice(tail),
        Mutation::Insert(i, b) => buf.insert(i % (len + 1), *b),
        Mutation::Remove(i) if len > 0 => {
            buf.remove(i % len);
        }
        _ => {}
    }
}

fn hash() -> impl Strategy<Value = [u8; 32]> {
    any::<[u8; 32]>()
}

fn join_repr() -> impl Strategy<Value = csp::JoinRepr> {
    (any::<u16>(), any::<u8>(), any::<u16>(), hash(), any::<bool>()).prop_map(|(h, p, d, s, signed)| csp::JoinRepr {
        hold_time: h,
        selector_proto: p,
        selector_dport: d,
        spec_hash: s,
        signed,
    })
}

/// Any well-formed CSP message (the SPEC_CHUNK data is owned alongside, borrowed at use).
fn csp_message() -> impl Strategy<Value = (u32, Ipv4Addr, u32, u8, Vec<u8>, csp::JoinRepr, u32, u16)>
{
    (
        any::<u32>(),
        addr(),
        any::<u32>(),
        1u8..=8,
        prop::collection::vec(any::<u8>(), 0..=csp::MAX_REASON_LEN),
        join_repr(),
        1u32..=csp::MAX_SPEC_SIZE,
        any::<u16>(),
    )
}

/// Half the generated JOIN_ACKs and SPEC_UPDATEs carry a signature trailer.
fn sig_of(n: u16, j: &csp::JoinRepr) -> Option<csp::SpecSig> {
    (n % 2 == 1).then_some(csp::SpecSig { key: j.spec_hash, sig: [j.selector_proto; csp::SIG_LEN] })
}

fn body_of<'a>(
    t: u8,
    text: &'a [u8],
    j: csp::JoinRepr,
    size: u32,
    n: u16,
    spec: &'a [u8],
) -> BodyRepr<'a> {
    match t {
        1 => BodyRepr::Join(j),
        2 => BodyRepr::JoinAck(csp::JoinAckRepr {
            hold_time: j.hold_time,
            path_mtu: j.selector_dport,
            spec_size: size,
            spec_hash: j.spec_hash,
            signature: sig_of(n, &j),
        }),
        3 => BodyRepr::Refresh(j),
        4 => BodyRepr::Leave,
        5 => BodyRepr::SpecRequest(csp::SpecRequestRepr {
            spec_hash: j.spec_hash,
            chunk_index: n % csp::MAX_CHUNKS,
        }),
        6 => {
            let count = csp::chunk_count(spec.len() as u32).unwrap();
            csp::SpecChunkRepr::of_spec(spec, j.spec_hash, n % count)
                .map(BodyRepr::SpecChunk)
                .unwrap()
        }
        7 => BodyRepr::SpecUpdate(csp::SpecUpdateRepr {
            spec_size: size,
            spec_hash: j.spec_hash,
            signature: sig_of(n, &j),
        }),
        _ => BodyRepr::Error(csp::ErrorRepr {
            code: n,
            offending_type: j.selector_proto,
            reason: text,
        }),
    }
}

fn record() -> impl Strategy<Value = (Ipv4Addr, u8, u8, Vec<u8>)> {
    (
        addr(),
        any::<u8>(),
        any::<u8>(),
        prop::collection::vec(any::<u8>(), 0..48),
    )
}

proptest! {
    #![proptest_config(config())]

    /// The pseudo-header checksum ignores what the field holds, a segment carrying it
    /// verifies, and it agrees with RFC 1071 over the pseudo-header written out in full.
    #[test]
    fn transport_checksums_fill_and_verify(
        src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(), udp in any::<bool>(),
        stale in any::<u16>(), body in proptest::collection::vec(any::<u8>(), 8..200),
    ) {
        let (src, dst) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
        let (proto, at) = if udp { (ipv4::protocol::UDP, 6) } else { (ipv4::protocol::TCP, 16) };
        let mut seg = body;
        if seg.len() < at + 2 { seg.resize(at + 2, 0); }
        seg[at..at + 2].copy_from_slice(&stale.to_be_bytes());
        let c = ipv4::transport_checksum(src, dst, proto, &seg, at);
        seg[at..at + 2].fill(0);
        prop_assert_eq!(c, ipv4::transport_checksum(src, dst, proto, &seg, at));
        let mut pseudo = [&src.octets()[..], &dst.octets(), &[0, proto], &(seg.len() as u16).to_be_bytes()].concat();
        pseudo.extend_from_slice(&seg);
        let plain = ipv4::checksum(&pseudo);
        prop_assert_eq!(c, if udp && plain == 0 { 0xFFFF } else { plain });
        seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
        prop_assert!(ipv4::transport_checksum_ok(src, dst, proto, &seg));
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..160)) {
        exercise(&buf)?;
    }

    #[test]
    fn ipv4_shaped_bytes_never_panic(buf in ipv4_like()) {
        exercise(&buf)?;
    }

    #[test]
    fn mutated_vectors_never_panic(
        pick in any::<prop::sample::Index>(),
        muts in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut buf = pick.get(vectors()).clone();
        for m in &muts {
            apply(&mut buf, m);
        }
        exercise(&buf)?;
    }

    #[test]
    fn concast_builder_round_trips(
        src in addr(), dst in addr(), group in any::<u32>(), ttl in any::<u8>(),
        proto in prop_oneof![Just(6u8), Just(17), Just(1)],
        payload in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut buf = vec![0u8; 400];
        let params = Params { ttl, ..Params::new(src, dst, proto) };
        let n = build::concast(&mut buf, &params, group, &payload).unwrap();
        let d = classify(&buf[..n]).unwrap();
        let Datagram::Concast { ip, group: g } = d else { panic!("{d:?}") };
        prop_assert_eq!(g, group);
        prop_assert_eq!(ip.payload(), &payload[..]);
        prop_assert_eq!(Params::from_packet(&ip), params);
        prop_assert!(ip.verify_checksum());
    }

    #[test]
    fn csp_builder_round_trips(
        (group, receiver, seq, t, text, j, size, n) in csp_message(),
        src in addr(), dst in addr(),
        spec_len in 1usize..5000,
    ) {
        let spec: Vec<u8> = (0..spec_len).map(|i| i as u8).collect();
        let repr = csp::Repr { group, receiver, seq, body: body_of(t, &text, j, size, n, &spec) };
        let mut buf = vec![0u8; 2000];
        let n = build::csp(&mut buf, &Params::new(src, dst, 0), &repr).unwrap();
        let d = classify(&buf[..n]).unwrap();
        let Datagram::Csp { ip, message } = d else { panic!("{d:?}") };
        prop_assert!(ip.verify_checksum());
        prop_assert_eq!(ip.options(), &options::ROUTER_ALERT_AREA[..]);
        prop_assert_eq!(csp::Repr::parse(&message), repr);
    }

    #[test]
    fn mplex_builder_round_trips(
        records in prop::collection::vec(record(), 1..12),
        hdr in (any::<u8>(), any::<u32>(), any::<u32>(), any::<u32>()),
        group in any::<u32>(), src in addr(), dst in addr(),
    ) {
        let hdr = HeaderRepr { initial_ttl: hdr.0, max_total_delay: hdr.1, delayed_so_far: hdr.2, max_local_delay: hdr.3 };
        let reprs: Vec<_> = records.iter()
            .enumerate()
            .map(|(i, (src, ttl, protocol, payload))| RecordRepr { src: *src, ttl: *ttl, protocol: *protocol, tos: ttl.wrapping_mul(i as u8), payload })
            .collect();
        let mut buf = vec![0u8; 1500];
        let mut b = MplexBuilder::new(&mut buf, &Params::new(src, dst, 0), group, &hdr).unwrap();
        for r in &reprs {
            b.push(r).unwrap();
        }
        let n = b.finish().unwrap();
        let d = classify(&buf[..n]).unwrap();
        let Datagram::Mplex { ip, group: g, mplex } = d else { panic!("{d:?}") };
        prop_assert!(ip.verify_checksum());
        prop_assert_eq!(g, group);
        prop_assert_eq!(mplex.header_repr(), hdr);
        let back: Vec<_> = mplex.records().collect();
        prop_assert_eq!(back.len(), reprs.len());
        for (r, want) in back.iter().zip(&reprs) {
            prop_assert_eq!(&RecordRepr::from_record(r), want);
        }
    }

    #[test]
    fn incremental_ttl_update_matches_full_checksum(buf in ipv4_like(), ttl in any::<u8>()) {
        let mut buf = buf;
        if let Ok(mut p) = ipv4::Packet::new_checked(&mut buf[..]) {
            p.fill_checksum();
            p.update_ttl(ttl);
            prop_assert!(p.verify_checksum());
            prop_assert_eq!(p.checksum(), p.compute_checksum());
            let before = p.ttl();
            match p.decrement_ttl() {
                Some(t) => prop_assert_eq!(t, before - 1),
                None => prop_assert_eq!(before, 0),
            }
            prop_assert!(p.verify_checksum());
        }
    }
}
