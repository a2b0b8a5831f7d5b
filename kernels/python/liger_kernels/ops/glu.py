"""SwiGLU and GeGLU (c = act(a) * b) as torch.library custom ops with autograd (swiglu.h, geglu.h).

The backward recomputes act(a) from a (nothing but a and b is saved). With in_place_backward=True
(eager mode only) the gradients are written into a's and b's buffers, Liger's memory saving: use it
only when nothing else reads a and b afterwards (true inside an MLP: gate_proj/up_proj outputs)."""

import ctypes
from typing import Tuple

import torch
from torch import Tensor

from .. import _lib
from .. import _torch as T

P, I64, I32, DT, ST = _lib.P, _lib.I64, _lib.I32, _lib.DT, _lib.ST
P_TUN = _lib.P_TUN

KINDS = ("swiglu", "geglu")
for _k in KINDS:
    _lib.declare(f"liger_{_k}_forward", ST, [P, I64, P, I64, P, I64, I64, I64, DT, P_TUN, P])
    _lib.declare(f"liger_{_k}_backward", ST, [P, I64, P, I64, P, I64, P, I64, P, I64, I64, I64, I32, DT, P_TUN, P])
    _lib.declare(f"liger_{_k}_default_tunables", ST, [ctypes.c_int, I64, I64, DT, P_TUN])


def _check(op: str, a: Tensor, b: Tensor):
    device = T.check_cuda(op, a=a, b=b)
    if a.shape != b.shape:
        raise ValueError(f"liger {op}: a {tuple(a.shape)} and b {tuple(b.shape)} must have the same shape")
    T.check_same_dtype(op, a, b=b)
    return device, T.dtype_enum(a, op)


def _rc(a: Tensor):
    cols = a.shape[-1] if a.dim() else 1
    return (a.numel() // cols if cols else 0), cols


@torch.library.custom_op("liger::glu_fwd", mutates_args=())
def glu_fwd(a: Tensor, b: Tensor, kind: str, in_place_backward: bool) -> Tensor:
    op = kind
    device, dtype = _check(op, a, b)
    a = a.contiguous()
    b = b.contiguous()
    rows, cols = _rc(a)
    c = torch.empty_like(a)
    with T.on_device(device):
        _lib.call(f"liger_{kind}_forward", T.ptr(a), cols, T.ptr(b), cols, T.ptr(c), cols, rows, cols, dtype,
                  _lib.op_tunables(op), T.stream(device))
    return c


@glu_fwd.register_fake
def _(a, b, kind, in_place_backward):
    return torch.empty_like(a, memory_format=torch.contiguous_format)


@torch.library.custom_op("liger::glu_bwd", mutates_args=())
def glu_bwd(dc: Tensor, a: Tensor, b: Tensor, kind: str) -> Tuple[Tensor, Tensor]:
    op = kind
    device, dtype = _check(op, a, b)
    dc = dc.contiguous()
    rows, cols = _rc(a)
    da = torch.empty_like(a)
    db = torch.empty_like(b)
    with T.on_device(device):
        _lib.call(f"liger_{kind}_backward", T.ptr(dc), cols, T.ptr(a), cols, T.ptr(b), cols, T.ptr(da), cols,
                  T.ptr(db), cols, rows, cols, 0, dtype, _lib.op_tunables(op), T.stream(device))
    return da, db


@glu_bwd.register_fake
def _(dc, a, b, kind):
    return torch.empty_like(a), torch.empty_like(b)


@torch.library.custom_op("liger::glu_bwd_inplace", mutates_args=("a", "b"))
def glu_bwd_inplace(dc: Tensor, a: Tensor, b: Tensor, kind: str) -> None:
    """da is written into a, db into b (both contiguous)."""
    op = kind
    device, dtype = _check(op, a, b)
    dc = dc.contiguous()
    rows, cols = _rc(a)
    with T.on_device(device):
        _lib.call(f"liger_{kind}_backward", T.ptr(dc), cols, T.ptr(a), cols, T.ptr(b), cols, None, cols,
                  None, cols, rows, cols, 1, dtype, _lib.op_tunables(op), T.stream(device))


@glu_bwd_inplace.register_fake
def _(dc, a, b, kind):
    return None


def _glu_setup(ctx, inputs, output):
    a, b, kind, in_place = inputs
    ctx.save_for_backward(a.contiguous(), b.contiguous())
    ctx.kind = kind
    ctx.in_place = in_place


def _glu_backward(ctx, dc):
    a, b = ctx.saved_tensors
    if ctx.in_place and not T.tracing(dc, a):
        torch.ops.liger.glu_bwd_inplace(dc, a, b, ctx.kind)
        da, db = a, b
    else:
        da, db = torch.ops.liger.glu_bwd(dc, a, b, ctx.kind)
    return da, db, None, None


torch.library.register_autograd("liger::glu_fwd", _glu_backward, setup_context=_glu_setup)


def swiglu(a: Tensor, b: Tensor, in_place_backward: bool = False) -> Tensor:
    """silu(a) * b."""
    return torch.ops.liger.glu_fwd(a, b, "swiglu", bool(in_place_backward))


def geglu(a: Tensor, b: Tensor, in_place_backward: bool = False) -> Tensor:
    """gelu_tanh(a) * b."""
    return torch.ops.liger.glu_fwd(a, b, "geglu", bool(in_place_backward))
