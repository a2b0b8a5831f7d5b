"""Shared machinery of the integrations `liger-agent autopatch` generates (and of the hand-written
Gemma and MoE references, which are written in the same form).

An integration module describes its model with a plain dict (SPEC) and keeps only its apply/revert
signatures (the switches of the kernels it applies); everything else lives here once:
  - the fused-linear-cross-entropy causal-LM forward (make_lce_forward, from SPEC["forward"]), its loss
    (liger_causal_lm_loss) and transformers' cross-entropy helper on the CE kernel (fixed_cross_entropy);
  - the patching, both ways (Patcher):
  - class level (before instantiation): norm classes replaced by LigerRMSNorm/LigerLayerNorm
    subclasses built with the decided offset / casting mode / in-place flag, gated-MLP classes'
    forward replaced by the SwiGLU/GeGLU forward (the class, its constructor and its state dict are
    kept, so MLPs built with any constructor signature work), the rotary function replaced, the
    causal-LM forward replaced;
  - compile level: the causal-mask rewrite goes into Inductor's pre-grad slot while any integration
    is applied (patch_causal_mask; see _causal_mask.py), so the patched model compiled by Inductor
    keeps a constant causal mask implicit;
  - instance level (model=...): every module of a patched class, reached under an allowed attribute
    name (so a vision tower's norms of the same class are left alone), is switched in place:
    parameters, devices and dtypes are kept.

SPEC keys (all names as in the modeling module):
  modeling:  "transformers.models.<m>.modeling_<m>"
  causal_lm: the causal-LM class whose forward is replaced
  norms:     [{cls, attrs, offset, casting_mode, in_place, init_fn}]  RMSNorm classes
  layer_norms: [{cls, attrs}]                                          LayerNorm classes (with bias)
  mlps:      [{cls, kind: swiglu|geglu, gate, up, down} | {cls, kind, gate_up, down}]
  rope:      name of the rotate-half rotary function, or None
  forward:   {base_attr, lm_head, output_module, output_class, softcap_attr, moe, logits_scale} for
             make_lce_forward: the attributes holding the base model and the output projection, the
             output class the stock forward returns, the config attribute of final-logit
             soft-capping (None: none), whether to add the router aux loss, and (optional) the
             scalar factors the head applies to its logits before the loss, [(op, path)] with op
             "*" or "/" and path an attribute path from the head ("config.logits_scaling",
             "logit_scale", "model.lm_head_multiplier") or a number
  module / rope_module (optional, per entry): the modeling module defining that class or function
             when it is not `modeling` (a multimodal wrapper whose text model is another model's)
"""
from __future__ import annotations

import importlib
import types
from typing import Any, Callable, Dict, List, Optional

import torch

from .. import functional as LF
from ..modules import LigerLayerNorm, LigerRMSNorm

_MISSING = object()
_NOT_SCALAR = object()


def _short(cls: str) -> str:
    """"nn.LayerNorm" -> "LayerNorm": the name as type(module).__name__ reports it."""
    return cls.rsplit(".", 1)[-1]

_ACTIVATIONS: Dict[str, Callable] = {"swiglu": LF.swiglu, "geglu": LF.geglu}


def make_rms_norm_class(name: str, offset: float, casting_mode: str, in_place: bool, init_fn: str):
    """A LigerRMSNorm subclass that takes the HF norm's constructor arguments ((dim|hidden_size), eps)."""

    def __init__(self, *args, **kwargs):
        hidden_size = args[0] if args else kwargs.pop("hidden_size", kwargs.pop("dim", None))
        eps = args[1] if len(args) > 1 else kwargs.pop("eps", 1e-6)
        LigerRMSNorm.__init__(self, hidden_size, eps=eps, offset=offset, casting_mode=casting_mode,
                              init_fn=init_fn, in_place=in_place)

    return type(f"Liger{name}", (LigerRMSNorm,), {"__init__": __init__, "_liger_spec": dict(
        offset=offset, casting_mode=casting_mode, in_place=in_place, init_fn=init_fn)})


def make_layer_norm_class(name: str):
    def __init__(self, *args, **kwargs):
        hidden_size = args[0] if args else kwargs.pop("normalized_shape", kwargs.pop("hidden_size", None))
        if isinstance(hidden_size, (tuple, list)):
            hidden_size = hidden_size[-1]
        eps = args[1] if len(args) > 1 else kwargs.pop("eps", 1e-5)
        LigerLayerNorm.__init__(self, hidden_size, eps=eps, bias=kwargs.pop("bias", True))

    return type(f"Liger{name}", (LigerLayerNorm,), {"__init__": __init__})


def make_mlp_forward(kind: str, gate: Optional[str] = None, up: Optional[str] = None, down: str = "down_proj",
                     gate_up: Optional[str] = None):
    """forward(self, x) = down(act(gate(x)) * up(x)) on the library's fused gated kernel."""
    act = _ACTIVATIONS[kind]
    if gate_up is not None:
        def forward(self, x):
            g, u = getattr(self, gate_up)(x).chunk(2, dim=-1)
            return getattr(self, down)(act(g.contiguous(), u.contiguous()))
    else:
        def forward(self, x):
            return getattr(self, down)(act(getattr(self, gate)(x), getattr(self, up)(x)))
    forward.__name__ = f"liger_{kind}_forward"
    forward._liger_kind = kind
    return forward


class Patcher:
    """Applies and reverts one model's patches from its SPEC (see the module docstring)."""

    def __init__(self, spec: Dict[str, Any], lce_forward: Optional[Callable] = None):
        self.spec = spec
        self.lce_forward = lce_forward
        self._originals: Dict[str, Any] = {}  # "module:attr" or "Class.forward" -> original
        self._norm_classes: Dict[str, type] = {}
        for n in spec.get("norms", []):
            self._norm_classes[n["cls"]] = make_rms_norm_class(
                _short(n["cls"]), n.get("offset", 0.0), n.get("casting_mode", "llama"), n.get("in_place", False),
                n.get("init_fn", "ones"))
        for n in spec.get("layer_norms", []):
            self._norm_classes[n["cls"]] = make_layer_norm_class(_short(n["cls"]))
        self._mlp_forwards: Dict[str, Callable] = {}
        for m in spec.get("mlps", []):
            self._mlp_forwards[m["cls"]] = make_mlp_forward(
                m["kind"], gate=m.get("gate"), up=m.get("up"), down=m.get("down", "down_proj"), gate_up=m.get("gate_up"))

    # ---- module helpers
    def modeling(self, entry: Optional[Dict[str, Any]] = None, key: str = "module"):
        name = (entry or {}).get(key) or self.spec["modeling"]
        return importlib.import_module(name)

    def _set(self, owner, attr: str, value, key: str) -> None:
        if key not in self._originals:
            # A class attribute it inherits is restored by deleting ours (_MISSING).
            original = owner.__dict__.get(attr, _MISSING) if isinstance(owner, type) else getattr(owner, attr)
            self._originals[key] = (owner, attr, original)
        setattr(owner, attr, value)

    def patch_norm_classes(self, kinds: List[str]) -> None:
        entries = [n for n in self.spec.get("norms", []) if "rms_norm" in kinds]
        entries += [n for n in self.spec.get("layer_norms", []) if "layer_norm" in kinds]
        for n in entries:
            modeling = self.modeling(n)
            name = _short(n["cls"])
            # A class the modeling module does not define itself (nn.LayerNorm used directly) cannot be
            # swapped before instantiation without touching torch; instances are still patched.
            if name in vars(modeling) and isinstance(vars(modeling)[name], type):
                self._set(modeling, name, self._norm_classes[n["cls"]], f"{modeling.__name__}:{name}")

    def patch_mlp_classes(self, kinds: List[str]) -> None:
        for m in self.spec.get("mlps", []):
            modeling = self.modeling(m)
            if m["kind"] not in kinds or _short(m["cls"]) not in vars(modeling):
                continue
            cls = getattr(modeling, _short(m["cls"]))
            self._set(cls, "forward", self._mlp_forwards[m["cls"]], f"{m['cls']}.forward")

    def patch_rope(self, fn) -> None:
        modeling = self.modeling(self.spec, "rope_module")
        name = self.spec.get("rope")
        if name:
            self._set(modeling, name, fn, f"{modeling.__name__}:{name}")

    def patch_causal_lm(self) -> None:
        cls = getattr(self.modeling(), self.spec["causal_lm"])
        self._set(cls, "forward", self.lce_forward, f"{self.spec['causal_lm']}.forward")

    def patch_causal_mask(self) -> bool:
        """Keeps a plain causal mask implicit under torch.compile, as transformers does eagerly
        (_causal_mask.py says why and when); released by revert_classes."""
        from . import _causal_mask

        return _causal_mask.acquire(self)

    def patch_cross_entropy(self, fixed_cross_entropy) -> None:
        from transformers.loss import loss_utils

        self._set(loss_utils, "fixed_cross_entropy", fixed_cross_entropy, "transformers.loss.loss_utils:fixed_cross_entropy")

    def revert_classes(self) -> None:
        from . import _causal_mask

        _causal_mask.release(self)
        for key in list(self._originals):
            owner, attr, original = self._originals.pop(key)
            if original is _MISSING:
                delattr(owner, attr)
            else:
                setattr(owner, attr, original)

    def is_patched(self) -> bool:
        return bool(self._originals)

    # ---- instance helpers
    def _allowed(self, entry: Dict[str, Any], name: str) -> bool:
        attrs = entry.get("attrs")
        return not attrs or name.rsplit(".", 1)[-1] in attrs or name.rsplit(".", 1)[-1].isdigit()

    def patch_instance(self, model, kinds: List[str]) -> Dict[str, int]:
        """Switches model's modules in place; returns counts per kernel (for tests and logs)."""
        counts = {"rms_norm": 0, "layer_norm": 0, "swiglu": 0, "geglu": 0}
        norms = {_short(n["cls"]): ("rms_norm", n) for n in self.spec.get("norms", [])}
        norms.update({_short(n["cls"]): ("layer_norm", n) for n in self.spec.get("layer_norms", [])})
        mlps = {_short(m["cls"]): m for m in self.spec.get("mlps", [])}
        for name, module in model.named_modules():
            cls_name = module.__dict__.get("_liger_original_class", type(module)).__name__
            if cls_name in norms:
                kind, entry = norms[cls_name]
                if kind in kinds and self._allowed(entry, name) and "_liger_original_class" not in module.__dict__:
                    self._patch_norm(module, kind, entry)
                    counts[kind] += 1
            elif cls_name in mlps:
                entry = mlps[cls_name]
                if entry["kind"] in kinds and "_liger_patched" not in module.__dict__:
                    module.forward = types.MethodType(self._mlp_forwards[entry["cls"]], module)
                    module._liger_patched = True
                    counts[entry["kind"]] += 1
        return counts

    def _patch_norm(self, norm: torch.nn.Module, kind: str, entry: Dict[str, Any]) -> None:
        original = type(norm)
        eps = getattr(norm, "variance_epsilon", None)
        if eps is None:
            eps = norm.__dict__.get("eps", getattr(norm, "eps", 1e-6))
        norm.__class__ = self._norm_classes[entry["cls"]]
        norm._liger_original_class = original
        norm.variance_epsilon = eps
        if kind == "rms_norm":
            norm.offset = entry.get("offset", 0.0)
            norm.casting_mode = entry.get("casting_mode", "llama")
            norm.in_place = entry.get("in_place", False)
        elif "hidden_size" not in norm.__dict__:
            norm.hidden_size = norm.weight.shape[-1]

    def patch_forward(self, model) -> bool:
        head = (self.spec.get("forward") or {}).get("lm_head", "lm_head")
        if self.lce_forward is None or not hasattr(model, head):
            return False
        model.forward = types.MethodType(self.lce_forward, model)
        model._liger_forward_patched = True
        return True

    def revert_instance(self, model) -> None:
        for module in model.modules():
            original = module.__dict__.pop("_liger_original_class", None)
            if original is not None:
                module.__class__ = original
                for attr in ("offset", "casting_mode", "in_place"):
                    module.__dict__.pop(attr, None)
            if module.__dict__.pop("_liger_patched", None):
                module.__dict__.pop("forward", None)
        if model.__dict__.pop("_liger_forward_patched", None):
            model.__dict__.pop("forward", None)


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
        h, lm_head_weight, shift_labels, bias=lm_head_bias, ignore_index=ignore_index, softcap=softcap,
        reduction=reduction)
    if reduction == "sum":
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss


def fixed_cross_entropy(source, target, num_items_in_batch=None, ignore_index: int = -100, **kwargs):
    """transformers.loss.loss_utils.fixed_cross_entropy on the liger cross-entropy kernel."""
    reduction = "sum" if num_items_in_batch is not None else "mean"
    loss = LF.cross_entropy(source.contiguous(), target.contiguous(), ignore_index=ignore_index, reduction=reduction)
    if reduction == "sum":
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss


def causal_lm_loss(self, hidden_states, labels, kwargs, softcap=None, lm_head=None, scale=None):
    """The fused loss from the kept hidden states (transformers' ForCausalLMLoss semantics).

    `scale` is a scalar the model multiplies its logits by before the loss: the projection is
    linear, so scaling the hidden state and the bias gives the same logits without building them."""
    lm_head = self.lm_head if lm_head is None else lm_head
    bias = getattr(lm_head, "bias", None)
    if scale is not None:
        hidden_states = hidden_states * scale
        bias = bias * scale if bias is not None else None
    return liger_causal_lm_loss(
        hidden_states,
        lm_head.weight,
        labels=labels,
        shift_labels=kwargs.get("shift_labels", None),
        num_items_in_batch=kwargs.get("num_items_in_batch"),
        ignore_index=kwargs.get("ignore_index", -100),
        lm_head_bias=bias,
        softcap=softcap,
    )


def parse_logits_scale(scales) -> List[tuple]:
    """SPEC's [(op, path)] as [(op, number, names)]: a literal factor as its number, else the
    attribute names from the head. Parsed once, when the forward is made, so the forward itself
    has no try/except for torch.compile to trace."""
    out = []
    for op, path in scales or ():
        if op not in ("*", "/"):
            raise ValueError(f"logits_scale: op {op!r} of {path!r} is not '*' or '/'")
        try:
            out.append((op, float(path), ()))
        except ValueError:
            out.append((op, None, tuple(str(path).split("."))))
    return out


def _factor(head, number, names):
    """One logits factor: a number, `config.x` (read like the soft-cap, text config first), or an
    attribute path from the head (`logit_scale`, `model.lm_head_multiplier`)."""
    if number is not None:
        return number
    if len(names) == 2 and names[0] == "config":
        value = _logit_softcap(head.config, names[1])
    else:
        value = head
        for name in names:
            value = getattr(value, name)
    if value is None:
        raise ValueError(
            f"{type(head).__name__}.{'.'.join(names)} is None, but the model scales its logits by it before the "
            f"loss; set it in the config (the stock forward fails on it the same way)")
    return value


def logits_scale_of(head, scales) -> Optional[Any]:
    """The product of the head's logit factors (parse_logits_scale) as one scalar: a float or a 0-d
    tensor, which keeps a learned factor's gradient. None when there are none; _NOT_SCALAR when a
    factor has more than one element (it would scale each vocabulary column differently: no fold)."""
    if not scales:
        return None
    factor = 1.0
    for op, number, names in scales:
        value = _factor(head, number, names)
        if torch.is_tensor(value):
            if value.numel() != 1:
                return _NOT_SCALAR
            value = value.reshape(())
        factor = factor * value if op == "*" else factor / value
    return factor


def apply_logits_scale(logits, head, scales):
    """The stock order: each factor applied to the logits as the model's forward does."""
    for op, number, names in scales:
        value = _factor(head, number, names)
        logits = logits * value if op == "*" else logits / value
    return logits


def softcap_logits(logits, cap):
    if cap is None:
        return logits
    return torch.tanh(logits / cap) * cap


def _vocab_size(config) -> int:
    # A multimodal head's config keeps the vocabulary on its text config.
    v = getattr(config, "vocab_size", None)
    return v if v is not None else config.get_text_config().vocab_size


def _logit_softcap(config, attr: str):
    # Multimodal heads read the soft-cap from their text config (Gemma4ForConditionalGeneration:
    # `self.config.get_text_config().final_logit_softcapping`); the top-level config has no such
    # field, so reading only it would silently skip the cap. A text model's get_text_config() is
    # itself.
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    value = getattr(text, attr, None)
    return value if value is not None else getattr(config, attr, None)


def make_lce_forward(spec: Dict[str, Any]):
    """The causal-LM forward with the fused linear cross-entropy, for the head SPEC["causal_lm"].

    With labels (or shift_labels) in training mode, or skip_logits=True, the loss comes from the last
    hidden state in row chunks and `logits` is None; otherwise this is the stock path (lm_head, the
    soft-capping the model applies, then self.loss_function). Arguments the head takes beyond the text
    ones (pixel_values, ...) pass through **kwargs to the base model."""
    fwd = dict(spec.get("forward") or {})
    base_attr = fwd.get("base_attr", "model")
    head_attr = fwd.get("lm_head", "lm_head")  # the output projection (BioGPT: output_projection)
    output_module = fwd.get("output_module", "transformers.modeling_outputs")
    output_class = fwd.get("output_class", "CausalLMOutputWithPast")
    softcap_attr = fwd.get("softcap_attr")
    scales = parse_logits_scale(fwd.get("logits_scale"))
    moe = bool(fwd.get("moe", False))
    modeling = spec.get("modeling")
    # Resolved when the forward is made, not per call: an import inside the forward is a graph break
    # that torch.compile(model, fullgraph=True) refuses. (Without transformers importable yet, the
    # first call resolves it; a model to run means transformers is there by then.)
    try:
        resolved_out_cls = getattr(importlib.import_module(output_module), output_class)
    except (ImportError, AttributeError):
        resolved_out_cls = None

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
        out_cls = resolved_out_cls or getattr(importlib.import_module(output_module), output_class)
        return_dict = kwargs.pop("return_dict", None)
        extra = {}
        if moe:
            output_router_logits = kwargs.pop("output_router_logits", None)
            if output_router_logits is None:
                output_router_logits = getattr(self.config, "output_router_logits", False)
            extra["output_router_logits"] = output_router_logits
        outputs = getattr(self, base_attr)(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            **extra,
            **kwargs,
        )
        hidden_states = outputs.last_hidden_state if hasattr(outputs, "last_hidden_state") else outputs[0]
        slice_indices = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        kept = hidden_states[:, slice_indices, :]
        softcap = _logit_softcap(self.config, softcap_attr) if softcap_attr else None

        shift_labels = kwargs.get("shift_labels", None)
        has_labels = labels is not None or shift_labels is not None
        if skip_logits is None:
            skip_logits = self.training and has_labels
        if skip_logits and not has_labels:
            raise ValueError("skip_logits=True needs labels or shift_labels")
        scale = logits_scale_of(self, scales)
        if scale is _NOT_SCALAR:
            # A per-vocabulary factor cannot fold into the hidden state: the logits are built.
            skip_logits = False

        loss = None
        logits = None
        head = getattr(self, head_attr)
        if skip_logits:
            loss = causal_lm_loss(self, kept, labels, kwargs, softcap=softcap, lm_head=head, scale=scale)
        else:
            logits = softcap_logits(apply_logits_scale(head(kept), self, scales), softcap)
            if has_labels:
                loss = self.loss_function(logits=logits, labels=labels, vocab_size=_vocab_size(self.config), **kwargs)

        fields = dict(
            loss=loss,
            logits=logits,
            past_key_values=getattr(outputs, "past_key_values", None),
            hidden_states=getattr(outputs, "hidden_states", None),
            attentions=getattr(outputs, "attentions", None),
        )
        if moe:
            aux_loss = None
            if extra["output_router_logits"] and getattr(outputs, "router_logits", None) is not None:
                cfg = self.config.get_text_config()
                experts = getattr(self, "num_experts", None) or getattr(cfg, "num_experts", None) or getattr(
                    cfg, "num_local_experts", None)
                top_k = getattr(self, "num_experts_per_tok", None) or getattr(cfg, "num_experts_per_tok", None)
                aux_loss = importlib.import_module(modeling).load_balancing_loss_func(
                    outputs.router_logits, experts, top_k, attention_mask)
                if loss is not None:
                    coef = getattr(self, "router_aux_loss_coef", None)
                    coef = getattr(cfg, "router_aux_loss_coef", 0.0) if coef is None else coef
                    fields["loss"] = loss + coef * aux_loss.to(loss.device)
            fields.update(aux_loss=aux_loss, router_logits=getattr(outputs, "router_logits", None))
        # Multimodal output classes carry the vision features too; keep what the base model returned.
        for name in ("image_hidden_states", "rope_deltas"):
            if hasattr(outputs, name) and name in getattr(out_cls, "__dataclass_fields__", {}):
                fields[name] = getattr(outputs, name)
        out = out_cls(**fields)
        if return_dict is False:
            return out.to_tuple()
        return out

    lce_forward.__qualname__ = f"{spec.get('causal_lm', 'CausalLM')}.forward"
    lce_forward.__doc__ = f"{spec.get('causal_lm')}.forward with the fused linear cross-entropy (see make_lce_forward)."
    return lce_forward
