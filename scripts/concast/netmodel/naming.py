"""Names of everything a running concast network creates outside its host namespaces.

Every bridge, root-namespace interface and named namespace starts with `cc` plus a
two-character run tag, so cleanup can find exactly one network's leftovers and
networks started by different processes at the same time never collide.
Linux interface names hold at most 15 characters; the limits below keep every
derived name inside that.
"""
from __future__ import annotations

import re

PREFIX = "cc"
TAG_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
MAX_ROUTER_NAME = 6      # "cc" + tag(2) + name(6) + "-cpu" = 14
MAX_HOST_NAME = 10       # "<host>-eth0" inside the host's namespace
IFNAMSIZ = 15
CPU_OFPORT = 1000        # OpenFlow port number of every router's CPU port

_NAME = re.compile(r"^[a-z][a-z0-9]*$")
# Our root-namespace names: node (the bridge on OVS), node-<ofport>, node-cpu, node-rd.
OUR_IFACE = re.compile(rf"^{PREFIX}([0-9a-z]{{2}})[a-z][a-z0-9]*(-(\d+|cpu|rd))?$")


def check_node_name(name: str, kind: str) -> None:
    limit = MAX_ROUTER_NAME if kind == "router" else MAX_HOST_NAME
    if not _NAME.match(name) or len(name) > limit:
        raise ValueError(f"{kind} name {name!r}: lower-case letters and digits, starting "
                         f"with a letter, at most {limit} characters")


def run_prefix(tag: str) -> str:
    return f"{PREFIX}{tag}"


def node(tag: str, router: str) -> str:
    """A router's Mininet node name, the prefix of its interfaces' names (on OVS, the bridge)."""
    return f"{PREFIX}{tag}{router}"


def port_iface(tag: str, router: str, ofport: int) -> str:
    name = f"{node(tag, router)}-{ofport}"
    if len(name) > IFNAMSIZ:
        raise ValueError(f"interface name {name} is longer than {IFNAMSIZ} characters")
    return name


def cpu_switch_iface(tag: str, router: str) -> str:
    """The CPU port's switch end (a port of the bridge)."""
    return f"{node(tag, router)}-cpu"


def cpu_routerd_iface(tag: str, router: str) -> str:
    """The CPU port's other end, which routerd opens with AF_PACKET."""
    return f"{node(tag, router)}-rd"


def host_iface(host: str) -> str:
    return f"{host}-eth0"


def netns(tag: str, host: str) -> str:
    """Name under /run/netns of a host's namespace (`ip netns exec` works on it)."""
    return f"{PREFIX}{tag}-{host}"
