//! Spec signatures against the shared vectors (tests/vectors/vectors.json, "signing"): the
//! signed message is built byte for byte as the spec says, signing with the published test
//! secret gives the vector's signature (Ed25519 is deterministic), and each verifies for its
//! own flow only.

use std::path::PathBuf;

use concast_csp::{sign, FlowId, SpecSig};
use serde_json::Value;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn signing() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/vectors.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["signing"].clone()
}

#[test]
fn the_vectors_signatures_are_reproduced_and_verify_for_their_own_flow_only() {
    let s = signing();
    let secret: [u8; 32] = unhex(s["secret"].as_str().unwrap()).try_into().unwrap();
    let key = sign::key_from_secret(secret);
    let cases = s["cases"].as_array().unwrap();
    assert!(cases.len() >= 2, "vectors sign at least two flows");
    for c in cases {
        let flow = FlowId { receiver: c["receiver"].as_str().unwrap().parse().unwrap(), group: c["group"].as_u64().unwrap() as u32 };
        let size = c["spec_size"].as_u64().unwrap() as u32;
        let hash: [u8; 32] = unhex(c["spec_hash"].as_str().unwrap()).try_into().unwrap();
        let message = concast_wire::csp::signed_message(flow.receiver, flow.group, size, &hash);
        assert_eq!(message.to_vec(), unhex(c["message"].as_str().unwrap()), "signed bytes of {flow}");
        let want = SpecSig {
            key: unhex(c["spec_key"].as_str().unwrap()).try_into().unwrap(),
            sig: unhex(c["signature"].as_str().unwrap()).try_into().unwrap(),
        };
        assert_eq!(sign::sign(&key, flow, size, &hash), want, "signature of {flow}");
        assert!(sign::verify(flow, size, &hash, &want));
        assert!(!sign::verify(FlowId { group: flow.group ^ 1, ..flow }, size, &hash, &want));
    }
}
