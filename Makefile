# concast: one Makefile drives the Cargo workspace, the merge specs and the Python project.
# `make run` and `make test` install what they need first (scripts/setup.sh, idempotent).

SHELL    := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
PY       := .venv/bin/python
CARGO    := cargo
BUILD    := build
# p4c and BMv2 are in no registry: where someone built them into P4_PREFIX (see
# docs/dataplane-bmv2.md), its bin/ joins PATH; elsewhere the P4 build and tests skip.
P4_PREFIX ?= /opt/p4
ifneq ($(wildcard $(P4_PREFIX)/bin/p4c-bm2-ss),)
export PATH := $(P4_PREFIX)/bin:$(PATH)
P4C      := $(P4_PREFIX)/bin/p4c-bm2-ss
else
P4C      := $(shell command -v p4c-bm2-ss 2>/dev/null)
endif

.PHONY: all setup build rust specs p4 vectors test test-rust test-python run run-mplex bench fuzz clean help

all: build

help:
	@echo "make run     - install what is needed, build, run the paper's ACK study in small (~1 min)"
	@echo "make run-mplex - the dumbbell ACK multiplexing experiment (8 clients x 2 MB)"
	@echo "make test    - install what is needed, build, run every test"
	@echo "make bench   - speed benchmarks (figures and ratios to their peers)"
	@echo "make fuzz    - fuzz every parser of untrusted bytes (FUZZ_SECONDS each; nightly Rust + cargo-fuzz)"
	@echo "make build   - build the Rust workspace, the merge specs and (with p4c) the P4 program"
	@echo "make setup   - only install dependencies (Debian packages, Rust target, venv, OVS)"

setup:
	@bash scripts/setup.sh

build: setup rust specs p4

rust:
	$(CARGO) build --release --workspace --quiet

specs:
	@bash mergespecs/build.sh $(BUILD)/mergespecs

# The P4 program compiles only where p4c is installed (it is in no registry we reach).
p4:
ifneq ($(P4C),)
	@mkdir -p $(BUILD)/p4
	$(P4C) --arch v1model -o $(BUILD)/p4/concast.json \
	    --p4runtime-files $(BUILD)/p4/concast.p4info.txt p4src/concast.p4
else
	@echo "[p4] p4c-bm2-ss not on PATH: skipping the P4 build (BMv2 tests will skip)"
endif

vectors:
	$(PY) tests/vectors/generate.py

test: build test-rust test-python

test-rust:
	$(CARGO) test --release --workspace
	cd mergespecs/specs && $(CARGO) test --release --target $(shell rustc -vV | sed -n 's/^host: //p')

test-python:
	$(PY) tests/vectors/generate.py --check
	$(PY) -m pytest tests

# The main job: the paper's ACK study in small (docs/experiments.md): a 14-router
# transit-stub network with emulated 10 ms links, 24 web clients, MaxLocalDelay 0 and 10 ms,
# both environments, about a minute. The full study: `concast exp ack-study` (root).
# DATAPLANE=ovs runs its routers on Open vSwitch instead of Linux namespaces.
DATAPLANE ?= linux
run: build
	$(PY) -m concast.cli exp ack-study --quick --dataplane $(DATAPLANE)

# The dumbbell experiment (docs/multiplex.md): 8 clients x 2 MB, multiplexing on and off.
# MPLEX_DATAPLANE=bmv2 runs the routers on BMv2 (needs p4c and BMv2), =linux on namespaces.
MPLEX_DATAPLANE ?= ovs
run-mplex: build
	$(PY) -m concast.cli exp mplex --dataplane $(MPLEX_DATAPLANE)

# Speed figures with the ratio to their peer measured in the same run (docs/benchmarks.md).
# The network benchmarks need root; results/ gets their CSV.
bench: build
	$(CARGO) bench -p concast-engine
	@mkdir -p results
	$(PY) scripts/bench_routerd.py --csv results/bench_routerd.csv
	$(PY) scripts/bench_latency.py --csv results/bench_latency.csv
	$(PY) scripts/bench_forwarding.py
	$(PY) scripts/bench_linkemu.py --csv results/bench_linkemu.csv
	$(PY) -m concast.cli perf --suite bench --out results/perf-bench

# libFuzzer through cargo-fuzz, which needs nightly Rust: installed here on first use (not by
# setup, not in CI: building the spec_module target compiles wasmtime with coverage, ~7 min).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := datagram csp_message mplex_packet hostd_request offline_input spec_module
fuzz: specs
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	@python3 tests/fuzz/seed.py
	@set -o pipefail; for t in $(FUZZ_TARGETS); do \
	    echo "[fuzz] $$t for $(FUZZ_SECONDS) s"; \
	    $(CARGO) +nightly fuzz run -O --fuzz-dir tests/fuzz $$t tests/fuzz/corpus/$$t -- \
	        -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -print_final_stats=1 2>&1 \
	        | grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)|ERROR|panicked' \
	        || exit 1; \
	done

clean:
	rm -rf $(BUILD) target mergespecs/specs/target results
