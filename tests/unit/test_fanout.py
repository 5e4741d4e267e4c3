"""concast.fanout: one call per item on a thread pool, as a plain loop would answer."""
import threading
import time

import pytest

from concast import fanout


def test_answers_keep_the_items_order_and_run_at_once():
    seen = set()

    def slow(i):
        seen.add(threading.get_ident())
        time.sleep(0.05)
        return i * i
    out = fanout.each(slow, range(8), workers=8)
    assert list(out.items()) == [(i, i * i) for i in range(8)]
    assert len(seen) > 1  # more than one thread did the calls


def test_one_worker_is_a_plain_loop_in_the_callers_thread():
    me = threading.get_ident()
    assert fanout.each(lambda i: threading.get_ident() == me, "abc", workers=1) == dict.fromkeys("abc", True)


def test_an_exception_reaches_the_caller():
    def fail_on_3(i):
        if i == 3:
            raise ValueError("three")
        return i
    with pytest.raises(ValueError, match="three"):
        fanout.each(fail_on_3, range(6), workers=4)


def test_no_items():
    assert fanout.each(lambda i: i, [], workers=4) == {}
