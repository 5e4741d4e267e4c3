"""`concast conform --ports`: the flags that describe an external device under test, checked
before anything runs.

    --ports s1=IFACE,rx=IFACE      which interface faces the children (s1) and which faces R (rx);
                                   plain `IFACE,IFACE` means s1 first, then rx
    --addr s1=IP,rx=IP             the addresses the suite takes there: the child's and R's
    --dut-addr IP[,IP...]          the device's own addresses; the first is the one unicast
                                   CSP goes to (SPEC_REQUEST, SPEC_UPDATE): its router ID
    --dut-mac MAC | s1=MAC,rx=MAC  the device's MAC on the ports (default: asked by ARP)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from pathlib import Path

ROLES = ("s1", "rx")
_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


class PortsError(ValueError):
    """A --ports description that cannot work; the message says which flag and why."""


@dataclass
class DeviceUnderTest:
    ifaces: dict[str, str]
    addrs: dict[str, str]
    dut_addrs: list[str]
    dut_macs: dict[str, str] = field(default_factory=dict)   # empty: resolve by ARP

    def argv(self) -> list[str]:
        """The same description as pytest options of the suite (tests/conform/conftest.py)."""
        out = ["--conform-ports", ",".join(f"{r}={self.ifaces[r]}" for r in ROLES),
               "--conform-addr", ",".join(f"{r}={self.addrs[r]}" for r in ROLES),
               "--conform-dut-addr", ",".join(self.dut_addrs)]
        if self.dut_macs:
            out += ["--conform-dut-mac", ",".join(f"{r}={m}" for r, m in self.dut_macs.items())]
        return out


def _pairs(flag: str, text: str, positional_ok: bool) -> dict[str, str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if positional_ok and items and all("=" not in x for x in items):
        if len(items) != 2:
            raise PortsError(f"{flag}: give two interfaces (s1's, then rx's), not {len(items)}")
        return dict(zip(ROLES, items))
    out = {}
    for x in items:
        role, eq, value = x.partition("=")
        if not eq or role not in ROLES or not value:
            raise PortsError(f"{flag}: {x!r} is not ROLE=VALUE with ROLE one of s1, rx")
        if role in out:
            raise PortsError(f"{flag}: {role} given twice")
        out[role] = value
    missing = [r for r in ROLES if r not in out]
    if missing:
        raise PortsError(f"{flag}: no {' and no '.join(missing)} (the suite needs both ends)")
    return out


def _ipv4(flag: str, value: str) -> str:
    try:
        return str(IPv4Address(value))
    except ValueError:
        raise PortsError(f"{flag}: {value!r} is not an IPv4 address") from None


def parse(ports: str, addr: str | None, dut_addr: str | None, dut_mac: str | None = None,
          sysfs: Path = Path("/sys/class/net")) -> DeviceUnderTest:
    """The flags' values, checked: interfaces exist here, addresses parse, nothing missing."""
    ifaces = _pairs("--ports", ports, positional_ok=True)
    if ifaces["s1"] == ifaces["rx"]:
        raise PortsError("--ports: s1 and rx must be two interfaces (the device sits between)")
    for role, iface in ifaces.items():
        if not (sysfs / iface).exists():
            raise PortsError(f"--ports: no interface {iface!r} ({role}) in this network namespace")
    if not addr:
        raise PortsError("--ports needs --addr s1=IP,rx=IP (the child's and R's addresses)")
    addrs = {r: _ipv4("--addr", a) for r, a in _pairs("--addr", addr, False).items()}
    if not dut_addr:
        raise PortsError("--ports needs --dut-addr IP[,IP...] (the device's own addresses; "
                         "the first receives unicast CSP)")
    dut = [_ipv4("--dut-addr", a.strip()) for a in dut_addr.split(",") if a.strip()]
    if set(dut) & set(addrs.values()):
        raise PortsError("--dut-addr: the device cannot have the suite's own --addr")
    macs: dict[str, str] = {}
    if dut_mac:
        macs = ({r: dut_mac for r in ROLES} if "=" not in dut_mac
                else _pairs("--dut-mac", dut_mac, False))
        for m in macs.values():
            if not _MAC.match(m):
                raise PortsError(f"--dut-mac: {m!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
    return DeviceUnderTest(ifaces, addrs, dut, {r: m.lower() for r, m in macs.items()})
