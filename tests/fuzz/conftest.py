import os
import sys
from pathlib import Path

import pytest

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"   # the package's kernels were verified in the interpreter

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def fuzz_bases(tmp_path_factory):
    from loader_cases import export_small_package, make_bases
    pkg = export_small_package(tmp_path_factory.mktemp("fuzz-package"))
    return make_bases(tmp_path_factory.mktemp("fuzz-scratch"), pkg)
