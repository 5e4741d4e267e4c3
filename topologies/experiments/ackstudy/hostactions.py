"""The ACK study's per-host actions, on one machine or through each host's server.

What the testbed does to hosts outside hostd: the TCP settings of their namespaces (no
metrics cache, congestion control, route options), the page server on sv, the fetcher for
every client, the cross traffic, and the CPU times the fidelity columns need.

- `LocalActions`: one machine; the driver enters the namespaces itself (as before).
- `ClusterActions`: a network over servers (docs/cluster.md). Each action runs on the
  server of the hosts it touches, as the same Python module the local path uses, started
  over ssh (`ServerSet.argv`), in the hosts' namespaces there (their /run/netns names exist
  only there); its files are in a scratch folder on that server (/tmp/concast/ha-TAG, never
  the results folder, which a server may share with the driver) and its result is read back
  over ssh into the results folder; the scratch folders go at stop. One fetcher
  per server with that server's clients, all started together, their records merged; cross
  traffic has a receiver on each server that has a flow's destination and a sender on each
  that has a flow's source. Nothing here enters a namespace from the driver.

`python -m concast.topologies.experiments.ackstudy.hostactions tcp|nometrics ...` is what a
server runs for the namespace settings (JSON on stdout).
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from concast.topologies.workload.tcpsettings import TcpSettings

MODULE = "concast.topologies.experiments.ackstudy.hostactions"
# How far ahead the fetchers' common release is set: ssh, Python's start and the clients'
# sockets come first (about 0.2-1 s measured at load 4-11 with 12-15 clients a server).
RELEASE_LEAD_S = 3.0


def for_net(net):
    """The actions for `net`: through its servers when it runs on a cluster."""
    return ClusterActions(net) if getattr(net, "servers", None) is not None and \
        hasattr(net, "placement") else LocalActions(net)


def _tcp_args(t: TcpSettings) -> list[str]:
    out = []
    for k in ("cc", "initcwnd", "advmss"):
        if getattr(t, k) is not None:
            out += [f"--{k}", str(getattr(t, k))]
    if t.quickack is not None:
        out += ["--quickack", "1" if t.quickack else "0"]
    return out


def _no_metrics_cache(netns_names: list[str]) -> None:
    """TCP forgets each path's metrics in these namespaces: every run starts cold."""
    from concast import netns as ns
    ns.run_in([(n, lambda: ns.write_sysctl("net.ipv4.tcp_no_metrics_save", "1"))
               for n in netns_names])


class LocalActions:
    def __init__(self, net) -> None:
        self.net = net

    def no_metrics_cache(self, hosts: list[str]) -> None:
        _no_metrics_cache([self.net.netns(h) for h in hosts])

    def tcp_apply(self, hosts: list[str], tcp: TcpSettings) -> dict:
        from concast.topologies.workload import tcpsettings
        return tcpsettings.apply([self.net.netns(h) for h in hosts], tcp)

    def page_server(self, host: str, port: int, size: int, seed: int, out: Path,
                    tcp: TcpSettings):
        from concast.topologies.workload import web
        return web.PageServer(self.net.netns(host), port=port, size=size, seed=seed, out=out,
                              tcp=tcp)

    def fetch_all(self, clients: list[str], server_ip: str, port: int, size: int, seed: int,
                  timeout: float, out_dir: Path) -> dict:
        from concast.topologies.workload import web
        return web.fetch_all({c: self.net.netns(c) for c in clients}, server_ip, port,
                             size=size, seed=seed, timeout=timeout, read_back=False).to_dict()

    def cross_traffic(self, flows, work_dir: Path):
        from concast.topologies.workload import cross
        return cross.CrossTraffic(flows, work_dir).start()

    def cpu_times(self) -> dict[str, int]:
        from concast.topologies.experiments.ackstudy import fidelity
        return fidelity.read_cpu_times()

    def close(self) -> None:
        pass


class RemoteChild:
    """launch.Child on a server: `python -m MODULE args --out REMOTE` started over ssh, its
    ready line read through the session, stopped by its PID (the server's) with SIGTERM,
    its summary read back over ssh into `local` on the driver."""

    def __init__(self, servers, server: str, module: str, args: list[str], remote: Path,
                 local: Path, ready_timeout: float = 60.0) -> None:
        from concast.topologies.workload.launch import ChildFailed
        self.servers, self.server, self.out = servers, server, Path(remote)
        self.local = Path(local)
        self.local.parent.mkdir(parents=True, exist_ok=True)
        self.pidfile = f"{self.out}.pid"
        self.log_path = self.local.with_suffix(".log")
        inner = [sys.executable, "-m", module, *args, "--out", str(self.out)]
        script = (f"mkdir -p {shlex.quote(str(self.out.parent))} && rm -f "
                  f"{shlex.quote(str(self.out))} && echo $$ > {shlex.quote(self.pidfile)} && "
                  f"exec {shlex.join(inner)}")
        self._log = open(self.log_path, "ab")
        self.popen = subprocess.Popen(servers.argv(server, ["sh", "-c", script]),
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=self._log, start_new_session=True)
        line = self._ready_line(ready_timeout)
        msg = json.loads(line) if line else {}
        if not msg.get("ready"):
            self.stop()
            raise ChildFailed(f"{module} on {server}: {msg.get('error') or 'no ready line'}; "
                              f"see {self.log_path}")
        self.ready = msg
        self.pid = msg.get("pid")

    def _ready_line(self, timeout: float) -> bytes:
        from concast.topologies.workload.launch import read_first_line
        return read_first_line(self.popen, timeout).split(b"\n", 1)[0]

    def stop(self, timeout: float = 10.0) -> dict | None:
        script = (f"p=$(cat {shlex.quote(self.pidfile)} 2>/dev/null) || exit 0; kill $p; "
                  f"for i in $(seq {int(timeout * 10)}); do kill -0 $p 2>/dev/null || break; "
                  "sleep 0.1; done; kill -9 $p 2>/dev/null; true")
        summary = None
        try:
            self.servers.run(self.server, ["sh", "-c", script], check=False, timeout=timeout + 10)
            text = self.servers.run(self.server, ["sh", "-c", f"cat {shlex.quote(str(self.out))}"
                                                  f" 2>/dev/null; rm -f {shlex.quote(self.pidfile)}"],
                                    check=False, timeout=30)
            summary = json.loads(text) if text.strip() else None
        except ValueError:
            summary = None
        finally:
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
            self.popen.stdout.close()
            self._log.close()
        if summary is not None:
            self.local.write_text(json.dumps(summary, indent=1) + "\n")
        return summary


class RemotePageServer:
    def __init__(self, child: RemoteChild, tcp_state: dict | None) -> None:
        self.child, self.tcp_state = child, tcp_state
        self.port, self.pid = child.ready.get("port"), child.pid

    def stop(self) -> dict | None:
        s = self.child.stop()
        if s is not None and self.tcp_state is not None:
            s["tcp"] = self.tcp_state
        return s


class RemoteCrossTraffic:
    """cross.CrossTraffic over the servers: receivers first, then senders, each the same
    `cross recv/send --spec` process the local path starts, with the flows of its server."""

    def __init__(self, servers, placement, flows, work_dir: Path, scratch: Path,
                 drain_s: float = 1.0) -> None:
        from concast.topologies.workload import cross
        self.servers, self.flows, self.dir = servers, flows, Path(work_dir)
        self.scratch = Path(scratch) / self.dir.name
        self.drain_s = drain_s
        self.dir.mkdir(parents=True, exist_ok=True)
        self.recv: list[RemoteChild] = []
        self.send: list[RemoteChild] = []
        self.by_role = {}
        for role, key in (("recv", "dst"), ("send", "src")):
            for s in servers.names:
                mine = [f for f in flows if placement[getattr(f, key)] == s]
                if mine:
                    spec = self.dir / f"flows-{role}-{s}.json"
                    cross.save_spec(mine, spec)
                    self.by_role.setdefault(role, []).append((s, spec))

    def start(self) -> "RemoteCrossTraffic":
        from concast.topologies.workload import cross
        try:
            for role, dest in (("recv", self.recv), ("send", self.send)):
                for s, spec in self.by_role.get(role, []):
                    remote = self.scratch / spec.name
                    _put(self.servers, s, spec, remote)
                    dest.append(RemoteChild(self.servers, s, cross.MODULE,
                                            [role, "--spec", str(remote)],
                                            self.scratch / f"{role}.json",
                                            self.dir / f"{role}-{s}.json"))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> dict:
        from concast.topologies.workload import cross
        sent = _merge([c.stop() for c in self.send])
        if self.recv:
            time.sleep(self.drain_s)
        received = _merge([c.stop() for c in self.recv])
        self.send, self.recv = [], []
        for s in {s for pairs in self.by_role.values() for s, _ in pairs}:
            self.servers.run(s, ["rm", "-rf", str(self.scratch)], check=False, timeout=30)
        result = cross.report(self.flows, sent, received)
        result["servers"] = {role: [s for s, _ in pairs] for role, pairs in self.by_role.items()}
        (self.dir / "report.json").write_text(json.dumps(result, indent=1) + "\n")
        return result


def _merge(summaries: list[dict | None]) -> dict | None:
    got = [s for s in summaries if s]
    if not got:
        return None
    flows = {k: v for s in got for k, v in s.get("flows", {}).items()}
    return {"flows": flows, "cpu_s": sum(s.get("cpu_s") or 0 for s in got)}


def _put(servers, server: str, path: Path, remote: Path) -> None:
    """A driver file to `remote` on `server`."""
    servers.run(server, ["sh", "-c", f"mkdir -p {shlex.quote(str(remote.parent))} && cat > "
                         f"{shlex.quote(str(remote))}"], stdin=path.read_text())


class ClusterActions:
    def __init__(self, net) -> None:
        self.net = net
        self.servers = net.servers
        self.placement = net.placement
        self.scratch = Path(f"/tmp/concast/ha-{net.tag}")     # on each server

    def _by_server(self, hosts: list[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for h in hosts:
            out.setdefault(self.placement[h], []).append(h)
        return out

    def _on_each(self, hosts: list[str], argv_of) -> dict:
        """One command per server over that server's hosts, run at once; their JSON merged."""
        procs = {s: subprocess.Popen(self.servers.argv(s, argv_of(hs)), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
                 for s, hs in self._by_server(hosts).items()}
        merged = {}
        for s, p in procs.items():
            out, err = p.communicate(timeout=300)
            if p.returncode != 0:
                raise RuntimeError(f"on {s}: {' '.join(argv_of([])[:5])}...: {err.strip()}")
            merged.update(json.loads(out or "{}"))
        return merged

    def _module(self, *args: str) -> list[str]:
        return [sys.executable, "-m", MODULE, *args]

    def no_metrics_cache(self, hosts: list[str]) -> None:
        self._on_each(hosts, lambda hs: self._module(
            "nometrics", *[self.net.netns(h) for h in hs]))

    def tcp_apply(self, hosts: list[str], tcp: TcpSettings) -> dict:
        return self._on_each(hosts, lambda hs: self._module(
            "tcp", *_tcp_args(tcp), *[self.net.netns(h) for h in hs]))

    def page_server(self, host: str, port: int, size: int, seed: int, out: Path,
                    tcp: TcpSettings):
        from concast.topologies.workload import tcpsettings, web
        state = tcpsettings.summarize(self.tcp_apply([host], tcp)) if tcp else None
        child = RemoteChild(self.servers, self.placement[host], web.MODULE,
                            ["serve", "--port", str(port), "--size", str(size), "--seed",
                             str(seed), "--netns", self.net.netns(host)],
                            self.scratch / "server.json", Path(out))
        return RemotePageServer(child, state)

    def fetch_all(self, clients: list[str], server_ip: str, port: int, size: int, seed: int,
                  timeout: float, out_dir: Path) -> dict:
        """One fetcher per server with its clients, all releasing their connects at one
        CLOCK_REALTIME instant (RELEASE_LEAD_S ahead: ssh, Python and the sockets' set-up
        come first); records merged. Each fetcher's times are relative to its own first
        connect; how late each released is in its settings (`release_late_ms`)."""
        from concast.topologies.workload import stats, web
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        procs = {}
        release_at = time.time_ns() + int(RELEASE_LEAD_S * 1e9)
        for s, hs in self._by_server(clients).items():
            spec = out_dir / f"fetch-clients-{s}.json"
            spec.write_text(json.dumps({h: self.net.netns(h) for h in hs}))
            remote = self.scratch / "fetch"
            _put(self.servers, s, spec, remote / "clients.json")
            out = remote / "result.json"
            argv = [sys.executable, "-m", web.MODULE, "fetch", "--server", server_ip,
                    "--port", str(port), "--size", str(size), "--seed", str(seed),
                    "--timeout", str(timeout), "--clients-file", str(remote / "clients.json"),
                    "--out", str(out), "--no-read-back", "--release-at-ns", str(release_at)]
            procs[s] = (out, subprocess.Popen(self.servers.argv(s, argv), stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True))
        results = []
        for s, (out, p) in procs.items():
            _, err = p.communicate(timeout=timeout + 120)
            text = self.servers.run(s, ["sh", "-c", f"cat {out}; rm -rf {out.parent}"],
                                    check=False)
            if not text.strip():
                raise RuntimeError(f"the fetcher on {s} wrote no result (exit {p.returncode}): "
                                   f"{err.strip()[-300:]}")
            results.append((s, json.loads(text)))
            (out_dir / f"fetch-{s}.json").write_text(text)
        records = [dict(r, server=s) for s, res in results for r in res["clients"]]
        summary = stats.summarize(records)
        summary["release_ms"] = max(res["summary"].get("release_ms") or 0 for _, res in results)
        cpu = {k: sum((res["cpu"].get(k) or 0) for _, res in results)
               for k in ("setup_s", "cpu_s", "user_s", "sys_s")}
        cpu["wall_s"] = max(res["cpu"].get("wall_s") or 0 for _, res in results)
        settings = {**results[0][1]["settings"], "fetchers": {
            s: {k: res["settings"].get(k) for k in ("start_unix_ns", "release_late_ms")}
            for s, res in results}}
        summary["release_late_ms_max"] = max(res["settings"].get("release_late_ms") or 0
                                             for _, res in results)
        return {"settings": settings, "summary": summary, "cpu": cpu, "clients": records}

    def cross_traffic(self, flows, work_dir: Path):
        return RemoteCrossTraffic(self.servers, self.placement, flows, work_dir,
                                  self.scratch).start()

    def close(self) -> None:
        """The scratch folders on every server."""
        for s in self.servers.names:
            try:
                self.servers.run(s, ["rm", "-rf", str(self.scratch)], check=False, timeout=30)
            except RuntimeError as e:
                print(f"concast: {e}: its {self.scratch} is left to it")

    def cpu_times(self) -> dict[str, int]:
        """/proc/stat summed over the servers (each its own machine's CPUs)."""
        from concast.topologies.experiments.ackstudy import fidelity
        total: dict[str, int] = {}
        for s in self.servers.names:
            for k, v in fidelity.cpu_times(self.servers.run(s, ["cat", "/proc/stat"],
                                                            timeout=20)).items():
                total[k] = total.get(k, 0) + v
        return total


# --- what a server runs ------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}",
                                description="TCP settings of host namespaces (JSON out)")
    sub = p.add_subparsers(dest="cmd", required=True)
    nm = sub.add_parser("nometrics", help="net.ipv4.tcp_no_metrics_save=1 in each")
    nm.add_argument("netns", nargs="+")
    tc = sub.add_parser("tcp", help="apply TCP settings; print what each has afterwards")
    tc.add_argument("--cc")
    tc.add_argument("--initcwnd", type=int)
    tc.add_argument("--advmss", type=int)
    tc.add_argument("--quickack", type=int, choices=(0, 1))
    tc.add_argument("netns", nargs="+")
    a = p.parse_args(argv)
    from concast.topologies.workload import tcpsettings
    try:
        if a.cmd == "nometrics":
            _no_metrics_cache(a.netns)
            print("{}")
        else:
            t = TcpSettings(a.cc, a.initcwnd, a.advmss,
                            None if a.quickack is None else bool(a.quickack))
            print(json.dumps(tcpsettings.apply(a.netns, t)))
    except (OSError, ValueError, RuntimeError) as e:
        print(f"{p.prog} {a.cmd}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
