"""docs/tutorial.md runs as written (issue #27, item 4): every `$ COMMAND` of its ```console
blocks, in order, as root in a scratch folder (with the checkout's build/ linked in), with its
output checked against the lines the tutorial shows under it. A command that fails, or whose
output no longer looks as shown, fails this test, so the tutorial cannot rot.

A command ending in `&` runs in the background (a second terminal): the test goes on once the
first line shown under it appears, and checks the rest when it ends (or, still running at the
end, after it is stopped with SIGTERM, as Ctrl-C would)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hostdtools import missing_builds      # tests/system is on sys.path (its conftest)
from tutorial import steps, unmatched

from concast import ROOT

pytestmark = pytest.mark.mininet
DOC = ROOT / "docs" / "tutorial.md"


def test_the_tutorial_has_steps_and_shows_their_output():
    ss = steps(DOC.read_text())
    assert len(ss) >= 10
    assert any(s.background and s.command.startswith("concast net up") for s in ss)
    assert any("decode --pcap" in s.command for s in ss)
    assert any(s.command.startswith("clang ") and "sdk-c" in s.command for s in ss)
    assert any(s.command.startswith("tshark ") and "concast.lua" in s.command for s in ss)
    assert all(s.command.startswith(("concast ", "ls ", "sleep ", "clang ", "tshark "))
               for s in ss), [s.command for s in ss]


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _wait_for(path: Path, proc: subprocess.Popen, pat, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace")
        if any(pat.search(line) for line in text.splitlines()):
            return text
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    return path.read_text(errors="replace")


def test_the_tutorial_runs_as_written(tmp_path):
    why = missing_builds()
    if why:
        pytest.skip(why)
    for folder in ("build", "mergespecs", "scripts"):     # specs, the C SDK, the dissector
        (tmp_path / folder).symlink_to(ROOT / folder)
    env = _env()
    background: list[tuple] = []          # (step, process, output file, index)
    try:
        for n, step in enumerate(steps(DOC.read_text()), 1):
            if step.background:
                out = tmp_path / f"bg-{n}.out"
                f = open(out, "w")
                proc = subprocess.Popen(["bash", "-c", step.command], cwd=tmp_path, env=env,
                                        stdout=f, stderr=subprocess.STDOUT, text=True,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
                background.append((step, proc, out, n))
                first = step.patterns()[:1]
                if first:
                    text = _wait_for(out, proc, first[0], 180)
                    assert any(first[0].search(x) for x in text.splitlines()), \
                        f"step {n} `{step.command}`: never printed {first[0].pattern}:\n{text[-3000:]}"
                continue
            r = subprocess.run(["bash", "-c", step.command], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=900)
            text = r.stdout + r.stderr
            assert r.returncode == 0, f"step {n} `{step.command}` exit {r.returncode}:\n{text[-3000:]}"
            assert not unmatched(step, text), \
                f"step {n} `{step.command}` lacks {unmatched(step, text)}:\n{text[-3000:]}"
        # the background commands that end by themselves (recv --count 1), then the rest
        for step, proc, out, n in background[1:]:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        for step, proc, out, n in background:
            stopped = proc.poll() is None
            if stopped:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=180)
            text = out.read_text(errors="replace")
            assert stopped or proc.returncode == 0, \
                f"step {n} `{step.command}` exit {proc.returncode}:\n{text[-3000:]}"
            assert not unmatched(step, text), \
                f"step {n} `{step.command}` lacks {unmatched(step, text)}:\n{text[-3000:]}"
    finally:
        for _, proc, _, _ in background:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=180)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)


def test_a_changed_output_is_caught():
    from tutorial import Step
    step = Step("concast recv", True, ["...", "ready", "datagram kind=merged ... count=2 value=15"])
    assert not unmatched(step, "spec x\nready\ndatagram kind=merged src=1 count=2 value=15\n")
    assert unmatched(step, "ready\ndatagram kind=merged src=1 count=2 value=16\n")
    assert unmatched(step, "datagram kind=merged src=1 count=2 value=15\nready\n")  # order
