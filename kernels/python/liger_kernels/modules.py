"""nn.Modules over the liger_kernels ops, state-dict compatible with their Hugging Face counterparts."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from . import functional as LF

CASTING_MODES = ("llama", "gemma", "none")


class LigerRMSNorm(nn.Module):
    """y = x * rstd * (offset + weight). State dict: {"weight"} (as LlamaRMSNorm / GemmaRMSNorm).

    casting_mode: "llama" (variance in fp32, x*rstd cast to the input dtype before the weight multiply),
    "gemma" (all in fp32, cast at the end), "none". in_place: the backward writes dx into dy's
    buffer (saves memory; unsafe when the incoming gradient is still needed elsewhere, e.g. Gemma2's
    pre/post feed-forward norms)."""

    def __init__(
        self,
        hidden_size: int,
        eps: float = 1e-6,
        offset: float = 0.0,
        casting_mode: str = "llama",
        init_fn: str = "ones",
        in_place: bool = False,
        elementwise_affine: bool = True,
    ):
        super().__init__()
        if casting_mode not in CASTING_MODES:
            raise ValueError(f"casting_mode must be one of {CASTING_MODES}, got {casting_mode!r}")
        if init_fn not in ("ones", "zeros"):
            raise ValueError("init_fn must be 'ones' or 'zeros'")
        if not elementwise_affine:
            raise ValueError("LigerRMSNorm needs a weight (elementwise_affine=True)")
        init = torch.ones if init_fn == "ones" else torch.zeros
        self.weight = nn.Parameter(init(hidden_size))
        self.variance_epsilon = eps  # HF's attribute name, so instance patching keeps it
        self.offset = offset
        self.casting_mode = casting_mode
        self.in_place = in_place

    @property
    def eps(self) -> float:
        return self.variance_epsilon

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return LF.rms_norm(
            hidden_states,
            self.weight,
            eps=self.variance_epsilon,
            offset=getattr(self, "offset", 0.0),
            casting_mode=getattr(self, "casting_mode", "llama"),
            in_place=getattr(self, "in_place", False),
        )

    def extra_repr(self) -> str:
        return (
            f"{tuple(self.weight.shape)}, eps={self.variance_epsilon}, offset={self.offset}, "
            f"casting_mode={self.casting_mode}, in_place={self.in_place}"
        )


class LigerFusedAddRMSNorm(LigerRMSNorm):
    """forward(x, residual) -> (RMSNorm(x + residual), x + residual)."""

    def forward(self, hidden_states: torch.Tensor, residual: torch.Tensor):  # type: ignore[override]
        return LF.fused_add_rms_norm(
            hidden_states,
            residual,
            self.weight,
            eps=self.variance_epsilon,
            offset=self.offset,
            casting_mode=self.casting_mode,
            in_place=self.in_place,
        )


class LigerLayerNorm(nn.Module):
    """State dict {"weight", "bias"} like nn.LayerNorm over the last dimension."""

    def __init__(self, hidden_size: int, eps: float = 1e-5, bias: bool = True, init_fn: str = "ones"):
        super().__init__()
        init = torch.ones if init_fn == "ones" else torch.zeros
        self.hidden_size = hidden_size
        self.weight = nn.Parameter(init(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size)) if bias else None
        self.variance_epsilon = eps

    @property
    def eps(self) -> float:
        return self.variance_epsilon

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return LF.layer_norm(hidden_states, self.weight, self.bias, eps=self.variance_epsilon)

    def extra_repr(self) -> str:
        return f"{self.hidden_size}, eps={self.variance_epsilon}, bias={self.bias is not None}"


# Inside a gated MLP the projections' outputs are read by the activation alone (nn.Linear's backward
# saves its input and weight, not its output), so the activation's backward writes da and db into
# their buffers: two [tokens, intermediate] tensors fewer at the backward's peak. The write bumps the
# tensors' autograd versions, so a hook that saved them for a backward of its own fails loudly
# instead of reading gradients. Under torch.compile the functional backward is traced instead.
def _mlp_forward_swiglu(self, x: torch.Tensor) -> torch.Tensor:
    return self.down_proj(LF.swiglu(self.gate_proj(x), self.up_proj(x), in_place_backward=True))


def _mlp_forward_geglu(self, x: torch.Tensor) -> torch.Tensor:
    return self.down_proj(LF.geglu(self.gate_proj(x), self.up_proj(x), in_place_backward=True))


class _GatedMLP(nn.Module):
    def __init__(self, config, hidden_size: Optional[int] = None, intermediate_size: Optional[int] = None):
        super().__init__()
        self.config = config
        self.hidden_size = hidden_size if hidden_size is not None else config.hidden_size
        self.intermediate_size = intermediate_size if intermediate_size is not None else config.intermediate_size
        bias = bool(getattr(config, "mlp_bias", False))
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=bias)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=bias)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=bias)


class LigerSwiGLUMLP(_GatedMLP):
    """down_proj(silu(gate_proj(x)) * up_proj(x)): LlamaMLP's layout and state dict."""

    _ACTS = ("silu", "swish")

    def __init__(self, config, hidden_size: Optional[int] = None, intermediate_size: Optional[int] = None):
        super().__init__(config, hidden_size, intermediate_size)
        act = getattr(config, "hidden_act", "silu")
        if act not in self._ACTS:
            raise ValueError(f"LigerSwiGLUMLP needs hidden_act silu/swish, config has {act!r}")

    forward = _mlp_forward_swiglu


class LigerGEGLUMLP(_GatedMLP):
    """down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)): GemmaMLP's layout and state dict."""

    _ACTS = ("gelu_pytorch_tanh", "gelu_tanh", "gelu_new", "gelu_fast")

    def __init__(self, config, hidden_size: Optional[int] = None, intermediate_size: Optional[int] = None):
        super().__init__(config, hidden_size, intermediate_size)
        act = getattr(config, "hidden_activation", None) or getattr(config, "hidden_act", "gelu_pytorch_tanh")
        if act not in self._ACTS:
            raise ValueError(f"LigerGEGLUMLP computes the tanh-approximated GELU; config has {act!r}")

    forward = _mlp_forward_geglu


def liger_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim: int = 1):
    """Drop-in for transformers' apply_rotary_pos_emb (rotate-half RoPE on q and k in one launch).

    Partial rotary (cos/sin narrower than the head, partial_rotary_factor < 1): as transformers'
    partial-capable forms do, the first cos.shape[-1] features of each head rotate and the rest
    pass through. The kernel alone would read a half-width cos as the first half of a full-width
    one and rotate every feature with the wrong frequencies, without an error."""
    rotary_dim = cos.shape[-1]
    if rotary_dim < q.shape[-1]:
        q_rot, k_rot = LF.rope(q[..., :rotary_dim].contiguous(), k[..., :rotary_dim].contiguous(), cos, sin,
                               unsqueeze_dim=unsqueeze_dim)
        return (torch.cat([q_rot, q[..., rotary_dim:]], dim=-1), torch.cat([k_rot, k[..., rotary_dim:]], dim=-1))
    return LF.rope(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)


class LigerCrossEntropyLoss(nn.Module):
    """nn.CrossEntropyLoss over [N, V] logits and [N] targets, plus z-loss and soft-capping.

    With return_z_loss=True, forward returns (loss, z_loss)."""

    def __init__(
        self,
        weight: Optional[torch.Tensor] = None,
        ignore_index: int = -100,
        lse_square_scale: float = 0.0,
        label_smoothing: float = 0.0,
        reduction: str = "mean",
        softcap: Optional[float] = None,
        return_z_loss: bool = False,
    ):
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be mean, sum or none; got {reduction!r}")
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError("label_smoothing must be in [0, 1]")
        if softcap is not None and softcap <= 0:
            raise ValueError("softcap must be positive or None")
        self.register_buffer("weight", weight, persistent=False)
        self.ignore_index = ignore_index
        self.lse_square_scale = lse_square_scale
        self.label_smoothing = label_smoothing
        self.reduction = reduction
        self.softcap = softcap
        self.return_z_loss = return_z_loss

    def forward(self, logits: torch.Tensor, target: torch.Tensor):
        return LF.cross_entropy(
            logits,
            target,
            weight=self.weight,
            ignore_index=self.ignore_index,
            label_smoothing=self.label_smoothing,
            lse_square_scale=self.lse_square_scale,
            softcap=self.softcap,
            reduction=self.reduction,
            return_z_loss=self.return_z_loss,
        )


class LigerFusedLinearCrossEntropyLoss(nn.Module):
    """loss(lm_head_weight, hidden [N, H], target [N], bias=None): the cross-entropy of hidden @ W^T
    (+ bias) without materialising the [N, V] logits. Argument order as Liger-Kernel's."""

    def __init__(
        self,
        ce_weight: Optional[torch.Tensor] = None,
        ignore_index: int = -100,
        lse_square_scale: float = 0.0,
        label_smoothing: float = 0.0,
        reduction: str = "mean",
        softcap: Optional[float] = None,
        return_z_loss: bool = False,
        accum_dtype: Optional[torch.dtype] = None,
    ):
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be mean, sum or none; got {reduction!r}")
        self.register_buffer("ce_weight", ce_weight, persistent=False)
        self.ignore_index = ignore_index
        self.lse_square_scale = lse_square_scale
        self.label_smoothing = label_smoothing
        self.reduction = reduction
        self.softcap = softcap
        self.return_z_loss = return_z_loss
        self.accum_dtype = accum_dtype

    def forward(self, lin_weight: torch.Tensor, _input: torch.Tensor, target: torch.Tensor, bias=None):
        return LF.fused_linear_cross_entropy(
            _input,
            lin_weight,
            target,
            bias=bias,
            ce_weight=self.ce_weight,
            ignore_index=self.ignore_index,
            label_smoothing=self.label_smoothing,
            lse_square_scale=self.lse_square_scale,
            softcap=self.softcap,
            reduction=self.reduction,
            return_z_loss=self.return_z_loss,
            accum_dtype=self.accum_dtype,
        )
