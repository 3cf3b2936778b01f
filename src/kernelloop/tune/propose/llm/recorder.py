"""Record and replay: every request and response is stored, content-addressed, so a run replays offline.

A cassette is a folder:

    objects/<sha256>.json   canonical JSON of each request and each response (the name is its content hash)
    exchanges.jsonl         one line per call, in call order: replay key, occurrence, request and response hashes

The *replay key* is chosen by the caller and names the discrete state the call was made in (role, prompt set,
workload, the candidates and verdicts seen so far, attempt): everything that decides which call comes next,
and nothing that is measured. A replayed run therefore gets the recorded reply exactly when it reaches the
same state, even though timings in the prompt (measured afresh) differ; `exact` says whether the request was
also byte-identical. A state the recording never reached is a `ReplayMiss`: the replay diverged.

`LLMClient` puts provider, cassette and price table together: `call(request, key)` returns an `Exchange` with
the response and its cost, recorded (record mode) or served from the cassette (replay mode, no network).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ....base.records import canonical_json
from .config import LLMConfig
from .providers import ChatRequest, ChatResponse, Provider

Mode = Literal["record", "replay"]


class ReplayMiss(RuntimeError):
    """The replayed run asked for a call the recording does not have: it diverged from the recorded run."""


@dataclass(frozen=True)
class Exchange:
    """One call: what was sent, what came back, what it cost."""

    key: str
    occurrence: int
    request: ChatRequest
    response: ChatResponse
    request_sha: str
    response_sha: str
    replayed: bool
    exact: bool          # replay only: the request equals the recorded one byte for byte
    usd: float | None    # None when the model has no configured price


class Cassette:
    """The content-addressed store of a run's LLM exchanges."""

    def __init__(self, root: str | Path, mode: Mode):
        if mode not in ("record", "replay"):
            raise ValueError(f"cassette mode {mode!r}: use record or replay")
        self.root = Path(root)
        self.mode = mode
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self._index: dict[tuple[str, int], dict] = {}
        log = self.root / "exchanges.jsonl"
        if mode == "replay" and not log.is_file():
            raise FileNotFoundError(f"no recording at {log}")
        if mode == "record":
            (self.root / "objects").mkdir(parents=True, exist_ok=True)
        for line in (log.read_text().splitlines() if log.is_file() else []):
            if line.strip():
                e = json.loads(line)
                self._index[(e["key"], e["occurrence"])] = e

    # -- objects ----------------------------------------------------------------------------------------------
    def put(self, value: dict) -> str:
        """Store a JSON object under the sha256 of its canonical form; return the hash."""
        text = canonical_json(value)
        sha = hashlib.sha256(text.encode()).hexdigest()
        path = self.root / "objects" / f"{sha}.json"
        if not path.exists():
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(text)
            os.replace(tmp, path)
        return sha

    def get(self, sha: str) -> dict:
        """The stored object; its hash is checked."""
        text = (self.root / "objects" / f"{sha}.json").read_text()
        if hashlib.sha256(text.encode()).hexdigest() != sha:
            raise ValueError(f"cassette object {sha} is corrupt (content hash differs)")
        return json.loads(text)

    # -- exchanges --------------------------------------------------------------------------------------------
    def next_occurrence(self, key: str) -> int:
        with self._lock:
            n = self._seen.get(key, 0)
            self._seen[key] = n + 1
            return n

    def record(self, key: str, occurrence: int, request: ChatRequest, response: ChatResponse) -> tuple[str, str]:
        req, resp = self.put(request.model_dump(mode="json")), self.put(response.model_dump(mode="json"))
        line = canonical_json({"key": key, "occurrence": occurrence, "request": req, "response": resp})
        with self._lock, open(self.root / "exchanges.jsonl", "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        return req, resp

    def has(self, key: str, occurrence: int) -> bool:
        return (key, occurrence) in self._index

    def lookup(self, key: str, occurrence: int) -> tuple[ChatResponse, str, str]:
        """(response, recorded request hash, response hash) of a recorded call; ReplayMiss if absent."""
        e = self._index.get((key, occurrence))
        if e is None:
            raise ReplayMiss(f"the recording has no call {key!r} #{occurrence}: the replayed run diverged from the "
                             f"recorded one (a verdict or a proposal differs)")
        return ChatResponse.model_validate(self.get(e["response"])), e["request"], e["response"]

    def exchanges(self) -> list[dict]:
        """The recorded calls in order, requests and responses decoded."""
        log = self.root / "exchanges.jsonl"
        out = []
        for line in (log.read_text().splitlines() if log.is_file() else []):
            if line.strip():
                e = json.loads(line)
                out.append({**e, "request_body": self.get(e["request"]), "response_body": self.get(e["response"])})
        return out


class LLMClient:
    """Provider + cassette + prices. In replay mode there is no provider: nothing leaves the machine.

    In record mode a call the cassette already holds (a resumed run retracing its steps) is served from it, so
    `--resume` after a crash neither pays for nor changes the answers it already had."""

    def __init__(self, config: LLMConfig, cassette: Cassette, provider: Provider | None = None):
        if cassette.mode == "record" and provider is None:
            raise ValueError("recording needs a provider")
        if cassette.mode == "replay" and provider is not None:
            raise ValueError("a replay must not have a provider (it would reach the network)")
        self.config = config
        self.cassette = cassette
        self.provider = provider

    def request(self, system: str, messages: list, *, max_tokens: int | None = None) -> ChatRequest:
        """A request with the config's model and sampling settings."""
        c = self.config
        return ChatRequest(provider=c.provider, model=c.model, system=system, messages=messages,
                           max_tokens=max_tokens or c.max_tokens, temperature=c.temperature, seed=c.seed,
                           json_mode=c.json_mode)

    def call(self, request: ChatRequest, key: str) -> Exchange:
        occurrence = self.cassette.next_occurrence(key)
        if self.cassette.mode == "replay" or self.cassette.has(key, occurrence):
            response, req_sha, resp_sha = self.cassette.lookup(key, occurrence)
            exact, replayed = req_sha == request.sha, True
        else:
            response = self.provider.complete(request)
            req_sha, resp_sha = self.cassette.record(key, occurrence, request, response)
            exact, replayed = True, False
        price = self.config.price(request.model)
        u = response.usage
        usd = price.cost(u.input_tokens, u.output_tokens, u.cached_tokens, u.cache_write_tokens) if price else None
        return Exchange(key=key, occurrence=occurrence, request=request, response=response, request_sha=req_sha,
                        response_sha=resp_sha, replayed=replayed, exact=exact, usd=usd)


__all__ = ["Cassette", "Exchange", "LLMClient", "ReplayMiss"]
