"""Gemma integration of the liger_kernels ops (hand-written reference for Gemma-family models; autopatch's
templates/autopatch/integration.py.mustache renders this same form for the models it generates).

apply_liger_kernel_to_gemma() patches transformers.models.gemma.modeling_gemma:
  - GemmaRMSNorm -> LigerRMSNorm (offset 1: y = x_hat * (1 + w), casting gemma: everything in fp32 and
    one cast at the end, weights initialised to zeros, in_place True: Gemma's norms feed only their
    attention/MLP, never a second norm; Gemma2/3's pre/post feed-forward norms do, so they get False)
  - GemmaMLP.forward -> the fused GeGLU kernel (gelu_pytorch_tanh(gate) * up; projections kept)
  - apply_rotary_pos_emb -> liger_rotary_pos_emb (rotate-half)
  - GemmaForCausalLM.forward -> the fused linear cross-entropy forward (final-logit soft-capping from
    config.final_logit_softcapping when the config has one: Gemma2/3 do, Gemma 1 does not)
Kept as the model implements them (declined on purpose):
  - nothing
With model=..., an existing instance is patched in place (parameters, devices and dtypes kept).
revert_liger_kernel_to_gemma() undoes the class patches, and an instance's when given one.

Reference integration: gemma. Hand-written: no recorded profile.
"""
# hand-written reference: no autopatch profile header, so `liger-agent autopatch` never overwrites it
# (it generates beside it with --module <name>).
# decisions (SPEC section 6): norm_type=RMSNorm rms_norm_casting=gemma rms_norm_offset=1 in_place_backward=true mlp_activation=geglu architecture=dense vision=false rope=standard output_class=GemmaForCausalLM softcapping=false
from __future__ import annotations

from typing import Optional

import torch

from ..modules import liger_rotary_pos_emb
from . import _autopatch
from .llama import _liger_fixed_cross_entropy

SPEC = {
    "model_type": "gemma",
    "modeling": "transformers.models.gemma.modeling_gemma",
    "causal_lm": "GemmaForCausalLM",
    "norms": [
        {"cls": "GemmaRMSNorm", "attrs": ["input_layernorm", "post_attention_layernorm", "norm"], "offset": 1, "casting_mode": "gemma", "in_place": True, "init_fn": "zeros"},
    ],
    "layer_norms": [
    ],
    "mlps": [
        {"cls": "GemmaMLP", "kind": "geglu", "gate": "gate_proj", "up": "up_proj", "down": "down_proj"},
    ],
    "rope": "apply_rotary_pos_emb",
}
DECLINED = {
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
    """GemmaForCausalLM.forward with the fused linear cross-entropy: with labels in training mode the
    loss comes from the last hidden state in row chunks and `logits` is None; otherwise the stock path."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    return_dict = kwargs.pop("return_dict", None)
    outputs = self.model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        past_key_values=past_key_values,
        inputs_embeds=inputs_embeds,
        use_cache=use_cache,
        **kwargs,
    )
    hidden_states = outputs.last_hidden_state if hasattr(outputs, "last_hidden_state") else outputs[0]
    slice_indices = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
    kept = hidden_states[:, slice_indices, :]
    softcap = getattr(self.config, "final_logit_softcapping", None)  # decision 11: family-wide in the reference

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

    out = CausalLMOutputWithPast(
        loss=loss,
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


def apply_liger_kernel_to_gemma(
    rope: bool = True,
    cross_entropy: bool = False,
    fused_linear_cross_entropy: bool = True,
    rms_norm: bool = True,
    geglu: bool = True,
    model=None,
) -> None:
    """Patches Gemma in transformers with liger_kernels ops (see the module docstring)."""
    if cross_entropy and fused_linear_cross_entropy:
        raise ValueError("cross_entropy and fused_linear_cross_entropy cannot both be True")
    norms = [k for k, on in (("rms_norm", rms_norm),) if on]
    mlps = [k for k, on in (("geglu", geglu),) if on]
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


def revert_liger_kernel_to_gemma(model=None) -> None:
    """Undoes apply_liger_kernel_to_gemma: class patches always; an instance's when given.
    Models built while the classes were patched keep their Liger modules unless passed here."""
    _PATCHER.revert_classes()
    if model is not None:
        _PATCHER.revert_instance(model)


def is_patched() -> bool:
    return _PATCHER.is_patched()
