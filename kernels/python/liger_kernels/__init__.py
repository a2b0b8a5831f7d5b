"""liger_kernels: PyTorch bindings of liger-agent's CUDA kernel library (loaded through ctypes).

    import liger_kernels as lk
    y = lk.functional.rms_norm(x, w)                  # autograd + torch.compile friendly
    norm = lk.LigerRMSNorm(4096).cuda()
    from liger_kernels.transformers import apply_liger_kernel_to_llama

The shared library is found through LIGER_KERNELS_LIBRARY, inside this package (where
`pip install ./kernels/python` puts it), or in the repository's build*/kernels/ (see _lib.py). When
libliger_torch_ops.so (the ops' C++ dispatcher kernels, built with the library where PyTorch is
installed) sits beside it, both are loaded at import; otherwise the library is loaded at the first
call and the ops run their Python implementations. ops_backend() says which.

Without PyTorch the package still imports: library_path(), library_version() and set_tunables()
work (the C library needs no torch), and the torch-based names raise an ImportError saying so."""
import importlib.util as _importlib_util

from ._lib import LibraryNotFoundError, LigerKernelError, library_path, set_tunables

_TORCH_NAMES = (
    "functional",
    "LigerCrossEntropyLoss",
    "LigerFusedAddRMSNorm",
    "LigerFusedLinearCrossEntropyLoss",
    "LigerGEGLUMLP",
    "LigerLayerNorm",
    "LigerRMSNorm",
    "LigerSwiGLUMLP",
    "liger_rotary_pos_emb",
    "optimize",
    "ops_backend",
)


def _torch_problem():
    """Why the torch-based names cannot load here ("" when they can)."""
    if _importlib_util.find_spec("torch") is None:
        return "needs PyTorch, which is not installed (pip install torch)"
    import re

    import torch

    found = re.match(r"(\d+)\.(\d+)", torch.__version__)
    if found and tuple(int(v) for v in found.groups()) < (2, 4):
        # An old torch (Debian 12 ships 1.13) lacks torch.library.custom_op: say so instead of an AttributeError.
        return f"needs PyTorch >= 2.4 (torch.library custom ops), found {torch.__version__}"
    return ""


_TORCH_PROBLEM = _torch_problem()

if not _TORCH_PROBLEM:
    # With torch, import eagerly as always: `import liger_kernels` registers torch.ops.liger.*.
    from . import functional  # noqa: F401
    from .modules import (
        LigerCrossEntropyLoss,
        LigerFusedAddRMSNorm,
        LigerFusedLinearCrossEntropyLoss,
        LigerGEGLUMLP,
        LigerLayerNorm,
        LigerRMSNorm,
        LigerSwiGLUMLP,
        liger_rotary_pos_emb,
    )

    def ops_backend() -> str:
        """Which implementation serves torch.ops.liger's launch ops (C++ kernels or Python), and why."""
        from ._torch_ops import status

        return status()

    def optimize(model, policy=None, goal=None, metric=None, **compile_kwargs):
        """torch.compile(model) with the liger backend (liger_kernels.compile; docs/compile.md)."""
        from .compile import optimize as _optimize

        return _optimize(model, policy=policy, goal=goal, metric=metric, **compile_kwargs)
else:

    def __getattr__(name: str):
        if name in _TORCH_NAMES:
            raise ImportError(
                f"liger_kernels.{name} {_TORCH_PROBLEM}; library_path() and library_version() work without it"
            )
        raise AttributeError(f"module 'liger_kernels' has no attribute {name!r}")

__version__ = "0.1.0"


def library_version() -> str:
    """The loaded shared library's liger_version() (loads it)."""
    from . import _lib

    return _lib.version()


__all__ = [
    "LibraryNotFoundError",
    "LigerKernelError",
    "library_path",
    "library_version",
    "set_tunables",
    "functional",
    "LigerRMSNorm",
    "LigerFusedAddRMSNorm",
    "LigerLayerNorm",
    "LigerSwiGLUMLP",
    "LigerGEGLUMLP",
    "liger_rotary_pos_emb",
    "LigerCrossEntropyLoss",
    "LigerFusedLinearCrossEntropyLoss",
    "optimize",
    "ops_backend",
]
