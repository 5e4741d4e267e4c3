//! docs/mergespec-abi.md section 11 does what it says: its WAT example is a valid spec that
//! emits a real UDP datagram, and its C build command, run as written, builds the module
//! `make specs` builds.

mod common;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;

use common::*;
use concast_engine::Outputs;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The body of the first fenced block of `lang` in section 11 of the ABI doc.
fn section_11_block(lang: &str) -> String {
    let doc = std::fs::read_to_string(repo().join("docs/mergespec-abi.md")).unwrap();
    let section = &doc[doc.find("## 11.").expect("section 11")..];
    let fence = format!("```{lang}\n");
    let start = section
        .find(&fence)
        .unwrap_or_else(|| panic!("a ```{lang} block in section 11"))
        + fence.len();
    let len = section[start..].find("```").unwrap();
    section[start..start + len].to_string()
}

#[test]
fn the_wat_example_emits_a_valid_udp_datagram() {
    let module = wat(&section_11_block("wat"));
    let mut engine = engine();
    let flow = add(&mut engine, &module, 7, "");
    let udp = |sport: u16, body: &[u8]| {
        let mut p = Vec::new();
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&5000u16.to_be_bytes());
        p.extend_from_slice(&(8 + body.len() as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(body);
        datagram(Ipv4Addr::new(10, 0, 1, 1), 7, 64, &p)
    };
    let mut tcp = udp(4000, b"not udp");
    tcp[9] = 6;
    let mut out = Outputs::new();
    engine
        .ingest(
            flow,
            &[udp(4000, b"one"), tcp, udp(4000, b"two")],
            10,
            &mut out,
        )
        .unwrap();
    let kinds: Vec<&str> = out.iter().map(|o| o.kind.name()).collect();
    assert_eq!(kinds, ["passed", "merged"], "TCP passes, two UDP make one");
    let merged = &merged(&out)[0];
    let header_len = usize::from(merged[0] & 0x0F) * 4;
    let payload = &merged[header_len..];
    assert_eq!(merged[9], 17, "protocol UDP");
    assert_eq!(payload.len(), 12);
    assert_eq!(
        &payload[..4],
        &[0x0F, 0xA0, 0x13, 0x88],
        "the merged datagrams' ports"
    );
    assert_eq!(
        usize::from(u16::from_be_bytes([payload[4], payload[5]])),
        payload.len(),
        "UDP length"
    );
    assert_eq!(&payload[8..], &2u32.to_be_bytes(), "the count");
}

#[test]
fn the_c_build_command_builds_what_make_specs_builds() {
    let built = repo().join("build/mergespecs/sum-c.wasm");
    if Command::new("clang").arg("--version").output().is_err() || !built.exists() {
        eprintln!("skipped: clang or build/mergespecs/sum-c.wasm missing (apt-get install clang lld; make specs)");
        return;
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("abi-doc-{}.wasm", std::process::id()));
    // The block's first command (continuation lines joined), for its placeholder file names.
    let block = section_11_block("sh").replace("\\\n", " ");
    let command = block.lines().next().unwrap();
    let words: Vec<String> = command
        .split_whitespace()
        .map(|w| match w {
            "my-spec.c" => "mergespecs/specs/c/sum-c.c".to_string(),
            "my-spec.wasm" => out.to_str().unwrap().to_string(),
            w => w.to_string(),
        })
        .collect();
    assert_eq!(words[0], "clang", "{command}");
    let status = Command::new(&words[0])
        .args(&words[1..])
        .current_dir(repo())
        .status()
        .unwrap();
    assert!(status.success(), "{command}");
    let doc_built = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    assert!(
        doc_built == std::fs::read(&built).unwrap(),
        "the documented command and build.sh differ"
    );
    engine()
        .load_spec(&doc_built)
        .expect("the documented build passes the ABI checks");
}

/// mergespecs/README.md's C example, compiled with the flags of section 11, is a working spec:
/// it merges `fanin` UDP datagrams into one UDP datagram carrying their count.
#[test]
fn the_readme_c_example_builds_and_merges() {
    if Command::new("clang").arg("--version").output().is_err() {
        eprintln!("skipped: clang is not installed (apt-get install clang lld)");
        return;
    }
    let readme = std::fs::read_to_string(repo().join("mergespecs/README.md")).unwrap();
    let start = readme.find("```c\n").expect("a ```c block") + 5;
    let source = &readme[start..start + readme[start..].find("```").unwrap()];
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("readme-c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("example.c"), source).unwrap();
    let sdk = repo().join("mergespecs/sdk-c");
    let status = Command::new("clang")
        .args([
            "--target=wasm32",
            "-O2",
            "-nostdlib",
            "-ffreestanding",
            "-Wall",
            "-Wextra",
            "-Werror",
        ])
        .arg("-I")
        .arg(&sdk)
        .args([
            "-Wl,--no-entry",
            "-Wl,--stack-first",
            "-Wl,-z,stack-size=65536",
            "-Wl,--strip-all",
        ])
        .args(["-o", "example.wasm", "example.c"])
        .current_dir(&dir)
        .status()
        .unwrap();
    assert!(status.success());
    let module = std::fs::read(dir.join("example.wasm")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let mut engine = engine();
    let flow = add(&mut engine, &module, 7, "fanin=3");
    let batch: Vec<Vec<u8>> = (1..=3).map(|i| contribution(i, 7, 1, 5)).collect();
    let mut out = Outputs::new();
    engine.ingest(flow, &batch, 10, &mut out).unwrap();
    let merged = merged(&out);
    assert_eq!(merged.len(), 1);
    let payload = &merged[0][usize::from(merged[0][0] & 0x0F) * 4..];
    assert_eq!(
        payload,
        [0x0F, 0xA0, 0x13, 0x88, 0, 12, 0, 0, 0, 0, 0, 3],
        "ports, length 12, count 3"
    );
    let mut engine = self::engine();
    let spec = engine.load_spec(&module).unwrap();
    let mut cfg = concast_engine::FlowConfig::new(key(8), spec);
    cfg.params = b"fanin=many".to_vec();
    assert!(
        engine.add_flow(cfg, 0).is_err(),
        "a bad fanin refuses the flow"
    );
}
