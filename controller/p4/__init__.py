"""The BMv2 (P4) data plane: P4Runtime client, table entries, counters (docs/dataplane-bmv2.md).

- `p4rt`     -- a small P4Runtime client (pipeline push, table writes, counter reads) on the
               `p4runtime` PyPI package (generated protobuf/gRPC stubs only);
- `pipeline` -- names and numbers of p4src/concast.p4 (tables, counters, CPU port) and the
               table entries of one router, computed from its plan and routes;
- `router`   -- `P4Router`, the per-router handle the control plane and routerd use
               (install the base entries, add/remove concast_flows entries, read counters);
- `switch`   -- start/stop one simple_switch_grpc process (by PID) for tests and topologies;
- `dataplane` -- `Bmv2Dataplane`: `ConcastNet(dataplane="bmv2")`, one switch per router;
- `__main__` -- `python -m concast.controller.p4 --switch ADDR flow add|del|list ... | counters`,
               run-time changes as a second P4Runtime controller (what routerd can call).

Importing this package needs nothing beyond the standard library; `p4rt` needs `p4runtime`.
"""
