"""Ahead-of-time sm_90 builds of template kernels in a fresh Python process (no GPU needed): a Triton that has run
interpreted kernels in the test process is not a clean compiler (the interpreter patches the language while it runs,
and a full CPU run once found those patches still in place). Shared by the compile tests of the row-op templates."""

import json
import os
import subprocess
import sys

import pytest

# Defines build(fn, signature, constexpr values, num_warps) in the child; a script appends its own loop over
# configurations, calls build() for each and prints {"built": [...]} last. A Triton without the ahead-of-time API,
# or one that cannot build for sm_90 here (no CUDA backend, no ptxas), prints {"skip": reason} and exits 0; a
# CompilationError (the template's own fault) fails the child.
PRELUDE = r'''
import importlib.util, json, sys
import triton
try:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
except ImportError as e:
    print(json.dumps({"skip": f"no ahead-of-time compiler API: {e}"})); sys.exit(0)

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod

def build(fn, sig, values, num_warps):
    src = ASTSource(fn=fn, signature=sig, constexprs={(list(sig).index(k),): v for k, v in values.items()})
    try:
        triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})
    except Exception as e:
        if type(e).__name__ == "CompilationError":
            raise
        print(json.dumps({"skip": f"cannot compile for sm_90 here: {type(e).__name__}: {str(e)[:200]}"}))
        sys.exit(0)
'''


def run_build(script: str, *args: str) -> list:
    """PRELUDE + script in a fresh interpreter without TRITON_INTERPRET; the list it printed as "built" (the test is
    skipped when the child said it cannot build here)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", PRELUDE + script, *args], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if "skip" in result:
        pytest.skip(result["skip"])
    return result["built"]
