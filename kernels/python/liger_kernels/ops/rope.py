"""RoPE (HF rotate-half) on q and k in one launch (rope.h): the ops liger::rope_fwd / rope_bwd (C++
dispatcher kernels from libliger_torch_ops.so, or the Python implementations below; fake
implementations that allocate exactly as the real ones do) for the launches, autograd in a
torch.autograd.Function outside them that calls the launch directly in plain eager execution and
torch.ops.liger.* while compiling or tracing.

q [B, Hq, T, D] and k [B, Hk, T, D] may be any strided views with a contiguous last dimension (what
LlamaAttention passes: proj(x).view(B, T, H, D).transpose(1, 2)); no copy is made for them. Outputs
are new [B, H, T, D] tensors in the inputs' memory layout (torch.empty_like, as PyTorch's
element-wise ops give). cos/sin: (1 or B, T, D) in q's
dtype (converted otherwise); no gradient flows into cos/sin (HF builds them under no_grad)."""
import ctypes
from typing import Tuple

import torch
from torch import Tensor

from .. import _lib
from .. import _torch as T
from .. import _torch_ops

P, I64, DT, ST = _lib.P, _lib.I64, _lib.DT, _lib.ST
P_TUN = _lib.P_TUN
PI64 = _lib.P_I64  # const int64_t strides[3] (host array)

_ROPE_ARGS = [P, PI64, P, PI64, I64, P, PI64, P, PI64, I64, P, P, I64, I64, I64, I64, I64, I64, DT, P_TUN, P]
_lib.declare("liger_rope_forward", ST, _ROPE_ARGS)
_lib.declare("liger_rope_backward", ST, _ROPE_ARGS)
_lib.declare("liger_rope_default_tunables", ST, [ctypes.c_int, I64, I64, DT, P_TUN])


_I64x3 = ctypes.c_int64 * 3


def _strides3(t: Tensor):
    s = t.stride()
    return _I64x3(s[0], s[1], s[2])


def _last_contig(t: Tensor) -> Tensor:
    return t if t.stride(-1) == 1 or t.shape[-1] == 1 else t.contiguous()


def _prep_cos_sin(cos: Tensor, sin: Tensor, B: int, S: int, D: int, dtype, op: str):
    if cos.dim() == 2:
        cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)
    if cos.dim() != 3 or cos.shape != sin.shape:
        raise ValueError(f"liger {op}: cos and sin must both be (1 or B, T, D); got {tuple(cos.shape)}, {tuple(sin.shape)}")
    if cos.shape[0] not in (1, B) or cos.shape[1] != S or cos.shape[2] < D // 2:
        raise ValueError(f"liger {op}: cos/sin shape {tuple(cos.shape)} does not fit q/k with B={B}, T={S}, D={D}")
    cos = cos.to(dtype)
    sin = sin.to(dtype)
    if cos.stride() != sin.stride() or cos.stride(-1) != 1:
        cos, sin = cos.contiguous(), sin.contiguous()
    batch_stride = int(cos.stride(0)) if cos.shape[0] > 1 else 0
    return cos, sin, int(cos.shape[0]), batch_stride, int(cos.stride(1))


def _launch(fn: str, q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> Tuple[Tensor, Tensor]:
    op = "rope"
    device = T.check_cuda(op, q=q, k=k, cos=cos, sin=sin)
    if q.dim() != 4 or k.dim() != 4:
        raise ValueError(f"liger {op}: q and k must be [B, H, T, D]; got {tuple(q.shape)} and {tuple(k.shape)}")
    B, Hq, S, D = q.shape
    if k.shape[0] != B or k.shape[2] != S or k.shape[3] != D:
        raise ValueError(f"liger {op}: k {tuple(k.shape)} does not match q {tuple(q.shape)} in B, T, D")
    T.check_same_dtype(op, q, k=k)
    dtype = T.dtype_enum(q, op)
    q = _last_contig(q)
    k = _last_contig(k)
    cos, sin, cos_batch, cbs, css = _prep_cos_sin(cos, sin, B, S, D, q.dtype, op)
    # Outputs in the inputs' layout (as PyTorch's elementwise ops give): HF's q/k are [B, T, H, D]
    # storage seen as [B, H, T, D], and with heads contiguous in a token on both sides the library
    # moves whole token rows through shared memory (the `stages` tunable) instead of head slices.
    qo = torch.empty_like(q)
    ko = torch.empty_like(k)
    Hk = k.shape[1]
    with T.on_device(device):
        _lib.call(
            fn, T.ptr(q), _strides3(q), T.ptr(qo), _strides3(qo), Hq, T.ptr(k) if Hk else None, _strides3(k),
            T.ptr(ko) if Hk else None, _strides3(ko), Hk, T.ptr(cos), T.ptr(sin), cos_batch, cbs, css, B, S, D,
            dtype, _lib.op_tunables(op), T.stream(device),
        )
    return qo, ko


_FORWARD = "liger_rope_forward"
_BACKWARD = "liger_rope_backward"


def _rope_fwd_python(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> Tuple[Tensor, Tensor]:
    return _launch(_FORWARD, q, k, cos, sin)


def _rope_bwd_python(dq: Tensor, dk: Tensor, cos: Tensor, sin: Tensor) -> Tuple[Tensor, Tensor]:
    return _launch(_BACKWARD, dq, dk, cos, sin)


def _fake_outputs(q: Tensor, k: Tensor) -> Tuple[Tensor, Tensor]:
    """The outputs' metadata exactly as _launch allocates them (the inputs' layout, after the copy a
    non-unit last stride forces): torch.compile plans every later view and stride from these, and a
    plain contiguous guess broke HF-layout q/k ("expected stride 128==262144")."""
    return torch.empty_like(_last_contig(q)), torch.empty_like(_last_contig(k))


def _rope_fwd_fake(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> Tuple[Tensor, Tensor]:
    return _fake_outputs(q, k)


def _rope_bwd_fake(dq: Tensor, dk: Tensor, cos: Tensor, sin: Tensor) -> Tuple[Tensor, Tensor]:
    return _fake_outputs(dq, dk)


# liger::rope_fwd / rope_bwd: C++ kernels when libliger_torch_ops.so is loaded, else the functions above.
_rope_fwd = _torch_ops.define("rope_fwd", _rope_fwd_python, _rope_fwd_fake)
_rope_bwd = _torch_ops.define("rope_bwd", _rope_bwd_python, _rope_bwd_fake)


class RoPEFunction(torch.autograd.Function):
    """(q', k') = rotate-half RoPE of [B, H, T, D] q and k; saves cos and sin (no gradient for them)."""

    @staticmethod
    def forward(ctx, q, k, cos, sin):
        if T.direct(q, k, cos, sin):
            qo, ko = _rope_fwd(q, k, cos, sin)
        else:
            qo, ko = torch.ops.liger.rope_fwd(q, k, cos, sin)
        ctx.save_for_backward(cos, sin)
        return qo, ko

    @staticmethod
    def backward(ctx, dq, dk):
        cos, sin = ctx.saved_tensors
        if T.direct(dq, dk, cos, sin):
            gq, gk = _rope_bwd(dq, dk, cos, sin)
        else:
            gq, gk = torch.ops.liger.rope_bwd(dq, dk, cos, sin)
        return gq, gk, None, None


def rope(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, unsqueeze_dim: int = 1) -> Tuple[Tensor, Tensor]:
    """transformers' apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim): unsqueeze_dim=1 for
    [B, H, T, D] q/k, 2 for [B, T, H, D] (results in the same layout as given)."""
    if unsqueeze_dim == 1:
        return RoPEFunction.apply(q, k, cos, sin)
    if unsqueeze_dim == 2:
        qo, ko = RoPEFunction.apply(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        return qo.transpose(1, 2), ko.transpose(1, 2)
    raise ValueError(f"liger rope: unsqueeze_dim must be 1 or 2, got {unsqueeze_dim}")
