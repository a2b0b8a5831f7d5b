"""Shared set-up for the PyTorch binding tests: skips (never passes) without torch, a GPU or the library."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# LIGER_TEST_INSTALLED=1: test the liger_kernels installed in this interpreter (the wheel), not
# the checkout's sources.
if os.environ.get("LIGER_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(REPO, "kernels", "python"))
sys.path.insert(0, HERE)

torch = pytest.importorskip("torch")

if not torch.cuda.is_available():
    pytest.skip("PyTorch sees no CUDA device", allow_module_level=True)


def pytest_report_header(config):
    try:
        from liger_kernels import _lib

        return [f"liger_kernels library: {_lib.library_path()} (version {_lib.version()})",
                f"torch {torch.__version__}, device {torch.cuda.get_device_name()}"]
    except Exception as exc:  # reported, and the tests then fail loudly
        return [f"liger_kernels library: NOT LOADABLE ({exc})"]


@pytest.fixture(autouse=True)
def _seed_and_reset():
    torch.manual_seed(1234)
    yield
    from liger_kernels import _lib

    _lib.reset_tunables()
