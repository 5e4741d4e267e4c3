"""The CPU port between a router's data plane and routerd: a veth pair, the data plane's end
and routerd's end, each with its own MAC (docs/architecture.md, "Processes")."""
from __future__ import annotations

# The largest MTU: a bundle built for a jumbo path must pass the CPU port whole.
MTU = 65535


def veth_cmds(switch_end: str, switch_mac: str, routerd_end: str, routerd_mac: str) -> list[str]:
    """`ip -batch` lines (run in the router's namespace) that make the pair and bring it up."""
    return [f"link add {switch_end} address {switch_mac} mtu {MTU} type veth"
            f" peer name {routerd_end} address {routerd_mac} mtu {MTU}",
            f"link set dev {switch_end} up",
            f"link set dev {routerd_end} up"]
