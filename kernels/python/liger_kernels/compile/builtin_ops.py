"""The library's own ops in the registry: their rules, and for the decision table the PyTorch each
replaces (what Inductor would compile instead) next to the library call, on representative shapes."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from . import replacements as R
from . import rules
from .registry import register_op

_NORM_DIMS = [{"rows": r, "cols": c} for r in (1024, 16384) for c in (1024, 4096, 8192, 32768)]
_GLU_DIMS = [{"rows": r, "cols": c} for r in (1024, 16384) for c in (1024, 4096, 14336, 28672)]
_ROPE_DIMS = [{"rows": r, "cols": d, "head_dim": d} for r in (1024, 16384) for d in (64, 128, 256)]
_CE_DIMS = [{"rows": r, "cols": v} for r in (1024, 8192) for v in (32000, 128256, 262144)]
_FLCE_DIMS = [{"rows": r, "cols": v, "hidden": 2048} for r in (1024, 8192) for v in (32000, 128256, 262144)]


def _randn(*shape, dtype, device, grad=True):
    return torch.randn(*shape, dtype=dtype, device=device).requires_grad_(grad)


def _rms_reference(x, w, eps=1e-6):
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


def _bench_rms(d, dtype, device):
    x, w = _randn(d["rows"], d["cols"], dtype=dtype, device=device), _randn(d["cols"], dtype=dtype, device=device)
    return (lambda a, b: R.rms_norm(a, b, 1e-6, 0.0, "llama")), _rms_reference, (x, w)


def _bench_ln(d, dtype, device):
    x = _randn(d["rows"], d["cols"], dtype=dtype, device=device)
    w, b = _randn(d["cols"], dtype=dtype, device=device), _randn(d["cols"], dtype=dtype, device=device)
    return (lambda a, ww, bb: R.layer_norm(a, ww, bb, 1e-5)), (
        lambda a, ww, bb: F.layer_norm(a, (a.shape[-1],), ww, bb, 1e-5)), (x, w, b)


def _bench_glu(kind):
    def make(d, dtype, device):
        a, b = _randn(d["rows"], d["cols"], dtype=dtype, device=device), _randn(d["rows"], d["cols"], dtype=dtype, device=device)
        if kind == "swiglu":
            return R.swiglu, (lambda g, u: F.silu(g) * u), (a, b)
        return R.geglu, (lambda g, u: F.gelu(g, approximate="tanh") * u), (a, b)

    return make


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rope_reference(q, k, cos, sin):
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * c + _rotate_half(q) * s, k * c + _rotate_half(k) * s


def _bench_rope(d, dtype, device):
    hd = d["head_dim"]
    tokens = d["rows"] // 8
    q = _randn(1, 32, tokens, hd, dtype=dtype, device=device)
    k = _randn(1, 8, tokens, hd, dtype=dtype, device=device)
    cos = torch.randn(1, tokens, hd, dtype=dtype, device=device)
    sin = torch.randn(1, tokens, hd, dtype=dtype, device=device)
    return (lambda a, b, c, s: R.rope(a, b, c, s, 1)), _rope_reference, (q, k, cos, sin)


def _bench_ce(d, dtype, device):
    logits = _randn(d["rows"], d["cols"], dtype=dtype, device=device)
    target = torch.randint(0, d["cols"], (d["rows"],), device=device)
    return (lambda lg, t: R.cross_entropy(lg, t, None, -100, 0.0, "mean", None, torch.float32)), (
        lambda lg, t: F.cross_entropy(lg.float(), t)), (logits, target)


def _bench_flce(d, dtype, device):
    h = _randn(d["rows"], d["hidden"], dtype=dtype, device=device)
    w = (torch.randn(d["cols"], d["hidden"], dtype=dtype, device=device) * 0.02).requires_grad_()
    target = torch.randint(0, d["cols"], (d["rows"],), device=device)
    return (lambda a, b, t: R.fused_linear_cross_entropy(a, b, t, None, None, -100, 0.0, "mean", None, torch.float32)), (
        lambda a, b, t: F.cross_entropy(F.linear(a, b).float(), t)), (h, w, target)


# One scan can yield several ops (cross_entropy also finds fused_linear_cross_entropy, glu both GLUs);
# the scan is registered with the first op and the others reuse it (the backend runs each scan once).
register_op("cross_entropy", rules.cross_entropy, bench_dims=_CE_DIMS, bench=_bench_ce)
register_op("fused_linear_cross_entropy", rules.cross_entropy, bench_dims=_FLCE_DIMS, bench=_bench_flce)
register_op("rope", rules.rope, bench_dims=_ROPE_DIMS, bench=_bench_rope)
register_op("rms_norm", rules.rms_norm, bench_dims=_NORM_DIMS, bench=_bench_rms)
register_op("layer_norm", rules.layer_norm, bench_dims=_NORM_DIMS, bench=_bench_ln)
register_op("swiglu", rules.glu, bench_dims=_GLU_DIMS, bench=_bench_glu("swiglu"))
register_op("geglu", rules.glu, bench_dims=_GLU_DIMS, bench=_bench_glu("geglu"))
