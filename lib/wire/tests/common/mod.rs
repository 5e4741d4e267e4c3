//! Loading the shared test vectors (`tests/vectors/vectors.json`, made by `generate.py`).
#![allow(dead_code)]

use std::path::PathBuf;

use serde_json::Value;

pub struct Vector {
    pub name: String,
    pub bytes: Vec<u8>,
    pub valid: bool,
    pub error: Option<String>,
    pub kind: String,
    pub fields: serde_json::Map<String, Value>,
}

pub fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/vectors.json")
}

pub fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// Every vector. Unknown top-level keys fail the load, so a format change cannot be missed.
pub fn load() -> Vec<Vector> {
    let path = vectors_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text).expect("vectors.json is JSON");
    let doc = doc.as_object().expect("top level is an object");
    for key in doc.keys() {
        assert!(
            // "signing": the spec-signature cases, checked by concast-csp's sign_vectors test.
            ["spec", "count", "vectors", "signing"].contains(&key.as_str()),
            "unknown top-level key {key}"
        );
    }
    let list = doc["vectors"].as_array().expect("vectors is an array");
    if let Some(count) = doc.get("count") {
        assert_eq!(
            count.as_u64(),
            Some(list.len() as u64),
            "count does not match"
        );
    }
    list.iter()
        .map(|v| {
            let v = v.as_object().expect("vector is an object");
            for key in v.keys() {
                assert!(
                    ["name", "hex", "valid", "error", "kind", "fields", "note"]
                        .contains(&key.as_str()),
                    "unknown vector key {key}"
                );
            }
            Vector {
                name: v["name"].as_str().expect("name").to_owned(),
                bytes: hex(v["hex"].as_str().expect("hex")),
                valid: v["valid"].as_bool().expect("valid"),
                error: v["error"].as_str().map(str::to_owned),
                kind: v["kind"].as_str().expect("kind").to_owned(),
                fields: v["fields"].as_object().expect("fields").clone(),
            }
        })
        .collect()
}
