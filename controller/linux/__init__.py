"""The Linux-kernel data plane: each router is a network namespace that forwards in the
kernel, with concast diversion by tc (docs/dataplane-linux.md)."""
from concast.controller.linux.bpf import divert_program  # noqa: F401
