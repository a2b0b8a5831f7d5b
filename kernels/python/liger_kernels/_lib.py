"""ctypes loader for the liger_kernels shared library (the C++ dispatcher kernels of _torch_ops.py
link the same library; this module needs no torch).

Finding the library, in order:
  1. the environment variable LIGER_KERNELS_LIBRARY (a path to libliger_kernels.so);
  2. inside this package (liger_kernels/libliger_kernels.so: where the wheel built by
     `pip install ./kernels/python` puts it), or beside it (../libliger_kernels.so);
  3. build*/kernels/libliger_kernels.so in the repository that holds this package.

Every entry point of the C ABI returns a liger_status; `call()` turns a non-success status into a
LigerKernelError carrying liger_last_error(). Every function used from Python is declared with
its argtypes/restype in `_DECLARATIONS` (checked against the headers by tests/python/test_abi.py).
"""
from __future__ import annotations

import ctypes
import glob
import os
import threading
from typing import Dict, List, Optional, Sequence, Tuple

ENV_VAR = "LIGER_KERNELS_LIBRARY"
LIB_NAME = "libliger_kernels.so"
BUILD_HINT = (
    "pip install --no-build-isolation ./kernels/python (from the repository root), or "
    "cmake -S . -B build -G Ninja -DLIGER_BUILD_AGENT=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && "
    "cmake --build build --target liger_kernels"
)

# liger_status
SUCCESS = 0
STATUS_NAMES = {
    0: "SUCCESS",
    1: "INVALID_ARGUMENT",
    2: "UNSUPPORTED_DTYPE",
    3: "UNSUPPORTED_SHAPE",
    4: "CUDA_ERROR",
    5: "OUT_OF_MEMORY",
    6: "CUBLAS_ERROR",
    7: "INTERNAL",
}

# liger_dtype
DTYPE_FLOAT32 = 0
DTYPE_FLOAT16 = 1
DTYPE_BFLOAT16 = 2


class LigerKernelError(RuntimeError):
    """A liger_kernels entry point returned a non-success status."""

    def __init__(self, function: str, status: int, detail: str):
        self.function = function
        self.status = status
        self.status_name = STATUS_NAMES.get(status, f"status {status}")
        self.detail = detail
        super().__init__(f"{function} failed with LIGER_STATUS_{self.status_name}: {detail or '(no detail)'}")


class LibraryNotFoundError(ImportError):
    pass


class LigerTunables(ctypes.Structure):
    """struct liger_tunables (common.h). A zero field means "use the tuned default"."""

    _fields_ = [
        ("threads_per_block", ctypes.c_int32),
        ("rows_per_block", ctypes.c_int32),
        ("vector_bytes", ctypes.c_int32),
        ("reduction_blocks", ctypes.c_int32),
        ("chunk_rows", ctypes.c_int32),
        ("pipeline_depth", ctypes.c_int32),
        ("stages", ctypes.c_int32),
        ("reserved", ctypes.c_int32 * 1),
    ]


# Short names for the declarations below.
P = ctypes.c_void_p  # device pointer, stream, or a pointer to an options/tunables struct
I64 = ctypes.c_int64
I32 = ctypes.c_int32
F32 = ctypes.c_float
SZ = ctypes.c_size_t
ST = ctypes.c_int  # liger_status (an enum: int)
DT = ctypes.c_int  # liger_dtype
CSTR = ctypes.c_char_p
P_I64 = ctypes.POINTER(ctypes.c_int64)
P_SZ = ctypes.POINTER(ctypes.c_size_t)

# name -> (restype, argtypes). Filled per op module through `declare()`; the common ones here.
_DECLARATIONS: Dict[str, Tuple[object, List[object]]] = {
    "liger_status_string": (CSTR, [ST]),
    "liger_last_error": (CSTR, []),
    "liger_dtype_name": (CSTR, [DT]),
    "liger_version": (CSTR, []),
}


def declare(name: str, restype, argtypes: Sequence[object]) -> None:
    """Registers the C signature of `name` (used when the library is loaded, or now if it is)."""
    _DECLARATIONS[name] = (restype, list(argtypes))
    if _STATE.lib is not None:
        _apply(_STATE.lib, name)


class _State:
    lib: Optional[ctypes.CDLL] = None
    path: Optional[str] = None
    lock = threading.Lock()


_STATE = _State()


def _candidates() -> List[str]:
    out: List[str] = []
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.join(here, LIB_NAME))
    out.append(os.path.join(os.path.dirname(here), LIB_NAME))
    # kernels/python/liger_kernels -> repository root is three levels up.
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    builds = sorted(glob.glob(os.path.join(repo, "build*", "kernels", LIB_NAME)))
    # Prefer the most recently built one.
    builds.sort(key=lambda p: os.path.getmtime(p), reverse=True)
    out.extend(builds)
    return out


def library_path() -> str:
    """The path of the library that is (or would be) loaded; raises LibraryNotFoundError."""
    env = os.environ.get(ENV_VAR, "")
    if env:
        if not os.path.isfile(env):
            raise LibraryNotFoundError(f"{ENV_VAR}={env!r} does not name a file. Build the library with: {BUILD_HINT}")
        return env
    for candidate in _candidates():
        if os.path.isfile(candidate):
            return candidate
    raise LibraryNotFoundError(
        f"{LIB_NAME} not found: set {ENV_VAR} to its path, or build it in the repository with: {BUILD_HINT} "
        f"(searched: {', '.join(_candidates()) or 'nothing'})"
    )


def _apply(lib: ctypes.CDLL, name: str) -> None:
    restype, argtypes = _DECLARATIONS[name]
    try:
        fn = getattr(lib, name)
    except AttributeError:
        return  # not in this build; `function()` reports it when used
    fn.restype = restype
    fn.argtypes = argtypes


def lib() -> ctypes.CDLL:
    """Loads the library once (thread-safe) and declares every known function."""
    if _STATE.lib is not None:
        return _STATE.lib
    with _STATE.lock:
        if _STATE.lib is None:
            path = library_path()
            try:
                handle = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
            except OSError as exc:
                raise LibraryNotFoundError(f"could not load {path}: {exc}. Rebuild it with: {BUILD_HINT}") from exc
            for name in _DECLARATIONS:
                _apply(handle, name)
            _STATE.path = path
            _STATE.lib = handle
    return _STATE.lib


def has_function(name: str) -> bool:
    try:
        return hasattr(lib(), name)
    except LibraryNotFoundError:
        return False


def function(name: str):
    handle = lib()
    if name not in _DECLARATIONS:
        raise RuntimeError(f"liger_kernels: {name} is called from Python but has no ctypes declaration")
    try:
        return getattr(handle, name)
    except AttributeError:
        raise NotImplementedError(
            f"{name} is not exported by {_STATE.path}: this build of liger_kernels lacks the op "
            f"(rebuild with: {BUILD_HINT})"
        ) from None


def last_error() -> str:
    raw = lib().liger_last_error()
    return raw.decode("utf-8", "replace") if raw else ""


def version() -> str:
    raw = lib().liger_version()
    return raw.decode() if raw else "unknown"


# name -> the ctypes function object (resolved once: `call` is on every op's launch path).
_FUNCS: Dict[str, object] = {}


def call(name: str, *args) -> None:
    """Calls a liger_status-returning entry point; raises LigerKernelError on failure."""
    fn = _FUNCS.get(name)
    if fn is None:
        fn = _FUNCS[name] = function(name)  # raises when the library lacks it (nothing cached then)
    status = fn(*args)
    if status != SUCCESS:
        raise LigerKernelError(name, int(status), last_error())


def call_size(name: str, *args) -> int:
    """Calls a workspace-size query `name(..., size_t* out)` returning liger_status; returns the size."""
    out = ctypes.c_size_t(0)
    call(name, *args, ctypes.byref(out))
    return int(out.value)


# Workspace sizes by (query name, arguments): the queries are pure functions of their arguments
# (sizes, dtype, device, options); only calls with the tuned defaults (tunables NULL) are cached.
_SIZES: Dict[tuple, int] = {}
_SIZES_MAX = 1024


def call_size_cached(key: tuple, name: str, *args) -> int:
    """call_size(name, *args), remembered under `key`, which must hold everything the size depends on
    (the caller passes key=None to bypass the cache, e.g. when tunables are set)."""
    if key is None:
        return call_size(name, *args)
    size = _SIZES.get(key)
    if size is None:
        size = call_size(name, *args)
        if len(_SIZES) >= _SIZES_MAX:
            _SIZES.clear()
        _SIZES[key] = size
    return size


TUNABLE_FIELDS = tuple(f[0] for f in LigerTunables._fields_ if f[0] != "reserved")
P_TUN = ctypes.POINTER(LigerTunables)


def tunables_ref(tunables: Optional[dict]):
    """None -> NULL (tuned defaults); a dict of liger_tunables fields -> byref(struct) (kept alive by
    the byref object for the duration of the call)."""
    if not tunables:
        return None
    t = LigerTunables()
    for key, value in tunables.items():
        if key not in TUNABLE_FIELDS:
            raise ValueError(f"unknown tunable {key!r}; known: {list(TUNABLE_FIELDS)}")
        setattr(t, key, int(value))
    return ctypes.byref(t)


# Process-wide tunables per op (kernel-perf and benchmarks set them; None = the library's defaults).
_OP_TUNABLES: Dict[str, Optional[dict]] = {}
# Called with (op, tunables) on every change, when the C++ op kernels are loaded (_torch_ops.py):
# they launch without this module and keep their own copy.
_TUNABLES_LISTENER = None


def set_tunables(op: str, tunables: Optional[dict]) -> None:
    """Overrides the launch parameters of `op` (e.g. "rms_norm") for later calls; None restores defaults."""
    if tunables:
        for key in tunables:
            if key not in TUNABLE_FIELDS:
                raise ValueError(f"unknown tunable {key!r}; known: {list(TUNABLE_FIELDS)}")
    _OP_TUNABLES[op] = dict(tunables) if tunables else None
    if _TUNABLES_LISTENER is not None:
        _TUNABLES_LISTENER(op, _OP_TUNABLES[op])


def reset_tunables() -> None:
    """Every op back to the library's tuned defaults."""
    for op in list(_OP_TUNABLES):
        set_tunables(op, None)
    _OP_TUNABLES.clear()


# op -> (the dict in _OP_TUNABLES it was built from, byref(struct)): one struct per set_tunables call,
# not one per launch. Keyed on the dict's identity, so clearing or replacing _OP_TUNABLES (the tests
# do) is seen at once.
_TUNABLES_REFS: Dict[str, tuple] = {}


def op_tunables(op: str):
    """The tunables pointer for `op`'s launches: None (NULL, the tuned defaults) unless set_tunables set some."""
    tunables = _OP_TUNABLES.get(op)
    if not tunables:
        return None
    cached = _TUNABLES_REFS.get(op)
    if cached is not None and cached[0] is tunables:
        return cached[1]
    ref = tunables_ref(tunables)
    _TUNABLES_REFS[op] = (tunables, ref)
    return ref
