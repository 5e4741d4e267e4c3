"""`concast demo`: the offline tour of concast, runnable with no network at all.

1. one packet of every concast type, decoded by the Scapy layers, with the spec's verdict;
2. a stream of concast datagrams merged by a bundled merge spec in the offline runner;
3. a pcap of every packet type, for Wireshark with scripts/wireshark/concast.lua.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scapy.layers.inet import IP

import concast.scapy as cs
import concast.vectors as V
from concast import pcapfile, tools


def step(n: int, text: str) -> None:
    print(f"\n[{n}/3] {text}", flush=True)


def packet_table(vectors: list[dict]) -> None:
    """One line per vector kind: what it is and what the layers decoded."""
    print(f"{'vector':34} {'kind':10} {'verdict':28} summary")
    for v in vectors:
        c = cs.classify(v["raw"])
        verdict = c.error or "valid"
        summary = IP(v["raw"]).summary() if not c.error else v["note"]
        print(f"{v['name']:34} {c.kind:10} {verdict:28} {summary[:60]}")


def merge_stream(out: Path) -> None:
    """Runs the `sum` spec over a generated stream in the offline runner (virtual time)."""
    from concast import offline
    try:
        spec = tools.spec_module("sum")
        runner = tools.rust_binary("concast-spec")
    except tools.MissingTool as e:
        print(f"skipped: {e}")
        return
    stream = out / "sum-input.jsonl"
    total = offline.write_sum_stream(stream, senders=8, rounds=5)
    print(f"8 senders x 5 rounds = 40 datagrams, values summing to {total}; fan-in 8")
    cmd = [str(runner), "run", str(spec), "--input", str(stream), "--param", "fanin=8"]
    print("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True)


def main(out_dir: str | None) -> int:
    """Writes into out_dir, or a new results/demo/<UTC time>-<rev>/; meta.json beside."""
    from concast import provenance
    meta = provenance.start({"out": out_dir}, seed="none: the vectors and the stream are fixed",
                            binaries=("concast-spec",), specs=("sum",))
    out = Path(out_dir) if out_dir else provenance.run_folder(tools.RESULTS / "demo")
    out.mkdir(parents=True, exist_ok=True)
    step(1, "one packet of every concast type (Scapy layers + the spec's checks)")
    vectors = V.load()
    sample = {}
    for v in vectors:  # the first vector of each kind and each error
        sample.setdefault((v["kind"], v["error"]), v)
    packet_table(list(sample.values()))

    step(2, "merging with the `sum` spec in the offline runner (virtual time)")
    merge_stream(out)

    step(3, "a pcap of every vector")
    pcap = out / "concast-vectors.pcap"
    pcapfile.write_ipv4(pcap, [v["raw"] for v in vectors])
    print(f"wrote {pcap} ({len(vectors)} packets, valid and malformed)")
    print("open it with: tshark -X lua_script:scripts/wireshark/concast.lua -r " + str(pcap))
    print(f"wrote {provenance.write(out, provenance.finish(meta))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(None))
