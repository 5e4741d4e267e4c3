#!/usr/bin/env bash
# Builds every bundled merge spec into OUT/<name>.wasm (default build/mergespecs; a relative OUT
# is taken from the repo root, as the Makefile passes it).
#   Rust specs: each crate mergespecs/specs/<name>/ with crate-type cdylib, package
#               concast-spec-<name>, built for wasm32-unknown-unknown (see specs/.cargo/config.toml).
#   WAT specs:  mergespecs/specs/wat/<name>.wat, assembled with wat2wasm (Debian's wabt).
#   C specs:    mergespecs/specs/c/<name>.c, one file each, on the C SDK (mergespecs/sdk-c),
#               compiled with clang --target=wasm32 and linked by wasm-ld (Debian's clang and
#               lld); skipped with a message when either is missing.
# Rust and C specs build as ABI version 2 (batched, the SDKs' default); their version 1 builds
# (the SDK feature concast-sdk/abi-v1, -DCONCAST_ABI_V1) go to OUT/v1/<name>.wasm, for the
# engine's v1-against-v2 tests and benchmark.
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

mkdir -p "$OUT/v1"
(cd "$SPECS" && CARGO_TARGET_DIR=target/v1 cargo build --release --quiet --workspace \
    --features concast-sdk/abi-v1) || die "cargo build of the Rust specs as ABI v1 failed"
for name in "${built[@]}"; do
    cp "$SPECS/target/v1/wasm32-unknown-unknown/release/concast_spec_${name//-/_}.wasm" "$OUT/v1/$name.wasm"
done

shopt -s nullglob
for wat in "$SPECS"/wat/*.wat; do
    command -v wat2wasm >/dev/null || die "wat2wasm not found: apt-get install wabt (make setup does)"
    name="$(basename "$wat" .wat)"
    wat2wasm "$wat" -o "$OUT/$name.wasm" || die "wat2wasm failed on $wat"
    built+=("$name")
done
# The C build command of docs/mergespec-abi.md section 11: no libc (the SDK brings memcpy and
# memset), no entry point, the stack first so an overflow traps instead of overwriting data,
# and no --export-dynamic / --allow-undefined: the SDK's macros export exactly the ABI's names.
C_FLAGS=(--target=wasm32 -O2 -nostdlib -ffreestanding -Wall -Wextra -Werror -I "$HERE/sdk-c"
         -Wl,--no-entry -Wl,--stack-first -Wl,-z,stack-size=65536 -Wl,--strip-all)
c_specs=("$SPECS"/c/*.c)
if [ ${#c_specs[@]} -gt 0 ]; then
    if ! command -v clang >/dev/null || ! command -v wasm-ld >/dev/null; then
        say "skipping the C specs (${c_specs[*]##*/}): clang and wasm-ld are needed: apt-get install clang lld (make setup does)"
    else
        for c in "${c_specs[@]}"; do
            name="$(basename "$c" .c)"
            clang "${C_FLAGS[@]}" -o "$OUT/$name.wasm" "$c" || die "clang failed on $c"
            clang "${C_FLAGS[@]}" -DCONCAST_ABI_V1 -o "$OUT/v1/$name.wasm" "$c" \
                || die "clang -DCONCAST_ABI_V1 failed on $c"
            built+=("$name")
        done
    fi
fi
say "built ${#built[@]} specs into $OUT: ${built[*]}"
