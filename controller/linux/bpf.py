"""Diversion matches as classic BPF programs for tc's `bpf` classifier.

This kernel has no `flower`, and `u32` reads transport ports at a fixed offset (wrong for
concast datagrams, whose Concast ID option lengthens the IPv4 header). A classic BPF
program can find the port past the options (`ldxb 4*([14]&0xf)`). At tc ingress cls_bpf
runs the program on the frame from its Ethernet header.

One match = (destination or any, protocol or any, destination port or any). routerd
builds the same text (controller/routerd/src/dataplane.rs, `divert_program`); both are
tested against the same vector, which is what `tcpdump -ddd 'ip dst 10.1.1.2 and udp dst
port 5000'` prints, with "match" returned as 0xffffffff (the filter's own class).
"""
from __future__ import annotations

from ipaddress import IPv4Address

# Opcodes (linux/filter.h): loads, jumps, return.
LDH_ABS, LD_ABS, LDB_ABS, LDXB_MSH, LDH_IND = 0x28, 0x20, 0x30, 0xB1, 0x48
JEQ_K, JSET_K, RET_K = 0x15, 0x45, 0x06
MATCH = 0xFFFFFFFF
ETH = 14


def divert_program(dst: IPv4Address | str | None = None, proto: int = 0, dport: int = 0) -> str:
    """tc's `bytecode` text: "N,op jt jf k,...". proto 0 = any; dport only with TCP/UDP."""
    if not 0 <= proto <= 255 or not 0 <= dport <= 65535:
        raise ValueError(f"protocol {proto} / port {dport} out of range")
    if proto not in (6, 17):
        dport = 0
    # (op, jt, jf, k); a jump to "FAIL" is patched to the last instruction below.
    prog: list[tuple[int, int, object, int]] = [(LDH_ABS, 0, 0, 12), (JEQ_K, 0, "FAIL", 0x0800)]
    if dst is not None:
        prog += [(LD_ABS, 0, 0, ETH + 16), (JEQ_K, 0, "FAIL", int(IPv4Address(dst)))]
    if proto:
        prog += [(LDB_ABS, 0, 0, ETH + 9), (JEQ_K, 0, "FAIL", proto)]
    if dport:
        # Not a later fragment (no port in it), then the port past the options.
        prog += [(LDH_ABS, 0, 0, ETH + 6), (JSET_K, "FAIL", 0, 0x1FFF),
                 (LDXB_MSH, 0, 0, ETH), (LDH_IND, 0, 0, ETH + 2), (JEQ_K, 0, "FAIL", dport)]
    prog += [(RET_K, 0, 0, MATCH)]
    fail = len(prog)                       # index of the final `ret #0`

    def target(i: int, j) -> int:
        return fail - i - 1 if j == "FAIL" else j
    words = [f"{op} {target(i, jt)} {target(i, jf)} {k}" for i, (op, jt, jf, k) in enumerate(prog)]
    words.append(f"{RET_K} 0 0 0")
    return ",".join([str(len(words)), *words])
