"""Data plane back ends a concast network can be built on, by name."""
from __future__ import annotations

import importlib

BACKENDS = {
    "ovs": ("concast.controller.ovs.dataplane", "OvsDataplane"),
    "bmv2": ("concast.controller.p4.dataplane", "Bmv2Dataplane"),
    "linux": ("concast.controller.linux.dataplane", "LinuxDataplane"),
}


def backend(name: str):
    """The back-end class: built with (tag, plan); gives planned_names(), add_routers(mn),
    configure(owner_pid, owner_start) -> {router: handle}, teardown()."""
    try:
        module, cls = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown data plane {name!r}; known: {', '.join(BACKENDS)}") from None
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError as e:
        raise RuntimeError(f"data plane {name!r} is not available: {e}") from e
