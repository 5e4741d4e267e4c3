"""tc command lines for one router namespace's diversion, and parsing tc's JSON.

Every port of a router shares one ingress filter block (BLOCK; blocks are per namespace),
so a rule is installed once per router, not once per port. Rules by preference:

    pref 10  own addresses    handle k = k-th own address     (static)
    pref 20  CSP (proto 253)  handle 1                        (static)
    pref 30  flow selectors   handle chosen by whoever adds   (routerd from 1, people
                                                               from SELECTOR_HANDLE_PEOPLE)

each `bpf bytecode <divert_program> action mirred egress redirect dev <CPU port>`.
The CPU port's own ingress has no block, so frames routerd writes into it are forwarded
by the kernel and never diverted again.
"""
from __future__ import annotations

from ipaddress import IPv4Address

from concast.controller.linux.bpf import LD_ABS, LDB_ABS, LDH_IND, JEQ_K, divert_program

BLOCK = 1
PREF_OWN, PREF_CSP, PREF_SELECTOR = 10, 20, 30
SELECTOR_HANDLE_PEOPLE = 0x10000   # below: routerd's handles
CSP_PROTO = 253


def qdisc_cmd(port: str) -> str:
    return f"qdisc add dev {port} ingress_block {BLOCK} clsact"


def filter_cmd(pref: int, handle: int, program: str, cpu_dev: str) -> str:
    """One `tc -batch` line adding a diversion rule."""
    return (f"filter add block {BLOCK} pref {pref} handle {handle} protocol ip bpf"
            f" bytecode \"{program}\" action mirred egress redirect dev {cpu_dev}")


def delete_argv(pref: int, handle: int | None = None) -> list[str]:
    """Delete one rule, or every rule of a preference (handle None)."""
    h = ["handle", str(handle)] if handle is not None else []
    return ["filter", "del", "block", str(BLOCK), "pref", str(pref), *h, "protocol", "ip", "bpf"]


def static_cmds(own: list[IPv4Address], cpu_dev: str) -> list[str]:
    """The rules every capable router has: its own addresses, then CSP."""
    cmds = [filter_cmd(PREF_OWN, k, divert_program(a), cpu_dev)
            for k, a in enumerate(own, start=1)]
    cmds.append(filter_cmd(PREF_CSP, 1, divert_program(None, CSP_PROTO), cpu_dev))
    return cmds


def match_of(insns: list[dict]) -> tuple[str | None, int, int]:
    """(destination, protocol, port) a divert_program matches, read back from tc's dump."""
    dst, proto, dport = None, 0, 0
    for load, test in zip(insns, insns[1:]):
        if test["code"] != JEQ_K:
            continue
        if load["code"] == LD_ABS and load["k"] == 30:
            dst = str(IPv4Address(test["k"]))
        elif load["code"] == LDB_ABS and load["k"] == 23:
            proto = test["k"]
        elif load["code"] == LDH_IND and load["k"] == 16:
            dport = test["k"]
    return dst, proto, dport


def parse_filters(dump: list[dict]) -> list[dict]:
    """`tc -s -j filter show block N` -> [{pref, handle, dst, proto, dport, n_packets,
    n_bytes, to}] for our bpf rules (the per-preference header entries are skipped)."""
    out = []
    for f in dump:
        opts = f.get("options")
        if f.get("kind") != "bpf" or not opts or "bytecode" not in opts:
            continue
        dst, proto, dport = match_of(opts["bytecode"]["insns"])
        acts = opts.get("actions") or [{}]
        stats = acts[0].get("stats", {})
        out.append({"pref": f["pref"], "handle": int(opts["handle"], 16), "dst": dst,
                    "proto": proto, "dport": dport, "n_packets": stats.get("packets", 0),
                    "n_bytes": stats.get("bytes", 0), "to": acts[0].get("to_dev")})
    return out


def parse_links(dump: list[dict]) -> dict[str, dict]:
    """`ip -s -j link show` -> {ifname: {rx_pkts, rx_bytes, rx_drop, tx_pkts, tx_bytes,
    tx_drop}} (the names OvsRouter.ports() uses)."""
    out = {}
    for link in dump:
        s = link.get("stats64", {})
        rx, tx = s.get("rx", {}), s.get("tx", {})
        out[link["ifname"]] = {"rx_pkts": rx.get("packets", 0), "rx_bytes": rx.get("bytes", 0),
                               "rx_drop": rx.get("dropped", 0), "tx_pkts": tx.get("packets", 0),
                               "tx_bytes": tx.get("bytes", 0), "tx_drop": tx.get("dropped", 0)}
    return out
