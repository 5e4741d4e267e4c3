"""Emulated servers on one machine, for testing Mininet Cluster Edition (docs/cluster.md).

Each "server" is a set of namespaces of its own: a named network namespace (`ccsK-NAME`), and
inside it new mount, PID and UTS namespaces with private /tmp, /run and /dev/shm and its own
hostname. K numbers the set: each set claims its own bridge `ccsbrK` and subnet 10.251.K.0/24,
so two sets (two test runs at once, or a leftover of a killed one) never share a name or an
address. Its only way in is its own sshd (generated host key, root login by a generated key
pair, PermitTunnel yes) listening on its own address on a bridge in the root namespace. So a
command that forgets its server runs in the wrong namespaces and fails visibly.

Everything made is written to STATE_DIR/servers.json as it is made, and `down` removes
exactly that: the sshd/init processes by PID, the namespaces, veths and bridge by name, and
the state directory. Nothing is killed by name.

    servers = EmulatedServers.up(["a", "b"])       # or scripts/cluster_servers.py up a b
    servers.ssh("a", "hostname")                    # -> "a"
    servers.down()
"""
from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_DIR = Path("/var/tmp/ccs-cluster")    # not /tmp: the servers' /tmp is private
PREFIX = "ccs"                              # every name we make starts with it
SUBNETS = "10.251"                          # set K: 10.251.K.0/24, driver .1, servers .11, ...
MAX_SETS = 250
PRIVATE = ("/tmp", "/run", "/dev/shm")      # what each server has of its own
SSHD_WAIT = 30.0                            # seconds a new server's sshd has to answer
# The underlay MTU. VXLAN over IPv4 adds 50 bytes (outer IP 20, UDP 8, VXLAN 8, inner
# Ethernet 14), so 1550 on the servers' links keeps a 1500-byte MTU inside (topologies/cluster/links.py).
UNDERLAY_MTU = 1550


@dataclass
class Server:
    name: str
    ip: str
    netns: str          # the named network namespace
    veth: str           # its root-namespace end (on the bridge)
    pid: int = 0        # `unshare`, in the root PID namespace
    init_pid: int = 0   # the namespaces' init (bash, PID 1 inside), in the root PID namespace


@dataclass
class ClusterState:
    state_dir: str
    bridge: str
    driver_ip: str
    mtu: int
    servers: list[Server] = field(default_factory=list)

    @property
    def ssh_config(self) -> Path:
        return Path(self.state_dir) / "ssh_config"

    def ip_of(self, name: str) -> str:
        for s in self.servers:
            if s.name == name:
                return s.ip
        raise KeyError(f"no emulated server {name!r} (have {[s.name for s in self.servers]})")


class ClusterError(RuntimeError):
    pass


class ServerDown(ClusterError):
    """A server stopped answering (its shells ended, ssh fails or times out)."""

    def __init__(self, server: str, what: str) -> None:
        super().__init__(f"server {server}: {what}")
        self.server = server


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)}: {p.stderr.strip() or p.stdout.strip()}")
    return p


def why_not() -> str | None:
    """Why emulated servers cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (network, mount and PID namespaces)"
    for tool in ("sshd", "ssh", "ssh-keygen", "unshare", "ip", "sudo", "mnexec"):
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is not installed (make setup installs openssh-server, sudo, mininet)"
    return None


def _sshd_config(state: Path, srv: Server) -> str:
    return "\n".join([
        f"ListenAddress {srv.ip}",
        f"HostKey {state / srv.name / 'ssh_host_ed25519_key'}",
        f"PidFile /run/sshd.pid",            # the server's own (private) /run
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        f"AuthorizedKeysFile {state / 'authorized_keys'}",
        "StrictModes no",                    # the state directory lives under /var/tmp (1777)
        "PermitTunnel yes",                  # the SSH-tunnel link (RemoteSSHLink)
        "AllowAgentForwarding yes",
        "UsePAM no",
        "MaxStartups 200",                   # MininetCluster opens one ssh per node
        "MaxSessions 200",
        "LogLevel ERROR",
        "",
    ])


def _ssh_config(state: Path, st: ClusterState) -> str:
    lines = []
    for s in st.servers:
        lines += [f"Host {s.name} {s.ip}", f"    HostName {s.ip}", f"    HostKeyAlias ccs-{s.name}"]
    lines += [
        "Host *",
        "    User root",
        f"    IdentityFile {state / 'id_ed25519'}",
        "    IdentitiesOnly yes",
        f"    UserKnownHostsFile {state / 'known_hosts'}",
        "    StrictHostKeyChecking yes",
        "    BatchMode yes",
        "    ConnectTimeout 10",
        # One connection per server, shared by every command and node shell: a new ssh
        # handshake per command made a 14-node network take a minute to start.
        "    ControlMaster auto",
        f"    ControlPath {state / 'cm-%C'}",
        "    ControlPersist 30",
        # A server that stops answering is noticed within 15 s (one that is killed at once:
        # its connections close); long enough that a loaded machine is not taken for dead.
        "    ServerAliveInterval 5",
        "    ServerAliveCountMax 3",
        "    LogLevel ERROR",
        "",
    ]
    return "\n".join(lines)


# The init of each server's namespaces: private /tmp, /run, /dev/shm, its hostname (and an
# /etc/hosts naming it and the other servers: sudo looks its own name up), its sshd.
# Shared paths (the checkout, when it lives under /tmp: every server has the same checkout at
# the same path, docs/cluster.md) are bound aside before the private tmpfs cover them, then
# moved back to the same path.
# bash is PID 1 of the new PID namespace: it reaps orphans (daemons started over ssh) and, on
# TERM, stops sshd; when it exits the kernel kills whatever is left in the namespace.
_INIT = r"""
set -e
name="$1" sshd_config="$2" hosts="$3" hold="$4"
shift 4
mount --make-rprivate /
i=0; for p in "$@"; do mkdir -p "$hold/$i"; mount --bind "$p" "$hold/$i"; i=$((i+1)); done
mount -t tmpfs -o mode=1777 ccs-tmp /tmp
mount -t tmpfs -o mode=0755 ccs-run /run
mount -t tmpfs -o mode=1777 ccs-shm /dev/shm
i=0; for p in "$@"; do mkdir -p "$p"; mount --move "$hold/$i" "$p"; i=$((i+1)); done
mkdir -p /run/sshd
mount --bind "$hosts" /etc/hosts
hostname "$name"
ip link set lo up
/usr/sbin/sshd -D -e -f "$sshd_config" &
trap 'kill -TERM $! 2>/dev/null' TERM INT
wait
"""


def _private(path: Path) -> bool:
    """Whether `path` is hidden from the servers by their private /tmp, /run, /dev/shm."""
    return any(path == Path(d) or Path(d) in path.parents for d in PRIVATE)


def default_share() -> list[Path]:
    """The checkout, if the servers would not see it otherwise (a clone under /tmp, as CI
    makes): the daemons' binaries and the tests' helper scripts are read from it there."""
    from concast import tools
    return [tools.CHECKOUT] if tools.CHECKOUT and _private(tools.CHECKOUT) else []


def _in_use(subnet: str) -> bool:
    """An address or route of the driver's already in subnet.0/24 (another set, a leftover)."""
    net = ipaddress.ip_network(f"{subnet}.0/24")
    addrs = _run("ip", "-o", "-4", "addr", "show").stdout
    if any(ipaddress.ip_interface(a).network.overlaps(net)
           for a in re.findall(r"\binet (\S+)", addrs)):
        return True
    for line in _run("ip", "-4", "route", "show").stdout.splitlines():
        dst = line.split()[0] if line.split() else "default"
        if dst != "default" and ipaddress.ip_network(dst, strict=False).overlaps(net):
            return True
    return False


class EmulatedServers:
    def __init__(self, state: ClusterState) -> None:
        self.state = state

    # --- making ----------------------------------------------------------------------
    @classmethod
    def up(cls, names: list[str], state_dir: Path | str = STATE_DIR, mtu: int = UNDERLAY_MTU,
           timeout: float = SSHD_WAIT, share: list[Path] | None = None) -> "EmulatedServers":
        """Makes the servers; `share`: driver paths every server sees at the same path
        (default: the checkout, if it is under /tmp, /run or /dev/shm)."""
        reason = why_not()
        if reason:
            raise ClusterError(reason)
        state_dir = Path(state_dir)
        if (state_dir / "servers.json").exists():
            raise ClusterError(f"{state_dir} already holds emulated servers: "
                               f"`scripts/cluster_servers.py down --state {state_dir}` first")
        bad = [n for n in names if not n.isalnum() or len(n) > 10]
        if bad or not names or len(set(names)) != len(names):
            raise ClusterError(f"server names must be distinct, alphanumeric, <= 10 chars: {names}")
        share = [Path(p).resolve() for p in (default_share() if share is None else share)]
        share = [p for p in share if _private(p)]
        state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(state_dir, 0o700)
        st = ClusterState(str(state_dir), "", "", mtu)
        self = cls(st)
        try:
            subnet = self._claim()
            self._make(names, subnet, timeout, share)
        except BaseException:
            self.down()
            raise
        return self

    def _claim(self) -> str:
        """Claims set number K: its bridge (`ip link add` fails if another set has it, so two
        sets made at once cannot both get K) and its subnet, which must be unused."""
        st = self.state
        for k in range(MAX_SETS):
            bridge, subnet = f"{PREFIX}br{k}", f"{SUBNETS}.{k}"
            if _run("ip", "link", "add", bridge, "type", "bridge", check=False).returncode:
                continue
            st.bridge = bridge      # ours now: down() removes it
            self._save()
            if not _in_use(subnet):
                st.driver_ip = f"{subnet}.1"
                self._save()
                return subnet
            _run("ip", "link", "del", bridge, check=False)
            st.bridge = ""
        raise ClusterError(f"no free set of emulated servers: bridges {PREFIX}br0..{MAX_SETS - 1} "
                           f"or subnets {SUBNETS}.0-{MAX_SETS - 1}.0/24 all in use")

    def _save(self) -> None:
        d = asdict(self.state)
        (Path(self.state.state_dir) / "servers.json").write_text(json.dumps(d, indent=1) + "\n")

    def _make(self, names: list[str], subnet: str, timeout: float, share: list[Path]) -> None:
        st, state = self.state, Path(self.state.state_dir)
        k = st.bridge[len(PREFIX) + 2:]
        self._save()
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ccs-driver",
             "-f", str(state / "id_ed25519"))
        (state / "authorized_keys").write_text((state / "id_ed25519.pub").read_text())
        _run("ip", "link", "set", st.bridge, "mtu", str(st.mtu), "up")
        _run("ip", "addr", "add", f"{st.driver_ip}/24", "dev", st.bridge)
        known = []
        hosts = "".join(f"{subnet}.{11 + i}\t{n}\n" for i, n in enumerate(names))
        for i, name in enumerate(names):
            srv = Server(name, f"{subnet}.{11 + i}", f"{PREFIX}{k}-{name}", f"{PREFIX}{k}v{i}")
            st.servers.append(srv)
            self._save()
            (state / name).mkdir()
            _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"ccs-{name}",
                 "-f", str(state / name / "ssh_host_ed25519_key"))
            pub = (state / name / "ssh_host_ed25519_key.pub").read_text().split()
            known.append(f"ccs-{name} {pub[0]} {pub[1]}")
            (state / name / "sshd_config").write_text(_sshd_config(state, srv))
            (state / name / "hosts").write_text(f"127.0.0.1\tlocalhost\n{hosts}")
            _run("ip", "netns", "add", srv.netns)
            _run("ip", "link", "add", srv.veth, "mtu", str(st.mtu), "type", "veth",
                 "peer", "name", "eth0", "mtu", str(st.mtu), "netns", srv.netns)
            _run("ip", "link", "set", srv.veth, "master", st.bridge, "up")
            _run("ip", "-n", srv.netns, "addr", "add", f"{srv.ip}/24", "dev", "eth0")
            _run("ip", "-n", srv.netns, "link", "set", "eth0", "up")
            log = open(state / name / "init.log", "wb")
            p = subprocess.Popen(
                ["ip", "netns", "exec", srv.netns, "unshare", "--mount", "--uts", "--pid",
                 "--fork", "--kill-child", "--mount-proc", "bash", "-c", _INIT, "ccs-init", name,
                 str(state / name / "sshd_config"), str(state / name / "hosts"),
                 str(state / name / "hold"), *map(str, share)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
            log.close()
            srv.pid = p.pid     # `ip netns exec` execs unshare: this is unshare's PID
            self._save()
            srv.init_pid = _child_of(p.pid, timeout)
            self._save()
        (state / "known_hosts").write_text("\n".join(known) + "\n")
        st_cfg = _ssh_config(state, st)
        st.ssh_config.write_text(st_cfg)
        self._save()
        for srv in st.servers:
            self._wait_sshd(srv, timeout)

    def _wait_sshd(self, srv: Server, timeout: float) -> None:
        """Until the server's sshd takes a login (it listens some time after its init
        starts; nothing announces it), at most `timeout` s; else which server, and why."""
        state = Path(self.state.state_dir)
        deadline = time.monotonic() + timeout
        while True:
            if not _is_ours(srv.pid):
                log = (state / srv.name / "init.log").read_text(errors="replace")
                raise ClusterError(f"server {srv.name}: its init exited: {log.strip()}")
            left = deadline - time.monotonic()
            try:
                p = self.ssh(srv.name, "true", check=False, timeout=max(1.0, left))
            except ServerDown:
                p = None
            if p is not None and p.returncode == 0:
                return
            if time.monotonic() > deadline:
                log = (state / srv.name / "init.log").read_text(errors="replace")
                why = p.stderr.strip() if p is not None else "ssh timed out"
                raise ClusterError(f"server {srv.name}: sshd does not answer on {srv.ip} within "
                                   f"{timeout:.0f} s: {why} {log.strip()}")
            time.sleep(0.2)

    # --- using -----------------------------------------------------------------------
    @classmethod
    def load(cls, state_dir: Path | str = STATE_DIR) -> "EmulatedServers":
        f = Path(state_dir) / "servers.json"
        try:
            d = json.loads(f.read_text())
        except FileNotFoundError:
            raise ClusterError(f"no emulated servers in {state_dir} "
                               "(make them with `scripts/cluster_servers.py up NAME...`)")
        d["servers"] = [Server(**s) for s in d["servers"]]
        return cls(ClusterState(**d))

    def ssh_cmd(self, name: str) -> list[str]:
        return ["ssh", "-F", str(self.state.ssh_config), name]

    def ssh(self, name: str, command: str, check: bool = True, timeout: float = 30):
        try:
            p = subprocess.run(self.ssh_cmd(name) + [command], capture_output=True, text=True,
                               timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ServerDown(name, f"ssh {command!r} did not finish within {timeout:.0f} s")
        if check and p.returncode != 0:
            raise ClusterError(f"ssh {name} {command!r}: rc {p.returncode}: {p.stderr.strip()}")
        return p

    # --- removing --------------------------------------------------------------------
    def down(self) -> list[str]:
        """Remove exactly what up() made (as recorded); returns what was removed."""
        st, done = self.state, []
        for srv in st.servers:
            # The driver's shared connection to it (ControlMaster) first: it would otherwise
            # linger up to ControlPersist after its server is gone.
            if st.ssh_config.exists():
                try:
                    subprocess.run(self.ssh_cmd(srv.name) + ["-O", "exit"], capture_output=True,
                                   timeout=5, stdin=subprocess.DEVNULL)
                except subprocess.TimeoutExpired:
                    pass
            # Killing the init (PID 1 of the server's PID namespace) kills every process in
            # it; unshare, its parent, then exits.
            if srv.init_pid and _is_ours(srv.pid):
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.kill(srv.init_pid, sig)
                    except ProcessLookupError:
                        break
                    if _wait_gone(srv.init_pid, 3.0):
                        break
                done.append(f"server {srv.name} (init {srv.init_pid}, unshare {srv.pid})")
            if srv.pid:
                _wait_gone(srv.pid, 3.0)
            if _run("ip", "netns", "del", srv.netns, check=False).returncode == 0:
                done.append(f"netns {srv.netns}")
            if _run("ip", "link", "del", srv.veth, check=False).returncode == 0:
                done.append(f"veth {srv.veth}")
        if st.bridge and _run("ip", "link", "del", st.bridge, check=False).returncode == 0:
            done.append(f"bridge {st.bridge}")
        if Path(st.state_dir).exists():
            shutil.rmtree(st.state_dir)
            done.append(f"dir {st.state_dir}")
        return done


def _is_ours(pid: int) -> bool:
    """The PID is still the unshare we started for a server (not a reused PID)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"ccs-init" in cmd


def _child_of(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            raise ClusterError(f"unshare {pid} exited before starting the server's init")
        if kids:
            return int(kids[0])
        time.sleep(0.02)
    raise ClusterError(f"unshare {pid} started no init within {timeout} s")


def _wait_gone(pid: int, timeout: float) -> bool:
    """Waits for `pid` to exit (reaping it if it is our child); True if it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if _zombie(pid):
            return True
        time.sleep(0.05)
    return False


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
