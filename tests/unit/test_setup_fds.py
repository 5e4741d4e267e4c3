"""scripts/setup.sh starts Open vSwitch's daemons through `without_inherited_fds`: they outlive
the script, and a descriptor they inherit (the flock around `make test`) stays held until
they stop (session 15: the systest lock held by ovsdb-server for an hour)."""
import subprocess
from pathlib import Path

SETUP = Path(__file__).resolve().parents[2] / "scripts" / "setup.sh"


def fds_seen(wrapper: str, tmp_path: Path) -> set[int]:
    """The descriptors a child sees when bash, holding fd 7 on a locked file, runs it."""
    lock = tmp_path / "lock"
    script = (f"source {SETUP}; exec 7>{lock}; flock 7; "
              f"{wrapper} sh -c 'ls /proc/$$/fd'")
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return {int(x) for x in r.stdout.split()}


def test_the_wrapped_command_inherits_nothing_above_stderr(tmp_path):
    seen = fds_seen("without_inherited_fds", tmp_path)
    assert {0, 1, 2} <= seen
    assert 7 not in seen, seen


def test_without_the_wrapper_the_lock_descriptor_is_inherited(tmp_path):
    # the control: the same command run plainly does see fd 7
    assert 7 in fds_seen("", tmp_path)
