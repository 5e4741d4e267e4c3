"""Why a normative sentence of docs/protocol.md has no conformance test yet (or never will
from the wire). Every id is either checked by a test in tests/conform/ or listed here; the
coverage table (docs/conformance.md) shows both, and a unit test keeps them in step."""

INSIDE = ("between a router's data plane and its routerd (the CPU port), not visible on the "
          "wire; tests/system/test_ovs_diversion.py and test_linux_tree.py check our routers")
EXPLAINS = "explains the sentences around it; nothing of its own to check"

WHY = {
    "1.2-6": "an index row: its five errors are the rows of section 1.1, each tested there",
    "2.3-4": ("sizing bundles by the path MTU needs enough traffic to fill them; "
              "tests/system/test_linux_path_mtu.py checks ours"),
    "2.3-5": EXPLAINS,
    "2.4-3": EXPLAINS,
    "2.4-4": EXPLAINS,
    "1.2-12": "what the Linux kernel's IP input does, not the router under test",
    "1.2-13": "says what OVS does not do, and why; nothing a router must do",
    "3-9": "says which component makes the checks; the checks themselves are 3-4..3-8",
    "4-7": "says what OVS cannot do; nothing a router must do",
    "4-8": INSIDE + "; routerd's tests/router.rs and tests/p4 (arbitration) check ours",
    "2.5-1": "a definition; its out-of-range cases are 2.5-2 and 2.5-3",
    "2.7-2": "how ERROR reasons are shown is a decoder's business (Scapy layers, unit tests)",
    "2.9-10": EXPLAINS,
    "2.8-16": ("defaults each node may configure otherwise; the CSP unit test "
               "the_timer_defaults_are_the_specs pins ours (2.8-7 and 2.8-17 check the "
               "doubling on the wire)"),
    "2.8-18": ("a window needs a spec of many chunks and chunk losses to show; the CSP unit "
               "test the_window_starts_small_grows_per_chunk_and_halves_on_a_timeout checks ours"),
    "2.9-11": "about nodes that predate signatures: none to test against",
    "2.9-12": EXPLAINS,
    "2.9-13": EXPLAINS,
    "2.9-14": EXPLAINS,
    "2.7-7": ("the text defines the code; the malformed-message tests accept MALFORMED or "
              "silence, as the text does not require an answer"),
    "2.7-5": "the table row defining the code; when it must be sent is 2.7-11, tested there",
    "2.7-9": ("needs filling a router to its limits (ours: 10,000 flows, 1,024 children a "
              "flow), which would load the device for the rest of the run; not tested "
              "elsewhere either"),
    "2.7-10": "how unknown codes are shown is a decoder's business (Scapy layers, unit tests)",
    "3-1": "history of the format; version 0 being dropped is 3-2",
    "3.2-3": ("queue access needs a busy emulated link (concast-linkemu); "
              "tests/system/test_linkemu.py checks ours"),
    "3.3-4": EXPLAINS,
    "3.3-5": EXPLAINS,
    "4-1": INSIDE,
    "4-6": ("needs the control plane to remove diversion when routerd dies; "
            "tests/system (test_concast_tree.py crashed-routerd test) checks ours"),
}
