//! The fuzz targets' smoke run on the stable toolchain (part of `make test`, so CI runs it):
//! every target gets the seeds `tests/fuzz/seed.py` gives libFuzzer plus seeded mutations of
//! them (truncations, bit flips, boundary bytes, spliced and repeated runs), a few seconds in
//! all. Not coverage-guided: `make fuzz` is the real search; this keeps its findings fixed.

use std::path::{Path, PathBuf};

use concast_fuzz_checks::TARGETS;

/// Inputs per target beyond the seeds; `spec_module` compiles what validates, so fewer.
const MUTANTS: usize = 20_000;
const SPEC_MUTANTS: usize = 300;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn files(dir: &Path, ext: &str) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).expect("readable seed")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// The same seeds as tests/fuzz/seed.py.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(root().join("tests/vectors/vectors.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let datagrams: Vec<Vec<u8>> = json["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| unhex(v["hex"].as_str().unwrap()))
        .collect();
    let payloads = |proto: u8| -> Vec<Vec<u8>> {
        datagrams
            .iter()
            .filter(|d| d.len() >= 20 && d[9] == proto)
            .map(|d| d[usize::from(d[0] & 0x0F) * 4..].to_vec())
            .collect()
    };
    match target {
        "datagram" => datagrams,
        "csp_message" => payloads(253),
        "mplex_packet" => payloads(254),
        "spec_module" => files(&root().join("build/mergespecs"), "wasm"),
        "offline_input" => files(&root().join("mergespecs/examples"), "jsonl"),
        "hostd_request" => [
            r#"{"op":"status"}"#,
            r#"{"op":"join","receiver":"10.0.0.9","group":7}"#,
            r#"{"op":"send","receiver":"10.0.0.9","group":7,"hex":"00ff"}"#,
            r#"{"op":"mplex","action":"on","role":"sender","receiver":"10.0.0.9","max_local_delay_ms":1,"max_total_delay_ms":10}"#,
            r#"{"op":"install_spec","group":7,"spec_hex":"0061736d01000000"}"#,
        ]
        .iter()
        .map(|l| l.as_bytes().to_vec())
        .collect(),
        other => panic!("no seeds for {other}"),
    }
}

/// xorshift64*: deterministic, so a failure names an input that comes back every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut b = seeds[rng.below(seeds.len())].clone();
    const BOUNDARY: [u8; 7] = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0x94, 0x9E];
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() + 1);
        let last = b.len().saturating_sub(1);
        match rng.below(6) {
            0 => b.truncate(at),
            1 if !b.is_empty() => b[at.min(last)] ^= 1 << rng.below(8),
            2 if !b.is_empty() => b[at.min(last)] = BOUNDARY[rng.below(BOUNDARY.len())],
            3 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len() + 1);
                b.splice(at..at, other[from..].iter().copied().take(64));
            }
            4 if !b.is_empty() => {
                let run = b[at.min(last)..].iter().copied().take(16).collect::<Vec<_>>();
                b.splice(at..at, run);
            }
            _ => b.insert(at, rng.next() as u8),
        }
    }
    b
}

#[test]
fn every_fuzz_target_survives_its_seeds_and_their_mutations() {
    for (name, check) in TARGETS {
        let seeds = seeds(name);
        assert!(!seeds.is_empty() || name == "spec_module", "{name}: no seeds");
        if seeds.is_empty() {
            eprintln!("{name}: build/mergespecs has no .wasm (make specs): mutating nothing");
            continue;
        }
        for s in &seeds {
            check(s);
        }
        let mut rng = Rng(0x5EED ^ name.len() as u64);
        let n = if name == "spec_module" { SPEC_MUTANTS } else { MUTANTS };
        for _ in 0..n {
            check(&mutate(&mut rng, &seeds));
        }
        eprintln!("{name}: {} seeds, {n} mutants", seeds.len());
    }
}
