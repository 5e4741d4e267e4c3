//! The merge model beyond plain folding: the pending queue, flush-first, persistent states,
//! drops, timers, flow info, logs, flushing and mixed batches. Native specs written with the
//! SDK exercise the host rules shared with Wasm; small WAT specs exercise the imports.

mod common;

use common::*;
use concast_engine::sdk::{AfterBuild, Host, Level, Merge, MergeSpec, OutHeader, Tag};
use concast_engine::{Fault, FlowConfig, FlowError, OutputKind, Outputs, SpecRef, Unmerged};

fn payload(d: &[u8]) -> &[u8] {
    &d[usize::from(d[0] & 0x0F) * 4..]
}

/// Bundles a datagram with everything already pending: zero added delay.
struct Bundler;
impl MergeSpec for Bundler {
    type State = Vec<u8>;
    fn init(_: &mut impl Host) -> Result<Self, &'static str> {
        Ok(Bundler)
    }
    fn get_tag(&mut self, _: &[u8], _: &mut impl Host) -> Tag {
        Tag::Merge(0)
    }
    fn new_state(&mut self, _: u64, _: &mut impl Host) -> Vec<u8> {
        Vec::new()
    }
    fn merge(&mut self, s: &mut Vec<u8>, msg: &[u8], host: &mut impl Host) -> Merge {
        s.push(msg[15]); // last byte of the source address
        let mut buf = [0u8; 2048];
        while host.pending_count() > 0 && s.len() < 3 {
            let n = host.pending_take(0, &mut buf).expect("fits");
            s.push(buf[15]);
            assert_eq!(n, 60);
        }
        Merge::Merged
    }
    fn done(&mut self, _: &mut Vec<u8>, _: &mut impl Host) -> bool {
        true
    }
    fn build(&mut self, s: &mut Vec<u8>, host: &mut impl Host) -> AfterBuild {
        host.emit(s, OutHeader::udp());
        AfterBuild::Free
    }
}

#[test]
fn pending_queue_lets_a_spec_bundle_the_rest_of_the_batch() {
    let mut engine = engine();
    let flow = engine
        .add_flow(FlowConfig::new(key(1), SpecRef::native::<Bundler>()), 0)
        .unwrap();
    let batch: Vec<Vec<u8>> = (1..=7).map(|i| contribution(i, 1, 0, 0)).collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 0, &mut out).unwrap();
    let bundles: Vec<Vec<u8>> = merged(&out).iter().map(|d| payload(d).to_vec()).collect();
    assert_eq!(bundles, vec![vec![1, 2, 3], vec![4, 5, 6], vec![7]]);
    let c = engine.stats(flow).unwrap().counters;
    assert_eq!(
        (c.received, c.merged, c.taken, c.out, c.built_from),
        (7, 7, 4, 3, 7)
    );
}

/// The same through the Wasm imports: count, peek and take in `concast_merge`.
#[test]
fn pending_imports_work_from_wasm() {
    let spec = wat(r#"(module
        (import "concast" "pending_count" (func $count (result i32)))
        (import "concast" "pending_peek" (func $peek (param i32 i32 i32) (result i32)))
        (import "concast" "pending_take" (func $take (param i32 i32 i32) (result i32)))
        (import "concast" "emit" (func $emit (param i32 i32 i32 i32 i32)))
        (memory (export "memory") 3)
        (global $n (mut i32) (i32.const 0))
        (func (export "concast_abi_version") (result i32) (i32.const 1))
        (func (export "concast_init") (result i32) (i32.const 65536))
        (func (export "concast_get_tag") (param i32) (result i64) (i64.const 5))
        (func (export "concast_state_new") (param i32 i64) (global.set $n (i32.const 1)))
        (func (export "concast_merge") (param $slot i32) (param $len i32) (result i32)
          ;; peeking with no room still tells the length; index 99 does not exist
          (if (i32.ne (call $peek (i32.const 0) (i32.const 0) (i32.const 0)) (i32.const 60)) (then unreachable))
          (if (i32.ne (call $peek (i32.const 99) (i32.const 0) (i32.const 0)) (i32.const -1)) (then unreachable))
          ;; too small a buffer: -2 and nothing taken
          (if (i32.ne (call $take (i32.const 0) (i32.const 0) (i32.const 10)) (i32.const -2)) (then unreachable))
          (block $full (loop $more
            (br_if $full (i32.eqz (call $count)))
            (drop (call $take (i32.const 0) (i32.const 0) (i32.const 2048)))
            (global.set $n (i32.add (global.get $n) (i32.const 1)))
            (br $more)))
          (i32.const 0))
        (func (export "concast_done") (param i32) (result i32) (i32.const 1))
        (func (export "concast_build") (param i32) (result i32)
          (i32.store (i32.const 0) (global.get $n))
          (call $emit (i32.const 0) (i32.const 4) (i32.const 17) (i32.const 64) (i32.const 0))
          (i32.const 0)))"#);
    let mut engine = engine();
    let flow = add(&mut engine, &spec, 1, "");
    let batch: Vec<Vec<u8>> = (1..=6).map(|i| contribution(i, 1, 0, 0)).collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 0, &mut out).unwrap();
    let m = merged(&out);
    assert_eq!(m.len(), 1, "one datagram carries the whole batch");
    assert_eq!(payload(&m[0]), &6u32.to_le_bytes());
    assert_eq!(engine.stats(flow).unwrap().counters.taken, 5);
}

/// Holds at most two per state; a third asks for a flush first.
struct Pairs;
impl MergeSpec for Pairs {
    type State = Vec<u8>;
    fn init(_: &mut impl Host) -> Result<Self, &'static str> {
        Ok(Pairs)
    }
    fn get_tag(&mut self, _: &[u8], _: &mut impl Host) -> Tag {
        Tag::Merge(1)
    }
    fn new_state(&mut self, _: u64, _: &mut impl Host) -> Vec<u8> {
        Vec::new()
    }
    fn merge(&mut self, s: &mut Vec<u8>, msg: &[u8], _: &mut impl Host) -> Merge {
        if s.len() == 2 {
            return Merge::FlushFirst;
        }
        s.push(msg[15]);
        Merge::Merged
    }
    fn done(&mut self, _: &mut Vec<u8>, _: &mut impl Host) -> bool {
        false
    }
    fn build(&mut self, s: &mut Vec<u8>, host: &mut impl Host) -> AfterBuild {
        host.emit(s, OutHeader::udp());
        s.clear();
        AfterBuild::Keep
    }
}

#[test]
fn flush_first_builds_the_full_state_then_merges() {
    let mut engine = engine();
    let flow = engine
        .add_flow(FlowConfig::new(key(1), SpecRef::native::<Pairs>()), 0)
        .unwrap();
    let batch: Vec<Vec<u8>> = (1..=5).map(|i| contribution(i, 1, 0, 0)).collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 0, &mut out).unwrap();
    let bundles: Vec<Vec<u8>> = merged(&out).iter().map(|d| payload(d).to_vec()).collect();
    assert_eq!(bundles, vec![vec![1, 2], vec![3, 4]]);
    out.clear();
    engine.flush_flow(flow, 1, &mut out).unwrap();
    assert_eq!(payload(&merged(&out)[0]), &[5]);
    assert_eq!(
        engine.stats(flow).unwrap().open_states,
        1,
        "kept states stay open"
    );
}

/// Duplicate suppression: forward the first of each tag, drop repeats for 1 ms.
struct Suppress;
impl MergeSpec for Suppress {
    type State = bool;
    fn init(_: &mut impl Host) -> Result<Self, &'static str> {
        Ok(Suppress)
    }
    fn get_tag(&mut self, msg: &[u8], _: &mut impl Host) -> Tag {
        match msg[31] {
            0xDD => Tag::Drop,
            0xEE => Tag::Pass,
            _ => Tag::Merge(u64::from(msg[29])),
        }
    }
    fn new_state(&mut self, _: u64, host: &mut impl Host) -> bool {
        host.log(Level::Info, "new window");
        false
    }
    fn merge(&mut self, sent: &mut bool, _: &[u8], host: &mut impl Host) -> Merge {
        if *sent {
            Merge::Drop
        } else {
            host.set_timer(host.now_us() + 1_000);
            Merge::Merged
        }
    }
    fn done(&mut self, sent: &mut bool, _: &mut impl Host) -> bool {
        !*sent
    }
    fn build(&mut self, sent: &mut bool, host: &mut impl Host) -> AfterBuild {
        if *sent {
            return AfterBuild::Free; // the window closed: forget the tag
        }
        *sent = true;
        host.emit(b"first", OutHeader::udp());
        host.set_timer(host.now_us() + 1_000);
        AfterBuild::Keep
    }
}

fn tagged(sender: u8, tag: u8, marker: u8) -> Vec<u8> {
    let mut p = [0u8; 12];
    p[1] = tag; // byte 29 of the datagram
    p[3] = marker; // byte 31
    datagram(std::net::Ipv4Addr::new(10, 0, 1, sender), 1, 64, &p)
}

#[test]
fn persistent_states_drops_and_timers() {
    let mut engine = engine();
    let flow = engine
        .add_flow(FlowConfig::new(key(1), SpecRef::native::<Suppress>()), 0)
        .unwrap();
    let mut out = Outputs::new();
    let batch = [
        tagged(1, 7, 0),
        tagged(2, 7, 0),
        tagged(3, 7, 0xDD),
        tagged(4, 7, 0xEE),
        tagged(5, 8, 0),
    ];
    engine.ingest(flow, &batch, 100, &mut out).unwrap();
    let kinds: Vec<OutputKind> = out.iter().map(|o| o.kind).collect();
    assert_eq!(
        kinds,
        vec![
            OutputKind::Merged,
            OutputKind::Unmerged(Unmerged::Passed),
            OutputKind::Merged
        ]
    );
    let c = engine.stats(flow).unwrap().counters;
    assert_eq!((c.merged, c.dropped, c.passed), (2, 2, 1));
    assert_eq!(engine.next_deadline(), Some(1_100));
    out.clear();
    engine.advance(1_100, &mut out);
    assert!(out.is_empty());
    assert_eq!(
        engine.stats(flow).unwrap().open_states,
        0,
        "both windows closed at their timers"
    );
    engine
        .ingest(flow, &[tagged(6, 7, 0)], 1_200, &mut out)
        .unwrap();
    assert_eq!(merged(&out).len(), 1, "a new window forwards again");
    let logs = engine.logs(flow);
    assert_eq!(logs.len(), 3);
    assert_eq!(
        (logs[0].at_us, logs[0].level, logs[0].text.as_str()),
        (100, Level::Info, "new window")
    );
}

/// Reports the flow info and parameters it sees.
struct Info;
impl MergeSpec for Info {
    type State = ();
    fn init(host: &mut impl Host) -> Result<Self, &'static str> {
        if host.params() == b"refuse" {
            return Err("refused by parameters");
        }
        Ok(Info)
    }
    fn get_tag(&mut self, _: &[u8], _: &mut impl Host) -> Tag {
        Tag::Merge(0)
    }
    fn new_state(&mut self, _: u64, _: &mut impl Host) {}
    fn merge(&mut self, _: &mut (), _: &[u8], _: &mut impl Host) -> Merge {
        Merge::Merged
    }
    fn done(&mut self, _: &mut (), _: &mut impl Host) -> bool {
        true
    }
    fn build(&mut self, _: &mut (), host: &mut impl Host) -> AfterBuild {
        let mut p = Vec::new();
        for v in [
            host.receiver(),
            host.group(),
            host.node(),
            host.path_mtu(),
            host.children(),
        ] {
            p.extend_from_slice(&v.to_be_bytes());
        }
        p.extend_from_slice(&host.now_us().to_be_bytes());
        p.extend_from_slice(host.params());
        host.emit(
            &p,
            OutHeader {
                protocol: 99,
                ttl: 3,
                dont_fragment: true,
            },
        );
        AfterBuild::Free
    }
}

#[test]
fn specs_see_flow_info_and_choose_protocol_ttl_df() {
    let mut engine = engine();
    let mut cfg = FlowConfig::new(key(0x0102_0304), SpecRef::native::<Info>());
    cfg.path_mtu = 1400;
    cfg.children = 4;
    cfg.params = b"x=1".to_vec();
    let flow = engine.add_flow(cfg, 0).unwrap();
    engine.set_children(flow, 5).unwrap();
    let mut out = Outputs::new();
    let d = datagram("10.0.1.1".parse().unwrap(), 0x0102_0304, 64, b"hi");
    engine.ingest(flow, &[d], 777, &mut out).unwrap();
    let o = merged(&out).remove(0);
    let mut expect = Vec::new();
    for v in [u32::from(R), 0x0102_0304, u32::from(NODE), 1400, 5] {
        expect.extend_from_slice(&v.to_be_bytes());
    }
    expect.extend_from_slice(&777u64.to_be_bytes());
    expect.extend_from_slice(b"x=1");
    assert_eq!(payload(&o), &expect[..]);
    assert_eq!(
        (o[8], o[9], o[6] & 0x40),
        (3, 99, 0x40),
        "TTL, protocol, DF as the spec chose"
    );

    let mut cfg = FlowConfig::new(key(9), SpecRef::native::<Info>());
    cfg.params = b"refuse".to_vec();
    let err = engine.add_flow(cfg, 0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the spec did not start the flow: init aborted: refused by parameters"
    );
}

/// Panics in its third merge.
struct Panics(u32);
impl MergeSpec for Panics {
    type State = ();
    fn init(_: &mut impl Host) -> Result<Self, &'static str> {
        Ok(Panics(0))
    }
    fn get_tag(&mut self, _: &[u8], _: &mut impl Host) -> Tag {
        Tag::Merge(0)
    }
    fn new_state(&mut self, _: u64, _: &mut impl Host) {}
    fn merge(&mut self, _: &mut (), _: &[u8], host: &mut impl Host) -> Merge {
        self.0 += 1;
        if self.0 == 2 {
            host.emit(b"not allowed here", OutHeader::udp());
        }
        Merge::Merged
    }
    fn done(&mut self, _: &mut (), _: &mut impl Host) -> bool {
        false
    }
    fn build(&mut self, _: &mut (), _: &mut impl Host) -> AfterBuild {
        AfterBuild::Free
    }
}

#[test]
fn native_specs_obey_the_same_host_rules() {
    let mut engine = engine();
    let flow = engine
        .add_flow(FlowConfig::new(key(1), SpecRef::native::<Panics>()), 0)
        .unwrap();
    let batch: Vec<Vec<u8>> = (1..=3).map(|i| contribution(i, 1, 0, 0)).collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 0, &mut out).unwrap();
    let q = engine.stats(flow).unwrap().quarantine.unwrap();
    assert_eq!(
        q.fault,
        Fault::Abi("emit called outside concast_build".into())
    );
    assert_eq!(out.len(), 3);
}

#[test]
fn removing_a_flow_flushes_it_and_stales_its_id() {
    let mut engine = engine();
    let flow = add(&mut engine, &spec_bytes("sum"), 7, "fanin=10");
    let mut out = Outputs::new();
    engine
        .ingest(
            flow,
            &[contribution(1, 7, 1, 5), contribution(2, 7, 2, 6)],
            0,
            &mut out,
        )
        .unwrap();
    assert!(out.is_empty());
    assert_eq!(engine.timers_armed(), 2);
    let stats = engine.remove_flow(flow, 10, &mut out).unwrap();
    assert_eq!(merged(&out).len(), 2, "open states are built, not lost");
    assert_eq!(stats.counters.built_from, 2);
    assert_eq!(engine.timers_armed(), 0);
    assert_eq!(
        engine.ingest(flow, &[contribution(1, 7, 1, 5)], 20, &mut out),
        Err(FlowError::UnknownFlow)
    );
    let again = add(&mut engine, &spec_bytes("sum"), 7, "");
    assert_ne!(again, flow);
}

#[test]
fn mixed_batches_go_to_their_flows() {
    let mut engine = engine();
    let a = add(&mut engine, &spec_bytes("sum"), 1, "");
    let b = add(&mut engine, &spec_bytes("count"), 2, "");
    let mut not_concast = contribution(1, 1, 1, 1);
    not_concast[20] = 0; // EOL before the option: not a concast datagram
    let batch = vec![
        contribution(1, 1, 1, 10),
        contribution(1, 2, 1, 0),
        not_concast.clone(),
        contribution(2, 2, 1, 0),
        contribution(2, 1, 1, 20),
    ];
    let mut out = Outputs::new();
    engine.ingest_mixed(&batch, 0, &mut out);
    assert_eq!(
        out.get(0).unwrap().kind,
        OutputKind::Unmerged(Unmerged::NoFlow)
    );
    let m: Vec<(u32, i64)> = out
        .iter()
        .filter(|o| o.kind == OutputKind::Merged)
        .map(|o| (o.flow.group, read_contribution(o.datagram).value))
        .collect();
    assert_eq!(m, vec![(1, 30), (2, 2)]);
    assert_eq!(engine.stats(a).unwrap().counters.received, 2);
    assert_eq!(engine.stats(b).unwrap().counters.received, 2);
}

#[test]
fn malformed_datagrams_are_forwarded_without_asking_the_spec() {
    let mut engine = engine();
    let flow = add(&mut engine, &spec_bytes("sum"), 1, "");
    let mut out = Outputs::new();
    engine
        .ingest(flow, &[vec![0x45u8; 10]], 0, &mut out)
        .unwrap();
    assert_eq!(
        out.get(0).unwrap().kind,
        OutputKind::Unmerged(Unmerged::Malformed)
    );
    assert_eq!(engine.stats(flow).unwrap().counters.malformed, 1);
}

/// The WAT example of docs/mergespec-abi.md section 11 is a working spec.
#[test]
fn the_abi_document_example_runs() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/mergespec-abi.md"
    ))
    .unwrap();
    let start = doc.find("```wat\n(module").expect("the example") + "```wat\n".len();
    let text = &doc[start..start + doc[start..].find("```").unwrap()];
    let mut engine = engine();
    let flow = add(&mut engine, &wat(text), 1, "");
    let batch: Vec<Vec<u8>> = (1..=5).map(|i| contribution(i, 1, 0, 0)).collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 0, &mut out).unwrap();
    let m = merged(&out);
    assert_eq!(m.len(), 2);
    // a UDP datagram (the contributions' ports, length 12, no checksum) carrying the count 2
    assert_eq!(payload(&m[0]), &[0x0F, 0xA0, 0x13, 0x88, 0, 12, 0, 0, 0, 0, 0, 2]);
}
