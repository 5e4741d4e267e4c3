"""concast: programmable router middleware for in-network services.

The Python code lives in the folders the design names (see docs/architecture.md);
this package stitches them into one namespace: `concast.topologies` is
`topologies/`, `concast.controller` is `controller/`, `concast.hosts` is
`hosts/`, `concast.scapy` is `tests/scapy/`.
"""
from pathlib import Path as _Path

ROOT = _Path(__file__).resolve().parents[2]

# Subpackages are looked up here first, then in the repository root
# (topologies, controller, hosts, mergespecs), then in tests/ (scapy).
__path__ = [str(_Path(__file__).parent), str(ROOT), str(ROOT / "tests")]
