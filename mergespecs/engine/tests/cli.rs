//! The `concast-spec` binary as the Python `concast spec` command runs it: exit statuses,
//! messages, and `run` over JSON lines and pcap.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use common::*;
use concast_engine::offline::pcap;
use serde_json::Value;

fn spec_path(name: &str) -> PathBuf {
    spec_bytes(name); // fails with the "run make specs" message if absent
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../build/mergespecs")
        .join(format!("{name}.wasm"))
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn concast_spec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_concast-spec"))
        .args(args)
        .output()
        .expect("runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A file in cargo's scratch directory for integration tests (under target/, so nothing is
/// left in /tmp).
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("concast-spec-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn check_prints_what_it_validated() {
    let out = concast_spec(&["check", spec_path("sum").to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let sha = concast_engine::sha256(&spec_bytes("sum"))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    assert!(stdout.contains(&format!("sha256       {sha}")), "{stdout}");
    assert!(stdout.contains("abi version  2"), "the SDK builds ABI v2");
    assert!(stdout.contains("concast_run (i32, i32, i32, i64) -> i32"));

    let out = concast_spec(&["check", spec_path("sum-wat").to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["valid"].as_bool(), v["abi_version"].as_u64()),
        (Some(true), Some(1))
    );
}

#[test]
fn check_rejects_with_a_reason_and_status_1() {
    let garbage = scratch("garbage.wasm");
    std::fs::write(&garbage, b"not wasm").unwrap();
    let out = concast_spec(&["check", garbage.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("is not a valid merge spec: not a valid WebAssembly module"),
        "{}",
        text(&out.stderr)
    );

    let out = concast_spec(&[
        "check",
        spec_path("sum").to_str().unwrap(),
        "--param",
        "k=many",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("does not start a flow with these parameters"),
        "{}",
        text(&out.stderr)
    );

    let out = concast_spec(&["check", "/nonexistent/x.wasm"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("concast-spec: cannot read spec /nonexistent/x.wasm"));
}

#[test]
fn bad_command_lines_exit_2_with_usage() {
    for (args, says) in [
        (vec![], "no command given"),
        (vec!["frobnicate"], "unknown command `frobnicate`"),
        (vec!["check"], "check needs a SPEC.wasm file"),
        (vec!["run", "x.wasm"], "run needs --input FILE"),
        (vec!["run", "x.wasm", "--input"], "--input needs a value"),
        (
            vec!["check", "x.wasm", "--input", "y"],
            "unknown option `--input` for check",
        ),
        (
            vec!["run", "x.wasm", "--input", "y", "--mtu", "big"],
            "--mtu: `big` is not a valid number",
        ),
        (
            vec!["run", "x.wasm", "--input", "y", "--param", "k"],
            "--param `k` is not KEY=VALUE",
        ),
    ] {
        let out = concast_spec(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.starts_with(&format!("concast-spec: bad command line: {says}")),
            "{args:?}: {err}"
        );
        assert!(err.contains("usage:"));
    }
    assert!(concast_spec(&["--help"]).status.success());
}

fn run_json(args: &[&str]) -> (Vec<Value>, Value) {
    let out = concast_spec(args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = lines.pop().unwrap()["summary"].clone();
    (lines, summary)
}

fn value_of(hex: &str) -> i64 {
    i64::from_str_radix(&hex[hex.len() - 16..], 16)
        .unwrap_or_else(|_| u64::from_str_radix(&hex[hex.len() - 16..], 16).unwrap() as i64)
}

#[test]
fn run_merges_json_lines_in_virtual_time() {
    let spec = spec_path("sum");
    let input = data("sum.jsonl");
    let (outputs, summary) = run_json(&[
        "run",
        spec.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--param",
        "fanin=3",
        "--param",
        "timeout_us=5000",
        "--json",
    ]);
    let merged: Vec<(u64, i64)> = outputs
        .iter()
        .filter(|o| o["kind"] == "merged")
        .map(|o| {
            (
                o["t_us"].as_u64().unwrap(),
                value_of(o["hex"].as_str().unwrap()),
            )
        })
        .collect();
    assert_eq!(
        merged,
        vec![(1_500, 42), (7_000, 6)],
        "key 1 after 3 contributions, key 2 at its timeout"
    );
    assert_eq!(outputs.iter().filter(|o| o["kind"] == "no_flow").count(), 1);
    assert_eq!(summary["flows"][0]["received"], 5);
    assert_eq!(summary["flows"][0]["timer_fires"], 1);
    assert_eq!(summary["not_concast"][0]["origin"], "line 7");
}

#[test]
fn run_writes_and_reads_pcap() {
    let spec = spec_path("sum");
    let input = data("sum.jsonl");
    let pcap_out = scratch("merged.pcap");
    let out = concast_spec(&[
        "run",
        spec.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--param",
        "fanin=3",
        "--output",
        pcap_out.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("3 datagrams forwarded, 2 of them merged"),
        "{}",
        text(&out.stdout)
    );
    let (packets, _) = pcap::read(&std::fs::read(&pcap_out).unwrap()).unwrap();
    assert_eq!(packets.len(), 3);
    assert_eq!(read_contribution(&packets[0].datagram).value, 42);

    // The merged capture is valid input too: the next hop merges the merged datagrams.
    let (outputs, summary) = run_json(&[
        "run",
        spec.to_str().unwrap(),
        "--input",
        pcap_out.to_str().unwrap(),
        "--param",
        "fanin=2",
        "--json",
    ]);
    assert_eq!(summary["flows"][0]["received"], 2);
    assert_eq!(
        outputs.iter().filter(|o| o["kind"] == "merged").count(),
        2,
        "different keys: both time out"
    );
}

#[test]
fn run_reports_quarantine_with_status_3() {
    let looping = scratch("loop.wasm");
    std::fs::write(
        &looping,
        wat(r#"(module (memory (export "memory") 2)
            (func (export "concast_abi_version") (result i32) (i32.const 1))
            (func (export "concast_init") (result i32) (i32.const 0))
            (func (export "concast_get_tag") (param i32) (result i64) (loop $l (br $l)) (i64.const 0))
            (func (export "concast_state_new") (param i32 i64))
            (func (export "concast_merge") (param i32 i32) (result i32) (i32.const 0))
            (func (export "concast_done") (param i32) (result i32) (i32.const 1))
            (func (export "concast_build") (param i32) (result i32) (i32.const 0)))"#),
    )
    .unwrap();
    let input = data("sum.jsonl");
    let out = concast_spec(&[
        "run",
        looping.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(3));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("QUARANTINED at 1000 us: concast_get_tag ran out of CPU time"),
        "{stdout}"
    );
    assert!(stdout.contains("fail-open 5"), "{stdout}");
}

/// `concast-spec check X | head -1`: a reader that closes the pipe early must not make the
/// tool panic. The read end is closed before the tool starts, so every write of it fails.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let sum = spec_path("sum");
    let input = data("sum.jsonl");
    for args in [
        vec!["check", sum.to_str().unwrap()],
        vec!["check", sum.to_str().unwrap(), "--json"],
        vec!["run", sum.to_str().unwrap(), "--input", input.to_str().unwrap()],
        vec!["help"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_concast-spec"))
            .args(&args)
            .stdout(writer)
            .output()
            .expect("runs");
        let err = text(&out.stderr);
        assert!(err.is_empty(), "{args:?} wrote to stderr: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}");
    }
}
