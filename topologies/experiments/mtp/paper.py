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

#: Appendix D, "Smoothed Averages": loss % (the fast ping's, round trip) -> (MTP KB/s, TCP KB/s)
#: after tplot's 1-2-4-2-1 smoothing of 0.5 %-bins, every 2 points, as Figure 14a draws them
#: (None where the appendix's cell is empty). Path: cs.ou.edu to ugcs.caltech.edu, 1 MB
#: transactions, 60 s limit; MTP's RTT column reads 106-176 ms.
APPENDIX_D_SMOOTHED = {
    0: (299.3, 24.07), 2: (225.0, 13.73), 4: (217.6, 8.637), 6: (172.0, 4.299), 8: (119.0, 2.973),
    10: (96.96, 2.132), 12: (96.24, 1.585), 14: (108.7, 1.145), 16: (102.0, 0.99), 18: (54.6, 0.9713),
    20: (None, 0.66), 22: (6.3, 0.725), 24: (5.72, 0.5675), 26: (5.293, 0.5183), 28: (4.983, 0.347),
    30: (4.286, 0.2307), 32: (3.983, 0.1243), 34: (3.325, 0.1421), 36: (2.3, 0.226), 38: (None, 0.374),
    40: (2.3, 0.3433), 42: (2.367, 0.1875), 44: (2.433, 0.1033), 46: (2.5, 0.05667), 48: (2.5, 0.055),
    50: (2.5, 0.03667), 58: (1.9, 0.0), 60: (1.9, 0.0)}
#: Appendix D, "Raw Averages": loss % -> (MTP KB/s or None, TCP KB/s or None) before smoothing.
APPENDIX_D_RAW = {
    0: (398.0, 36.22), 2: (122.3, 9.15), 4: (258.5, 5.32), 6: (223.0, 3.92), 8: (53.4, 2.73),
    10: (82.1, 2.06), 12: (107.2, 1.54), 14: (None, 0.63), 16: (123.5, None), 18: (None, 1.50),
    20: (10.5, 0.14), 22: (5.0, 0.86), 24: (4.8, None), 26: (6.1, 0.58), 28: (5.3, 0.39), 30: (3.3, 0.20),
    32: (None, 0.03), 34: (None, 0.11), 38: (None, 0.44), 40: (2.3, None), 44: (None, 0.15),
    46: (2.5, 0.01), 52: (None, 0.05), 62: (1.9, None)}
#: The WAN path's round trip we emulate: the middle of Appendix D's MTP RTT column (106-176 ms,
#: most rows 110-120), within the issue's 80-210 ms.
WAN_RTT_MS = 110

#: Figure 16: TCP KB/s with (TCP count) TCP transfers against (MTP count) MTP transactions on a
#: lightly loaded WAN; row 0 is MTP's own per-transaction throughput competing with itself.
FIGURE_16_MTP_COUNTS = (0, 1, 2, 3, 4, 8)
FIGURE_16 = {0: (None, 397.1, 338.0, 262.1, 182.1, 101.3),
             1: (45.5, 41.7, 37.9, 32.5, 32.2, 33.9),
             2: (44.3, 42.0, 35.7, 30.9, 30.2, 33.8),
             3: (44.9, 41.7, 35.2, 30.7, 33.5, 31.0),
             4: (45.1, 40.4, 34.8, 30.2, 30.9, 33.0)}
