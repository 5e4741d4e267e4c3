"""The P4Runtime arbitration scheme (docs/dataplane-bmv2.md "Arbitration"), without a switch:
election ids, what an arbitration answer means for a primary and a backup client, and that
the command line routerd runs fails with a message, not a traceback."""
from __future__ import annotations

import pytest

p4rt = pytest.importorskip("concast.controller.p4.p4rt")


def test_concast_outranks_clients_left_at_their_defaults_and_routerd_outranks_the_control_plane():
    finsy_default, p4runtime_shell_default = 10, 1
    assert p4rt.ELECTION_WRITER > p4rt.ELECTION_CONTROL >= p4rt.ELECTION_CONCAST_BASE
    assert p4rt.ELECTION_CONCAST_BASE > max(finsy_default, p4runtime_shell_default)
    for _ in range(100):
        assert 0 < p4rt.reader_election_id() < p4rt.ELECTION_CONCAST_BASE


def test_election_ids_are_128_bit():
    u = p4rt.uint128(p4rt.ELECTION_WRITER)
    assert (u.high, u.low) == (1, 2)
    assert (p4rt.uint128(10).high, p4rt.uint128(10).low) == (0, 10)
    for bad in (-1, 1 << 128):
        with pytest.raises(ValueError):
            p4rt.uint128(bad)


@pytest.mark.parametrize("code,backup,outcome", [
    (0, False, (True, None)),
    (0, True, (True, None)),
    (6, False, (False, "not primary")),      # ALREADY_EXISTS: another client is primary
    (5, False, (False, "not primary")),      # NOT_FOUND: no primary
    (6, True, (False, None)),                # a backup reader takes that
    (5, True, (False, None)),
    (3, True, (False, "arbitration refused (code 3)")),
])
def test_arbitration_outcome(code, backup, outcome):
    assert p4rt.arbitration_outcome(code, backup) == outcome


def test_a_backup_client_never_writes():
    client = p4rt.P4RuntimeClient.__new__(p4rt.P4RuntimeClient)
    client.address, client.backup = "unix:/x", True
    with pytest.raises(p4rt.P4RuntimeError, match="does not write"):
        client._write([(1, object())])


def test_the_command_line_says_why_it_cannot_write_without_a_traceback(capsys, monkeypatch):
    """What routerd's --dataplane-cmd runs; routerd shows its last stderr line."""
    from concast.controller.p4 import __main__ as cli

    def refused(*args, **kwargs):
        raise p4rt.NotPrimaryError("unix:/x: not primary (our election id 18446744073709551618, "
                                   "primary's 73786976294838206464)")
    monkeypatch.setattr(p4rt, "P4RuntimeClient", refused)
    assert cli.main(["--switch", "unix:/x", "divert", "10.0.9.1", "7"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "not primary" in err[0]


def test_an_unreachable_switch_is_an_error_line(capsys, monkeypatch):
    import grpc

    class Future:
        def result(self, timeout):
            raise grpc.FutureTimeoutError()
    monkeypatch.setattr(grpc, "channel_ready_future", lambda ch: Future())
    from concast.controller.p4 import __main__ as cli
    assert cli.main(["--switch", "unix:/nonexistent", "flow", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: unix:/nonexistent: no P4Runtime server answered")
