"""concast control plane: topology -> routes -> data-plane rules, and the hooks that
start and stop the per-router daemon (routerd). routerd itself is Rust (controller/*
crates); the OVS back end is in concast.controller.ovs; routerdmgmt asks routerd's
management socket one question (the one Python client of it)."""
