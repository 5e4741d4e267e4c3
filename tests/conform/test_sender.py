"""The sending host (protocol.md 2.8, "Sender"; 2.7 NO_SPEC): our hostd at s1 behind an
oblivious router, driven through its API socket; the suite plays R at rx, answering (or not)
what hostd sends upstream. Timers are checked as relations between the gaps the suite sees
(doubling, H/3 against H), never against a wall-clock bound of their own."""
import hashlib
import os
import statistics
import time

import pytest
from scapy.layers.inet import IP

from concast.scapy import CSP, CSP_Error, CSP_JoinAck, concast_option, csp_datagram
from conform_target import HOLD_S, decode, fresh_group, is_csp, on_net

pytestmark = pytest.mark.mininet
RETRY_MS = 400          # hostd's first JOIN retransmission (--join-retry-ms; default 1 s)
H = 3                   # hostd's hold time (--hold): it refreshes every H/3 = 1 s
TRIES = 5


@pytest.fixture(scope="module")
def s_net(request, tmp_path_factory):
    """s1 - r1 - rx with an oblivious r1 and hostd at s1; nothing at rx but the suite."""
    from hostdtools import missing_builds
    from concast.topologies import line
    if request.config.getoption("--conform-ports") or request.config.getoption("--conform-p4"):
        pytest.skip("checks our hostd as a sender on a network of its own, not a router")
    why = missing_builds()
    if why:
        pytest.skip(why)
    net = line(1, senders=1, capable=False,
               dataplane=request.config.getoption("--conform-dataplane")).start(
        run_dir=tmp_path_factory.mktemp("conform-s"))
    t = None
    try:
        net.start_concast(hold=H, hostd_args=("--join-retry-ms", str(RETRY_MS)), hosts=["s1"])
        t = on_net(net, "sender")
        yield t
    finally:
        if t is not None:
            for p in t.ports.values():
                p.close()
        net.stop()


@pytest.fixture
def s(s_net, request):
    return s_net.for_test(request.node)


@pytest.fixture
def app(s_net):
    """An application of hostd at s1 (its API client)."""
    from concast.hosts import Client
    with Client(s_net.net.hostd_socket("s1")) as c:
        yield c


def seen_at_r(t, group: int, ctype: int, watch: float, stop=lambda: False):
    """[(arrival time, datagram)] of CSP messages of `ctype` for (rx, group) reaching rx
    within `watch` seconds, or until stop() is true after one arrived."""
    got = []

    def note(ds):
        if is_csp(ds[-1], group, ctype):
            got.append((time.monotonic(), ds[-1]))
        return False
    deadline = time.monotonic() + watch
    while time.monotonic() < deadline and not (got and stop()):
        t.rx.datagrams(min(0.2, max(0.0, deadline - time.monotonic())), until=note)
    return got


def answer_join(t, join: bytes, body) -> None:
    ip = decode(join)
    t.rx.send(csp_datagram(CSP(group=ip[CSP].group, receiver=t.RX, seq=ip[CSP].seq) / body,
                           src=t.RX, dst=ip.src, ttl=64))


def joined(t, app, group: int) -> None:
    """Join (rx, group) from the application and answer as R with the multiplex spec,
    serving its chunks, until hostd reports the flow active."""
    app.join(t.RX, group, selector="17/5000")
    join = t.rx.first(lambda d: is_csp(d, group, 1), 5)
    assert join is not None, "hostd sent no JOIN toward R (2.8-7)"
    digest = hashlib.sha256(t.spec).digest()
    answer_join(t, join, CSP_JoinAck(hold_time=HOLD_S, spec_size=len(t.spec), spec_hash=digest,
                                     **t.signed(group, len(t.spec), digest)))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for d in t.rx.datagrams(0.2):
            if is_csp(d, group, 5):
                t.serve_chunk(decode(d))
        ev = app.wait_settled(t.RX, group, 0.01)
        if ev is not None:
            assert ev["event"] == "active", f"hostd did not take R's spec: {ev}"
            return
    pytest.fail("hostd never reported the flow active after R's JOIN_ACK and spec")


@pytest.mark.spec("2.8-7")
def test_an_unanswered_join_is_sent_5_times_with_doubling_gaps_then_falls_back(s, app):
    g = fresh_group()
    assert app.join(s.RX, g, selector="17/5000")["state"] == "joining"
    fell_back = {}

    def settled():
        if fell_back.get("ev") is None:
            fell_back["ev"] = app.wait_settled(s.RX, g, 0.01)
        return fell_back["ev"] is not None
    # 1 + 2 + 4 + 8 + 16 waits of RETRY_MS until the fallback; watched three times as long
    joins = seen_at_r(s, g, 1, 3 * 31 * RETRY_MS / 1000, stop=settled)
    assert len(joins) == TRIES, f"{len(joins)} JOINs reached R, not {TRIES}"
    assert len({decode(d)[CSP].seq for _, d in joins}) == 1, "a retransmission changed seq"
    gaps = [b[0] - a[0] for a, b in zip(joins, joins[1:])]
    for before, after in zip(gaps, gaps[1:]):
        assert 1.3 <= after / before <= 3.0, f"gaps {gaps} do not double"
    ev = fell_back.get("ev") or app.wait_settled(s.RX, g, 5)
    assert ev is not None and ev["event"] == "fallback", "no fallback after the last try"
    assert not seen_at_r(s, g, 1, 1.0), "a JOIN after the sender gave up"


@pytest.mark.spec("2.8-8")
def test_a_joined_sender_refreshes_every_third_of_its_hold_time(s, app):
    g = fresh_group()
    joined(s, app, g)
    refreshes = seen_at_r(s, g, 3, 5 * H / 3 + 0.5)
    assert len(refreshes) >= 3, f"{len(refreshes)} REFRESHes in {5 * H / 3 + 0.5:.1f} s"
    gaps = [b[0] - a[0] for a, b in zip(refreshes, refreshes[1:])]
    assert 0.6 <= statistics.median(gaps) / (H / 3) <= 1.6, f"REFRESH gaps {gaps}, H = {H}"
    assert max(gaps) < H, f"a REFRESH gap of {max(gaps):.2f} s lets the hold time {H} s run out"
    app.leave(s.RX, g)


@pytest.mark.spec("2.8-9")
def test_leave_sends_a_leave_upstream(s, app):
    g = fresh_group()
    joined(s, app, g)
    app.leave(s.RX, g)
    got = seen_at_r(s, g, 4, 5, stop=lambda: True)
    assert got, "no LEAVE reached R after the application left"
    assert decode(got[0][1]).src == s.S1


@pytest.mark.spec("2.8-10", "2.7-3")
def test_after_no_spec_the_sender_tells_its_application_and_sends_plain_unicast(s, app):
    g = fresh_group()
    app.join(s.RX, g, selector="17/5000")
    join = s.rx.first(lambda d: is_csp(d, g, 1), 5)
    assert join is not None, "hostd sent no JOIN toward R"
    answer_join(s, join, CSP_Error(error_code=1, offending_type=1, reason=b"no spec"))
    ev = app.wait_settled(s.RX, g, 5)
    assert ev is not None and ev["event"] == "fallback", f"the application was not told: {ev}"
    marker = os.urandom(8)
    reply = app.send(s.RX, g, marker, dport=5000)
    assert reply["sent"] == "plain", reply
    got = s.rx.first(lambda d: marker in d, 5)
    assert got is not None, "the datagram after NO_SPEC did not reach R"
    ip = IP(got)
    assert ip.proto == 17 and ip.src == s.S1
    assert concast_option(ip) is None, "a datagram after NO_SPEC still carries a Concast ID"
