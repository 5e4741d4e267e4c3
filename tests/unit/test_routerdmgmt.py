"""The routerd management client refuses commands routerd does not know before connecting,
and builds `busy-poll US` only inside routerd's range (busypoll.rs MAX_WINDOW_US)."""
import re
from pathlib import Path

import pytest

from concast import tools
from concast.controller import routerdmgmt as rm


def test_busy_poll_commands_are_built_inside_routerds_range():
    assert rm.busy_poll_command(0) == "busy-poll 0"
    assert rm.busy_poll_command(rm.BUSY_POLL_MAX_US) == f"busy-poll {rm.BUSY_POLL_MAX_US}"
    for bad in (-1, rm.BUSY_POLL_MAX_US + 1):
        with pytest.raises(ValueError, match="0..10000"):
            rm.busy_poll_command(bad)


def test_the_range_is_routerds_own():
    src = (tools.ROOT / "controller" / "routerd" / "src" / "busypoll.rs").read_text()
    assert int(re.search(r"MAX_WINDOW_US: u64 = ([0-9_]+);", src).group(1).replace("_", "")) == rm.BUSY_POLL_MAX_US


@pytest.mark.parametrize("command", ["busy-poll 20000", "busy-poll x", "busy-poll", "reboot", "wait spin"])
def test_unknown_or_out_of_range_commands_are_refused_before_connecting(command, tmp_path: Path):
    with pytest.raises(ValueError, match="unknown routerd command"):
        rm.query(tmp_path / "none.sock", command)


@pytest.mark.parametrize("command", ["busy-poll 0", "busy-poll 1000", "read-delay", "stats", "wait sleep", "wait adaptive"])
def test_known_commands_go_to_the_socket(command, tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        rm.query(tmp_path / "none.sock", command)
