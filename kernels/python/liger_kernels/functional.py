"""Functional API: every op of the library as a differentiable function of torch tensors.

All functions take CUDA tensors (fp32, fp16 or bf16), launch on the device that holds them, on
PyTorch's current stream of that device, and work under torch.compile (custom ops with fake
implementations: no graph breaks)."""
from __future__ import annotations

from .ops.glu import geglu, swiglu
from .ops.losses import cross_entropy, fused_linear_cross_entropy
from .ops.norms import fused_add_rms_norm, layer_norm, rms_norm
from .ops.rope import rope

liger_rms_norm = rms_norm
liger_fused_add_rms_norm = fused_add_rms_norm
liger_layer_norm = layer_norm
liger_rope = rope
liger_swiglu = swiglu
liger_geglu = geglu
liger_cross_entropy = cross_entropy
liger_fused_linear_cross_entropy = fused_linear_cross_entropy

__all__ = [
    "rms_norm",
    "fused_add_rms_norm",
    "layer_norm",
    "rope",
    "swiglu",
    "geglu",
    "cross_entropy",
    "fused_linear_cross_entropy",
]
