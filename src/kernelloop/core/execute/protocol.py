"""The worker protocol: the requests the controller sends a worker (core/execute/worker.py) and the replies it gets.

Messages are bytes of JSON, one record per message, each framed by `multiprocessing.connection.Connection`'s
length header and sent with `send_bytes`; the receiver reads them with `recv_bytes(limit)` (a message longer than
`MAX_REQUEST_BYTES` / `MAX_REPLY_BYTES` is refused before its body is read) and validates them with the records
named here (`decode_request`, `decode_reply`) before anything else looks at them. Nothing is unpickled in either
direction: what a process that ran candidate code sends the controller is data in a fixed schema, never code, and a
message that does not decode and validate is a protocol violation (`ProtocolViolation`), never a reply. Requests are
told apart by `op`, replies by `kind`.

Every request carries a sequence number (`seq`) that the controller counts from a random start per worker; the reply
must carry the same one. After each reply the controller sends a `SyncRequest` and must get its `Synced` next: a
second reply to a request (a candidate that wrote its own reply onto the connection and let the worker's follow), a
reply to a request never sent, or bytes that are no reply are protocol violations that replace the worker
(core/execute/pool.py). A reply's contents are still the claim of a process that ran candidate code: the controller
checks timing replies against evidence of its own (core/execute/evidence.py) and reads outputs only from arenas in the
job folder it named.

A request names the op's spec as its JSON text (`spec`), which the worker validates once per distinct text and
keeps (`SpecCache`); workloads, cases and the timing policy are records. Tensors do not travel in messages: they
are shared (core/execute/shared.py: an arena file mapped by both processes, or CUDA IPC handles) and the reply says where.

Requests: `LoadRequest`, `CheckRequest`, `BenchRequest`, `ShareRequest` (the CUDA IPC probe), `SyncRequest`,
`ExitRequest`. Replies: `Ready` (once, when the worker has started), `Loaded`, `Checked`, `Benched`, `Shared`,
`Synced` for a request that succeeded, `Failed` for one that did not (its `stage`: import, compile, runtime,
protocol; the controller turns a reply whose request had the sandbox deny something into stage `sandbox`). A check
or bench of a candidate the worker has not loaded -- it was started after the load, the previous one having been
replaced -- is answered `Failed(stage="protocol", error=NOT_LOADED)`; the controller then loads the candidate again
and asks once more. Every reply lists the sandbox's denials of that request (`denied`).
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter, ValidationError

from ...base.records import BuildArtifact, TimingPolicy, Workload
from ...base.records.base import Record, sha256_hex
from .aten import AtenReport
from ..sandbox.policy import Denial
from .shared import SharedTensor, Transport


MAX_REQUEST_BYTES = 64 << 20   # a request's JSON (a candidate's source, the spec): larger is refused unread
MAX_REPLY_BYTES = 32 << 20     # a reply's JSON (samples, tensor records, logs of at most 20,000 characters)


class ProtocolViolation(Exception):
    """Bytes from a worker that are not a valid reply to the request asked: too long, not JSON, not a reply record,
    a reply to another request, or a reply nobody asked for."""


# -- requests --------------------------------------------------------------------------------------------------
class _Request(Record):
    seq: int = Field(0, ge=0, description="The request's sequence number; its reply carries the same one.")


class LoadRequest(_Request):
    """Import a candidate's source (once per source hash) and check that it defines a callable `launch`."""

    op: Literal["load"] = "load"
    source: str = Field(description="The candidate module's source text.")
    source_hash: str = Field(description="Its content hash: the key of the loaded module in the worker.")


class VerifyCase(Record):
    """One verification case: what the worker needs to run it, nothing of what a proposer may not know beyond it."""

    workload: Workload
    seed: int = Field(description="Seed of the case's inputs (reference.inputs.make_inputs).")
    distribution: str = Field(description="Value distribution of the inputs.")
    pattern: str | None = Field(None, description="Sparsity pattern of a CSR input (None: the spec's first).")
    repeats: int = Field(1, ge=1, description="Calls on identical inputs (determinism check when > 1).")


class CheckRequest(_Request):
    """Run a loaded candidate on each case; its first call builds (compiles) the kernels."""

    op: Literal["check"] = "check"
    spec: str = Field(description="The op's spec as JSON text (OpSpec).")
    source_hash: str
    config: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of `launch`.")
    job_dir: str = Field(description="Folder of the cases' arenas (case<k>.arena: core/execute/shared.py).")
    cases: list[VerifyCase]
    transport: Transport = Field("arena", description="How the cases' tensors are shared (core/execute/shared.py): "
                                 "'arena' (CPU: the candidate's tensors are an arena file's pages in job_dir), "
                                 "'cuda-ipc' (CUDA IPC handles of the worker's CUDA buffers) or 'host-arena' (those "
                                 "buffers copied into an arena file after the calls). A GPU worker never hands the "
                                 "candidate host tensors, whatever is asked.")


class BenchRequest(_Request):
    """Interleaved timing of subjects: candidate kinds (execute.timing.CANDIDATE_KINDS) and baselines."""

    op: Literal["bench"] = "bench"
    spec: str = Field(description="The op's spec as JSON text (OpSpec).")
    workload: Workload
    source_hash: str = Field("", description="The loaded candidate ('' when only baselines are timed).")
    config: dict[str, Any] = Field(default_factory=dict)
    policy: TimingPolicy
    subjects: list[str]
    seed: int
    reference_file: str = ""
    baselines_file: str = ""
    bytes_moved: float = 0.0
    fresh_inputs: bool = Field(False, description="New input contents before every timed call.")
    snapshots: int = Field(0, ge=0, description="Near-duplicate timed calls whose outputs are re-verified.")
    job_dir: str = Field("", description="Folder of the snapshots' arena (timed.arena).")
    transport: Transport = Field("arena", description="How the snapshots are shared (as CheckRequest.transport).")
    settle_threads: bool = Field(False, description="Take the thread census's base once the count stops moving.")


class ShareRequest(_Request):
    """Share a small CUDA tensor of known contents (0, 1, ..., elements - 1 in float32) by CUDA IPC: the controller
    opens it to learn, before any candidate's tensors depend on it, whether CUDA IPC works between the two processes."""

    op: Literal["share"] = "share"
    elements: int = Field(256, ge=1, le=1 << 20)


class SyncRequest(_Request):
    """Answered at once with `Synced`: sent after every reply, it proves that reply was the request's only one."""

    op: Literal["sync"] = "sync"


class ExitRequest(_Request):
    """End the worker's request loop."""

    op: Literal["exit"] = "exit"


Request = Annotated[Union[LoadRequest, CheckRequest, BenchRequest, ShareRequest, SyncRequest, ExitRequest],
                    Field(discriminator="op")]
_REQUEST = TypeAdapter(Request)


# -- parts of replies ------------------------------------------------------------------------------------------
class NewThread(Record):
    """A thread that did not exist at the census's base (sandbox.census.new_threads)."""

    tid: int
    name: str
    python: bool
    python_name: str | None = None
    files: list[str] = Field(default_factory=list, description="Files of its innermost frames (Python threads).")


class ThreadCensus(Record):
    """OS threads of the worker at the base (None: never taken) and after the calls."""

    base: int | None = None
    after: int
    new: list[NewThread] = Field(default_factory=list)


class Returned(Record):
    """The first verification call whose `launch` returned something (the contract: it returns None)."""

    case: int
    type: str


class CaseTensors(Record):
    """The tensors of one verification case, shared with the controller (core/execute/shared.py)."""

    runs: list[list[SharedTensor]] = Field(description="Each call's output buffers (several: the determinism "
                                                       "repeats), each as its guarded backing (core/reference/guards.py).")
    scratch: list[SharedTensor] = Field(default_factory=list, description="Each call's workspace as its guarded "
                                                                           "backing (none where the op has none).")
    inputs_before: list[SharedTensor] | None = Field(None, description="The worker's copy of the inputs before the "
                                                                       "first call (CPU tensors only).")
    inputs_after: list[SharedTensor] = Field(description="The inputs the candidate was given, after its calls.")


class Snapshot(Record):
    """A re-verified timed call: its outputs and the seeds of its input contents."""

    call: int
    seed: int | None
    perturb: int | None = None
    outputs: list[SharedTensor]


class TimedBuffers(Record):
    """One set of buffers the timed calls of candidate kinds wrote (core/execute/timing.py), as guarded backings
    (core/reference/guards.py) shared after the timing phase: their guards were filled once, at allocation, so a write
    outside the buffers in any timed call is still there for the controller to see."""

    outputs: list[SharedTensor] = Field(description="The set's output buffers, in the spec's order, each as its "
                                                    "guarded backing.")
    scratch: SharedTensor | None = Field(None, description="The set's workspace as its guarded backing (None where "
                                                           "the op has none).")


class SubjectSamples(Record):
    """Samples of one timed subject (bench.timer.sample)."""

    kernel_us: list[float]
    call_us: list[float]
    audit: dict[str, Any] | None = Field(None, description="Batch audit: wall clock against harness-stream events.")
    launch: dict[str, Any] | None = Field(None, description="Launch exposure of the CUDA timer's samples.")


# -- replies ---------------------------------------------------------------------------------------------------
class _Reply(Record):
    seq: int = Field(0, ge=0, description="The sequence number of the request answered (0: the ready message).")
    denied: list[Denial] = Field(default_factory=list, description="What the sandbox denied during the request.")


class Ready(_Reply):
    kind: Literal["ready"] = "ready"
    ok: Literal[True] = True
    pid: int
    view: str = Field("", description="What sandbox.confine did ('' without a read-only view).")


class Loaded(_Reply):
    kind: Literal["load"] = "load"
    ok: Literal[True] = True
    aten: AtenReport | None = Field(None, description="What the import computed with torch; None: loaded before.")


class Checked(_Reply):
    kind: Literal["check"] = "check"
    ok: Literal[True] = True
    cases: list[CaseTensors] = Field(description="One per case, in case order.")
    transport: Transport = Field("arena", description="How the cases' tensors are shared (core/execute/shared.py).")
    transport_error: str = Field("", description="Why the worker could not export its CUDA buffers when CUDA IPC "
                                                 "was asked for ('' when it could): they came in a host arena.")
    build: BuildArtifact | None
    alias: list[str] = Field(default_factory=list, description="Outputs replaced, re-strided or aliasing inputs.")
    alias_case: int | None = None
    returned: Returned | None = None
    threads: ThreadCensus
    aten: AtenReport
    cubins: list[str] = Field(default_factory=list, description="sha256 of each kernel binary the calls ran (GPU).")


class Benched(_Reply):
    kind: Literal["bench"] = "bench"
    ok: Literal[True] = True
    samples: dict[str, SubjectSamples]
    notes: dict[str, str] = Field(default_factory=dict, description="Why a requested baseline is unavailable.")
    gpu_before: dict[str, Any] = Field(default_factory=dict)
    gpu_after: dict[str, Any] = Field(default_factory=dict)
    snapshots: list[Snapshot] = Field(default_factory=list, description="Re-verified timed calls.")
    guards: list[TimedBuffers] = Field(default_factory=list, description="Every output set and workspace the timed "
                                       "calls of candidate kinds wrote, in allocation order (set 1, 2, ...): the "
                                       "controller checks their guard zones (core/execute/timed.py).")
    transport: Transport = Field("arena", description="How the snapshots and guards are shared (core/execute/shared.py).")
    transport_error: str = Field("", description="As Checked.transport_error.")
    threads: ThreadCensus


class Shared(_Reply):
    kind: Literal["share"] = "share"
    ok: Literal[True] = True
    tensor: SharedTensor | None = Field(None, description="The ShareRequest's tensor by CUDA IPC handle; None when "
                                                          "the worker could not export it (`error` says why).")
    error: str = ""


class Synced(_Reply):
    kind: Literal["sync"] = "sync"
    ok: Literal[True] = True


class Failed(_Reply):
    kind: Literal["error"] = "error"
    ok: Literal[False] = False
    stage: Literal["import", "compile", "runtime", "protocol", "sandbox"]
    log: str = ""
    error: str = ""
    cuda_fault: bool = Field(False, description="The CUDA context is unusable: the worker is replaced.")
    build: BuildArtifact | None = Field(None, description="The build, when the failure came after the first call.")
    case: int | None = Field(None, description="The verification case the failure happened in.")


NOT_LOADED = "not loaded"   # Failed.error of a request naming a candidate this worker has not loaded


def not_loaded(source_hash: str) -> Failed:
    """The answer to a check or bench of a candidate this worker never loaded (it was started after the load, the
    previous worker having been replaced): the controller loads the candidate again and asks once more."""
    return Failed(stage="protocol", error=NOT_LOADED,
                  log=f"candidate {source_hash[:16]} is not loaded in this worker (pid {os.getpid()})")


def is_not_loaded(record: Any) -> bool:
    """Whether a reply record is `not_loaded`'s answer."""
    return isinstance(record, Failed) and record.stage == "protocol" and record.error == NOT_LOADED


WorkerReply = Annotated[Union[Ready, Loaded, Checked, Benched, Shared, Synced, Failed], Field(discriminator="kind")]
_REPLY = TypeAdapter(WorkerReply)


# -- the wire --------------------------------------------------------------------------------------------------
def encode(record: Record, limit: int = MAX_REPLY_BYTES) -> bytes:
    """A record as the bytes of one message (its JSON); raises ValueError past `limit`."""
    data = record.model_dump_json().encode("utf-8")
    if len(data) > limit:
        raise ValueError(f"a {type(record).__name__} of {len(data)} bytes exceeds the protocol's {limit}")
    return data


def send(conn, record: Record, limit: int | None = None) -> None:
    """Send a request or reply as one framed JSON message (`Connection.send_bytes`)."""
    if limit is None:
        limit = MAX_REQUEST_BYTES if isinstance(record, _Request) else MAX_REPLY_BYTES
    conn.send_bytes(encode(record, limit))


def receive(conn, limit: int) -> bytes:
    """One framed message of at most `limit` bytes (`Connection.recv_bytes`: a longer one is refused before its body
    is read, and the connection closed): ProtocolViolation. EOFError / OSError when the other side is gone."""
    try:
        return conn.recv_bytes(limit)
    except OSError as e:
        if "bad message length" in str(e):
            raise ProtocolViolation(f"a message longer than {limit} bytes (or a corrupt length header)") from None
        raise


def decode_request(data: bytes | str) -> LoadRequest | CheckRequest | BenchRequest | ShareRequest | SyncRequest | \
        ExitRequest:
    """A request from its JSON bytes (raises pydantic.ValidationError for a malformed one)."""
    return _REQUEST.validate_json(data)


def decode_reply(data: bytes | str) -> Ready | Loaded | Checked | Benched | Shared | Synced | Failed:
    """A reply from its JSON bytes; anything else is a ProtocolViolation naming what was wrong."""
    try:
        return _REPLY.validate_json(data)
    except ValidationError as e:
        raise ProtocolViolation(f"not a worker reply: {e}"[:2000]) from None


def parse_request(data: Any) -> LoadRequest | CheckRequest | BenchRequest | ShareRequest | SyncRequest | ExitRequest:
    """A request from its JSON bytes or plain data (raises pydantic.ValidationError for a malformed one)."""
    if isinstance(data, (bytes, bytearray, str)):
        return decode_request(data)
    return _REQUEST.validate_python(data)


def parse_reply(data: Any) -> Ready | Loaded | Checked | Benched | Shared | Synced | Failed:
    """A reply from its JSON bytes or plain data; a malformed one becomes Failed(stage='protocol') naming what was
    wrong."""
    try:
        if isinstance(data, (bytes, bytearray, str)):
            return _REPLY.validate_json(data)
        return _REPLY.validate_python(data)
    except ValidationError as e:
        return Failed(stage="protocol", error=f"malformed worker reply: {e}"[:2000], log=repr(data)[:20000])


class SpecCache:
    """Validated OpSpecs keyed by the sha256 of their JSON text: a spec is validated once per worker, not on every
    request that names it."""

    def __init__(self):
        self._specs: dict[str, Any] = {}

    def get(self, text: str):
        from ...base.records import OpSpec
        key = sha256_hex(text)
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs[key] = OpSpec.model_validate_json(text)
        return spec
