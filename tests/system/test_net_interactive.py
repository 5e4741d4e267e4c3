"""The interactive network as a user meets it (issue #27, item 3): `concast net up tree` on a
terminal (a pty here) gives Mininet's prompt with Mininet's own output on; every command of the
banner works as typed; a sum of two values sent from the prompt, as docs/tutorial.md sends them,
reaches the receiver merged; `--pcap` records a router-to-router link as well as a host's."""
from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

import pytest

from hostdtools import missing_builds      # tests/system is on sys.path (its conftest)

from concast import ROOT

pytestmark = pytest.mark.mininet
CONCAST = [sys.executable, "-m", "concast.cli"]
PROMPT = "concast> "


class Terminal:
    """A command on a pseudo-terminal: send lines, read until a pattern."""

    def __init__(self, argv: list[str], cwd, env: dict):
        self.fd, slave = pty.openpty()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                                     env=env, start_new_session=True, close_fds=True)
        os.close(slave)
        self.text = ""

    def until(self, pattern: str, timeout: float) -> str:
        """Everything read up to and including the first match after the last call."""
        start, deadline = len(self.text), time.monotonic() + timeout
        rx = re.compile(pattern)
        while time.monotonic() < deadline:
            m = rx.search(self.text, start)
            if m:
                self._mark = m.end()          # command() drops what came before it
                return self.text[start:m.end()]
            ready, _, _ = select.select([self.fd], [], [], 0.5)
            if ready:
                try:
                    self.text += os.read(self.fd, 65536).decode(errors="replace")
                except OSError:
                    break
        raise AssertionError(f"no {pattern!r} within {timeout} s; got:\n{self.text[start:][-3000:]}")

    def command(self, line: str, timeout: float = 60) -> str:
        """Types a line at the prompt; returns its output (up to the next prompt)."""
        self.text = self.text[getattr(self, "_mark", 0):]
        self._mark = 0
        os.write(self.fd, (line + "\n").encode())
        return self.until(re.escape(PROMPT), timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.write(self.fd, b"exit\n")
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGTERM)      # net up stops what it made
                self.proc.wait(timeout=60)
        os.close(self.fd)


def banner(text: str) -> list[str]:
    """The commands the banner suggests, as printed."""
    block = text.split("Mininet CLI; try:", 1)[1].splitlines()[1:]
    out = []
    for line in block:
        if not line.startswith("  ") or line.strip().startswith("exit"):
            break
        out.append(line.strip())
    return out


@pytest.mark.parametrize("dataplane", ["linux", "ovs"])
def test_the_prompt_the_banner_and_a_typed_sum(tmp_path, dataplane):
    why = missing_builds()
    if why:
        pytest.skip(why)
    env = dict(os.environ, PATH=f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "build").symlink_to(ROOT / "build")        # the user's folder has the specs
    term = Terminal([*CONCAST, "net", "up", "tree", "--dataplane", dataplane,
                     "--pcap", "rx,r1-r2", "--pcap-dir", str(tmp_path / "pcaps")],
                    tmp_path, env)
    recv = None
    try:
        start = term.until(re.escape(PROMPT), 300)
        hints = banner(start)
        assert hints[:4] == ["nodes", "net", "dump", "pingall"], hints
        assert "capturing on rx, r1-r2" in start
        tag = re.search(r"run tag (\w+)", start).group(1)

        # Mininet's own commands print (the network was started with its log quiet)
        out = term.command("nodes")
        assert "available nodes are" in out and "rx" in out and "routers by name: r1=" in out
        assert re.search(r"^rx rx-eth0:", term.command("net"), re.M)
        assert "Results: 0% dropped" in term.command("pingall", 180)
        # every hint, as typed (the recv runs in rx's shell, in the background)
        for h in hints[4:]:
            out = term.command(h, 120)
            assert not re.search(r"\*\*\* Unknown command|command not found|Traceback|usage:",
                                 out), (h, out)
            if " ping " in h:
                assert " 0% packet loss" in out, (h, out)

        # a path relative to where net up started, at a host's prompt
        out = term.command("rx concast spec check build/mergespecs/sum.wasm", 60)
        assert "build/mergespecs/sum.wasm: a valid concast merge spec" in out, out

        # the tutorial's sum, the two values typed at the prompt
        recv = subprocess.Popen([*CONCAST, "recv", "--node", "rx", "--run", tag, "--group", "8",
                                 "--spec", "sum", "--round-timeout", "5", "--count", "1",
                                 "--timeout", "90"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:      # recv says `ready` once the spec is in
            if select.select([recv.stdout], [], [], 1)[0] and "ready" in recv.stdout.readline():
                break
        out1 = term.command("s1 concast send --to rx --group 8 5", 60)
        out2 = term.command("s3 concast send --to rx --group 8 10", 60)
        assert "sent key=1 value=5" in out1 and "sent key=1 value=10" in out2, (out1, out2)
        rest, _ = recv.communicate(timeout=90)
        assert re.search(r"count=2 value=15", rest), rest
    finally:
        if recv is not None and recv.poll() is None:
            recv.kill()
            recv.wait()
        term.close()
    assert term.proc.returncode == 0
    for name in ("rx.pcapng", "r1-r2.pcapng"):
        assert (tmp_path / "pcaps" / name).stat().st_size > 24, name     # more than a header
