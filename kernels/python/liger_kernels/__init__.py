"""liger_kernels: PyTorch bindings of liger-agent's CUDA kernel library (loaded through ctypes).

    import liger_kernels as lk
    y = lk.functional.rms_norm(x, w)                  # autograd + torch.compile friendly
    norm = lk.LigerRMSNorm(4096).cuda()
    from liger_kernels.transformers import apply_liger_kernel_to_llama

The shared library is found through LIGER_KERNELS_LIBRARY, next to this package, or in the
repository's build*/kernels/ (see _lib.py); it is loaded at the first call, not at import."""
from ._lib import LibraryNotFoundError, LigerKernelError, library_path, set_tunables
from . import functional  # noqa: F401  (registers the torch.ops.liger.* custom ops)
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
]
