"""Mininet Cluster Edition on two emulated servers (docs/cluster.md): each server its own
namespaces and sshd, reached only over ssh; a VXLAN link and the SSH-tunnel fallback between
them; cleanup leaves nothing behind."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.mininet

HOSTTCP = Path(__file__).parent / "hosttcp.py"    # servers see the checkout at this path
SIZE = 4 << 20


@pytest.fixture(scope="module")
def servers(emulated_servers):
    return emulated_servers


@pytest.fixture(scope="module")
def net(servers):
    from mininet.examples.cluster import MininetCluster
    from concast.topologies.cluster.links import ClusterHost, SshLink, VxlanLink, use_ssh_config
    use_ssh_config(servers.state.ssh_config)
    ips = {s.name: s.ip for s in servers.state.servers}
    n = MininetCluster(servers=list(ips), serverIP=ips, user="root", link=VxlanLink,
                       host=ClusterHost, controller=None, topo=None, build=False)
    try:
        h = {name: n.addHost(name, server=srv, serverIP=ips[srv], user="root")
             for name, srv in (("h1", "a"), ("h2", "b"), ("h3", "a"), ("h4", "b"))}
        n.addLink(h["h1"], h["h2"])
        n.addLink(h["h3"], h["h4"], cls=SshLink)
        n.build()
        yield n
    finally:
        if not getattr(n, "ccs_stopped", False):
            n.stop()
        use_ssh_config(None)


def test_each_server_is_its_own_machine(servers):
    for srv in servers.state.servers:
        p = servers.ssh(srv.name, "hostname; ip -o -4 addr show; echo pid $$; "
                        "touch /tmp/ccs-mark; ls /tmp; cat /proc/1/comm")
        lines = p.stdout.split("\n")
        assert lines[0] == srv.name
        assert f"inet {srv.ip}/24" in p.stdout
        others = [o.ip for o in servers.state.servers if o.name != srv.name]
        assert not any(f"inet {ip}/" in p.stdout for ip in others)
        assert "ccs-mark" in p.stdout
        assert "bash" in p.stdout.split("\n")[-2]     # PID 1 of its own PID namespace
    # Its /tmp is its own: the driver's /tmp does not get the file.
    assert not Path("/tmp/ccs-mark").exists()


def test_a_second_set_gets_its_own_names_and_subnet(servers):
    """Two sets at once (two test runs, or a leftover) share no name and no address."""
    from clustertools import emulated
    with emulated(["a"]) as other:
        mine, theirs = servers.state, other.state
        assert mine.bridge != theirs.bridge
        assert mine.driver_ip.rsplit(".", 1)[0] != theirs.driver_ip.rsplit(".", 1)[0]
        assert mine.servers[0].netns != theirs.servers[0].netns
        assert other.ssh("a", "hostname").stdout.strip() == "a"
        assert servers.ssh("a", "ip -o -4 addr show eth0").stdout.count(mine.servers[0].ip)
    assert servers.ssh("a", "hostname").stdout.strip() == "a"    # ours untouched


def test_vxlan_link_carries_ping_full_mtu_and_tcp(net):
    h1, h2 = net["h1"], net["h2"]
    link = net.linksBetween(h1, h2)[0]
    assert link.mtu == 1500 and link.vni is not None
    assert f"vxlan id {link.vni}" in h1.cmd("ip -d link show h1-eth0")
    assert h1.cmd("hostname").strip() == "a" and h2.cmd("hostname").strip() == "b"
    out = h1.cmd(f"ping -c2 -W2 -M do -s 1472 {h2.IP()}")    # a full 1500-byte packet, DF
    assert " 0% packet loss" in out, out
    recv = h2.popen(["python3", str(HOSTTCP), "serve", "5001"], stdout=subprocess.PIPE,
                    text=True)
    try:
        assert recv.stdout.readline().strip() == "listening"
        sent = h1.cmd(f"python3 {HOSTTCP} send {h2.IP()} 5001 {SIZE}").split()
        got = recv.communicate(timeout=60)[0].split()
    finally:
        if recv.poll() is None:
            recv.kill()
    assert sent[:1] == [str(SIZE)] and got == sent, (sent, got)


def test_ssh_tunnel_link_is_the_fallback(net):
    h3, h4 = net["h3"], net["h4"]
    assert "tun" in h3.cmd("ip -d link show h3-eth0")     # a TAP, not a veth or VXLAN
    out = h3.cmd(f"ping -c2 -W3 {h4.IP()}")
    assert " 0% packet loss" in out, out


def test_down_leaves_nothing(servers, net):
    """Last: the network, then the servers (the fixture's own removal finds nothing left)."""
    from clustertools import leftovers
    from concast.topologies.cluster.servers import EmulatedServers
    net.stop()
    net.ccs_stopped = True
    for s in ("a", "b"):    # the VXLAN devices and TAPs went with the links
        out = servers.ssh(s, "ip -o link show").stdout
        assert {ln.split(":")[1].strip().split("@")[0] for ln in out.splitlines()} \
            == {"lo", "eth0"}, out
        ps = servers.ssh(s, "ps -e -o comm=").stdout.split()
        assert set(ps) <= {"bash", "sshd", "ps"}, ps      # the tunnel's ssh ended too
    assert leftovers(servers)          # the check sees the servers while they are there...
    removed = EmulatedServers.load(servers.state.state_dir).down()
    assert removed
    left = leftovers(servers)
    assert left == [], left                              # ... and then nothing is
