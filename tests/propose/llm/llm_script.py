"""A scripted LLM server for tests: real HTTP on 127.0.0.1, OpenAI Chat Completions and Anthropic Messages.

Each POST takes the next planned reply, in order, whatever the path:
    {"content": TEXT}                       a normal answer
    {"content": TEXT, "delay": S}           answered after S seconds (a client with a shorter deadline times out)
    {"status": 500, "content": TEXT}        an HTTP error
and optional "usage": {"input": N, "output": N, "cached": N}. An exhausted script answers HTTP 500, so a test
that asks more than it planned fails loudly. Every request body is kept in `requests`.

Also the kernels the scripted replies carry (layernorm, weight and bias, any M, N <= BLOCK).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kernelloop.base.records import Record
from kernelloop.base.records.events import payload_dict


class ScriptedLLMServer:
    def __init__(self, script: list[dict]):
        self.script = list(script)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with owner._lock:
                    owner.requests.append({"path": self.path, "body": body})
                    plan = owner.script.pop(0) if owner.script else {"status": 500, "content": "script exhausted"}
                if plan.get("delay"):
                    time.sleep(plan["delay"])
                status = plan.get("status", 200)
                if status != 200:
                    payload = {"error": {"message": plan.get("content", "error"), "type": "server_error"}}
                elif self.path.rstrip("/").endswith("/messages"):
                    payload = _anthropic(body, plan)
                else:
                    payload = _openai(body, plan)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "ScriptedLLMServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _usage(plan: dict) -> tuple[int, int, int]:
    u = plan.get("usage", {})
    return u.get("input", 1000), u.get("output", 200), u.get("cached", 0)


def _openai(body: dict, plan: dict) -> dict:
    i, o, c = _usage(plan)
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": plan["content"]},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o,
                      "prompt_tokens_details": {"cached_tokens": c}}}


def _anthropic(body: dict, plan: dict) -> dict:
    i, o, c = _usage(plan)
    return {"id": "msg_scripted", "type": "message", "role": "assistant", "model": body.get("model", ""),
            "content": [{"type": "text", "text": plan["content"]}], "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": i - c, "output_tokens": o, "cache_read_input_tokens": c,
                      "cache_creation_input_tokens": 0}}


# -- kernels carried by the scripted replies ------------------------------------------------------------------

GOOD = '''"""LayerNorm, one program per row, the whole row in registers."""
import triton
import triton.language as tl


@triton.jit
def _ln_fwd(X, W, B, Y, N, stride_x, stride_y, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    x = tl.load(X + row * stride_x + cols, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(m, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
    w = tl.load(W + cols, mask=m, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(Y + row * stride_y + cols, (xc * rstd * w + b).to(Y.dtype.element_ty), mask=m)


def launch(x, weight, bias, y, *, eps, BLOCK, num_warps=4):
    # the row in one block whatever N is: held-out rows wider than the visible ones stay correct
    M, N = x.shape
    _ln_fwd[(M,)](x, weight, bias, y, N, x.stride(0), y.stride(0), eps, BLOCK=max(BLOCK, triton.next_power_of_2(N)),
                  num_warps=num_warps)
'''

# A patch against GOOD that does not compile: tl.arange needs constexpr bounds.
BREAK_PATCH = '''--- a/kernel.py
+++ b/kernel.py
@@ -7,3 +7,3 @@
 def _ln_fwd(X, W, B, Y, N, stride_x, stride_y, eps, BLOCK: tl.constexpr):
     row = tl.program_id(0)
-    cols = tl.arange(0, BLOCK)
+    cols = tl.arange(0, N)
'''

# The debugger's fix, a patch against the broken candidate.
FIX_PATCH = '''@@ -9,1 +9,1 @@
-    cols = tl.arange(0, N)
+    cols = tl.arange(0, BLOCK)
'''

WRONG = GOOD.replace("(xc * rstd * w + b)", "(xc * rstd * w)")   # forgets the bias

CHEAT = GOOD.replace('''    M, N = x.shape
    _ln_fwd''', '''    import torch
    y.copy_(torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps))
    return
    M, N = x.shape
    _ln_fwd''')


def proposal(*, source=None, patch=None, parents=(), config=None, space=None, latency=-10.0,
             metrics=(("registers", "same"),), rationale="scripted") -> str:
    """A KernelProposal as JSON text."""
    p = {"language": "triton", "parent_ids": list(parents), "rationale": rationale,
         "hypothesis": {"metrics": [{"metric": m, "direction": d} for m, d in metrics],
                        "latency_change_pct": latency}}
    if source is not None:
        p["source"] = source
    if patch is not None:
        p["patch"] = patch
    if config is not None:
        p["config"] = config
    if space is not None:
        p["space"] = space
    return json.dumps(p)


def plan(direction: str, parents=(), stop=False) -> str:
    return json.dumps({"direction": direction, "parent_ids": list(parents), "rationale": "scripted", "stop": stop})

def stored(evs):
    """The events as (kind, payload as archived): the sink gets typed records of the event union."""
    assert all(isinstance(e, Record) and isinstance(e.payload, Record) for e in evs), evs
    return [(e.kind, payload_dict(e)) for e in evs]
