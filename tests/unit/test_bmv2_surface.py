"""The BMv2 parts of the user's surface (issue #27), without BMv2 or p4c: the one compile
step's command line, `net up --p4/--bmv2-log` reaching the data plane and the switch's command
line, the read-only P4Runtime connection of `concast router table/stats` (against an
in-process P4Runtime server that records what it was asked), and the output of both from
recorded counters and entries."""
from __future__ import annotations

import argparse
import json
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from concast import hostcli
from concast.controller.p4 import dataplane, pipeline as P, program, readout
from concast.controller.p4.p4rt import P4Info, P4RuntimeClient, P4RuntimeError
from concast.controller.p4.switch import Switch


# --- the one compile step ---------------------------------------------------------------
def test_the_compile_command_is_p4c_bm2_ss_for_v1model(tmp_path):
    json_, p4info = program.outputs(Path("x/my.p4"), tmp_path)
    assert (json_.name, p4info.name) == ("my.json", "my.p4info.txt")
    cmd = program.command(Path("x/my.p4"), json_, p4info)
    assert cmd[0] == "p4c-bm2-ss" and cmd[cmd.index("--arch") + 1] == "v1model"
    assert cmd[cmd.index("-o") + 1] == str(json_)
    assert cmd[cmd.index("--p4runtime-files") + 1] == str(p4info) and cmd[-1] == "x/my.p4"


def test_compiling_without_the_toolchain_says_why(tmp_path, monkeypatch):
    src = tmp_path / "a.p4"
    with pytest.raises(FileNotFoundError):
        program.compile_program(src, tmp_path)
    src.write_text("")
    monkeypatch.setattr("concast.controller.p4.switch.tools_missing", lambda: "p4c-bm2-ss is not on PATH")
    with pytest.raises(program.CompileError, match="p4c-bm2-ss is not on PATH"):
        program.compile_program(src, tmp_path / "out")


def test_conform_and_net_up_compile_through_the_same_helper(tmp_path, monkeypatch):
    from concast.conform import p4 as conform_p4
    from concast.topologies import up
    calls = []

    def fake(source, out_dir):
        calls.append(Path(source).name)
        return out_dir / "a.json", out_dir / "a.p4info.txt"
    src = tmp_path / "a.p4"
    src.write_text("")
    monkeypatch.setattr(program, "compile_program", fake)
    monkeypatch.setattr(conform_p4, "tools_missing", lambda: None)
    conform_p4.compile_program(src)
    opts = up.bmv2_options(argparse.Namespace(p4=str(src), bmv2_log=True))
    assert calls == ["a.p4", "a.p4"]
    assert opts["log"] is True and opts["program"][1].name == "a.p4info.txt"
    assert up.bmv2_options(argparse.Namespace(p4=None, bmv2_log=False)) == {}


# --- the switch and the data plane ----------------------------------------------------------
def test_bmv2_log_goes_to_the_run_folder_on_the_switch_command_line(tmp_path):
    where = dataplane.switch_log_dir(tmp_path, Path("/run/x"))
    assert where == tmp_path / "bmv2" and dataplane.switch_log_dir(None, Path("/run/x")) == Path("/run/x")
    sw = Switch("ccxr1", {1: "ccx-r1-eth1"}, rundir=tmp_path, log=True)
    sw.logfile = where / "r1.log"
    cmd = sw.command()
    assert cmd[cmd.index("--log-file") + 1] == str(where / "r1")
    assert "--log-flush" in cmd and cmd[cmd.index("--log-level") + 1] == "debug"
    assert "--log-file" not in Switch("s", {1: "e"}, rundir=tmp_path).command()


def test_a_user_program_reaches_routerds_command(tmp_path):
    from concast.topologies import line
    plan = __import__("concast.netmodel.addressing", fromlist=["plan"]).plan(
        line(1, senders=1, dataplane="bmv2").topo)
    prog = (tmp_path / "my.json", tmp_path / "my.p4info.txt")
    dp = dataplane.Bmv2Dataplane("t1", plan, program=prog, log=True)
    assert dp.program == prog and dp.log
    r = next(iter(dp.routers.values()))
    r.switch = Switch(r.node, {}, rundir=tmp_path)
    assert f"--p4info {P.P4INFO_PATH}" in r.command_line()       # before configure()
    r.p4info = prog[1]                                            # as configure() sets it
    assert f"--p4info {prog[1]}" in r.command_line()
    assert readout.p4info_of({"dataplane_cmd": r.command_line()}) == prog[1]
    assert readout.p4info_of({}) == P.P4INFO_PATH


def test_intake_loss_is_kernel_rx_less_what_the_parser_saw(monkeypatch):
    """Bmv2Router.intake: per port (keyed as port_counters, the CPU port as OVS names it),
    the interface's kernel rx against the P4 `received` cell of the same BMv2 port."""
    from concast.controller.p4.router import P4Router
    from concast.netmodel import naming
    from concast.topologies import line
    plan = __import__("concast.netmodel.addressing", fromlist=["plan"]).plan(
        line(1, senders=1, dataplane="bmv2").topo)
    r = next(iter(dataplane.Bmv2Dataplane("t1", plan).routers.values()))
    ports = r.ports_map("t1")
    assert P.CPU_PORT in ports and len(ports) >= 2
    cells = [(0, 0)] * P.N_PORTS
    kernel = {}
    for k, port in enumerate(sorted(ports)):
        cells[port] = (100 * (k + 1) - k, 0)                 # port k lost k frames
        kernel[str(naming.CPU_OFPORT if port == P.CPU_PORT else port)] = {"rx_pkts": 100 * (k + 1)}

    class Client:
        def read_counter(self, name):
            assert name == P.C_RECEIVED
            return cells

    r.p4 = P4Router(Client())
    monkeypatch.setattr(type(r), "port_counters", lambda self, tag: kernel)
    got = r.intake("t1")
    assert set(got) == set(kernel)
    for k, port in enumerate(sorted(ports)):
        key = str(naming.CPU_OFPORT if port == P.CPU_PORT else port)
        assert got[key] == {"kernel_rx": 100 * (k + 1), "parsed": 100 * (k + 1) - k,
                            "intake_lost": k}
    assert r.p4.received() == {str(p): n for p, (n, _) in enumerate(cells) if n}


def test_egress_loss_is_what_the_program_sent_less_the_kernels_tx(monkeypatch):
    """Bmv2Router.egress: diverted frames against the CPU port's tx, forwarded and ARP
    answers against the other ports' tx."""
    from concast.netmodel import naming
    from concast.topologies import line
    plan = __import__("concast.netmodel.addressing", fromlist=["plan"]).plan(
        line(1, senders=1, dataplane="bmv2").topo)
    r = next(iter(dataplane.Bmv2Dataplane("t1", plan).routers.values()))

    class P4:
        def counters(self):
            return {"diverted": {"own_address": 3, "csp": 4, "concast": 100}, "forwarded": 50,
                    "arp_answered": 2, "malformed": {}, "dropped": {}, "reinjected": 9}

    r.p4 = P4()
    kernel = {str(naming.CPU_OFPORT): {"tx_pkts": 100}, "1": {"tx_pkts": 30}, "2": {"tx_pkts": 21}}
    monkeypatch.setattr(type(r), "port_counters", lambda self, tag: kernel)
    assert r.egress("t1") == {"cpu": {"sent_by_p4": 107, "kernel_tx": 100, "egress_lost": 7},
                              "ports": {"sent_by_p4": 52, "kernel_tx": 51, "egress_lost": 1}}


def test_net_up_options_reach_the_running_network(monkeypatch):
    from concast.topologies import line, running
    got = {}

    class Fake:
        def __init__(self, *a, **kw):
            got.update(kw)
    monkeypatch.setattr(running, "RunningNet", Fake)
    net = line(1, senders=1, dataplane="bmv2")
    net.dataplane_options = {"log": True}
    net.start()
    assert got["dataplane_options"] == {"log": True}


# --- the read-only connection -----------------------------------------------------------
def p4info() -> p4info_pb2.P4Info:
    """A P4Info with concast_flows and ipv4_lpm as p4src/concast.p4 names them."""
    m = p4info_pb2.P4Info()
    t = m.tables.add()
    t.preamble.id, t.preamble.name = 1, P.T_CONCAST_FLOWS
    for i, n in ((1, "R"), (2, "G")):
        f = t.match_fields.add(id=i, name=n, bitwidth=32)
        f.match_type = p4info_pb2.MatchField.EXACT
    t2 = m.tables.add()
    t2.preamble.id, t2.preamble.name = 2, P.T_IPV4_LPM
    f = t2.match_fields.add(id=1, name="dst", bitwidth=32)
    f.match_type = p4info_pb2.MatchField.LPM
    a = m.actions.add()
    a.preamble.id, a.preamble.name = 10, P.A_DIVERT
    a.params.add(id=1, name="reason", bitwidth=8)
    a2 = m.actions.add()
    a2.preamble.id, a2.preamble.name = 11, P.A_SET_NHOP
    a2.params.add(id=1, name="dmac", bitwidth=48)
    a2.params.add(id=2, name="smac", bitwidth=48)
    a2.params.add(id=3, name="port", bitwidth=9)
    return m


def entries() -> list:
    fake = type("C", (), {"p4info": P4Info(p4info())})()
    flow = P.concast_flow_entry("10.1.1.2", 7)
    route = P.lpm_entry(__import__("ipaddress").IPv4Network("10.1.1.0/24"), 2,
                        "02:00:00:00:00:02", "02:00:00:00:00:01")
    return [P4RuntimeClient._table_entry(fake, flow), P4RuntimeClient._table_entry(fake, route)]


class Recorder(p4runtime_pb2_grpc.P4RuntimeServicer):
    """A P4Runtime server that answers Reads from `entries()` and arbitration with "a
    primary exists", recording what it was asked."""

    def __init__(self):
        self.streams, self.reads, self.writes = 0, [], 0

    def StreamChannel(self, requests, context):
        self.streams += 1
        for req in requests:
            if req.HasField("arbitration"):
                resp = p4runtime_pb2.StreamMessageResponse()
                resp.arbitration.CopyFrom(req.arbitration)
                resp.arbitration.status.code = 6        # ALREADY_EXISTS: we are a backup
                yield resp

    def Read(self, request, context):
        self.reads.append(request)
        tid = request.entities[0].table_entry.table_id
        resp = p4runtime_pb2.ReadResponse()
        for te in entries():
            if te.table_id == tid:
                resp.entities.add().table_entry.CopyFrom(te)
        yield resp

    def Write(self, request, context):
        self.writes += 1
        return p4runtime_pb2.WriteResponse()


@pytest.fixture
def switch(tmp_path):
    rec = Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(rec, server)
    sock = tmp_path / "sw.sock"
    server.add_insecure_port(f"unix:{sock}")
    server.start()
    info = tmp_path / "p.p4info.txt"
    info.write_text(__import__("google.protobuf.text_format", fromlist=["x"]).MessageToString(p4info()))
    cfg = {"dataplane": "bmv2", "p4_switch": f"unix:{sock}",
           "dataplane_cmd": f"python3 -m concast.controller.p4 --switch unix:{sock} --p4info {info}"}
    yield rec, cfg
    server.stop(0)


def test_the_table_reader_never_arbitrates_and_never_writes(switch):
    rec, cfg = switch
    rows = readout.read_tables(cfg, ["concast_flows"])
    assert rec.streams == 0 and len(rec.reads) == 1
    assert rows == [{"table": P.T_CONCAST_FLOWS, "match": {"R": "10.1.1.2", "G": "7"},
                     "action": P.A_DIVERT, "params": {"reason": "2"}}]
    client = readout.connect(cfg)
    with pytest.raises(P4RuntimeError, match="read-only"):
        client.insert([P.concast_flow_entry("10.1.1.2", 8)])
    client.close()
    assert rec.writes == 0


def test_with_an_election_id_the_reader_is_a_backup(switch):
    rec, cfg = switch
    rows = readout.read_tables(cfg, None, election_id=1)   # the server says: not primary
    assert rec.streams == 1 and {r["table"] for r in rows} == {P.T_CONCAST_FLOWS, P.T_IPV4_LPM}
    route = next(r for r in rows if r["table"] == P.T_IPV4_LPM)
    assert route["match"] == {"dst": "10.1.1.0/24"}
    assert route["params"]["dmac"] == "02:00:00:00:00:02" and route["params"]["port"] == "2"


def test_table_names_are_resolved_by_their_last_part():
    known = [P.T_CONCAST_FLOWS, P.T_IPV4_LPM]
    assert readout.resolve_tables(["concast_flows"], known) == [P.T_CONCAST_FLOWS]
    assert readout.resolve_tables(None, known) == sorted(known)
    with pytest.raises(ValueError, match="unknown.*concast_flows, ipv4_lpm"):
        readout.resolve_tables(["nope"], known)


def test_the_table_listing_is_one_line_per_entry():
    info = P4Info(p4info())
    text = readout.format_rows([readout.entry_row(te, info) for te in entries()])
    lines = text.splitlines()
    assert lines[0].startswith("concast_flows") and "R=10.1.1.2" in lines[0]
    assert "divert_to_cpu(reason=2)" in lines[0] and "dst=10.1.1.0/24" in lines[1]
    assert lines[-1] == "2 entries: concast_flows 1, ipv4_lpm 1"


# --- router stats on BMv2 ---------------------------------------------------------------
RECORDED = {"malformed": {"truncated": 2, "bad_version": 1}, "diverted": {"own_address": 3,
            "csp": 4, "concast": 40}, "reinjected": 38, "forwarded": 120,
            "dropped": {"not_ipv4": 0, "ttl": 1, "no_route": 0, "local": 5}, "arp_answered": 6}


def test_router_stats_carry_the_p4_counters_on_bmv2(tmp_path, monkeypatch):
    sock = tmp_path / "r1.sock"
    (tmp_path / "r1.json").write_text(json.dumps({"dataplane": "bmv2",
                                                  "p4_switch": "unix:/x.sock"}))
    monkeypatch.setattr(readout, "read_stats",
                        lambda cfg, eid: readout.stats(cfg, RECORDED))
    reply = {"counters": {"diverted_rx": 44}}
    hostcli.add_dataplane_stats(reply, sock)
    d = reply["dataplane"]
    assert d["p4_counters"] == RECORDED and d["p4_switch"] == "unix:/x.sock"
    assert (d["diverted_total"], d["dropped_total"], d["malformed_total"]) == (47, 6, 3)

    def down(cfg, eid):
        raise RuntimeError("connect failed")
    monkeypatch.setattr(readout, "read_stats", down)
    reply = {}
    hostcli.add_dataplane_stats(reply, sock)
    assert reply["dataplane"]["error"] == "connect failed"


def test_router_table_on_a_router_that_is_not_bmv2_is_a_usage_error(tmp_path, monkeypatch):
    from concast import cli
    from concast.hosts import locate
    sock = tmp_path / "r1.sock"
    (tmp_path / "r1.json").write_text(json.dumps({"dataplane": "ovs", "bridge": "b"}))
    monkeypatch.setattr(locate, "routerd_socket", lambda node, run: sock)
    with pytest.raises(SystemExit) as e:
        cli.main(["router", "table", "r1"])
    assert e.value.code == 2
    (tmp_path / "r1.json").write_text(json.dumps({"dataplane": "bmv2", "p4_switch": "unix:/x"}))
    monkeypatch.setattr(readout, "read_tables", lambda cfg, names, eid: [
        readout.entry_row(entries()[0], P4Info(p4info()))])
    assert cli.main(["router", "table", "r1", "--table", "concast_flows", "--json"]) == 0
