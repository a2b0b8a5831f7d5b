"""The C++ registrations of the op launches (libliger_torch_ops.so, built from kernels/torch_ops/):
loaded at import when the file sits beside libliger_kernels.so and was built for the running torch.

With it, torch.ops.liger.{rms_norm,fused_add_rms_norm,layer_norm}_{fwd,bwd}, glu_* and rope_* are
C++ kernels of the dispatcher: eager calls and compiled graphs reach the CUDA launch without a
Python frame. Without it (not built, built for another torch, or LIGER_KERNELS_TORCH_OPS=0) the same
ops are registered from their Python (ctypes) implementations, with the same schemas, fakes and
results; `status()` says which is in use and why.

Environment: LIGER_KERNELS_TORCH_OPS=0 keeps the Python implementations; a path loads that file.
"""
from __future__ import annotations

import ctypes
import os
import re
import warnings
from typing import Callable, Optional

import torch

from . import _lib

ENV_VAR = "LIGER_KERNELS_TORCH_OPS"
LIB_NAME = "libliger_torch_ops.so"
# What kernels/torch_ops/common.cpp defines.
CPP_OPS = frozenset({
    "rms_norm_fwd", "rms_norm_bwd", "rms_norm_bwd_inplace", "fused_add_rms_norm_fwd", "fused_add_rms_norm_bwd",
    "layer_norm_fwd", "layer_norm_bwd", "glu_fwd", "glu_bwd", "glu_bwd_inplace", "rope_fwd", "rope_bwd",
})


class _State:
    tried = False
    path: Optional[str] = None  # the loaded library
    reason = ""  # why it is not loaded
    set_tunables = None  # liger_torch_ops_set_tunables through ctypes


_STATE = _State()


def _candidate() -> Optional[str]:
    setting = os.environ.get(ENV_VAR, "").strip()
    if setting.lower() in ("0", "off", "false", "no"):
        _STATE.reason = f"disabled by {ENV_VAR}={setting}"
        return None
    if setting:
        if not os.path.isfile(setting):
            warnings.warn(f"liger_kernels: {ENV_VAR}={setting!r} is not a file; using the Python op implementations",
                          RuntimeWarning, stacklevel=3)
            _STATE.reason = f"{ENV_VAR}={setting!r} is not a file"
            return None
        return setting
    try:
        library = _lib.library_path()
    except _lib.LibraryNotFoundError as exc:
        _STATE.reason = f"libliger_kernels.so not found ({exc})"
        return None
    path = os.path.join(os.path.dirname(library), LIB_NAME)
    if not os.path.isfile(path):
        _STATE.reason = (f"{LIB_NAME} is not beside {library} (it is built with the library when the build's python3 "
                         "imports a CUDA PyTorch)")
        return None
    return path


def _built_for(path: str) -> Optional[str]:
    try:
        with open(path + ".torch-version", encoding="utf-8") as stamp:
            return stamp.read().strip() or None
    except OSError:
        return None


def load() -> bool:
    """Loads the C++ registrations once; True when torch.ops.liger's launch ops are C++ kernels."""
    if _STATE.tried:
        return _STATE.path is not None
    _STATE.tried = True
    path = _candidate()
    if path is None:
        return False
    built_for = _built_for(path)
    explicit = bool(os.environ.get(ENV_VAR, "").strip())
    if built_for is None and not explicit:
        # Without the stamp nothing says which torch it was built for, and a C++ ABI mismatch can
        # crash at load instead of failing cleanly: a named file (LIGER_KERNELS_TORCH_OPS=path) is
        # the user's assertion, a discovered one is not.
        _STATE.reason = f"{path} has no {os.path.basename(path)}.torch-version stamp beside it (rebuild the library)"
        return False
    if built_for is not None and built_for != torch.__version__:
        _STATE.reason = f"{path} was built for torch {built_for}, this is torch {torch.__version__}"
        warnings.warn(f"liger_kernels: {_STATE.reason}; using the Python op implementations (rebuild the library "
                      "to get the C++ ones)", RuntimeWarning, stacklevel=3)
        return False
    try:
        torch.ops.load_library(path)
        handle = ctypes.CDLL(path)
        setter = handle.liger_torch_ops_set_tunables
        setter.restype = ctypes.c_int
        setter.argtypes = [ctypes.c_char_p, _lib.P_TUN]
    except (OSError, RuntimeError, AttributeError) as exc:
        _STATE.reason = f"{path} could not be loaded: {exc}"
        warnings.warn(f"liger_kernels: {_STATE.reason}; using the Python op implementations", RuntimeWarning,
                      stacklevel=3)
        return False
    _STATE.path = path
    _STATE.set_tunables = setter
    for op, tunables in list(_lib._OP_TUNABLES.items()):
        push_tunables(op, tunables)
    _lib._TUNABLES_LISTENER = push_tunables
    return True


def loaded() -> bool:
    return load()


def status() -> str:
    """Which implementation serves torch.ops.liger's launch ops, and why."""
    if load():
        return f"C++ dispatcher kernels ({_STATE.path})"
    return f"Python implementations ({_STATE.reason})"


def push_tunables(op: str, tunables: Optional[dict]) -> None:
    """Mirrors liger_kernels.set_tunables into the C++ kernels (no-op when they are not loaded)."""
    if _STATE.set_tunables is None:
        return
    ref = _lib.tunables_ref(tunables) if tunables else None
    _STATE.set_tunables(op.encode(), ref)


_KERNEL_ERROR = re.compile(r"(liger_\w+) failed with LIGER_STATUS_(\w+): ([^\n]*)")
_STATUS_CODES = {name: code for code, name in _lib.STATUS_NAMES.items()}


def _eager(op: Callable) -> Callable:
    """`op` (an OpOverload) for the eager path, with a library status error raised as LigerKernelError
    as the Python implementations raise it."""

    def call(*args):
        try:
            return op(*args)
        except RuntimeError as exc:
            found = _KERNEL_ERROR.search(str(exc))
            if found is None:
                raise
            function, name, detail = found.groups()
            raise _lib.LigerKernelError(function, _STATUS_CODES.get(name, 7), detail) from None

    call.__name__ = f"liger_{op.__name__}"
    return call


# Every op registered through define(), whichever implementation serves it.
DEFINED: list = []


def define(name: str, python_impl: Callable, fake: Callable, mutates_args=()) -> Callable:
    """Registers liger::<name> and returns the callable the eager path uses.

    With the C++ kernels loaded: only `fake` is registered (the schema and kernels come from C++), and
    the eager path calls the dispatcher op. Otherwise `python_impl` becomes a torch.library custom op
    with `fake`, and the eager path calls `python_impl` directly."""
    DEFINED.append(name)
    if name in CPP_OPS and load():
        torch.library.register_fake(f"liger::{name}")(fake)
        return _eager(getattr(torch.ops.liger, name).default)
    op = torch.library.custom_op(f"liger::{name}", python_impl, mutates_args=mutates_args)
    op.register_fake(fake)
    return python_impl
