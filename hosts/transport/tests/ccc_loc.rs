//! `scripts/ccc_loc.py` (UDT/CCC Table 1's metric: semicolons in an algorithm's code) counts
//! every algorithm the registry has, and its rule holds on a file whose count is known.
use std::path::PathBuf;
use std::process::Command;

use concast_transport::cc;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ccc_loc.py")
}

fn run(args: &[&str]) -> (i32, String, String) {
    let o = Command::new("python3").arg(script()).args(args).output().expect("python3 runs");
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into(), String::from_utf8_lossy(&o.stderr).into())
}

#[test]
fn every_registered_algorithm_is_counted_and_nonzero() {
    let (rc, out, err) = run(&["--json"]);
    assert_eq!(rc, 0, "{err}");
    for name in cc::NAMES {
        let key = format!("\"algorithm\": \"{name}\"");
        let at = out.find(&key).unwrap_or_else(|| panic!("{name} missing from the LOC table: {out}"));
        let row = &out[at..at + out[at..].find('}').unwrap()];
        let semis: u32 = row.split("\"semicolons\": ").nth(1).and_then(|s| s.split(',').next()).and_then(|s| s.parse().ok()).unwrap();
        assert!(semis > 0, "{name}: {row}");
        assert!(row.contains("\"found\": true"), "{row}");
    }
}

#[test]
fn the_rule_skips_comments_strings_chars_and_tests() {
    let dir = std::env::temp_dir().join(format!("ccc-loc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("fixture.rs");
    // four real semicolons: a, b, x, r; the rest are in comments, literals or the tests
    std::fs::write(
        &f,
        "let a = \";\"; // ;\n/* ; /* ; */ */ let b = ';'; x;\nfn f<'a>(s: &'a str) -> &'a str { s }\nlet r = r#\"a;b\"#;\n#[cfg(test)]\nmod t { fn g() { y; } }\n",
    )
    .unwrap();
    let (rc, out, err) = run(&["--count", f.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("\"semicolons\": 4"), "{out}");
    let (rc, _, err) = run(&["--bogus"]);
    assert_eq!(rc, 2);
    assert!(err.contains("unknown arguments"), "{err}");
}
