"""concast.argtypes: the command lines' argument types, in one place."""
import argparse

import pytest

from concast import argtypes as A


@pytest.mark.parametrize("fn,text", [(A.port, "0"), (A.port, "65536"), (A.port, "http"),
                                     (A.group_id, "1"), (A.group_id, "4294967296"),
                                     (A.mplex_group, "0"), (A.receiver_addr, "224.0.0.1"),
                                     (A.positive, "0"), (A.delay_ms, "10001"),
                                     (A.threshold, "27")])
def test_bad_values_are_refused_with_a_reason(fn, text):
    with pytest.raises(argparse.ArgumentTypeError, match=r"\S"):
        fn(text)


def test_good_values():
    assert (A.port("5000"), A.group_id("0x10"), A.mplex_group("1")) == (5000, 16, 1)
    assert A.receiver_addr("10.0.0.9") == "10.0.0.9"


def test_comma_list_casts_and_bounds():
    delays = A.comma_list(float, 0, 10_000, "delays")
    assert delays("0,1.5,50") == (0.0, 1.5, 50.0)
    with pytest.raises(argparse.ArgumentTypeError, match="at most 10000"):
        delays("1,20000")
    with pytest.raises(argparse.ArgumentTypeError, match="integers"):
        A.comma_list(int, what="integers")("1,x")
    with pytest.raises(argparse.ArgumentTypeError, match="no numbers"):
        A.comma_list()(",")
