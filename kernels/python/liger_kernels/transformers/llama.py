"""Hand-written Llama integration (the reference `autopatch` follows for dense models).

apply_liger_kernel_to_llama() patches transformers.models.llama.modeling_llama:
  - module level (affects models built afterwards): LlamaRMSNorm -> LigerRMSNorm, LlamaMLP ->
    LigerSwiGLUMLP, apply_rotary_pos_emb -> liger_rotary_pos_emb, LlamaForCausalLM.forward -> the
    fused-linear-cross-entropy forward below, and (cross_entropy=True) transformers' loss helper;
  - an existing model (model=...): its norms' class is swapped to LigerRMSNorm and its MLPs'
    forward bound to the SwiGLU forward, in place (parameters, devices and dtypes kept), its
    forward replaced by the FLCE forward.
revert_liger_kernel_to_llama() restores the module and, when given a model, that model.

Written against transformers 5.17 (LlamaForCausalLM.forward(input_ids, attention_mask, position_ids,
past_key_values, inputs_embeds, labels, use_cache, logits_to_keep, **kwargs), read on the GPU machine).
"""
from __future__ import annotations

import types
from typing import Any, Dict, Optional

import torch

from .. import functional as LF
from ..modules import LigerRMSNorm, LigerSwiGLUMLP, _mlp_forward_swiglu, liger_rotary_pos_emb

_ORIGINALS: Dict[str, Any] = {}  # name -> original object, while a module-level patch is active
_LOSS_ORIGINALS: Dict[str, Any] = {}


def _modeling():
    from transformers.models.llama import modeling_llama

    return modeling_llama


def liger_causal_lm_loss(
    hidden_states: torch.Tensor,
    lm_head_weight: torch.Tensor,
    labels: Optional[torch.Tensor] = None,
    shift_labels: Optional[torch.Tensor] = None,
    num_items_in_batch=None,
    ignore_index: int = -100,
    lm_head_bias: Optional[torch.Tensor] = None,
    softcap: Optional[float] = None,
    **unused,
) -> torch.Tensor:
    """transformers' ForCausalLMLoss computed from the last hidden state with the fused kernel:
    labels shifted left by one (the last position ignored), mean over non-ignored tokens, or the sum
    divided by num_items_in_batch when the Trainer passes it (gradient accumulation)."""
    if shift_labels is None:
        if labels is None:
            raise ValueError("liger_causal_lm_loss needs labels or shift_labels")
        labels = labels.to(hidden_states.device)
        shift_labels = torch.nn.functional.pad(labels, (0, 1), value=ignore_index)[..., 1:]
    shift_labels = shift_labels.to(hidden_states.device).reshape(-1).contiguous()
    h = hidden_states.reshape(-1, hidden_states.shape[-1])
    reduction = "sum" if num_items_in_batch is not None else "mean"
    loss = LF.fused_linear_cross_entropy(
        h,
        lm_head_weight,
        shift_labels,
        bias=lm_head_bias,
        ignore_index=ignore_index,
        softcap=softcap,
        reduction=reduction,
    )
    if reduction == "sum":
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss


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
    """LlamaForCausalLM.forward with the fused linear cross-entropy.

    When labels (or shift_labels) are given and logits are not wanted (skip_logits, by default
    True in training mode), the loss is computed from the last hidden state in row chunks and
    `logits` is None; otherwise this is the stock path (lm_head, then self.loss_function)."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    return_dict = kwargs.pop("return_dict", None)
    outputs = self.model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        past_key_values=past_key_values,
        inputs_embeds=inputs_embeds,
        use_cache=use_cache,
        **kwargs,  # cache_position etc. pass through when the caller gives them (5.17 dropped the argument)
    )
    hidden_states = outputs.last_hidden_state if hasattr(outputs, "last_hidden_state") else outputs[0]
    slice_indices = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
    kept = hidden_states[:, slice_indices, :]

    shift_labels = kwargs.get("shift_labels", None)
    has_labels = labels is not None or shift_labels is not None
    if skip_logits is None:
        skip_logits = self.training and has_labels
    if skip_logits and not has_labels:
        raise ValueError("skip_logits=True needs labels or shift_labels")

    loss = None
    logits = None
    if skip_logits:
        lm_head = self.lm_head
        loss = liger_causal_lm_loss(
            kept,
            lm_head.weight,
            labels=labels,
            shift_labels=shift_labels,
            num_items_in_batch=kwargs.get("num_items_in_batch"),
            ignore_index=kwargs.get("ignore_index", -100),
            lm_head_bias=getattr(lm_head, "bias", None),
            softcap=getattr(self.config, "final_logit_softcapping", None),
        )
    else:
        logits = self.lm_head(kept)
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


def _liger_fixed_cross_entropy(source, target, num_items_in_batch=None, ignore_index: int = -100, **kwargs):
    """transformers.loss.loss_utils.fixed_cross_entropy on the liger cross-entropy kernel."""
    reduction = "sum" if num_items_in_batch is not None else "mean"
    loss = LF.cross_entropy(source.contiguous(), target.contiguous(), ignore_index=ignore_index, reduction=reduction)
    if reduction == "sum":
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss


def _set_module_attr(module, name: str, value) -> None:
    key = f"{module.__name__}.{name}"
    if key not in _ORIGINALS:
        _ORIGINALS[key] = getattr(module, name)
    setattr(module, name, value)


def _patch_norm_instance(norm: torch.nn.Module, offset: float = 0.0, casting_mode: str = "llama", in_place: bool = False):
    if isinstance(norm, LigerRMSNorm):
        return
    norm._liger_original_class = norm.__class__
    eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6))
    norm.__class__ = LigerRMSNorm
    norm.variance_epsilon = eps
    norm.offset = offset
    norm.casting_mode = casting_mode
    norm.in_place = in_place


def _unpatch_norm_instance(norm: torch.nn.Module) -> None:
    original = norm.__dict__.pop("_liger_original_class", None)
    if original is None:
        return
    norm.__class__ = original
    for attr in ("offset", "casting_mode", "in_place"):
        norm.__dict__.pop(attr, None)


def _patch_mlp_instance(mlp: torch.nn.Module) -> None:
    if isinstance(mlp, LigerSwiGLUMLP) or "_liger_patched" in mlp.__dict__:
        return
    mlp.forward = types.MethodType(_mlp_forward_swiglu, mlp)
    mlp._liger_patched = True


def _unpatch_mlp_instance(mlp: torch.nn.Module) -> None:
    if mlp.__dict__.pop("_liger_patched", None):
        mlp.__dict__.pop("forward", None)


def _base_model(model):
    modeling = _modeling()
    if isinstance(model, modeling.LlamaModel):
        return model
    base = getattr(model, getattr(model, "base_model_prefix", "model"), None)
    if base is None:
        base = getattr(model, "model", None)
    if base is None:
        raise TypeError(f"apply_liger_kernel_to_llama: cannot find the decoder in {type(model).__name__}")
    return base


def apply_liger_kernel_to_llama(
    rope: bool = True,
    cross_entropy: bool = False,
    fused_linear_cross_entropy: bool = True,
    rms_norm: bool = True,
    swiglu: bool = True,
    model=None,
) -> None:
    """Patches Llama in transformers with liger_kernels ops (see the module docstring)."""
    if cross_entropy and fused_linear_cross_entropy:
        raise ValueError("cross_entropy and fused_linear_cross_entropy cannot both be True")
    modeling = _modeling()
    if rope:
        _set_module_attr(modeling, "apply_rotary_pos_emb", liger_rotary_pos_emb)
    if rms_norm:
        _set_module_attr(modeling, "LlamaRMSNorm", LigerRMSNorm)
    if swiglu:
        _set_module_attr(modeling, "LlamaMLP", LigerSwiGLUMLP)
    if cross_entropy:
        from transformers.loss import loss_utils

        _set_module_attr(loss_utils, "fixed_cross_entropy", _liger_fixed_cross_entropy)
    if fused_linear_cross_entropy:
        cls = modeling.LlamaForCausalLM
        if "LlamaForCausalLM.forward" not in _ORIGINALS:
            _ORIGINALS["LlamaForCausalLM.forward"] = cls.__dict__["forward"]
        cls.forward = lce_forward

    if model is not None:
        base = _base_model(model)
        if rms_norm:
            _patch_norm_instance(base.norm)
        for layer in base.layers:
            if rms_norm:
                _patch_norm_instance(layer.input_layernorm)
                _patch_norm_instance(layer.post_attention_layernorm)
            if swiglu:
                _patch_mlp_instance(layer.mlp)
        if fused_linear_cross_entropy and base is not model and hasattr(model, "lm_head"):
            model.forward = types.MethodType(lce_forward, model)
            model._liger_forward_patched = True


def revert_liger_kernel_to_llama(model=None) -> None:
    """Undoes apply_liger_kernel_to_llama: module-level patches always; an instance's when given.

    Models built while the module was patched keep their Liger modules (their classes were chosen at
    construction) unless passed here, in which case only instance patches are undone."""
    modeling = _modeling()
    for key in list(_ORIGINALS):
        original = _ORIGINALS.pop(key)
        if key == "LlamaForCausalLM.forward":
            modeling.LlamaForCausalLM.forward = original
            continue
        module_name, _, attr = key.rpartition(".")
        if module_name == modeling.__name__:
            setattr(modeling, attr, original)
        else:
            import importlib

            setattr(importlib.import_module(module_name), attr, original)
    if model is not None:
        base = _base_model(model)
        _unpatch_norm_instance(base.norm)
        for layer in base.layers:
            _unpatch_norm_instance(layer.input_layernorm)
            _unpatch_norm_instance(layer.post_attention_layernorm)
            _unpatch_mlp_instance(layer.mlp)
        if model.__dict__.pop("_liger_forward_patched", None):
            model.__dict__.pop("forward", None)


def is_patched() -> bool:
    return bool(_ORIGINALS)
