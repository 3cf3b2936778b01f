"""Trial: one pass of the loop linking candidate, workload, build, verdict and measurement."""

from __future__ import annotations

from pydantic import Field, field_validator

from .base import Record, content_hash
from .build import BuildArtifact, BuildFailure
from .device import Device, DeviceProperties
from .measurement import Measurement
from .verdict import Verdict


class Environment(Record):
    """Where results were produced."""

    device: Device = Field(description="The device's kind, 'cuda' or 'interpret' (stored as that text).")
    gpu: str = Field("", description="GPU name; empty in the interpreter.")
    driver: str = Field("", description="Driver version.")
    cuda: str = Field("", description="CUDA runtime torch was built with.")
    torch: str
    triton: str
    python: str
    host: str
    properties: DeviceProperties | None = Field(None, description="Device properties used for pruning (None: not "
                                                                  "recorded; older records held an empty mapping).")
    sandbox: str = Field("", description="How candidate code is confined (core/sandbox/policy.py): 'audit hook; os "
                                         "layer: user+net+mount namespaces, read-only view except ...', '...: "
                                         "user+net namespaces; read-only view unavailable: <why>', '...: "
                                         "unavailable: <why>' (older runs: 'net-namespace'), or 'off'.")

    @field_validator("properties", mode="before")
    @classmethod
    def _empty_is_none(cls, v):
        return None if v == {} else v


class Costs(Record):
    compile_s: float = 0.0
    verify_s: float = 0.0
    bench_s: float = 0.0
    wall_s: float = 0.0


class Trial(Record):
    """A candidate evaluated on a workload under one frozen manifest."""

    run_id: str
    index: int = Field(ge=0, description="Order in which the controller asked for it.")
    candidate_id: str
    workload_id: str
    manifest_hash: str = Field(description="Hash of reference, verifier, policy and environment.")
    build: BuildArtifact | BuildFailure | None = Field(None, discriminator="kind")
    verdict: Verdict
    measurement: Measurement | None = None
    costs: Costs = Field(default_factory=Costs)
    started: float
    finished: float
    device: str = Field("", description="The device it was verified and timed on (a records.Device's text, e.g. "
                                        "'cuda:1', 'interpret:0'); '' in older records.")
    transport: str = Field("", description="How the worker's tensors reached the controller (core/execute/shared.py): "
                                           "'arena' (the CPU: the candidate's tensors were a mapped file's pages), "
                                           "'cuda-ipc' (its CUDA buffers opened by handle) or 'host-arena' (its "
                                           "CUDA buffers copied into a mapped host file after the calls, where CUDA "
                                           "IPC was refused: the run's `transport` event says why); '' where no "
                                           "tensors were asked for (the build stage ended the trial) and in older "
                                           "records.")

    @property
    def id(self) -> str:
        return "t-" + content_hash({"c": self.candidate_id, "w": self.workload_id, "m": self.manifest_hash})
