"""Seed corpora for the fuzz targets from what the project already has: the protocol vectors
(tests/vectors/vectors.json), the bundled merge specs (build/mergespecs), the offline runner's
examples and a few hostd API lines. Writes tests/fuzz/corpus/<target>/, one file per input.
Run by `make fuzz`; safe to run again (files are named by content)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def put(target: str, data: bytes) -> None:
    d = HERE / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def ip_payload(b: bytes) -> bytes:
    ihl = (b[0] & 0x0F) * 4 if b else 0
    return b[ihl:]


def main() -> None:
    vectors = json.loads((ROOT / "tests/vectors/vectors.json").read_text())["vectors"]
    for v in vectors:
        b = bytes.fromhex(v["hex"])
        put("datagram", b)
        if len(b) >= 20 and b[9] == 253:
            put("csp_message", ip_payload(b))
        if len(b) >= 20 and b[9] == 254:
            put("mplex_packet", ip_payload(b))
    for wasm in sorted((ROOT / "build/mergespecs").glob("*.wasm")):
        put("spec_module", wasm.read_bytes())
    for ex in sorted((ROOT / "mergespecs/examples").glob("*.jsonl")):
        put("offline_input", ex.read_bytes())
    for line in ('{"op":"status"}', '{"op":"join","receiver":"10.0.0.9","group":7}',
                 '{"op":"send","receiver":"10.0.0.9","group":7,"hex":"00ff"}',
                 '{"op":"mplex","action":"on","role":"sender","receiver":"10.0.0.9",'
                 '"max_local_delay_ms":1,"max_total_delay_ms":10}',
                 '{"op":"install_spec","group":7,"spec_hex":"0061736d01000000"}'):
        put("hostd_request", line.encode())
    counts = {d.name: len(list(d.iterdir())) for d in sorted((HERE / "corpus").iterdir())}
    print("[fuzz] seed corpora:", ", ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
