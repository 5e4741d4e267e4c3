"""A server that dies mid-run (docs/cluster.md): detected and reported, not hung on; the
rest of the network still stops, and nothing is left behind on the servers or the driver."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

pytestmark = pytest.mark.mininet

DETECT_S = 20       # ssh notices a killed server at once (its connections close); a bound
HUNG_S = 180        # stop() still running after this is hung (it hung for good before the fix)


def test_a_killed_server_is_detected_and_the_rest_stops(capsys):
    from clustertools import emulated, net_leftovers
    from concast.topologies import line
    from concast.topologies.cluster.running import ServerDown
    with emulated(["x", "y"]) as servers:
        net = line(n_routers=2, senders=1, dataplane="linux").servers(
            ["x", "y"], state_dir=servers.state.state_dir).start()
        try:
            assert net.placement["s1"] == "x" and net.placement["rx"] == "y"
            assert net.ping("s1", "rx", timeout=3).ok
            rd, hd = net.start_concast(hold=3, timeout=60)
            y = next(s for s in servers.state.servers if s.name == "y")
            os.kill(y.init_pid, signal.SIGKILL)         # the whole server, at once
            t = time.monotonic()
            while "y" not in net.servers_down() and time.monotonic() - t < DETECT_S:
                time.sleep(0.5)
            assert net.servers_down() == ["y"]
            assert not net.ping("s1", "rx", timeout=2).ok
            with pytest.raises(ServerDown, match="server y"):
                net.ping("rx", "s1")
            # A command on a node of the dead server ends with ServerDown (it used to hang).
            with pytest.raises(ServerDown, match="server y"):
                net.mn["rx"].cmd("true")
            assert not hd["rx"].alive() and hd["s1"].alive()
        finally:
            stopper = threading.Thread(target=net.stop, daemon=True)
            stopper.start()
            stopper.join(HUNG_S)
        assert not stopper.is_alive(), "stop() hangs on the dead server"
        assert "y do not answer" in capsys.readouterr().out
        # Server x is clean: no namespace, no daemon of the network left.
        assert servers.ssh("x", "ip netns list").stdout.strip() == ""
        assert "concast-" not in servers.ssh("x", "ps -e -o comm=").stdout
        assert net_leftovers(net.tag) == []
    # emulated() has removed both servers and checked that nothing of them is left.
