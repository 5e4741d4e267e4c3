"""`concast conform`: the conformance suite's tooling (docs/conformance.md).

specids.py gives every normative sentence of docs/protocol.md a stable id and checks them;
run.py builds a target network and runs the suite in tests/conform/; coverage.py writes the
coverage table. The tests themselves live in tests/conform/.
"""
