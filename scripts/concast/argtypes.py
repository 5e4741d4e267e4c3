"""Argument types for the command lines (argparse `type=`): each says what is wrong with a
bad value, so a bad command line ends with a clear message and exit status 2. The CLI verbs
(hostcli, mplexcli) and the experiments' parsers take theirs from here."""
from __future__ import annotations

import argparse
import ipaddress
from typing import Callable

from concast.scapy.mplex import MPLEX_GROUP     # the well-known multiplex group (protocol.md)


def receiver_addr(text: str) -> str:
    try:
        a = ipaddress.IPv4Address(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IPv4 address") from None
    if a.is_multicast or a.is_loopback or a.is_unspecified or int(a) >> 28 >= 15:
        raise argparse.ArgumentTypeError(f"{text} is not a unicast host address")
    return str(a)


def _cast(text: str, cast: Callable[[str], float], not_a: str):
    """`cast(text)`, or the usage error "'TEXT' is not NOT_A"."""
    try:
        return cast(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {not_a}") from None


def _u32(text: str, what: str) -> int:
    v = _cast(text, lambda t: int(t, 0), "a number")
    if not 0 <= v <= 0xFFFFFFFF:
        raise argparse.ArgumentTypeError(f"{v} is not a 32-bit {what} (0..4294967295)")
    return v


def group_id(text: str) -> int:
    """A concast group for `send`/`recv`: 32 bits, not the multiplex group."""
    g = _u32(text, "group ID")
    if g == MPLEX_GROUP:
        raise argparse.ArgumentTypeError(f"group {MPLEX_GROUP} is reserved for the multiplex "
                                         f"service")
    return g


def mplex_group(text: str) -> int:
    g = _u32(text, "multiplex group")
    if g == 0:
        raise argparse.ArgumentTypeError(f"{g} is not a multiplex group (1..4294967295; the "
                                         f"well-known one is {MPLEX_GROUP})")
    return g


def key_id(text: str) -> int:
    return _u32(text, "key")


def port(text: str) -> int:
    p = _cast(text, int, "a port number")
    if not 1 <= p <= 65535:
        raise argparse.ArgumentTypeError(f"{p} is not a port (1..65535)")
    return p


def positive(text: str) -> float:
    v = _cast(text, float, "a number")
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be above 0")
    return v


def delay_ms(text: str) -> float:
    v = _cast(text, float, "a number of milliseconds")
    if not 0 <= v <= 10_000:
        raise argparse.ArgumentTypeError(f"{text} ms is not between 0 and 10000 ms")
    return v


def threshold(text: str) -> int:
    v = _cast(text, int, "a whole number of bytes")
    if not 28 <= v <= 1448:
        raise argparse.ArgumentTypeError(f"{v} is not between 28 (the smallest UDP datagram) "
                                         "and 1448 bytes")
    return v


def comma_list(cast: Callable[[str], float] = float, low: float | None = None,
               high: float | None = None, what: str = "numbers") -> Callable[[str], tuple]:
    """A type for `A,B,C`: each item cast, optionally within [low, high]."""
    def parse(text: str) -> tuple:
        try:
            vals = tuple(cast(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a comma-separated list of {what}: {text!r}") from None
        if not vals:
            raise argparse.ArgumentTypeError(f"no {what} in {text!r}")
        if any((low is not None and v < low) or (high is not None and v > high) for v in vals):
            bounds = ([f"at least {low:g}"] if low is not None else []) + \
                     ([f"at most {high:g}"] if high is not None else [])
            raise argparse.ArgumentTypeError(f"{what} must be {' and '.join(bounds)}: {text!r}")
        return vals
    parse.__name__ = f"list of {what}"
    return parse


# The data planes every verb with --dataplane offers, and the one default (docs/cli.md):
# linux, the data plane that carries the large networks.
DATAPLANES = ("linux", "ovs", "bmv2")
DEFAULT_DATAPLANE = "linux"


def add_dataplane(p, help: str, choices: tuple[str, ...] = DATAPLANES, **kw) -> argparse.Action:
    """--dataplane with the one default; `help` says what runs on it."""
    return p.add_argument("--dataplane", choices=choices, default=DEFAULT_DATAPLANE,
                          help=f"{help} (default {DEFAULT_DATAPLANE})", **kw)


def hidden_alias(p, old: str, of: argparse.Action) -> None:
    """An old option name kept working for scripts but left out of --help (docs/cli.md)."""
    kw = {} if of.nargs == 0 else {"type": of.type, "metavar": of.metavar}
    action = "store_true" if isinstance(of, argparse._StoreTrueAction) else "store"
    p.add_argument(old, dest=of.dest, action=action, default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS, **kw)
