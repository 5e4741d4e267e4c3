"""`concast exp mtp`'s emulated-path scenarios without a network: the loss split per direction,
the ping summary, the dissertation's bin-smooth-fit treatment (section 7.2), the tables beside
its numbers, and bad options failing with a message, not a traceback."""
import math

import pytest

from concast.topologies.experiments.mtp import cli, curve, michelle, thirdparty, wan
from concast.topologies.experiments.mtp.paper import APPENDIX_D_SMOOTHED, FIGURE_16
from concast.topologies.experiments.mtp.path import per_direction, ping_counts


def test_per_direction_loss_makes_the_round_trip_loss_asked_for():
    for rt in (0.0, 2.8, 3.0, 10.0, 30.0):
        p = per_direction(rt) / 100
        assert 1 - (1 - p) ** 2 == pytest.approx(rt / 100)
    with pytest.raises(ValueError):
        per_direction(100)


def test_ping_counts_reads_iputils_summary():
    out = "--- 10.78.0.2 ping statistics ---\n478 packets transmitted, 459 received, 3.97% packet loss, time 2013ms\n"
    assert ping_counts(out) == (478, 459)
    assert ping_counts("ping: connect: Network is unreachable") == (0, 0)


def test_smoothing_weights_1_2_4_2_1_and_missing_neighbours_drop_out():
    s = curve.smooth({0.0: 10.0, 2.0: 0.0, 4.0: 0.0, 6.0: 0.0, 8.0: 0.0}, 2.0)
    assert s[4.0] == pytest.approx(10 / 10)          # 1·10 of weights 1+2+4+2+1
    assert s[0.0] == pytest.approx(4 * 10 / 7)       # itself 4, neighbours 2 and 1 at +2, +4
    lone = curve.smooth({10.0: 5.0}, 2.0)
    assert lone == {10.0: 5.0}


def test_exponential_fit_recovers_a_decay_and_bins_average():
    pts = [(x, 300 * math.exp(-0.2 * x)) for x in (0, 2, 5, 10, 20)]
    a, b = curve.exp_fit(pts)
    assert a == pytest.approx(300) and b == pytest.approx(-0.2)
    assert curve.exp_fit([(3, 1.0), (3, 2.0)]) is None
    assert curve.bin_means([(0.4, 1.0), (1.2, 3.0), (2.9, 5.0)], 2.0) == {0.0: (1.0, 1), 2.0: (4.0, 2)}


def test_wan_table_sets_ours_beside_appendix_d():
    rows = [{"proto": p, "set_loss_pct": l, "ping_loss_pct": l + 0.3, "kBps": v}
            for p, l, v in (("mtp", 0, 900.0), ("mtp", 10, 200.0), ("reno-1999", 0, 800.0), ("reno-1999", 10, 20.0))]
    a = wan.analyse(rows)
    t = wan.table(a)
    assert "MTP / reno-1999" in t and f"{APPENDIX_D_SMOOTHED[10][0]:.1f}" in t
    assert a["mtp"]["fit"][1] < 0


def test_michelle_and_third_party_tables():
    rows = [{"proto": "mtp", "kBps": 500.0, "ping_loss_pct": 3.0}, {"proto": "mtp", "kBps": 510.0, "ping_loss_pct": 2.0},
            {"proto": "reno-1999", "kBps": 50.0, "ping_loss_pct": 3.0, "timeouts": 4, "fast_retrans": 2}]
    s = michelle.summary(rows)
    assert s["mtp"]["mean"] == 505.0 and s["mtp"]["sd"] == pytest.approx(7.07, abs=0.01)
    assert "10.1×" in michelle.table(s) and "13.5×" in michelle.table(s)
    tp = [{"mtp_count": m, "tcp_count": t, "tcp_each_kBps": None if t == 0 else 40.0 - m,
           "mtp_each_kBps": None if m == 0 else 300.0 / m} for t in (0, 1) for m in (0, 1, 8) if (t, m) != (0, 0)]
    t = thirdparty.table(tp)
    assert f"({FIGURE_16[1][5]})" in t and "80%" in t     # 32 at 8 MTP of a 40 peak


@pytest.mark.parametrize("argv", [["--scenario", "wan", "--losses", "x"], ["--scenario", "michelle", "--protocols", "ftp"],
                                  ["--scenario", "nope"]])
def test_bad_options_exit_2_with_a_message(argv, capsys):
    with pytest.raises(SystemExit) as e:
        rc = cli.main(argv)
        raise SystemExit(rc)
    assert e.value.code == 2
    assert "Traceback" not in capsys.readouterr().err
