#!/usr/bin/env python3
"""Runs the PyTorch binding tests, or explains why they cannot run here (exit 77 = skipped).

They need PyTorch with a CUDA device and the built liger_kernels shared library; CI machines
have none of these, and must report the suite as skipped rather than passed.
"""
import os
import subprocess
import sys

SKIP = 77
here = os.path.dirname(os.path.abspath(__file__))


def skip(reason: str) -> None:
    print(f"[  SKIPPED ] python binding tests not run: {reason}", flush=True)
    sys.exit(SKIP)


try:
    import torch  # noqa: F401
except Exception as exc:  # ImportError or a broken install
    skip(f"PyTorch is not importable ({exc.__class__.__name__}: {exc})")
if not torch.cuda.is_available():
    skip("PyTorch sees no CUDA device")
library = os.environ.get("LIGER_KERNELS_LIBRARY", "")
if not library or not os.path.exists(library):
    skip("the liger_kernels shared library was not built (no nvcc at configure time?)")
try:
    import pytest  # noqa: F401
except ImportError:
    skip("pytest is not installed")

env = dict(os.environ)
repo = os.path.dirname(os.path.dirname(here))
env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(repo, "kernels", "python"), env.get("PYTHONPATH", "")]))
sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", here] + sys.argv[1:], env=env))
