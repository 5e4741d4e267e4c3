"""concast.netns.Scratch, the one owner of the namespaces and veth pairs that tests and
benchmarks make for themselves: it makes what is asked and removes exactly that."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from concast.netns import Scratch, ip

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"),
                                reason="needs root and iproute2 (network namespaces)")


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def link(ns: str, dev: str) -> str:
    return ip("-n", ns, "-o", "link", "show", dev)


def test_namespaces_and_veths_are_made_and_removed():
    tag = f"cscr{os.getpid()}"
    with Scratch() as s:
        a, b = s.add(f"{tag}-a"), s.add(f"{tag}-b")
        s.veth(a, "xa", b, "xb", mtu=1400)
        s.veth(a, "ya", a, "yb", up=False)
        assert {a, b} <= namespaces()
        assert "mtu 1400" in link(a, "xa") and "mtu 1400" in link(b, "xb")
        assert "UP" in link(a, "xa").split("<")[1].split(">")[0]
        assert "UP" not in link(a, "ya").split("<")[1].split(">")[0]
        assert "LOOPBACK,UP" in link(a, "lo")
        with pytest.raises(subprocess.CalledProcessError):
            link(b, "ya")                      # both ends of the second pair stay in a
    assert not {a, b} & namespaces()


def test_close_leaves_namespaces_it_did_not_make():
    tag = f"cscr{os.getpid()}"
    with Scratch() as other:
        theirs = other.add(f"{tag}-theirs")
        with Scratch() as s:
            s.add(f"{tag}-mine")
            with pytest.raises(subprocess.CalledProcessError):
                s.add(theirs)                  # exists already: not made, so not removed
        assert theirs in namespaces() and f"{tag}-mine" not in namespaces()
    assert theirs not in namespaces()
