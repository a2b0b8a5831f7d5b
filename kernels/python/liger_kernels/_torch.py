"""Tensor plumbing between PyTorch and the C ABI: dtype enum, checks, pointers, stream, device, and
the checks that choose between calling an op's Python implementation directly (plain eager
execution: `direct`) and the registered torch.ops.liger.* op (compiling, tracing, dispatch modes,
tensor subclasses). Everything here runs on every call: keep it cheap."""
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
    index = -1
    for name, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"liger {op}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_cuda:
            raise ValueError(f"liger {op}: {name} is on {t.device}; liger_kernels runs on CUDA tensors only")
        if device is None:
            device = t.device
            index = t.get_device()
        elif t.get_device() != index:
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


# Launch plumbing, resolved once: the raw cudaStream_t of PyTorch's current stream of a device (as an
# int, what Inductor's generated code uses), and the current device's index.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_NO_DEVICE_SWITCH = contextlib.nullcontext()


def stream(device: torch.device):
    """PyTorch's current stream on `device`, as the C ABI's liger_stream_t (an address)."""
    if _raw_stream is not None:
        return _raw_stream(device.index)
    return ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)


def on_device(device: torch.device):
    """A context manager that makes `device` current for the launch (the stream and the kernels belong
    to the tensors' GPU); nothing to do, and no torch.cuda.device switch, when it already is."""
    index = device.index
    if index is None or index == _current_device():
        return _NO_DEVICE_SWITCH
    return torch.cuda.device(index)


_increment_version = torch.autograd.graph.increment_version


def written(*tensors: torch.Tensor) -> None:
    """Bumps the autograd version counters of tensors a kernel wrote in place, as the dispatcher does
    for a registered op's mutates_args: the direct (eager) in-place paths call this, so autograd's
    "modified by an inplace operation" checks see the same writes as before."""
    for t in tensors:
        _increment_version(t)


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


# Tracing and dispatch checks, imported once (they run on every call).
_is_compiling = torch.compiler.is_compiling
_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
try:
    from torch._subclasses.fake_tensor import FakeTensor as _FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor as _FunctionalTensor

    _TRACING_TENSORS: tuple = (_FakeTensor, _FunctionalTensor)
except ImportError:  # pragma: no cover - older torch
    _TRACING_TENSORS = ()
try:
    from torch.fx.experimental.proxy_tensor import get_proxy_mode as _get_proxy_mode
except ImportError:  # pragma: no cover - older torch
    _get_proxy_mode = None
# Number of active TorchDispatchModes, infrastructure modes (fake, proxy, functional) included.
_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", None)
# Modes of pre-dispatch tracing (export) live on a separate stack.
_pre_dispatch_modes = getattr(torch._ops, "_len_torch_dispatch_stack_pre_dispatch", None)


def tracing(*tensors) -> bool:
    """True while torch.compile / export / AOTAutograd traces (then the functional, non-mutating
    path is taken and nothing reads device values); False in eager execution."""
    if _is_compiling():
        return True
    for t in tensors:
        # Plain tensors first: a type check is cheaper than isinstance against the subclasses.
        if t is not None and type(t) is not _Tensor and isinstance(t, _TRACING_TENSORS):
            return True
    return _get_proxy_mode is not None and _get_proxy_mode() is not None


def direct(*tensors) -> bool:
    """True in plain eager execution: an op's Python implementation may then be called directly,
    without the dispatcher (torch.ops.liger.*). False while compiling or tracing, under any
    TorchDispatchMode (they must see the op), and for tensor subclasses (fake, functional, DTensor,
    ...): those calls go through the registered op. direct() implies not tracing()."""
    if _is_compiling():
        return False
    if _dispatch_modes is None or _dispatch_modes() != 0:
        return False
    for t in tensors:
        if t is not None and type(t) is not _Tensor and type(t) is not _Parameter:
            return False
    if _pre_dispatch_modes is None:
        return _get_proxy_mode is None or _get_proxy_mode() is None
    return _pre_dispatch_modes() == 0
