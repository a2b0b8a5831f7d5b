"""Hugging Face transformers integrations, registered by model type (config.model_type)."""
from __future__ import annotations

from typing import Callable, Dict

from .llama import apply_liger_kernel_to_llama, lce_forward as llama_lce_forward, revert_liger_kernel_to_llama

# model_type -> (apply, revert). `autopatch` adds generated integrations here.
MODEL_TYPE_TO_APPLY_LIGER_FN: Dict[str, Callable] = {
    "llama": apply_liger_kernel_to_llama,
}
MODEL_TYPE_TO_REVERT_LIGER_FN: Dict[str, Callable] = {
    "llama": revert_liger_kernel_to_llama,
}


def register(model_type: str, apply_fn: Callable, revert_fn: Callable) -> None:
    MODEL_TYPE_TO_APPLY_LIGER_FN[model_type] = apply_fn
    MODEL_TYPE_TO_REVERT_LIGER_FN[model_type] = revert_fn


def _register_module(model_type: str, module: str) -> None:
    """Registers liger_kernels.transformers.<module> (apply_liger_kernel_to_<module> /
    revert_liger_kernel_to_<module>) for `model_type`; the generated integrations use this."""
    import importlib

    mod = importlib.import_module(f"{__name__}.{module}")
    register(model_type, getattr(mod, f"apply_liger_kernel_to_{module}"), getattr(mod, f"revert_liger_kernel_to_{module}"))


# One line per model type, sorted; `liger-agent autopatch` inserts its lines here (hand-written
# references included, so the generator never rewrites the rest of this file).
# BEGIN autopatch registry
_register_module("cohere", "cohere")
_register_module("cohere2", "cohere2")
_register_module("deepseek_v4", "deepseek_v4")
_register_module("exaone4", "exaone4")
_register_module("falcon_h1", "falcon_h1")
_register_module("gemma", "gemma")
_register_module("gemma2", "gemma2")
_register_module("gemma3", "gemma3")
_register_module("gemma3_text", "gemma3_text")
_register_module("gemma4", "gemma4")
_register_module("gemma4_text", "gemma4_text")
_register_module("glm4", "glm4")
_register_module("glm4v", "glm4v")
_register_module("glm4v_moe", "glm4v_moe")
_register_module("gpt_oss", "gpt_oss")
_register_module("granite", "granite")
_register_module("granitemoe", "granitemoe")
_register_module("granitemoeshared", "granitemoeshared")
_register_module("hunyuan_v1_dense", "hunyuan_v1_dense")
_register_module("hunyuan_v1_moe", "hunyuan_v1_moe")
_register_module("hyperclovax", "hyperclovax")
_register_module("internvl", "internvl")
_register_module("llama", "llama")
_register_module("llama4", "llama4")
_register_module("llava", "llava")
_register_module("minicpm3", "minicpm3")
_register_module("ministral", "ministral")
_register_module("mistral", "mistral")
_register_module("mixtral", "mixtral")
_register_module("mllama", "mllama")
_register_module("nemotron", "nemotron")
_register_module("olmo2", "olmo2")
_register_module("olmo3", "olmo3")
_register_module("paligemma", "paligemma")
_register_module("phi3", "phi3")
_register_module("qwen2", "qwen2")
_register_module("qwen2_5_vl", "qwen2_5_vl")
_register_module("qwen2_vl", "qwen2_vl")
_register_module("qwen3", "qwen3")
_register_module("qwen3_5", "qwen3_5")
_register_module("qwen3_5_moe", "qwen3_5_moe")
_register_module("qwen3_moe", "qwen3_moe")
_register_module("qwen3_next", "qwen3_next")
_register_module("qwen3_vl", "qwen3_vl")
_register_module("qwen3_vl_moe", "qwen3_vl_moe")
_register_module("smollm3", "smollm3")
_register_module("smolvlm", "smolvlm")
# END autopatch registry


def _apply_liger_kernel_to_instance(model, **kwargs) -> None:
    """Patches an existing model by its config.model_type (keyword arguments go to the apply function)."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in MODEL_TYPE_TO_APPLY_LIGER_FN:
        raise ValueError(
            f"no liger integration for model_type {model_type!r}; known: {sorted(MODEL_TYPE_TO_APPLY_LIGER_FN)}"
        )
    MODEL_TYPE_TO_APPLY_LIGER_FN[model_type](model=model, **kwargs)


def implicit_causal_mask_under_compile(enable: bool = True) -> bool:
    """Installs (or, with enable=False, releases) the graph pass that turns a constant causal mask
    into SDPA's is_causal=True in models compiled by Inductor, as transformers decides eagerly; every
    apply function installs it already. Returns whether it is in effect (_causal_mask.status() says
    why not). See liger_kernels/compile/causal_mask.py."""
    from . import _causal_mask

    if enable:
        return _causal_mask.acquire("user")
    _causal_mask.release("user")
    return _causal_mask.status().startswith("installed")


def apply_liger_kernel(model_type: str, **kwargs) -> None:
    """Patches the transformers classes of `model_type` (before instantiation)."""
    if model_type not in MODEL_TYPE_TO_APPLY_LIGER_FN:
        raise ValueError(f"no liger integration for model_type {model_type!r}")
    MODEL_TYPE_TO_APPLY_LIGER_FN[model_type](**kwargs)


__all__ = [
    "apply_liger_kernel_to_llama",
    "revert_liger_kernel_to_llama",
    "llama_lce_forward",
    "MODEL_TYPE_TO_APPLY_LIGER_FN",
    "MODEL_TYPE_TO_REVERT_LIGER_FN",
    "register",
    "_register_module",
    "apply_liger_kernel",
    "implicit_causal_mask_under_compile",
    "_apply_liger_kernel_to_instance",
]
