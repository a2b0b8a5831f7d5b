"""Installs the causal-mask graph pass (liger_kernels/compile/causal_mask.py) into Inductor, so a
patched transformers model compiled with plain torch.compile keeps a constant causal mask implicit
(SDPA's is_causal=True), as transformers does eagerly. That module says why and what it proves.

The pass goes into torch._inductor.config.pre_grad_custom_pass, chained after any pass already
there, while any holder keeps it: every integration's apply function acquires it (through
_autopatch.Patcher.patch_causal_mask) and its revert releases it; the last release restores what was
there before. LIGER_KERNELS_COMPILED_CAUSAL_MASK=0 keeps it out. liger_kernels.compile.Backend runs
the pass itself and does not need this.
"""
from __future__ import annotations

from typing import Callable, Optional

from ..compile.causal_mask import ENV, enabled_by_env, graph_pass

_holders: set = set()
_previous: Optional[Callable] = None
_installed: Optional[Callable] = None
_why_not: Optional[str] = None


try:
    from torch._inductor.custom_graph_pass import CustomGraphPass as _PassBase
except ImportError:  # older torch: a plain callable is what the slot takes
    _PassBase = object


class CausalMaskPass(_PassBase):
    """Inductor's pre-grad pass: the pass that was in the slot before, then the causal-mask pass.
    Inductor pickles its config into cache keys; this pickles as its uuid(), so the FX graph cache
    keeps working and keys on what the pass does."""

    def __init__(self, previous: Optional[Callable]):
        self.previous = previous

    def __call__(self, graph) -> None:
        if self.previous is not None:
            self.previous(graph)
        graph_pass(graph)

    def uuid(self):
        prev = self.previous.uuid() if hasattr(self.previous, "uuid") else repr(self.previous)
        return f"liger_kernels.causal_mask.v1+{prev}"

    def __reduce__(self):
        return (str, (self.uuid(),))


def acquire(holder) -> bool:
    """Installs the pass for `holder` (any hashable); True when it is in effect afterwards."""
    global _previous, _installed, _why_not
    if not enabled_by_env():
        _why_not = f"{ENV}=0"
        return False
    try:
        from torch._inductor import config as inductor_config
    except ImportError as exc:
        _why_not = f"torch._inductor is not importable ({exc})"
        return False
    if _installed is None:
        if not hasattr(inductor_config, "pre_grad_custom_pass"):
            _why_not = "this torch's Inductor has no pre_grad_custom_pass slot"
            return False
        _previous = inductor_config.pre_grad_custom_pass
        _installed = CausalMaskPass(_previous)
        inductor_config.pre_grad_custom_pass = _installed
    _why_not = None
    _holders.add(holder)
    return True


def release(holder) -> None:
    """Drops `holder`; the last one out restores the slot's previous content."""
    global _previous, _installed
    _holders.discard(holder)
    if _holders or _installed is None:
        return
    from torch._inductor import config as inductor_config

    if inductor_config.pre_grad_custom_pass is _installed:
        inductor_config.pre_grad_custom_pass = _previous
    _previous = _installed = None


def status() -> str:
    """One line for logs: whether the pass is installed, and why not."""
    if _installed is not None:
        return f"installed ({len(_holders)} holder(s))"
    return f"not installed: {_why_not}" if _why_not else "not installed"
