"""A small P4Runtime client: just what concast needs from simple_switch_grpc.

Built on the generated stubs of the `p4runtime` PyPI package (p4runtime==1.4.1 with
protobuf 3.20.x; newer p4runtime wheels need protobuf >= 4.21 and their generated p4types
module does not load with the protobuf 7 C implementation). One client = one controller
connection to one device.

Arbitration (docs/dataplane-bmv2.md "Arbitration"): P4Runtime lets only the primary client
(the highest election id connected, per device and role) write. Election ids from 2**64 up
are concast's: the control plane's connection holds ELECTION_CONTROL, routerd's writes
(`python -m concast.controller.p4 ... divert`) ELECTION_WRITER, one above it, so routerd is
primary while it writes, and both outrank any client left at a small default (finsy's 10,
p4runtime-shell's 1). A client that only reads connects as a backup (`backup=True`): it
accepts not being primary and never writes.
"""
from __future__ import annotations

import queue
import random
import threading
from pathlib import Path

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from concast.controller.p4.pipeline import Entry


class P4RuntimeError(RuntimeError):
    pass


class NotPrimaryError(P4RuntimeError):
    """Another client holds a higher election id: this one may not write."""


# Election ids (128-bit): every id from 2**64 up is concast's; users' clients stay below.
ELECTION_CONCAST_BASE = 1 << 64
ELECTION_CONTROL = ELECTION_CONCAST_BASE + 1    # the control plane's connection, kept open
ELECTION_WRITER = ELECTION_CONCAST_BASE + 2     # routerd's diversion writes, while they last
# google.rpc codes of an arbitration answer to a client that is not primary: ALREADY_EXISTS
# (another client is primary), NOT_FOUND (no client is primary).
_NOT_PRIMARY_CODES = (6, 5)


def uint128(value: int) -> p4runtime_pb2.Uint128:
    if value < 0 or value >= 1 << 128:
        raise ValueError(f"election id {value} is not a 128-bit unsigned number")
    return p4runtime_pb2.Uint128(high=value >> 64, low=value & ((1 << 64) - 1))


def reader_election_id() -> int:
    """A backup reader's id: random below 2**32, so readers do not collide with each other
    (P4Runtime refuses a second client with the same id) and never outrank concast."""
    return random.randrange(1, 1 << 32)


def _encode(value: int, bitwidth: int) -> bytes:
    if value < 0 or value >= 1 << bitwidth:
        raise ValueError(f"{value} does not fit in {bitwidth} bits")
    return value.to_bytes((bitwidth + 7) // 8, "big")


class P4Info:
    """Name -> id/bitwidth lookups over a P4Info message."""

    def __init__(self, msg: p4info_pb2.P4Info):
        self.msg = msg
        self.tables = {t.preamble.name: t for t in msg.tables}
        self.actions = {a.preamble.name: a for a in msg.actions}
        self.counters = {c.preamble.name: c for c in msg.counters}

    @classmethod
    def load(cls, path) -> "P4Info":
        msg = p4info_pb2.P4Info()
        text_format.Merge(Path(path).read_text(), msg)
        return cls(msg)

    def table(self, name: str):
        try:
            return self.tables[name]
        except KeyError:
            raise P4RuntimeError(f"no table {name!r}; known: {sorted(self.tables)}") from None

    def action(self, name: str):
        try:
            return self.actions[name]
        except KeyError:
            raise P4RuntimeError(f"no action {name!r}; known: {sorted(self.actions)}") from None

    def counter(self, name: str):
        try:
            return self.counters[name]
        except KeyError:
            raise P4RuntimeError(f"no counter {name!r}; known: {sorted(self.counters)}") from None


def arbitration_outcome(code: int, backup: bool) -> tuple[bool, str | None]:
    """(primary?, error) for an arbitration answer's status code: a primary client must get
    OK; a backup takes OK or either not-primary code; anything else is an error."""
    if code == 0:
        return True, None
    if code in _NOT_PRIMARY_CODES:
        return False, None if backup else "not primary"
    return False, f"arbitration refused (code {code})"


class P4RuntimeClient:
    """A connection to one P4Runtime device (simple_switch_grpc): primary (the default; it
    raises NotPrimaryError when another client outranks it); with `backup=True`, a read-only
    backup that arbitrates and accepts not being primary; with `reader=True`
    (`concast router table/stats`), no stream channel and no arbitration at all, Read RPCs
    only, so it can neither be nor displace the primary."""

    def __init__(self, address: str, device_id: int = 0, election_id: int | None = None,
                 timeout: float = 10.0, backup: bool = False, reader: bool = False):
        self.address = address
        self.device_id = device_id
        self.reader = reader
        self.backup = backup or reader
        if election_id is None:
            election_id = reader_election_id() if self.backup else ELECTION_CONTROL
        self.election_id = election_id
        self.election = uint128(election_id)
        self.primary = False
        self.channel = grpc.insecure_channel(address)
        try:
            grpc.channel_ready_future(self.channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            self.channel.close()
            raise P4RuntimeError(f"{address}: no P4Runtime server answered in {timeout:g} s") from None
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.p4info: P4Info | None = None
        self._requests = None
        if self.reader:
            return
        self._requests: queue.Queue = queue.Queue()
        self._responses: queue.Queue = queue.Queue()
        self._stream = self.stub.StreamChannel(iter(self._requests.get, None))
        self._stream_thread = threading.Thread(target=self._read_stream, daemon=True)
        self._stream_thread.start()
        self._arbitrate(timeout)

    # -- stream channel -----------------------------------------------------------------
    def _read_stream(self):
        try:
            for msg in self._stream:
                self._responses.put(msg)
        except grpc.RpcError:
            pass

    def _arbitrate(self, timeout: float):
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.CopyFrom(self.election)
        self._requests.put(req)
        try:
            msg = self._responses.get(timeout=timeout)
        except queue.Empty:
            raise P4RuntimeError(f"{self.address}: no arbitration answer") from None
        self.primary, error = arbitration_outcome(msg.arbitration.status.code, self.backup)
        if error:
            self.close()
            theirs = msg.arbitration.election_id
            raise (NotPrimaryError if error == "not primary" else P4RuntimeError)(
                f"{self.address}: {error} (our election id {self.election_id}, primary's "
                f"{(theirs.high << 64) | theirs.low}): {msg.arbitration.status.message}")

    def close(self):
        if getattr(self, "_closed", False):
            return
        self._closed = True
        if self._requests is not None:
            self._requests.put(None)
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- pipeline -----------------------------------------------------------------------
    def set_pipeline(self, p4info_path, json_path):
        """Push the P4Info and the BMv2 JSON (VERIFY_AND_COMMIT)."""
        self.p4info = P4Info.load(p4info_path)
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest()
        req.device_id = self.device_id
        req.election_id.CopyFrom(self.election)
        req.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        req.config.p4info.CopyFrom(self.p4info.msg)
        req.config.p4_device_config = Path(json_path).read_bytes()
        self.stub.SetForwardingPipelineConfig(req)

    def use_p4info(self, p4info_path):
        """Talk to a device whose pipeline someone else pushed."""
        self.p4info = P4Info.load(p4info_path)

    # -- table entries --------------------------------------------------------------------
    def _table_entry(self, e: Entry) -> p4runtime_pb2.TableEntry:
        info = self.p4info
        table = info.table(e.table)
        te = p4runtime_pb2.TableEntry(table_id=table.preamble.id)
        if e.default:
            te.is_default_action = True
        fields = {f.name: f for f in table.match_fields}
        for m in e.matches:
            f = fields.get(m.name)
            if f is None:
                raise P4RuntimeError(f"{e.table}: no match field {m.name!r}; known: {sorted(fields)}")
            fm = te.match.add(field_id=f.id)
            if m.kind == "exact":
                fm.exact.value = _encode(m.value, f.bitwidth)
            elif m.kind == "lpm":
                fm.lpm.value = _encode(m.value, f.bitwidth)
                fm.lpm.prefix_len = m.arg
            elif m.kind == "ternary":
                fm.ternary.value = _encode(m.value & m.arg, f.bitwidth)
                fm.ternary.mask = _encode(m.arg, f.bitwidth)
            else:
                raise P4RuntimeError(f"match kind {m.kind!r} not supported")
        if e.priority:
            te.priority = e.priority
        if e.action:
            action = info.action(e.action)
            te.action.action.action_id = action.preamble.id
            params = {p.name: p for p in action.params}
            for name, value in e.params:
                p = params.get(name)
                if p is None:
                    raise P4RuntimeError(f"{e.action}: no parameter {name!r}; known: {sorted(params)}")
                te.action.action.params.add(param_id=p.id, value=_encode(value, p.bitwidth))
        return te

    def _write(self, updates: list[tuple[int, Entry]]):
        if not updates:
            return
        if self.backup:
            raise P4RuntimeError(f"{self.address}: a read-only client does not write")
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        req.election_id.CopyFrom(self.election)
        for kind, e in updates:
            u = req.updates.add(type=kind)
            u.entity.table_entry.CopyFrom(self._table_entry(e))
        try:
            self.stub.Write(req)
        except grpc.RpcError as err:
            raise P4RuntimeError(f"{self.address}: write failed: {err.details()}") from err

    def insert(self, entries):
        """Insert entries (default-action entries are written as MODIFY, as P4Runtime wants)."""
        self._write([(p4runtime_pb2.Update.MODIFY if e.default else p4runtime_pb2.Update.INSERT, e)
                     for e in entries])

    def modify(self, entries):
        self._write([(p4runtime_pb2.Update.MODIFY, e) for e in entries])

    def delete(self, entries):
        self._write([(p4runtime_pb2.Update.DELETE, e) for e in entries])

    def read_table(self, table: str) -> list[p4runtime_pb2.TableEntry]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.add().table_entry.table_id = self.p4info.table(table).preamble.id
        return [ent.table_entry for resp in self.stub.Read(req) for ent in resp.entities]

    # -- counters -------------------------------------------------------------------------
    def read_counter(self, name: str) -> list[tuple[int, int]]:
        """Every cell of an indirect counter, as (packets, bytes), by index."""
        c = self.p4info.counter(name)
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.add().counter_entry.counter_id = c.preamble.id
        cells = [(0, 0)] * c.size
        for resp in self.stub.Read(req):
            for ent in resp.entities:
                ce = ent.counter_entry
                cells[ce.index.index] = (ce.data.packet_count, ce.data.byte_count)
        return cells
