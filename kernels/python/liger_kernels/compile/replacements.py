"""What a matched region becomes: thin calls into liger_kernels.functional with the arguments a graph
carries (literals and nodes, no Python objects), traceable by AOTAutograd like any PyTorch code.
liger_kernels.functional is imported at the first call: the graph tools above it work without the
CUDA library."""
from __future__ import annotations

from typing import Optional

from torch import Tensor



def rms_norm(x: Tensor, weight: Tensor, eps: float, offset: float, casting: str) -> Tensor:
    from .. import functional as LF

    return LF.rms_norm(x, weight, eps=eps, offset=offset, casting_mode=casting)


def layer_norm(x: Tensor, weight: Tensor, bias: Optional[Tensor], eps: float) -> Tensor:
    from .. import functional as LF

    return LF.layer_norm(x, weight, bias, eps=eps)


def swiglu(gate: Tensor, up: Tensor) -> Tensor:
    from .. import functional as LF

    return LF.swiglu(gate, up)


def geglu(gate: Tensor, up: Tensor) -> Tensor:
    from .. import functional as LF

    return LF.geglu(gate, up)


def rope(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, unsqueeze_dim: int):
    from .. import functional as LF

    return LF.rope(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)


def cross_entropy(logits: Tensor, target: Tensor, class_weight: Optional[Tensor], ignore_index: int,
                  label_smoothing: float, reduction: str, softcap: Optional[float], out_dtype) -> Tensor:
    from .. import functional as LF

    loss = LF.cross_entropy(logits, target, weight=class_weight, ignore_index=ignore_index,
                            label_smoothing=label_smoothing, softcap=softcap, reduction=reduction)
    return loss if out_dtype is None or loss.dtype == out_dtype else loss.to(out_dtype)


def fused_linear_cross_entropy(hidden: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor],
                               class_weight: Optional[Tensor], ignore_index: int, label_smoothing: float,
                               reduction: str, softcap: Optional[float], out_dtype, scale: float = 1.0) -> Tensor:
    from .. import functional as LF

    if scale != 1.0:  # a constant logit scale, folded into the hidden states (and the bias)
        hidden = hidden * scale
        bias = bias * scale if bias is not None else None
    loss = LF.fused_linear_cross_entropy(hidden, weight, target, bias, ce_weight=class_weight,
                                         ignore_index=ignore_index, label_smoothing=label_smoothing,
                                         softcap=softcap, reduction=reduction)
    return loss if out_dtype is None or loss.dtype == out_dtype else loss.to(out_dtype)
