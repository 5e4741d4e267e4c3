//! The C SDK's `pending_scan` / `pending_take_list` (mergespecs/sdk-c/concast_spec.h,
//! docs/mergespec-abi.md §5 and §8): tests/data/pending_take.c, built as ABI v2 and v1 with
//! the flags of section 11, scans the queue, reads each queued datagram's marker byte in place
//! (v2) or peeked (v1), and takes the odd-marked ones with one take list. Also: the header
//! declares every import of the ABI.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use concast_engine::Outputs;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// tests/data/pending_take.c compiled (`-DCONCAST_ABI_V1` for v1), or None (reason printed)
/// without clang and wasm-ld.
fn build(v1: bool) -> Option<Vec<u8>> {
    let has = |tool: &str| Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !has("clang") || !has("wasm-ld") {
        eprintln!("skipped: clang and wasm-ld are not installed (apt-get install clang lld)");
        return None;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("c-pending-{}-{}", std::process::id(), u8::from(v1)));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("pending_take.wasm");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pending_take.c");
    let mut clang = Command::new("clang");
    clang
        .args(["--target=wasm32", "-O2", "-nostdlib", "-ffreestanding", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(repo().join("mergespecs/sdk-c"))
        .args(["-Wl,--no-entry", "-Wl,--stack-first", "-Wl,-z,stack-size=65536", "-Wl,--strip-all"]);
    if v1 {
        clang.arg("-DCONCAST_ABI_V1");
    }
    let status = clang.arg("-o").arg(&out).arg(&source).status().unwrap();
    assert!(status.success(), "clang failed on {}", source.display());
    let module = std::fs::read(&out).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    Some(module)
}

/// (count, marker sum, peeked) of each state the spec built, in order.
fn run(module: &[u8]) -> (Vec<(u32, u32, u32)>, u64) {
    let mut engine = engine();
    let flow = add(&mut engine, module, 3, "");
    // Ten datagrams whose first payload byte (the marker) is 0..9.
    let batch: Vec<Vec<u8>> = (0..10u8)
        .map(|m| datagram(std::net::Ipv4Addr::new(10, 0, 1, m + 1), 3, 64, &[m, 0xAA, 0xBB]))
        .collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 10, &mut out).unwrap();
    let stats = engine.stats(flow).unwrap();
    assert!(stats.quarantine.is_none(), "{:?}", stats.quarantine);
    let built = merged(&out)
        .iter()
        .map(|d| {
            let p = &d[usize::from(d[0] & 0x0F) * 4 + 8..];
            let u = |i: usize| u32::from_be_bytes(p[i..i + 4].try_into().unwrap());
            (u(0), u(4), u(8))
        })
        .collect();
    (built, stats.counters.taken)
}

/// Datagram 0 opens the state and its `done` takes the odd markers 1, 3, 5, 7, 9 of the nine
/// queued behind it; then 2, 4, 6 and 8 each find only even markers queued.
fn expected(peeked: [u32; 5]) -> Vec<(u32, u32, u32)> {
    vec![(6, 25, peeked[0]), (1, 2, peeked[1]), (1, 4, peeked[2]), (1, 6, peeked[3]), (1, 8, peeked[4])]
}

#[test]
fn a_c_spec_scans_in_place_and_takes_a_list_v2() {
    let Some(module) = build(false) else { return };
    let (built, taken) = run(&module);
    assert_eq!(built, expected([0; 5]), "v2: every scanned datagram read in the batch area");
    assert_eq!(taken, 5);
}

#[test]
fn a_c_spec_scans_by_peeking_and_takes_a_list_v1() {
    let Some(module) = build(true) else { return };
    let (built, taken) = run(&module);
    // v1: nothing is laid out, so every scanned datagram is peeked: 9, then 3 (4, 6, 8),
    // 2, 1, 0.
    assert_eq!(built, expected([9, 3, 2, 1, 0]));
    assert_eq!(taken, 5);
}

/// The header's pending-scan numbers are the ABI's (concast_sdk::abi::pending).
#[test]
fn the_c_header_has_the_abi_scan_numbers() {
    use concast_sdk::abi::pending;
    let header = std::fs::read_to_string(repo().join("mergespecs/sdk-c/concast_spec.h")).unwrap();
    let define = |name: &str| -> String {
        let line = header
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("concast_spec.h defines {name}"));
        line.split_whitespace().nth(2).unwrap().trim_end_matches('u').to_string()
    };
    assert_eq!(define("CONCAST_SCAN_MAX"), pending::SCAN_MAX.to_string());
    assert_eq!(define("CONCAST_TAKE_LIST_MAX"), pending::TAKE_LIST_MAX.to_string());
    assert_eq!(define("CONCAST_NOT_IN_MEMORY"), pending::NOT_IN_MEMORY.to_string());
    // struct concast_scan_record is two u32s: the ABI's 8-byte record, `at` first.
    assert_eq!((pending::SCAN_RECORD_LEN, pending::SCAN_AT, pending::SCAN_LEN), (8, 0, 4));
    assert!(header.contains("struct concast_scan_record {\n    uint32_t at;\n    uint32_t len;\n};"));
}

/// Every import of the ABI (concast_sdk::abi::IMPORTS) is declared in the C header.
#[test]
fn the_c_header_declares_every_import() {
    let header = std::fs::read_to_string(repo().join("mergespecs/sdk-c/concast_spec.h")).unwrap();
    for (name, _) in concast_sdk::abi::IMPORTS {
        assert!(
            header.contains(&format!("CONCAST_IMPORT(\"{name}\")")),
            "concast_spec.h declares the import {name}"
        );
    }
}
