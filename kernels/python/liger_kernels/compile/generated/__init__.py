"""Registry entries written by `liger-agent kernel-dev` (one module per op it created).

Each module registers its op with the PyTorch function the op came from (see ../pattern.py), so
the backend places a new kernel in any model without model code. A module that fails to import is
reported and skipped: one broken entry must not take the backend down."""
import importlib
import logging
import pkgutil

_LOG = logging.getLogger("liger_kernels.compile")
FAILED = {}


def load_all():
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"{__name__}.{info.name}")
        except Exception as exc:  # a generated entry is data: report it, keep the others
            FAILED[info.name] = f"{type(exc).__name__}: {exc}"
            _LOG.warning("liger compile: skipped generated entry %s (%s)", info.name, FAILED[info.name])
