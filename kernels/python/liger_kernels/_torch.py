"""Tensor plumbing between PyTorch and the C ABI: dtype enum, checks, pointers, stream, device."""
from __future__ import annotations

import contextlib
import ctypes
from typing import Iterable, Optional

import torch

from . import _lib

_DTYPES = {
    torch.float32: _lib.DTYPE_FLOAT32,
    torch.float16: _lib.DTYPE_FLOAT16,
    torch.bfloat16: _lib.DTYPE_BFLOAT16,
}
SUPPORTED_DTYPES = tuple(_DTYPES)


def dtype_enum(t: torch.Tensor, op: str, what: str = "input") -> int:
    try:
        return _DTYPES[t.dtype]
    except KeyError:
        raise TypeError(
            f"liger {op}: {what} has dtype {t.dtype}; supported: float32, float16, bfloat16"
        ) from None


def check_cuda(op: str, **tensors: Optional[torch.Tensor]) -> torch.device:
    """All given tensors on one CUDA device; returns it."""
    device = None
    for name, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"liger {op}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.device.type != "cuda":
            raise ValueError(f"liger {op}: {name} is on {t.device}; liger_kernels runs on CUDA tensors only")
        if device is None:
            device = t.device
        elif t.device != device:
            raise ValueError(f"liger {op}: {name} is on {t.device} but the other tensors are on {device}")
    if device is None:
        raise ValueError(f"liger {op}: no tensor given")
    return device


def check_same_dtype(op: str, ref: torch.Tensor, **tensors: Optional[torch.Tensor]) -> None:
    for name, t in tensors.items():
        if t is not None and t.dtype != ref.dtype:
            raise TypeError(f"liger {op}: {name} has dtype {t.dtype}, expected {ref.dtype} (same as the input)")


def check_contiguous(op: str, **tensors: Optional[torch.Tensor]) -> None:
    for name, t in tensors.items():
        if t is not None and not t.is_contiguous():
            raise ValueError(
                f"liger {op}: {name} (shape {tuple(t.shape)}, strides {t.stride()}) must be contiguous here"
            )


def rows_view(x: torch.Tensor, op: str, name: str = "input") -> torch.Tensor:
    """x as a 2-D [rows, cols] tensor whose last dim is contiguous (stride 1); copies only when needed.

    The C ABI takes a row stride, so a row-strided view (e.g. a slice) need not be copied."""
    if x.dim() == 0:
        raise ValueError(f"liger {op}: {name} must have at least one dimension")
    cols = x.shape[-1]
    if x.dim() == 2 and (x.stride(1) == 1 or cols == 1) and x.stride(0) >= cols:
        return x
    x2 = x.reshape(-1, cols)
    if not ((x2.stride(1) == 1 or cols == 1) and (x2.stride(0) >= cols or x2.shape[0] <= 1)):
        x2 = x2.contiguous()
    return x2


def row_stride(x2: torch.Tensor) -> int:
    return int(x2.stride(0)) if x2.shape[0] > 1 else int(x2.shape[1])


def ptr(t: Optional[torch.Tensor]) -> Optional[int]:
    """Device pointer for ctypes (None -> NULL). Zero-element tensors may have a null pointer."""
    if t is None:
        return None
    return t.data_ptr() or None


def stream(device: torch.device) -> ctypes.c_void_p:
    return ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)


@contextlib.contextmanager
def on_device(device: torch.device):
    """Runs the launch with `device` current: the stream and the kernels belong to the tensors' GPU."""
    with torch.cuda.device(device):
        yield


def workspace(nbytes: int, device: torch.device) -> Optional[torch.Tensor]:
    """A workspace from PyTorch's caching allocator (kept alive by the caller until the launch is queued;
    the allocator's stream semantics make reuse after the call safe on the current stream)."""
    if nbytes <= 0:
        return None
    return torch.empty(int(nbytes), dtype=torch.uint8, device=device)


def numel_rows(shape: Iterable[int]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def tracing(*tensors) -> bool:
    """True while torch.compile / export / AOTAutograd traces (then the functional, non-mutating
    path is taken and nothing reads device values); False in eager execution."""
    if torch.compiler.is_compiling():
        return True
    try:
        from torch._subclasses.fake_tensor import FakeTensor
        from torch._subclasses.functional_tensor import FunctionalTensor

        if any(isinstance(t, (FakeTensor, FunctionalTensor)) for t in tensors if t is not None):
            return True
    except ImportError:
        pass
    try:
        from torch.fx.experimental.proxy_tensor import get_proxy_mode

        if get_proxy_mode() is not None:
            return True
    except ImportError:
        pass
    return False
