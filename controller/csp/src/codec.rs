//! CSP messages to and from bytes, through the wire crate (docs/protocol.md section 2).

use std::net::Ipv4Addr;

use concast_wire::build;
use concast_wire::BuildError;
use concast_wire::csp::{self as wcsp, BodyRepr, Repr};
use concast_wire::ipv4::Params;

use crate::msg::{Body, FlowId, JoinBody, Msg, Selector};

/// The largest CSP datagram: a SPEC_CHUNK with a full 1024-byte chunk (a signed JOIN_ACK,
/// 16 + 136 bytes, is smaller).
pub const MAX_DATAGRAM: usize = build::CSP_HEADER_LEN + 16 + 40 + crate::CHUNK_SIZE;

fn join(b: &wcsp::JoinBody<&[u8]>) -> JoinBody {
    JoinBody {
        hold_s: b.hold_time(),
        selector: Selector { proto: b.selector_proto(), dport: b.selector_dport() },
        hash: *b.spec_hash(),
        signed: b.signed(),
    }
}

/// The owned message of a checked wire message.
pub fn decode(m: &wcsp::Message<'_>) -> Msg {
    let flow = FlowId { receiver: m.receiver(), group: m.group() };
    let body = match &m.body {
        wcsp::Body::Join(b) => Body::Join(join(b)),
        wcsp::Body::Refresh(b) => Body::Refresh(join(b)),
        wcsp::Body::JoinAck(b) => {
            Body::JoinAck { hold_s: b.hold_time(), path_mtu: b.path_mtu(), spec_size: b.spec_size(), hash: *b.spec_hash(), sig: b.signature() }
        }
        wcsp::Body::Leave => Body::Leave,
        wcsp::Body::SpecRequest(b) => Body::SpecRequest { hash: *b.spec_hash(), index: b.chunk_index() },
        wcsp::Body::SpecChunk(b) => Body::SpecChunk {
            hash: *b.spec_hash(),
            size: b.spec_size(),
            index: b.chunk_index(),
            count: b.chunk_count(),
            data: b.data().to_vec(),
        },
        wcsp::Body::SpecUpdate(b) => Body::SpecUpdate { size: b.spec_size(), hash: *b.spec_hash(), sig: b.signature() },
        wcsp::Body::Error(b) => Body::Error {
            code: b.code(),
            offending: b.offending_type(),
            reason: String::from_utf8_lossy(b.reason()).into_owned(),
        },
    };
    Msg { flow, seq: m.header.seq(), body }
}

fn join_repr(b: &JoinBody) -> wcsp::JoinRepr {
    wcsp::JoinRepr { hold_time: b.hold_s, selector_proto: b.selector.proto, selector_dport: b.selector.dport, spec_hash: b.hash, signed: b.signed }
}

/// Writes `msg` as a whole IPv4 CSP datagram (Router Alert, TTL 64) into `buf`.
pub fn encode(src: Ipv4Addr, dst: Ipv4Addr, msg: &Msg, buf: &mut [u8]) -> Result<usize, BuildError> {
    // A reason longer than the wire allows is cut at a character boundary, never rejected.
    let reason_bytes;
    let body = match &msg.body {
        Body::Join(b) => BodyRepr::Join(join_repr(b)),
        Body::Refresh(b) => BodyRepr::Refresh(join_repr(b)),
        Body::JoinAck { hold_s, path_mtu, spec_size, hash, sig } => BodyRepr::JoinAck(wcsp::JoinAckRepr {
            hold_time: *hold_s,
            path_mtu: *path_mtu,
            spec_size: *spec_size,
            spec_hash: *hash,
            signature: *sig,
        }),
        Body::Leave => BodyRepr::Leave,
        Body::SpecRequest { hash, index } => BodyRepr::SpecRequest(wcsp::SpecRequestRepr { spec_hash: *hash, chunk_index: *index }),
        Body::SpecChunk { hash, size, index, count, data } => BodyRepr::SpecChunk(wcsp::SpecChunkRepr {
            spec_hash: *hash,
            spec_size: *size,
            chunk_index: *index,
            chunk_count: *count,
            data,
        }),
        Body::SpecUpdate { size, hash, sig } => {
            BodyRepr::SpecUpdate(wcsp::SpecUpdateRepr { spec_size: *size, spec_hash: *hash, signature: *sig })
        }
        Body::Error { code, offending, reason } => {
            let mut end = reason.len().min(wcsp::MAX_REASON_LEN);
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            reason_bytes = &reason.as_bytes()[..end];
            BodyRepr::Error(wcsp::ErrorRepr { code: *code, offending_type: *offending, reason: reason_bytes })
        }
    };
    let repr = Repr { group: msg.flow.group, receiver: msg.flow.receiver, seq: msg.seq, body };
    build::csp(buf, &Params::new(src, dst, concast_wire::ipv4::protocol::CSP), &repr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::SpecSig;
    use concast_wire::datagram::{classify, Datagram};

    fn roundtrip(msg: Msg) {
        let mut buf = [0u8; MAX_DATAGRAM];
        let n = encode("10.0.1.1".parse().unwrap(), "10.0.9.9".parse().unwrap(), &msg, &mut buf).unwrap();
        match classify(&buf[..n]).unwrap() {
            Datagram::Csp { message, .. } => {
                assert_eq!(message.msg_type(), msg.body.msg_type());
                assert_eq!(decode(&message), msg);
            }
            other => panic!("not CSP: {:?}", other.kind()),
        }
    }

    #[test]
    fn every_body_roundtrips() {
        let flow = FlowId { receiver: "10.0.9.9".parse().unwrap(), group: 7 };
        let j = JoinBody { hold_s: 30, selector: Selector { proto: 17, dport: 6000 }, hash: [3; 32], signed: true };
        for body in [
            Body::Join(j.clone()),
            Body::Refresh(j),
            Body::JoinAck { hold_s: 30, path_mtu: 1000, spec_size: 2500, hash: [4; 32], sig: None },
            Body::JoinAck { hold_s: 30, path_mtu: 0, spec_size: 2500, hash: [4; 32], sig: Some(SpecSig { key: [1; 32], sig: [2; 64] }) },
            Body::Leave,
            Body::SpecRequest { hash: [5; 32], index: 2 },
            Body::SpecChunk { hash: [6; 32], size: 1500, index: 1, count: 2, data: vec![9; 476] },
            Body::SpecUpdate { size: 10, hash: [7; 32], sig: None },
            Body::SpecUpdate { size: 10, hash: [7; 32], sig: Some(SpecSig { key: [3; 32], sig: [4; 64] }) },
            Body::Error { code: 1, offending: 1, reason: "no merge spec".into() },
        ] {
            roundtrip(Msg { flow, seq: 42, body });
        }
    }

    #[test]
    fn long_reasons_are_cut_on_a_char_boundary() {
        let flow = FlowId { receiver: "10.0.9.9".parse().unwrap(), group: 7 };
        let reason = "é".repeat(150); // 300 bytes
        let mut buf = [0u8; MAX_DATAGRAM];
        let msg = Msg { flow, seq: 1, body: Body::Error { code: 5, offending: 1, reason } };
        let n = encode("10.0.1.1".parse().unwrap(), "10.0.9.9".parse().unwrap(), &msg, &mut buf).unwrap();
        let Datagram::Csp { message, .. } = classify(&buf[..n]).unwrap() else { panic!() };
        let Body::Error { reason, .. } = decode(&message).body else { panic!() };
        assert_eq!(reason, "é".repeat(100));
    }
}
