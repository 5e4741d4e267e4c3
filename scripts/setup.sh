#!/usr/bin/env bash
# Installs everything concast needs on Debian 12 (run as root), idempotently:
# Debian packages, the Rust toolchain (rustup, if cargo is missing) and its wasm32 target,
# the Python venv, and the Open vSwitch daemons.
# When everything is already there it only checks, in about a second.
# CONCAST_SETUP_DRY_RUN=1 prints the Rust install commands instead of running them.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

APT_PACKAGES=(
    mininet openvswitch-switch iproute2 ethtool iputils-ping tcpdump tshark iperf3 iptables nftables
    python3-venv python3-pip clang lld wabt build-essential pkg-config curl ca-certificates
    openssh-server openssh-client sudo
)

# The toolchain the project is built and tested with, installed when there is none: the
# channel of a rust-toolchain.toml at the root if there is one, else this release.
RUST_PINNED=1.95.0

install_debian_packages() {
    local missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        [ "$(id -u)" = 0 ] || die "need root to install: ${missing[*]}"
        say "installing Debian packages: ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

rust_toolchain() {
    local file="$ROOT/rust-toolchain.toml" channel=""
    if [ -f "$file" ]; then
        channel="$(sed -n 's/^[[:space:]]*channel[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$file" | head -n1)"
    fi
    echo "${channel:-$RUST_PINNED}"
}

# Runs "$@", or only prints it under CONCAST_SETUP_DRY_RUN=1.
run() {
    if [ "${CONCAST_SETUP_DRY_RUN:-0}" = 1 ]; then echo "would run: $*"; else "$@"; fi
}

install_rust() {
    export PATH="$HOME/.cargo/bin:$PATH"
    if ! command -v cargo >/dev/null || ! command -v rustup >/dev/null; then
        local tc; tc="$(rust_toolchain)"
        say "no rustup/cargo on PATH: installing Rust $tc with rustup-init (into $HOME/.cargo)"
        # rustup's official installer; --profile minimal: rustc, cargo and the std library only.
        run sh -c "curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain $tc --no-modify-path"
        [ "${CONCAST_SETUP_DRY_RUN:-0}" = 1 ] || command -v cargo >/dev/null \
            || die "rustup-init did not install cargo into $HOME/.cargo/bin"
    fi
    if [ "${CONCAST_SETUP_DRY_RUN:-0}" = 1 ] && ! command -v rustup >/dev/null; then
        echo "would run: rustup target add wasm32-unknown-unknown"
    elif ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
        say "adding Rust target wasm32-unknown-unknown"
        run rustup target add wasm32-unknown-unknown
    fi
}

install_python_venv() {
    # Debian's python3 so that its Mininet package is importable from the venv.
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating $VENV"
        /usr/bin/python3 -m venv --system-site-packages "$VENV"
    fi
    local stamp="$VENV/.concast-installed"
    # setup.py maps the folders to import names: a change there needs a new install too
    if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ] || [ "$ROOT/setup.py" -nt "$stamp" ]; then
        say "installing the concast Python package and its dependencies"
        "$VENV/bin/pip" install -q --disable-pip-version-check -e "$ROOT"
        touch "$stamp"
    fi
}

# Runs a command with no file descriptor above 2 inherited: the daemons ovs-ctl starts live on
# after this script, and a descriptor they keep (say, the flock that wraps `make test`) would
# stay held until they stop.
without_inherited_fds() {
    (
        for fd in /proc/$BASHPID/fd/*; do
            fd=${fd##*/}
            if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
        done
        exec "$@"
    )
}

start_openvswitch() {
    if ovs-vsctl --timeout=5 show >/dev/null 2>&1 && pgrep -x ovs-vswitchd >/dev/null; then
        return
    fi
    say "starting Open vSwitch (userspace datapath; there is no OVS kernel module here)"
    local ctl=/usr/share/openvswitch/scripts/ovs-ctl
    without_inherited_fds "$ctl" start --system-id=random --no-ovs-vswitchd --no-mlockall >/dev/null
    # TCP through userspace OVS needs TSO support set before ovs-vswitchd starts.
    ovs-vsctl --no-wait set Open_vSwitch . other_config:userspace-tso-enable=true
    without_inherited_fds "$ctl" start --system-id=random --no-ovsdb-server --no-mlockall >/dev/null
    ovs-vsctl --timeout=10 show >/dev/null || die "Open vSwitch did not start; see /var/log/openvswitch/"
}

main() {
    install_debian_packages
    install_rust
    install_python_venv
    start_openvswitch
    say "ready"
}

# Sourced (tests), only the functions are defined.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    main "$@"
fi
