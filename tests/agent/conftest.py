import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _run_keys_outside_home(tmp_path_factory):
    """Run keys (kernelloop.execute.keys) go to a folder of the test session, not the user's ~/.config."""
    old = os.environ.get("KERNELLOOP_KEY_DIR")
    os.environ["KERNELLOOP_KEY_DIR"] = str(tmp_path_factory.mktemp("run-keys"))
    yield
    if old is None:
        os.environ.pop("KERNELLOOP_KEY_DIR", None)
    else:
        os.environ["KERNELLOOP_KEY_DIR"] = old
