"""The dissertation's numbers for the runs we reproduce (Noble 1999, section 7.4): its simulator's
printed runs, and the empirical WAN aggregates it sets beside them (Appendix D)."""

#: run name -> protocol -> what the simulator printed: throughput KB/s, elapsed s, messages
#: requested, lost, largest window, delay min/avg/max ms (its tenths of ms / 10).
PRINTED = {
    "lan": {"params": {"loss": 0.0, "rtt_ms": 1, "cong": 1, "messages": 5120},
            "tcp": {"throughput": 1249.7, "elapsed": 4.1, "requested": 5184, "lost": 0, "max_window": 64,
                    "delay": (1.0, 44.1, 51.2)},
            "mtp": {"throughput": 1249.7, "elapsed": 4.1, "requested": 5133, "lost": 0, "max_window": 13,
                    "delay": (1.0, 10.2, 10.4)}},
    "two-routers": {"params": {"loss": 0.03, "rtt_ms": 2, "cong": 5, "messages": 5120},
                    "tcp": {"throughput": 27.5, "elapsed": 186.1, "requested": 6460, "lost": 165,
                            "max_window": 13, "delay": (2.0, 25.2, 48.0)},
                    "mtp": {"throughput": 243.0, "elapsed": 21.1, "requested": 5126, "lost": 148,
                            "max_window": 6, "delay": (2.0, 22.5, 124.0)}},
    "wan": {"params": {"loss": 0.10, "rtt_ms": 80, "cong": 20, "messages": 1024},
            "tcp": {"throughput": 1.8, "elapsed": 576.5, "requested": 2179, "lost": 432, "max_window": 5,
                    "delay": (80.0, 100.6, 112.0)},
            "mtp": {"throughput": 32.7, "elapsed": 31.3, "requested": 1030, "lost": 114, "max_window": 7,
                    "delay": (80.0, 140.7, 880.0)}},
    "wan-3pct-c10": {"params": {"loss": 0.03, "rtt_ms": 80, "cong": 10, "messages": 1024},
                     "tcp": {"throughput": 10.0, "elapsed": 101.9, "requested": 1461, "lost": 75,
                             "max_window": 7, "delay": (80.0, 81.1, 82.4)},
                     "mtp": {"throughput": 171.1, "elapsed": 6.0, "requested": 1082, "lost": 26,
                             "max_window": 16, "delay": (80.0, 88.1, 89.6)}},
    "wan-3pct-c1": {"params": {"loss": 0.03, "rtt_ms": 80, "cong": 1, "messages": 1024},
                    "tcp": {"throughput": 19.4, "elapsed": 52.7, "requested": 1305, "lost": 35,
                            "max_window": 16, "delay": (80.0, 81.1, 84.0)},
                    "mtp": {"throughput": 188.8, "elapsed": 5.4, "requested": 1078, "lost": 23,
                            "max_window": 16, "delay": (80.0, 80.9, 82.4)}},
}

#: The empirical WAN path (Appendix D aggregates quoted in section 7.4): loss % -> KB/s.
EMPIRICAL_WAN = {"mtp": {8: 119.0, 10: 96.96, 12: 96.24}, "tcp": {8: 2.973, 10: 2.132, 12: 1.585}}

#: The two-router LAN test ("michelle", section 7.4): measured, not simulated.
MICHELLE = {"mtp": 242.6, "tcp": 17.96, "loss_pct": 2.8}
