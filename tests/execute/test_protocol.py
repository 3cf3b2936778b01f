"""The worker protocol's records (core/execute/protocol.py): what crosses the socket pair, and how it is read back."""

import socket
import struct
from multiprocessing.connection import Connection

import pytest
from pydantic import ValidationError

from kernelloop.core.execute import protocol as P
from kernelloop.core.bench.policy import policies_for
from kernelloop.base.records import Workload


def _wire(record):
    """What the other side receives: the record's JSON bytes, as protocol.send writes them."""
    return P.encode(record)


def test_requests_round_trip_by_their_op(layernorm):
    w = Workload(op="layernorm", axes={"M": 4, "N": 8}, dtype="fp32")
    spec = layernorm.spec.model_dump_json()
    check = P.CheckRequest(spec=spec, source_hash="h", config={"BLOCK_N": 8}, job_dir="/tmp/j",
                           cases=[P.VerifyCase(workload=w, seed=3, distribution="normal", repeats=3)])
    bench = P.BenchRequest(spec=spec, workload=w, policy=policies_for("interpret")[0], subjects=["eager"], seed=5)
    for msg in (P.LoadRequest(source="x = 1\n", source_hash="h"), check, bench, P.ShareRequest(), P.ExitRequest()):
        assert P.parse_request(_wire(msg)) == msg
    assert P.parse_request(_wire(check)).cases[0].workload.id == w.id


def test_a_request_of_unknown_op_or_shape_is_refused():
    with pytest.raises(ValidationError):
        P.parse_request({"op": "format-disk"})
    with pytest.raises(ValidationError):
        P.parse_request({"op": "load", "source": "x"})   # no source_hash


def test_replies_are_read_by_their_kind_and_keep_their_denials():
    census = P.ThreadCensus(base=3, after=4, new=[P.NewThread(tid=7, name="spy", python=True, python_name="spy")])
    benched = P.Benched(samples={"eager": {"kernel_us": [1.0, 2.0], "call_us": [3.0, 4.0]}}, threads=census)
    got = P.parse_reply(_wire(benched))
    assert isinstance(got, P.Benched) and got.samples["eager"].kernel_us == [1.0, 2.0] and got.threads == census
    shared = P.parse_reply(_wire(P.Shared(error="no IPC here")))
    assert isinstance(shared, P.Shared) and shared.tensor is None and shared.error == "no IPC here"
    data = P.Failed(stage="runtime", error="boom").model_dump()
    data["denied"] = [{"action": "open", "detail": "/etc/passwd"}]
    failed = P.parse_reply(data)
    assert P.decode_reply(_wire(failed)) == failed
    assert isinstance(failed, P.Failed) and failed.denied[0].action == "open" and not failed.ok


def test_a_malformed_reply_is_a_protocol_failure_not_an_exception():
    for data in ({"kind": "check", "files": "not a list"}, {"ok": True}, "ready", None):
        got = P.parse_reply(data)
        assert isinstance(got, P.Failed) and got.stage == "protocol" and "malformed worker reply" in got.error


def test_the_spec_is_validated_once_per_text(layernorm, monkeypatch):
    from kernelloop.base.records import OpSpec
    text = layernorm.spec.model_dump_json()
    calls = []
    real = OpSpec.model_validate_json.__func__

    def counting(cls, data, *a, **k):
        calls.append(1)
        return real(cls, data, *a, **k)
    monkeypatch.setattr(OpSpec, "model_validate_json", classmethod(counting))
    cache = P.SpecCache()
    first = cache.get(text)
    assert cache.get(text) is first and cache.get(str(text)) is first and len(calls) == 1
    assert first == layernorm.spec


def _pair():
    a, b = socket.socketpair()
    return Connection(a.detach()), Connection(b.detach())


def test_a_framed_pickle_is_no_reply_and_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    code = f"open({str(marker)!r}, 'w').write('ran')"
    payload = b"cbuiltins\nexec\n(V" + code.encode() + b"\ntR."
    mine, theirs = _pair()
    theirs.send_bytes(payload)     # what a candidate writes onto the worker's end of the connection
    with pytest.raises(P.ProtocolViolation, match="not a worker reply"):
        P.decode_reply(P.receive(mine, P.MAX_REPLY_BYTES))
    assert not marker.exists()


def test_a_message_over_the_limit_is_refused_unread():
    mine, theirs = _pair()
    theirs.send_bytes(b"x" * 1000)
    with pytest.raises(P.ProtocolViolation, match="longer than 100 bytes"):
        P.receive(mine, 100)
    mine2, theirs2 = _pair()
    import os
    os.write(theirs2.fileno(), struct.pack("!i", -1) + struct.pack("!Q", 1 << 60))   # a 1 EiB header
    with pytest.raises(P.ProtocolViolation):
        P.receive(mine2, P.MAX_REPLY_BYTES)


def test_a_record_past_the_limit_is_not_sent():
    with pytest.raises(ValueError, match="exceeds the protocol"):
        P.encode(P.Failed(stage="runtime", log="x" * 5000), limit=1000)


def test_replies_carry_the_sequence_number_of_their_request():
    got = P.decode_reply(_wire(P.Synced(seq=41)))
    assert isinstance(got, P.Synced) and got.seq == 41
    assert P.parse_request(_wire(P.SyncRequest(seq=7))) == P.SyncRequest(seq=7)


def test_cuda_ipc_handles_cross_as_base64(tmp_path):
    from kernelloop.core.execute.shared import SharedTensor, arenas_outside
    t = SharedTensor(transport="cuda-ipc", dtype="float32", shape=[2], stride=[1],
                     ipc=[[2], [1], 0, 0, b"\x00\xffh", 8, 0, b"/torch_1", 3, None, True])
    assert SharedTensor.model_validate_json(t.model_dump_json()) == t
    inside = SharedTensor(arena=str(tmp_path / "job" / "case0.arena"), dtype="float32", shape=[1], stride=[1])
    outside = SharedTensor(arena=str(tmp_path / "keys" / "run.key"), dtype="float32", shape=[1], stride=[1])
    assert arenas_outside([inside, outside], tmp_path / "job") == [outside.arena]
