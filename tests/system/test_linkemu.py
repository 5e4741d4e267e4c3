"""concast-linkemu against what it is configured to do: delay (ping RTT), random loss,
rate (iperf3), drop-tail, live `set`, carrier down/up; and a ConcastNet whose links it
emulates (TCP through userspace OVS, routerd's link_slot / link_state, cleanup).

The accuracy checks use two hosts joined directly by one emulated link (no switch): the
only thing between them is the emulator, so what is measured is the emulator. Tolerances
are the design's: delay within 5 %, loss within 1 point, rate within 5 %.
"""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from systools import tcp_transfer, wait_listening

pytestmark = pytest.mark.mininet

UDPCOUNT = Path(__file__).with_name("udpcount.py")
MPLEXSEND = Path(__file__).with_name("mplexsend.py")
IP1, IP2 = "10.231.0.1", "10.231.0.2"
MAC1, MAC2 = "02:aa:00:00:00:01", "02:aa:00:00:00:02"
LINK = "h1h2"
ZERO = {"delay": 0, "loss": 0, "bw": 0, "max_queue_size": None}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(mininet, emulator): h1 and h2 joined by one EmuLink, static ARP, no IPv6."""
    from mininet.log import setLogLevel
    from mininet.net import Mininet

    from concast.topologies.links import EmuLink, LinkEmulator
    setLogLevel("error")
    emu = LinkEmulator(tmp_path_factory.mktemp("linkemu"), f"t{os.getpid()}").start()
    mn = Mininet(topo=None, build=False, controller=None, autoSetMacs=False)
    try:
        h1 = mn.addHost("h1", ip=f"{IP1}/24", mac=MAC1)
        h2 = mn.addHost("h2", ip=f"{IP2}/24", mac=MAC2)
        mn.addLink(h1, h2, cls=EmuLink, emu=emu, link_id=LINK, addr1=MAC1, addr2=MAC2)
        mn.build()
        for h, ip, mac in ((h1, IP2, MAC2), (h2, IP1, MAC1)):
            # Nothing but the test's own frames on the link: drop-tail counts are exact.
            h.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1;"
                  f" ip neigh replace {ip} lladdr {mac} dev {h.name}-eth0 nud permanent")
        yield mn, emu
    finally:
        mn.stop()
        emu.stop()


@pytest.fixture
def link(pair):
    """The pair with the link back at zero parameters after each test."""
    mn, emu = pair
    emu.set(LINK, params=ZERO)
    emu.up(LINK)
    yield mn, emu
    emu.set(LINK, params=ZERO)
    emu.up(LINK)


def rtts(host, dst: str, count: int, interval: float = 0.02) -> list[float]:
    out = host.cmd(f"ping -n -c {count} -i {interval} -W 2 {dst}")
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]


def udp_run(mn, count: int, size: int, rate: float, idle: float = 1.5) -> int:
    """Send `count` datagrams h1 -> h2; how many arrived."""
    rx = mn["h2"].popen([sys.executable, str(UDPCOUNT), "recv", "9000", str(idle)],
                        stdout=subprocess.PIPE, text=True)
    try:
        assert rx.stdout.readline().strip() == "ready"
        out = mn["h1"].cmd(f"{sys.executable} {UDPCOUNT} send {IP2} 9000 {count} {size} {rate}")
        assert f"sent {count}" in out, out
        return int(rx.stdout.readline())
    finally:
        if rx.poll() is None:
            rx.kill()
        rx.wait()


def test_delay_is_the_configured_one_and_set_changes_it_live(link):
    mn, emu = link
    base = statistics.median(rtts(mn["h1"], IP2, 50))
    for one_way in (10, 25):
        emu.set(LINK, params={"delay": f"{one_way}ms"})
        got = rtts(mn["h1"], IP2, 60)
        assert len(got) >= 55, got
        added = statistics.median(got) - base
        print(f"delay {one_way} ms each way: RTT added {added:.2f} ms (base {base:.3f} ms)")
        assert abs(added - 2 * one_way) <= 0.05 * 2 * one_way, (one_way, added, base)


def test_random_loss_within_one_point(link):
    mn, emu = link
    emu.set(LINK, ab={"loss": 5})
    before = emu.stats(LINK)["ab"]
    n = 20000
    got = udp_run(mn, n, 100, rate=8000)
    loss = 100 * (1 - got / n)
    print(f"loss configured 5 %: {loss:.2f} % of {n}")
    assert abs(loss - 5) <= 1, loss
    after = emu.stats(LINK)["ab"]
    lost = after["dropped_loss"] - before["dropped_loss"]
    assert lost == n - got, (lost, n - got)   # every missing datagram is one the emulator chose


def test_rate_within_five_percent(link, tmp_path):
    mn, emu = link
    # A deep queue (240 ms at 10 Mbit/s) keeps the link busy through the sender's stalls on
    # a loaded machine.
    emu.set(LINK, ab={"bw": 10, "max_queue_size": 300})
    report = tmp_path / "iperf3.json"
    srv = mn["h2"].popen(["iperf3", "-s", "-1", "-J", "-p", "5301"], stdout=open(report, "w"))
    try:
        wait_listening(mn["h2"], 5301)
        mn["h1"].cmd(f"iperf3 -c {IP2} -p 5301 -u -b 20M -l 1400 -t 6")
        srv.wait(timeout=20)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    intervals = json.loads(report.read_text())["intervals"]
    # Whole seconds with the link saturated (not the first, not the tail).
    bps = [i["sum"]["bits_per_second"] for i in intervals[1:5]]
    frame, payload = 1400 + 8 + 20 + 14, 1400       # rate is on the Ethernet frame
    achieved = statistics.median(bps) * frame / payload
    print(f"rate configured 10 Mbit/s: {achieved / 1e6:.3f} Mbit/s (intervals {bps})")
    assert abs(achieved / 10e6 - 1) <= 0.05, (achieved, bps)
    st = emu.stats(LINK)["ab"]
    assert st["dropped_queue"] > 0 and st["max_backlog"] == 300


def test_drop_tail_drops_exactly_the_excess(link):
    from concast.topologies.linkstate import StateReader
    mn, emu = link
    # 1042-byte frames at 0.08 Mbit/s take 104 ms each: the 200-frame burst is over (even
    # with the sender preempted for a while) before the first frame has left.
    emu.set(LINK, ab={"bw": 0.08, "max_queue_size": 50})
    before = emu.stats(LINK)["ab"]
    rx = mn["h2"].popen([sys.executable, str(UDPCOUNT), "recv", "9001", "3"],
                        stdout=subprocess.PIPE, text=True)
    try:
        assert rx.stdout.readline().strip() == "ready"
        mn["h1"].cmd(f"{sys.executable} {UDPCOUNT} send {IP2} 9001 200 1000 0")
        with StateReader(emu.state_path) as state:
            slot = state.read(before["slot"])
        got = int(rx.stdout.readline())
    finally:
        if rx.poll() is None:
            rx.kill()
        rx.wait()
    after = emu.stats(LINK)["ab"]
    print(f"drop-tail: {after['dropped_queue'] - before['dropped_queue']} dropped, {got} received,"
          f" state slot {slot}")
    assert after["dropped_queue"] - before["dropped_queue"] == 150
    assert got == 50
    # The state file showed the busy transmitter while the burst drained.
    assert slot.queue_limit_pkts == 50 and slot.rate_bps == 80_000
    assert 40 <= slot.backlog_pkts <= 50, slot
    assert slot.tx_free_at_ns > time.monotonic_ns() - 5_000_000_000


def test_drops_are_booked_by_what_they_carried(link):
    """A burst of one-record MplexPkts into a 50-frame queue: the excess is booked as
    MplexPkts and as the ACK records they carried, under the queue (docs/linkemu.md)."""
    mn, emu = link
    # ~70-byte frames at 0.005 Mbit/s take ~110 ms each: the burst is over long before the
    # queue has moved. A 5-frame queue drains in about half a second, before the next test.
    emu.set(LINK, ab={"bw": 0.005, "max_queue_size": 5})
    st0 = emu.stats(LINK)["ab"]
    out = mn["h1"].cmd(f"{sys.executable} {MPLEXSEND} --dst {IP2} --count 200 "
                       "--max-local-delay-us 1000")
    assert out.strip().endswith("200"), out
    st1 = emu.stats(LINK)["ab"]
    before, after = st0["drops"], st1["drops"]
    grew = {cause: {k: after[cause][k] - before[cause][k] for k in after[cause]}
            for cause in after}
    dropped = st1["dropped_queue"] - st0["dropped_queue"]
    print(f"drop books: {grew}; dropped_queue {dropped}")
    # Building each datagram with Scapy takes a while: a few frames may leave mid-burst.
    assert 180 <= dropped <= 195
    assert grew["queue"]["mplex_pkts"] == grew["queue"]["mplex_records"] == dropped, grew
    assert grew["queue"]["other"] == grew["queue"]["pure_acks"] == 0, grew
    assert sum(grew["loss"].values()) == sum(grew["down"].values()) == 0, grew
    for _ in range(50):               # let the queue drain: later tests time this link
        st = emu.stats(LINK)["ab"]
        if st["backlog_pkts"] == 0 and st["in_flight"] == 0:
            break
        time.sleep(0.1)


def test_a_control_client_that_stops_reading_never_stalls_the_links(link):
    """Replies are queued, not written blocking: a client that asks for `stats` again and
    again without reading must not hold up a single frame (it once stalled every link for
    tens of ms whenever the experiment's Python side was slow to read)."""
    import socket
    mn, emu = link
    emu.set(LINK, params={"delay": "5ms"})
    hog = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hog.connect(str(emu.socket_path))
    try:
        hog.setblocking(False)
        sent = 0
        for _ in range(2000):         # far more reply bytes than any socket buffer holds
            try:
                sent += hog.send(b'{"cmd": "stats"}\n')
            except BlockingIOError:
                break
        got = rtts(mn["h1"], IP2, 50, interval=0.01)
    finally:
        hog.close()
    print(f"{sent} bytes of requests unread; RTT median "
          f"{statistics.median(got) if got else None} ms, max {max(got, default=None)} ms")
    assert len(got) >= 48, got
    # 10 ms of delay: no stall behind the unread replies (written blocking, each cost 2 s)
    assert statistics.median(got) < 12 and max(got) < 10 + 40, got
    assert emu.call("ping")["ok"]     # and the emulator still answers others


def test_down_drops_and_up_restores(link):
    mn, emu = link
    assert rtts(mn["h1"], IP2, 2)
    emu.down(LINK)
    before = emu.stats(LINK)["ab"]["dropped_down"]
    assert rtts(mn["h1"], IP2, 3, interval=0.2) == []
    assert emu.stats(LINK)["ab"]["dropped_down"] - before == 3
    emu.up(LINK)
    assert len(rtts(mn["h1"], IP2, 3)) == 3


def napi_threads() -> set[str]:
    out = set()
    for p in Path("/proc").iterdir():
        try:
            comm = (p / "comm").read_text().strip() if p.name.isdigit() else ""
        except OSError:
            continue
        if comm.startswith("napi/"):
            out.add(comm)
    return out


def test_default_mode_keeps_plain_taps(link):
    """The default receive mode is inline (docs/linkemu.md, "Where the receiving stack
    runs"): plain TAPs, no NAPI thread for them."""
    if os.environ.get("CONCAST_LINKEMU_RX"):
        pytest.skip("CONCAST_LINKEMU_RX chooses the mode for this run")
    mn, emu = link
    st = emu.stats(LINK)
    assert (st["a"]["rx"], st["b"]["rx"]) == ("inline", "inline")
    assert not any(t.startswith(("napi/h1-eth0-", "napi/h2-eth0-")) for t in napi_threads())


def test_napi_mode_hands_frames_to_a_threaded_napi_poll(tmp_path):
    """--rx-mode napi (CONCAST_LINKEMU_RX=napi): each TAP opened with IFF_NAPI, its NAPI
    threaded (a napi/<dev> kernel thread runs the receiving stack, not the emulator's write),
    GRO off so frames arrive one by one as written; pings, small and large, get through."""
    from concast.netns import Scratch
    from concast.topologies.links import LinkEmulator
    scratch = Scratch()
    ns1 = scratch.add(f"ccle-n1-{os.getpid()}")
    ns2 = scratch.add(f"ccle-n2-{os.getpid()}")
    emu = LinkEmulator(tmp_path, f"n{os.getpid()}", rx_mode="napi")
    try:
        emu.start()
        emu.add("n", {"netns": ns1, "name": "na", "mac": MAC1}, {"netns": ns2, "name": "nb", "mac": MAC2})
        st = emu.stats("n")
        if st["a"]["rx"] == "inline-fallback":
            pytest.skip("this kernel refused IFF_NAPI; the emulator fell back to plain TAPs")
        assert (st["a"]["rx"], st["b"]["rx"]) == ("napi-threaded", "napi-threaded")
        threads = napi_threads()
        for ns, dev, ip, peer, peer_mac in ((ns1, "na", IP1, IP2, MAC2), (ns2, "nb", IP2, IP1, MAC1)):
            run = lambda *a: subprocess.run(["ip", "netns", "exec", ns, *a], check=True,
                                            capture_output=True, text=True, timeout=10).stdout
            assert run("cat", f"/sys/class/net/{dev}/threaded").strip() in ("1", "enabled")
            assert "generic-receive-offload: off" in run("ethtool", "-k", dev)
            assert any(t.startswith(f"napi/{dev}-") for t in threads), sorted(threads)
            run("ip", "addr", "add", f"{ip}/24", "dev", dev)
            run("ip", "link", "set", dev, "up")
            run("ip", "neigh", "replace", peer, "lladdr", peer_mac, "dev", dev, "nud", "permanent")
        ping = lambda size: subprocess.run(["ip", "netns", "exec", ns1, "ping", "-n", "-c", "5", "-i", "0.02",
                                            "-W", "2", "-s", str(size), IP2],
                                           capture_output=True, text=True, timeout=20).stdout
        assert "5 received" in ping(56)
        assert "5 received" in ping(1400)
        assert emu.stats("n")["ab"]["delivered"] >= 10
    finally:
        emu.stop()
        scratch.close()


def test_inline_mode_keeps_plain_taps(tmp_path):
    """--rx-mode inline asked for explicitly: no IFF_NAPI, the stack in our write."""
    from concast.netns import Scratch
    from concast.topologies.links import LinkEmulator
    scratch = Scratch()
    ns = scratch.add(f"ccle-rx-{os.getpid()}")
    emu = LinkEmulator(tmp_path, f"x{os.getpid()}", rx_mode="inline")
    try:
        emu.start()
        emu.add("x", {"netns": ns, "name": "xa"}, {"netns": ns, "name": "xb"})
        st = emu.stats("x")
        assert (st["a"]["rx"], st["b"]["rx"]) == ("inline", "inline")
        assert not any(t.startswith("napi/xa-") for t in napi_threads())
    finally:
        emu.stop()
        scratch.close()


# Receives frames of the test's ethertype on one interface until a quiet second; prints how
# many came and a digest of their bytes in arrival order.
FRAMES_RECV = """
import hashlib, socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88b5))
s.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)   # SO_RCVBUFFORCE (root): room for all of them
s.bind((sys.argv[1], 0x88b5))
print("ready", flush=True)
h, n = hashlib.sha256(), 0
s.settimeout(10)
while True:
    try:
        f = s.recv(65535)
    except socket.timeout:
        break
    h.update(len(f).to_bytes(4, "big") + f)
    n += 1
    s.settimeout(1.0)
print(n, h.hexdigest(), flush=True)
"""
FRAMES_SEND = """
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
data, k = sys.stdin.buffer.read(), 0
for i in range(int(sys.argv[2])):
    n = int.from_bytes(data[k:k + 2], "big")
    s.send(data[k + 2:k + 2 + n])
    k += 2 + n
    if i % 100 == 99:
        time.sleep(0.002)   # bursts of 100: the TAP's own queue holds 1000
"""


@pytest.mark.parametrize("io", ["uring", "syscalls"])
def test_each_io_path_forwards_every_frame_whole_and_in_order(tmp_path, io):
    """--io uring (batched TAP reads and writes) and --io syscalls move 3000 frames of mixed
    sizes, 60 to 1514 bytes, sent in bursts, each byte intact and none reordered
    (docs/linkemu.md, "Batched TAP I/O")."""
    import hashlib
    import random
    from concast.netns import Scratch
    from concast.topologies.links import LinkEmulator
    rng = random.Random(15)
    frames = []
    for i in range(3000):
        size = rng.choice((60, 64, 128, 512, 1000, 1514))
        body = i.to_bytes(4, "big") + bytes(rng.getrandbits(8) for _ in range(8))
        f = b"\xff" * 6 + bytes.fromhex("02cc00000001") + b"\x88\xb5" + body
        frames.append(f + bytes(size - len(f)))
    want = hashlib.sha256()
    for f in frames:
        want.update(len(f).to_bytes(4, "big") + f)
    scratch = Scratch()
    ns1 = scratch.add(f"ccio-a-{os.getpid()}")
    ns2 = scratch.add(f"ccio-b-{os.getpid()}")
    emu = LinkEmulator(tmp_path, f"io{os.getpid()}", io=io)
    try:
        emu.start()
        emu.add("f", {"netns": ns1, "name": "fa"}, {"netns": ns2, "name": "fb"})
        got_io = emu.call("stats")["io"]
        if io == "uring" and got_io != ["uring"]:
            pytest.skip(f"io_uring not available here: the emulator fell back to {got_io} "
                        f"(its log: {(tmp_path / 'linkemu.log').read_text()[-300:]!r})")
        assert got_io == [io]
        for ns, dev in ((ns1, "fa"), (ns2, "fb")):
            # Only the test's frames: no IPv6 chatter (router solicitations) from the stack.
            subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1"],
                           check=True, timeout=10)
            subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True, timeout=10)
        rx = subprocess.Popen(["ip", "netns", "exec", ns2, sys.executable, "-c", FRAMES_RECV, "fb"],
                              stdout=subprocess.PIPE, text=True)
        try:
            assert rx.stdout.readline().strip() == "ready"
            subprocess.run(["ip", "netns", "exec", ns1, sys.executable, "-c", FRAMES_SEND, "fa", str(len(frames))],
                           input=b"".join(len(f).to_bytes(2, "big") + f for f in frames), check=True, timeout=60)
            out = rx.communicate(timeout=60)[0].split()
        finally:
            if rx.poll() is None:
                rx.kill()
                rx.wait()
        st = emu.stats("f")["ab"]
        assert st["delivered"] == len(frames), st
        assert (int(out[0]), out[1]) == (len(frames), want.hexdigest()), "frames lost, changed or reordered"
    finally:
        emu.stop()
        scratch.close()


def test_bad_requests_are_refused_with_a_reason(link):
    from concast.topologies.links import LinkEmuError
    _, emu = link
    with pytest.raises(LinkEmuError, match="loss"):
        emu.set(LINK, params={"loss": 150})
    with pytest.raises(LinkEmuError, match="no link"):
        emu.down("nosuch")
    with pytest.raises(LinkEmuError, match="exists"):
        emu.add(LINK, {"name": "x1"}, {"name": "x2"})
    with pytest.raises(ValueError, match="unknown link parameter"):
        emu.set(LINK, params={"jitter": "1ms"})
    with pytest.raises(LinkEmuError, match="tap_queue"):
        emu.add("q0", {"name": "x1"}, {"name": "x2"}, tap_queue=0)
    assert emu.stats(LINK)["ab"]["params"]["loss"] == 0


def test_every_tap_reports_its_queue_and_the_frames_it_dropped(link):
    """The emulator sets each TAP's transmit queue and reads the kernel's tx_dropped of it,
    in the TAP's own namespace: for one link always, for all links when asked."""
    _, emu = link
    st = emu.stats(LINK)
    for end in ("a", "b"):
        assert st[end]["tap_queue"] >= 1000 and st[end]["tx_dropped"] == 0, st[end]
    every = emu.stats(taps=True)
    assert all(isinstance(l[e]["tx_dropped"], int) for l in every for e in ("a", "b")), every
    assert "tx_dropped" not in emu.stats()[0]["a"]


def test_concast_net_with_emulated_links():
    from concast.topologies import ConcastNet
    from concast.topologies.linkstate import StateReader
    net = (ConcastNet().router("r1").router("r2")
           .host("h1", router="r1", delay="5ms").host("h2", router="r2")
           .link("r1", "r2", delay="5ms", bw=50))
    with net.start() as n:
        emu = n.emulator
        assert emu is not None
        # Each way h1 -> h2 crosses 5 + 5 ms of emulated delay (and two OVS hops).
        got = rtts(n["h1"], n.ip("h2"), 10, interval=0.1)
        assert len(got) >= 8 and min(got) >= 20, got
        assert tcp_transfer(n, "h1", "h2", 1_000_000)   # checksums complete through TAPs + OVS
        cfg = json.loads((n.run_dir / "routers" / "r1.json").read_text())
        assert cfg["link_state"] == str(emu.state_path)
        slots = {r["iface"]: r["link_slot"] for r in cfg["egress_routes"]}
        assert set(slots) == {r["iface"] for r in cfg["egress_routes"]} and len(slots) == 2
        with StateReader(emu.state_path) as state:
            rates = {state.read(s).rate_bps for s in slots.values()}
        assert rates == {0, 50_000_000}      # the host port (no bw) and the r1-r2 link
        pid, state_path = emu.pid, emu.state_path
        assert any(d["name"] == "linkemu" and d["pid"] == pid for d in n.record.data["daemons"])
    assert not state_path.exists()
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
