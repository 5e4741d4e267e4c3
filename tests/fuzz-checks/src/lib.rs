//! The checks behind the fuzz targets (docs/hardening.md), one function per parser that sees
//! untrusted bytes. Each must return for any input: no panic (an `assert!` failing here is
//! a finding), no hang, no unbounded memory. `tests/fuzz/fuzz_targets/*.rs` hand libFuzzer's
//! inputs to them; `tests/smoke.rs` hands them seeds and mutations on the stable toolchain.

use std::net::Ipv4Addr;
use std::sync::{Mutex, OnceLock};

use concast_engine::offline::{input, pcap};
use concast_engine::{params_section, Engine, EngineConfig, FlowConfig, FlowId, Outputs};
use concast_wire::csp::{Message, Repr};
use concast_wire::mplex::{Packet, RecordIter};
use concast_wire::{classify, Datagram};

/// A whole IPv4 datagram as a router's CPU port hands it over: the options walk, the kind,
/// and for CSP and MplexPkt their bodies. A datagram it accepts holds together.
pub fn datagram(data: &[u8]) {
    let Ok(d) = classify(data) else { return };
    match d {
        Datagram::Csp { message, .. } => {
            let _ = message.msg_type();
        }
        Datagram::Mplex { mplex, .. } => {
            // A checked MplexPkt's records cover its record bytes exactly.
            let covered: usize = mplex.records().map(|r| r.as_bytes().len()).sum();
            assert_eq!(covered, mplex.records_bytes().len());
        }
        Datagram::Concast { ip, .. } | Datagram::Ipv4(ip) => {
            assert!(usize::from(ip.total_len()) <= data.len());
        }
    }
}

/// A CSP message (the IPv4 payload of protocol 253): header checks, type, body rules, and
/// the signature trailer of JOIN_ACK and SPEC_UPDATE.
pub fn csp_message(data: &[u8]) {
    if let Ok(m) = Message::parse(data) {
        // Accepted: the length field said exactly how long it is.
        assert_eq!(usize::from(m.header.length()), data.len());
        // What was read (signature trailer included) is written back to an equal message.
        let repr = Repr::parse(&m);
        let mut out = vec![0u8; repr.buffer_len()];
        let n = repr.emit(&mut out).expect("a parsed message can be emitted");
        assert_eq!(Repr::parse(&Message::parse(&out[..n]).expect("emitted parses")), repr);
    }
}

/// An MplexPkt body (MplexHdr and records) on its own, checked and unchecked.
pub fn mplex_packet(data: &[u8]) {
    let unchecked = Packet::new_unchecked(data);
    let walked: usize = RecordIter::new(unchecked.records_bytes())
        .filter_map(Result::ok)
        .map(|r| r.as_bytes().len())
        .sum();
    assert!(walked <= unchecked.records_bytes().len());
    if let Ok(p) = Packet::new_checked(data) {
        let covered: usize = p.records().map(|r| r.as_bytes().len()).sum();
        assert_eq!(covered, p.records_bytes().len(), "a checked packet's records cover it");
    }
}

fn engine() -> &'static Mutex<Engine> {
    static ENGINE: OnceLock<Mutex<Engine>> = OnceLock::new();
    ENGINE.get_or_init(|| Mutex::new(Engine::new(EngineConfig::default()).expect("engine starts")))
}

/// A merge-spec module as CSP delivers it: the params section reader and the engine's loader
/// (Wasm validation, the ABI's export and import checks, compilation). A module it accepts
/// must also start a flow or be refused with an error.
pub fn spec_module(data: &[u8]) {
    let _ = params_section::embedded(data);
    let mut e = engine().lock().unwrap_or_else(|p| p.into_inner());
    let Ok(spec) = e.load_spec(data) else { return };
    let flow = FlowId::new(Ipv4Addr::new(10, 0, 0, 9), 1);
    if let Ok(slot) = e.add_flow(FlowConfig::new(flow, spec.clone()), 0) {
        let mut out = Outputs::new();
        let _ = e.remove_flow(slot, 0, &mut out);
    }
    e.forget_spec(&concast_engine::sha256(data)); // the engine caches by hash: keep memory flat
}

/// One line an application writes to hostd's API socket.
pub fn hostd_request(data: &[u8]) {
    let Ok(line) = std::str::from_utf8(data) else { return };
    let _ = concast_hostd::api::parse(line, Ipv4Addr::new(10, 0, 0, 1));
}

/// The offline runner's input files (`concast-spec run --input`): JSON lines or a pcap.
pub fn offline_input(data: &[u8]) {
    if pcap::is_pcap(data) {
        let _ = pcap::read(data);
    } else {
        let _ = input::read(data);
    }
}

/// Every target by its name (the fuzz binaries' names).
pub const TARGETS: [(&str, fn(&[u8])); 6] = [
    ("datagram", datagram),
    ("csp_message", csp_message),
    ("mplex_packet", mplex_packet),
    ("spec_module", spec_module),
    ("hostd_request", hostd_request),
    ("offline_input", offline_input),
];
