"""Qwen3 MoE integration of the liger_kernels ops (hand-written reference for mixture-of-experts models;
autopatch's templates/autopatch/integration.py.mustache renders this same form for the models it generates).

apply_liger_kernel_to_qwen3_moe() patches transformers.models.qwen3_moe.modeling_qwen3_moe:
  - Qwen3MoeRMSNorm -> LigerRMSNorm (offset 0, casting llama, in_place True) for the decoder norms,
    the per-head q_norm/k_norm and the final norm
  - Qwen3MoeMLP.forward -> the fused SwiGLU kernel (the dense MLP of mlp_only_layers, and every expert
    where a model keeps its experts as a ModuleList of such MLPs: the patch matches modules by class)
  - apply_rotary_pos_emb -> liger_rotary_pos_emb (rotate-half)
  - Qwen3MoeForCausalLM.forward -> the fused linear cross-entropy forward (MoeCausalLMOutputWithPast,
    the router load-balancing loss added as the stock forward does when output_router_logits)
Kept as the model implements them (declined on purpose):
  - swiglu (Qwen3MoeExperts): experts are stored as fused 3-D parameter tensors and computed in a loop
    or grouped GEMM; the library gated-MLP kernel replaces per-expert MLP modules
  - the router (top-k softmax gating): no library kernel
With model=..., an existing instance is patched in place (parameters, devices and dtypes kept).
revert_liger_kernel_to_qwen3_moe() undoes the class patches, and an instance's when given one.

Reference integration: moe. Hand-written: no recorded profile.
"""
# hand-written reference: no autopatch profile header, so `liger-agent autopatch` never overwrites it
# (it generates beside it with --module <name>).
# decisions (SPEC section 6): norm_type=RMSNorm rms_norm_casting=llama rms_norm_offset=0 in_place_backward=true mlp_activation=swiglu architecture=moe vision=false rope=standard output_class=Qwen3MoeForCausalLM softcapping=false
from __future__ import annotations

from typing import Optional

import torch

from ..modules import liger_rotary_pos_emb
from . import _autopatch
from .llama import _liger_fixed_cross_entropy

SPEC = {
    "model_type": "qwen3_moe",
    "modeling": "transformers.models.qwen3_moe.modeling_qwen3_moe",
    "causal_lm": "Qwen3MoeForCausalLM",
    "norms": [
        {"cls": "Qwen3MoeRMSNorm", "attrs": ["input_layernorm", "post_attention_layernorm", "q_norm", "k_norm", "norm"], "offset": 0, "casting_mode": "llama", "in_place": True, "init_fn": "ones"},
    ],
    "layer_norms": [
    ],
    "mlps": [
        {"cls": "Qwen3MoeMLP", "kind": "swiglu", "gate": "gate_proj", "up": "up_proj", "down": "down_proj"},
    ],
    "rope": "apply_rotary_pos_emb",
}
DECLINED = {
    "swiglu:Qwen3MoeExperts": "experts are stored as fused 3-D parameter tensors and computed in a loop or grouped GEMM; the library gated-MLP kernel replaces per-expert MLP modules",
}


def lce_forward(
    self,
    input_ids: Optional[torch.LongTensor] = None,
    attention_mask: Optional[torch.Tensor] = None,
    position_ids: Optional[torch.LongTensor] = None,
    past_key_values=None,
    inputs_embeds: Optional[torch.FloatTensor] = None,
    labels: Optional[torch.LongTensor] = None,
    use_cache: Optional[bool] = None,
    logits_to_keep=0,
    skip_logits: Optional[bool] = None,
    **kwargs,
):
    """Qwen3MoeForCausalLM.forward with the fused linear cross-entropy: with labels in training mode the
    loss comes from the last hidden state in row chunks and `logits` is None; otherwise the stock path."""
    from transformers.modeling_outputs import MoeCausalLMOutputWithPast

    return_dict = kwargs.pop("return_dict", None)
    output_router_logits = kwargs.pop("output_router_logits", None)
    if output_router_logits is None:
        output_router_logits = getattr(self.config, "output_router_logits", False)
    outputs = self.model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        past_key_values=past_key_values,
        inputs_embeds=inputs_embeds,
        use_cache=use_cache,
        output_router_logits=output_router_logits,
        **kwargs,
    )
    hidden_states = outputs.last_hidden_state if hasattr(outputs, "last_hidden_state") else outputs[0]
    slice_indices = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
    kept = hidden_states[:, slice_indices, :]
    softcap = None  # decision 11: no final-logit soft-capping

    shift_labels = kwargs.get("shift_labels", None)
    has_labels = labels is not None or shift_labels is not None
    if skip_logits is None:
        skip_logits = self.training and has_labels
    if skip_logits and not has_labels:
        raise ValueError("skip_logits=True needs labels or shift_labels")

    loss = None
    logits = None
    if skip_logits:
        loss = _autopatch.causal_lm_loss(self, kept, labels, kwargs, softcap=softcap)
    else:
        logits = _autopatch.softcap_logits(self.lm_head(kept), softcap)
        if has_labels:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)

    aux_loss = None
    if output_router_logits and getattr(outputs, "router_logits", None) is not None:
        aux_loss = _MODELING().load_balancing_loss_func(
            outputs.router_logits, self.num_experts, self.num_experts_per_tok, attention_mask)
        if loss is not None:
            loss = loss + self.router_aux_loss_coef * aux_loss.to(loss.device)

    out = MoeCausalLMOutputWithPast(
        loss=loss,
        aux_loss=aux_loss,
        router_logits=getattr(outputs, "router_logits", None),
        logits=logits,
        past_key_values=getattr(outputs, "past_key_values", None),
        hidden_states=getattr(outputs, "hidden_states", None),
        attentions=getattr(outputs, "attentions", None),
    )
    if return_dict is False:
        return out.to_tuple()
    return out


_PATCHER = _autopatch.Patcher(SPEC, lce_forward)
_MODELING = _PATCHER.modeling


def apply_liger_kernel_to_qwen3_moe(
    rope: bool = True,
    cross_entropy: bool = False,
    fused_linear_cross_entropy: bool = True,
    rms_norm: bool = True,
    swiglu: bool = True,
    model=None,
) -> None:
    """Patches Qwen3 MoE in transformers with liger_kernels ops (see the module docstring)."""
    if cross_entropy and fused_linear_cross_entropy:
        raise ValueError("cross_entropy and fused_linear_cross_entropy cannot both be True")
    norms = [k for k, on in (("rms_norm", rms_norm),) if on]
    mlps = [k for k, on in (("swiglu", swiglu),) if on]
    _PATCHER.patch_norm_classes(norms)
    _PATCHER.patch_mlp_classes(mlps)
    if rope:
        _PATCHER.patch_rope(liger_rotary_pos_emb)
    if cross_entropy:
        _PATCHER.patch_cross_entropy(_liger_fixed_cross_entropy)
    if fused_linear_cross_entropy:
        _PATCHER.patch_causal_lm()
    if model is not None:
        _PATCHER.patch_instance(model, norms + mlps)
        if fused_linear_cross_entropy:
            _PATCHER.patch_forward(model)


def revert_liger_kernel_to_qwen3_moe(model=None) -> None:
    """Undoes apply_liger_kernel_to_qwen3_moe: class patches always; an instance's when given.
    Models built while the classes were patched keep their Liger modules unless passed here."""
    _PATCHER.revert_classes()
    if model is not None:
        _PATCHER.revert_instance(model)


def is_patched() -> bool:
    return _PATCHER.is_patched()
