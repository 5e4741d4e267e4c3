//! The MTP decoder and encoder against the shared vectors (tests/vectors/mtp.json, generated
//! by tests/vectors/mtp_generate.py from docs/transport.md): every valid vector decodes to
//! exactly its fields and re-encodes to the same bytes; every invalid one is refused with the
//! error the vector names. A field this test does not know fails it.
use concast_transport::mtp::wire::{self, Header, Kind, WireError};
use serde_json::Value;

fn vectors() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/mtp.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("mtp.json")).expect("json");
    let v = doc["vectors"].as_array().expect("vectors").clone();
    assert_eq!(v.len() as u64, doc["count"].as_u64().unwrap());
    v
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

fn error_name(e: &WireError) -> &'static str {
    match e {
        WireError::Short(_) => "short",
        WireError::Magic(_) => "magic",
        WireError::Version(_) => "version",
        WireError::Kind(_) => "type",
        WireError::Flags(_) => "flags",
        WireError::Field(_) => "field",
        WireError::Length { .. } => "length",
    }
}

fn field(h: &Header, body: &[u8], name: &str) -> u64 {
    match name {
        "type" => h.kind as u64,
        "flags" => h.flags as u64,
        "channel" => h.channel as u64,
        "txid" => h.txid as u64,
        "offset" => h.offset as u64,
        "length" => h.length as u64,
        "namelen" => h.namelen as u64,
        "total" => h.total as u64,
        "stamp" => h.stamp as u64,
        "body_len" => body.len() as u64,
        other => panic!("field {other} unknown to this test"),
    }
}

#[test]
fn every_vector_decodes_or_is_refused_as_it_says() {
    let all = vectors();
    assert!(all.len() >= 20);
    for v in &all {
        let name = v["name"].as_str().unwrap();
        let raw = unhex(v["hex"].as_str().unwrap());
        match (wire::decode(&raw), v["valid"].as_bool().unwrap()) {
            (Ok((h, body)), true) => {
                for (k, want) in v["fields"].as_object().unwrap() {
                    if k == "body_hex" {
                        assert_eq!(body, &unhex(want.as_str().unwrap())[..], "{name}: body");
                    } else {
                        assert_eq!(field(&h, body, k), want.as_u64().unwrap(), "{name}: {k}");
                    }
                }
                assert_eq!(wire::datagram(&h, body), raw, "{name}: re-encoded");
                assert_eq!(h.kind == Kind::Request, v["fields"]["type"] == 1);
            }
            (Err(e), false) => assert_eq!(error_name(&e), v["error"].as_str().unwrap(), "{name}: {e}"),
            (r, _) => panic!("{name}: {r:?}"),
        }
    }
}
