"""Running `concast exp transport`: the loss sweep per rate, the third-party test, the
command line."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from concast import ROOT, prereq, tools
from concast.argtypes import comma_list, hidden_alias

from .report import save, table, third_party_table
from .settings import KNOWN_PROTOCOLS, PROTOCOLS, TCP_CCS, Settings, say
from .testbed import Testbed



def object_name(size: int) -> str:
    return f"object-{size}.bin"
BIG = "big.bin"
#: the third-party test's object: big enough that neither side's per-object start (TCP's
#: handshake and slow start, MTP's size round trip) weighs in a run, so the shares measure the
#: two window rules sharing a queue
BIG_BYTES = 20_000_000


def cell(tb: Testbed, proto: str, size: int, s: Settings) -> dict:
    """One protocol moving `count` objects of `size` bytes at the current loss."""
    want, name = s.count * size, object_name(size)
    row = {"proto": proto, "size": size, "wanted_bytes": want}
    if proto == "mtp":
        r = tb.mtp_get(name, s.count, s.limit_s, s.mtp_cc)
    elif proto.startswith("tcp-"):
        r = tb.tcp_get(name, s.count, s.limit_s, proto.removeprefix("tcp-"))
    else:
        r = tb.bulk_send(want, s.limit_s)
        if r is not None:
            sent, got = r["sent"], r["received"]
            r = {"bytes": got["bytes"], "secs": sent["secs"], "complete": got["bytes"] == want,
                 "hash_ok": got.get("sha256") == sent.get("sha256"), "repairs": sent["stats"]["retransmits"]}
    if r is None:
        return {**row, "bytes": 0, "secs": s.limit_s, "complete": False, "hash_ok": False, "repairs": None,
                "kbytes_per_s": 0.0}
    if proto != "bulk":
        r["hash_ok"] = r["objects"] == 0 or (r["sha256"] == tb.sha256[name] and r["all_same"])
        r["repairs"] = r.get("stats", {}).get("repeats")
    # goodput counts every byte delivered in order: whole objects, and an object the limit
    # interrupted up to its first gap (MTP, TCP), as the third-party test does
    got = r["bytes"] + r.get("partial_bytes", 0)
    return {**row, "bytes": r["bytes"], "partial_bytes": r.get("partial_bytes", 0), "secs": r["secs"],
            "complete": bool(r["complete"]), "hash_ok": bool(r["hash_ok"]), "repairs": r["repairs"],
            "kbytes_per_s": got / 1e3 / max(r["secs"], 1e-9)}


def sweep(tb: Testbed, rate: float, s: Settings) -> list[dict]:
    rows = []
    for size in s.sizes:
        for loss in s.losses:
            tb.set_loss(loss)
            for proto in s.protocols:
                d0 = tb.dropped()
                r = {"rate_mbit": rate, "loss_pct": loss, **cell(tb, proto, size, s)}
                r["dropped"] = tb.dropped() - d0
                rows.append(r)
                say(f"{rate:g} Mbit/s {size / 1e3:g} kB {loss:g}% {proto:9s} {r['kbytes_per_s']:9.1f} KB/s "
                    f"{'complete' if r['complete'] else 'INCOMPLETE'} hash {'ok' if r['hash_ok'] else 'BAD'}")
    tb.set_loss(0)
    return rows


def third_party(tb: Testbed, rate: float, s: Settings) -> dict:
    """MTP and kernel TCP alone, then sharing the link for the same time: what each gets."""
    tb.set_loss(s.third_party_loss)
    secs, n = s.third_party_s, 1_000_000

    def both(run_mtp: bool, run_tcp: bool) -> tuple[float | None, float | None]:
        import threading
        out: dict[str, dict | None] = {}
        ts = []
        if run_mtp:
            ts.append(threading.Thread(target=lambda: out.__setitem__("mtp", tb.mtp_get(BIG, n, secs, s.mtp_cc))))
        if run_tcp:
            ts.append(threading.Thread(target=lambda: out.__setitem__(
                "tcp", tb.tcp_get(BIG, n, secs, s.third_party_cc))))
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        # every byte that arrived counts, the interrupted object's contiguous prefix too
        rate_of = lambda r: None if r is None else (r["bytes"] + r["partial_bytes"]) / 1e3 / max(r["secs"], 1e-9)
        return rate_of(out.get("mtp")), rate_of(out.get("tcp"))

    mtp_alone, _ = both(True, False)
    _, tcp_alone = both(False, True)
    mtp_shared, tcp_shared = both(True, True)
    tb.set_loss(0)
    r = {"rate_mbit": rate, "loss_pct": s.third_party_loss, "tcp_cc": s.third_party_cc, "mtp_cc": s.mtp_cc, "secs": secs, "mtp_alone": mtp_alone,
         "tcp_alone": tcp_alone, "mtp_shared": mtp_shared, "tcp_shared": tcp_shared}
    if mtp_shared and tcp_shared:
        x = (mtp_shared, tcp_shared)
        r["tcp_share"] = tcp_shared / (mtp_shared + tcp_shared)
        r["jain"] = sum(x) ** 2 / (2 * sum(v * v for v in x))
    say(f"third party at {rate:g} Mbit/s: MTP {mtp_alone} alone, {mtp_shared} shared; "
        f"TCP {tcp_alone} alone, {tcp_shared} shared (KB/s)")
    return r


def run(s: Settings, work: Path) -> dict:
    rows, tp = [], []
    for rate in s.rates:
        tb = Testbed(rate, s.queue_ms, work / f"{rate:g}mbit", s.seed, s.delay_ms)
        try:
            tb.start({**{object_name(z): z for z in s.sizes}, BIG: BIG_BYTES})
            rows += sweep(tb, rate, s)
            if s.third_party_s > 0:
                tp.append(third_party(tb, rate, s))
        finally:
            tb.stop()
    return {"settings": s.__dict__, "rows": rows, "third_party": tp}


def metadata(params: dict | None = None, command: list[str] | None = None) -> dict:
    """What makes the run repeatable: the one provenance record (concast.provenance: git
    revision, tool versions, machine, parameters) and the kernel's default TCP congestion
    control (what an unnamed TCP would have used)."""
    from concast import provenance
    cc = Path("/proc/sys/net/ipv4/tcp_congestion_control")
    seed = (params or {}).get("seed")
    return {**provenance.start(params, seed=f"{seed} (the objects' bytes); loss is nftables "
                                            f"numgen random (kernel PRNG), not seeded",
                               command=command),
            "default_tcp_cc": cc.read_text().strip() if cc.exists() else None}


def unavailable_ccs(protos: tuple[str, ...], third_party_cc: str) -> list[str]:
    """Congestion controls the study would ask the kernel for that it refuses."""
    import socket
    wanted = {p.removeprefix("tcp-") for p in protos if p.startswith("tcp-")} | {third_party_cc}
    bad = []
    for cc in sorted(wanted):
        with socket.socket() as sk:
            try:
                sk.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
            except OSError:
                bad.append(cc)
    return bad


def missing_prerequisites() -> str | None:
    from concast.topologies.links import BINARY
    return prereq.first(
        prereq.root("Mininet, network namespaces"), prereq.commands("nft", "tc"),
        prereq.built("mtping", "concast-perf"),
        None if BINARY.exists() else f"{BINARY} (the delay's link emulator) is not built: "
                                     f"run `make build`")


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="concast exp transport", description=__doc__)
    ap.add_argument("--rates", type=comma_list(float, what="rates"), default=[10.0], help="Mbit/s, comma separated (default 10)")
    ap.add_argument("--losses", type=comma_list(float, what="loss percentages"), default=[0, 1, 3, 5, 10], help="percent, comma separated (default 0,1,3,5,10)")
    ap.add_argument("--protocols", default=",".join(PROTOCOLS),
                    help=f"comma separated, from {','.join(KNOWN_PROTOCOLS)} (default "
                         f"{','.join(PROTOCOLS)})")
    ap.add_argument("--sizes", type=lambda t: [int(float(x)) for x in t.split(",") if x.strip()],
                    default=[256_000, 4_000_000], help="bytes per object, comma separated (one sweep each; default 256000,4000000)")
    ap.add_argument("--count", type=int, default=8, help="objects per cell (default %(default)s)")
    hidden_alias(ap, "--limit", ap.add_argument(
        "--timeout", type=float, default=60.0, metavar="S",
        help="seconds to wait for one cell at most (default 60)"))
    ap.add_argument("--delay", type=float, default=50.0, help="one-way delay, ms (0: none; default %(default)s)")
    ap.add_argument("--queue", type=float, default=20.0, help="bottleneck queue, ms of its rate (default %(default)s)")
    ap.add_argument("--third-party", type=float, default=20.0, help="seconds (0: skip; default %(default)s)")
    ap.add_argument("--third-party-loss", type=float, default=0.0,
                    help="random loss during the third-party test, percent (default 0)")
    ap.add_argument("--third-party-cc", default="cubic", choices=TCP_CCS,
                    help="the competing TCP's congestion control (default %(default)s)")
    ap.add_argument("--mtp-cc", default="mtp",
                    help="MTP's window algorithm (mtping get --cc): mtp, mtp-halve, or a crate algorithm (default %(default)s)")
    ap.add_argument("--out", type=Path, metavar="DIR",
                    help="results folder (default a new folder results/transport/<UTC time>-<rev>/)")
    a = ap.parse_args(argv)
    protos = tuple(p for p in a.protocols.split(",") if p)
    bad = [p for p in protos if p not in KNOWN_PROTOCOLS]
    if (bad or any(not 0 <= x < 100 for x in a.losses) or any(r <= 0 for r in a.rates) or a.delay < 0
            or not a.sizes or any(z <= 0 for z in a.sizes)):
        ap.error(f"protocols from {KNOWN_PROTOCOLS}, losses in [0, 100), rates > 0, sizes > 0 "
                 f"(got {a.protocols}, {a.losses}, {a.rates}, {a.sizes})")
    why = missing_prerequisites()
    if why:
        return prereq.report("concast exp transport", why)
    missing = unavailable_ccs(protos, a.third_party_cc)
    if missing:
        return prereq.report("concast exp transport", f"this kernel refuses TCP congestion "
                             f"control {', '.join(missing)}: load its module (modprobe "
                             f"tcp_{missing[0]}; see /proc/sys/net/ipv4/"
                             f"tcp_available_congestion_control)")
    s = Settings(rates=a.rates, losses=a.losses, protocols=protos, sizes=a.sizes, count=a.count,
                 limit_s=a.timeout, third_party_s=a.third_party, third_party_loss=a.third_party_loss,
                 delay_ms=a.delay, queue_ms=a.queue, third_party_cc=a.third_party_cc,
                 mtp_cc=a.mtp_cc)
    from concast import provenance
    a.out = a.out or provenance.run_folder(tools.RESULTS / "transport")
    a.out.mkdir(parents=True, exist_ok=True)
    # a run in the background ignores SIGINT and dies on SIGTERM without `finally`: both
    # now unwind through Testbed.stop(), so an interrupted run leaves nothing behind
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _interrupt)
    t0 = time.monotonic()
    command = ["concast", "exp", "transport", *(argv if argv is not None else sys.argv[1:])]
    meta = metadata(dict(s.__dict__), command)
    try:
        res = run(s, a.out / "work")
    except KeyboardInterrupt:
        say("interrupted: network stopped, nothing saved")
        return 130
    res["meta"] = {**provenance.finish(meta), "loadavg_at_end": os.getloadavg()}
    provenance.write(a.out, res["meta"])
    print(table(res["rows"]))
    if res["third_party"]:
        print(third_party_table(res["third_party"]))
    paths = [*save(res, a.out), a.out / "meta.json"]
    say(f"done in {time.monotonic() - t0:.0f} s: {', '.join(str(p) for p in paths)}")
    return 0
