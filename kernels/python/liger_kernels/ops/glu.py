"""SwiGLU and GeGLU (c = act(a) * b) (swiglu.h, geglu.h): the ops liger::glu_* (C++ dispatcher
kernels from libliger_torch_ops.so, or the Python implementations below; fake implementations) for
the launches, autograd in a torch.autograd.Function outside them that calls the launch directly in
plain eager execution and torch.ops.liger.* while compiling or tracing.

The backward recomputes act(a) from a (nothing but a and b is saved). With in_place_backward=True
(eager mode only) the gradients are written into a's and b's buffers, Liger's memory saving: use it
only when nothing else reads a and b afterwards (true inside an MLP: gate_proj/up_proj outputs)."""

import ctypes
from typing import Tuple

import torch
from torch import Tensor

from .. import _lib
from .. import _torch as T
from .. import _torch_ops

P, I64, I32, DT, ST = _lib.P, _lib.I64, _lib.I32, _lib.DT, _lib.ST
P_TUN = _lib.P_TUN

KINDS = ("swiglu", "geglu")
for _k in KINDS:
    _lib.declare(f"liger_{_k}_forward", ST, [P, I64, P, I64, P, I64, I64, I64, DT, P_TUN, P])
    _lib.declare(f"liger_{_k}_backward", ST, [P, I64, P, I64, P, I64, P, I64, P, I64, I64, I64, I32, DT, P_TUN, P])
    _lib.declare(f"liger_{_k}_default_tunables", ST, [ctypes.c_int, I64, I64, DT, P_TUN])
# Entry point names per kind, built once (not an f-string per launch).
_FORWARD = {k: f"liger_{k}_forward" for k in KINDS}
_BACKWARD = {k: f"liger_{k}_backward" for k in KINDS}


def _entry(names: dict, kind: str, which: str) -> str:
    return names.get(kind) or f"liger_{kind}_{which}"  # an unknown kind fails in _lib (no declaration)


def _check(op: str, a: Tensor, b: Tensor):
    device = T.check_cuda(op, a=a, b=b)
    if a.shape != b.shape:
        raise ValueError(f"liger {op}: a {tuple(a.shape)} and b {tuple(b.shape)} must have the same shape")
    T.check_same_dtype(op, a, b=b)
    return device, T.dtype_enum(a, op)


def _rc(a: Tensor):
    cols = a.shape[-1] if a.dim() else 1
    return (a.numel() // cols if cols else 0), cols


def _glu_fwd_python(a: Tensor, b: Tensor, kind: str, in_place_backward: bool) -> Tensor:
    op = kind
    device, dtype = _check(op, a, b)
    a = a.contiguous()
    b = b.contiguous()
    rows, cols = _rc(a)
    c = torch.empty_like(a)
    with T.on_device(device):
        _lib.call(_entry(_FORWARD, kind, "forward"), T.ptr(a), cols, T.ptr(b), cols, T.ptr(c), cols, rows, cols, dtype,
                  _lib.op_tunables(op), T.stream(device))
    return c


def _glu_fwd_fake(a: Tensor, b: Tensor, kind: str, in_place_backward: bool) -> Tensor:
    return torch.empty_like(a, memory_format=torch.contiguous_format)


def _glu_bwd_python(dc: Tensor, a: Tensor, b: Tensor, kind: str) -> Tuple[Tensor, Tensor]:
    op = kind
    device, dtype = _check(op, a, b)
    dc = dc.contiguous()
    rows, cols = _rc(a)
    da = torch.empty_like(a)
    db = torch.empty_like(b)
    with T.on_device(device):
        _lib.call(_entry(_BACKWARD, kind, "backward"), T.ptr(dc), cols, T.ptr(a), cols, T.ptr(b), cols, T.ptr(da), cols,
                  T.ptr(db), cols, rows, cols, 0, dtype, _lib.op_tunables(op), T.stream(device))
    return da, db


def _glu_bwd_fake(dc: Tensor, a: Tensor, b: Tensor, kind: str) -> Tuple[Tensor, Tensor]:
    return torch.empty_like(a), torch.empty_like(b)


def _glu_bwd_inplace_python(dc: Tensor, a: Tensor, b: Tensor, kind: str) -> None:
    """da is written into a, db into b (both contiguous)."""
    op = kind
    device, dtype = _check(op, a, b)
    dc = dc.contiguous()
    rows, cols = _rc(a)
    with T.on_device(device):
        _lib.call(_entry(_BACKWARD, kind, "backward"), T.ptr(dc), cols, T.ptr(a), cols, T.ptr(b), cols, None, cols,
                  None, cols, rows, cols, 1, dtype, _lib.op_tunables(op), T.stream(device))


def _glu_bwd_inplace_fake(dc: Tensor, a: Tensor, b: Tensor, kind: str) -> None:
    return None


# The liger::glu_* ops: C++ kernels when libliger_torch_ops.so is loaded, else the functions above.
_glu_fwd = _torch_ops.define("glu_fwd", _glu_fwd_python, _glu_fwd_fake)
_glu_bwd = _torch_ops.define("glu_bwd", _glu_bwd_python, _glu_bwd_fake)
_glu_bwd_inplace = _torch_ops.define("glu_bwd_inplace", _glu_bwd_inplace_python, _glu_bwd_inplace_fake,
                                     mutates_args=("a", "b"))


class GLUFunction(torch.autograd.Function):
    """c = act(a) * b for kind "swiglu" (silu) or "geglu" (gelu_tanh); saves a and b."""

    @staticmethod
    def forward(ctx, a, b, kind, in_place_backward):
        a = a.contiguous()
        b = b.contiguous()
        if T.direct(a, b):
            c = _glu_fwd(a, b, kind, in_place_backward)
        else:
            c = torch.ops.liger.glu_fwd(a, b, kind, in_place_backward)
        ctx.save_for_backward(a, b)
        ctx.kind = kind
        ctx.in_place = in_place_backward
        return c

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        direct = T.direct(dc, a)
        if ctx.in_place and (direct or not T.tracing(dc, a)):
            if direct:
                _glu_bwd_inplace(dc, a, b, ctx.kind)
                T.written(a, b)
            else:
                torch.ops.liger.glu_bwd_inplace(dc, a, b, ctx.kind)
            da, db = a, b
        elif direct:
            da, db = _glu_bwd(dc, a, b, ctx.kind)
        else:
            da, db = torch.ops.liger.glu_bwd(dc, a, b, ctx.kind)
        return da, db, None, None


def swiglu(a: Tensor, b: Tensor, in_place_backward: bool = False) -> Tensor:
    """silu(a) * b."""
    return GLUFunction.apply(a, b, "swiglu", bool(in_place_backward))


def geglu(a: Tensor, b: Tensor, in_place_backward: bool = False) -> Tensor:
    """gelu_tanh(a) * b."""
    return GLUFunction.apply(a, b, "geglu", bool(in_place_backward))
