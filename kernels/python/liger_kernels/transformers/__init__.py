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
    "apply_liger_kernel",
    "_apply_liger_kernel_to_instance",
]
