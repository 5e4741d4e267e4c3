"""The Open vSwitch data plane: OpenFlow 1.3 pipeline, selectors, counters
(docs/dataplane-ovs.md)."""
from concast.controller.ovs.selectors import Selector, remove_all_argv  # noqa: F401
