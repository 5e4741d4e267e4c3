#!/usr/bin/env bash
# Builds every bundled merge spec into OUT/<name>.wasm (default build/mergespecs; a relative OUT
# is taken from the repo root, as the Makefile passes it).
#   Rust specs: each crate mergespecs/specs/<name>/ with crate-type cdylib, package
#               concast-spec-<name>, built for wasm32-unknown-unknown (see specs/.cargo/config.toml).
#   WAT specs:  mergespecs/specs/wat/<name>.wat, assembled with wat2wasm (Debian's wabt).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
OUT="${1:-$ROOT/build/mergespecs}"
case "$OUT" in /*) ;; *) OUT="$ROOT/$OUT" ;; esac
SPECS="$HERE/specs"
say() { printf '[specs] %s\n' "$*"; }
die() { printf '[specs] error: %s\n' "$*" >&2; exit 1; }

export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null || die "cargo not found (run make setup)"
mkdir -p "$OUT"

# Cargo reads specs/.cargo/config.toml only when run from inside specs/.
(cd "$SPECS" && cargo build --release --quiet) || die "cargo build of the Rust specs failed"
WASM_DIR="$SPECS/target/wasm32-unknown-unknown/release"
built=()
for manifest in "$SPECS"/*/Cargo.toml; do
    dir="$(dirname "$manifest")"
    name="$(basename "$dir")"
    grep -q 'cdylib' "$manifest" || continue          # shared libraries such as aggregate/
    artifact="$WASM_DIR/concast_spec_${name//-/_}.wasm"
    [ -f "$artifact" ] || die "$artifact missing: is the package named concast-spec-$name?"
    cp "$artifact" "$OUT/$name.wasm"
    built+=("$name")
done

shopt -s nullglob
for wat in "$SPECS"/wat/*.wat; do
    command -v wat2wasm >/dev/null || die "wat2wasm not found: apt-get install wabt (make setup does)"
    name="$(basename "$wat" .wat)"
    wat2wasm "$wat" -o "$OUT/$name.wasm" || die "wat2wasm failed on $wat"
    built+=("$name")
done
say "built ${#built[@]} specs into $OUT: ${built[*]}"
