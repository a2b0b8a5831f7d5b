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
_register_module("gemma", "gemma")
_register_module("gemma2", "gemma2")
_register_module("qwen3_moe", "qwen3_moe")
# END autopatch registry


def _apply_liger_kernel_to_instance(model, **kwargs) -> None:
    """Patches an existing model by its config.model_type (keyword arguments go to the apply function)."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in MODEL_TYPE_TO_APPLY_LIGER_FN:
        raise ValueError(
            f"no liger integration for model_type {model_type!r}; known: {sorted(MODEL_TYPE_TO_APPLY_LIGER_FN)}"
        )
    MODEL_TYPE_TO_APPLY_LIGER_FN[model_type](model=model, **kwargs)


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
    "_apply_liger_kernel_to_instance",
]
