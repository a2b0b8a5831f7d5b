"""The ctypes declarations against the C headers: every LIGER_API function of every header is declared
with matching argument kinds, and every options struct has the header's fields in order.
(Needs torch to import the op modules, no GPU work.)"""
import ctypes
import glob
import os
import re

import pytest

import liger_kernels  # noqa: F401  (imports every op module, which declares its functions)
from liger_kernels import _lib
from liger_kernels.ops import losses, norms

HDR_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "kernels", "include", "liger_kernels")


def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _headers():
    out = {}
    for path in sorted(glob.glob(os.path.join(HDR_DIR, "*.h"))):
        with open(path) as f:
            out[os.path.basename(path)] = _strip_comments(f.read())
    return out


def _functions():
    funcs = {}
    for name, text in _headers().items():
        for m in re.finditer(r"LIGER_API\s+([\w\s\*]+?)\s*\b(\w+)\s*\(([^)]*)\)\s*;", text):
            ret, fname, params = m.group(1), m.group(2), m.group(3)
            plist = [p.strip() for p in params.split(",")] if params.strip() not in ("", "void") else []
            funcs[fname] = (name, ret.strip(), plist)
    return funcs


SCALARS = {
    "int64_t": ctypes.c_int64, "int32_t": ctypes.c_int32, "int": ctypes.c_int, "float": ctypes.c_float,
    "size_t": ctypes.c_size_t, "liger_dtype": ctypes.c_int, "liger_status": ctypes.c_int,
}


def _kind(ctype):
    """'ptr', ('struct', name), 'size_t*', or a ctypes scalar type."""
    t = re.sub(r"\bconst\b", "", ctype).strip()
    if t.endswith("*") or "*" in t:
        base = t.replace("*", " ").split()[0]
        if base == "size_t":
            return "size_t*"
        if base.startswith("liger_") and base != "liger_stream_t":
            return ("struct", base)
        return "ptr"
    words = t.split()
    base = words[0] if len(words) == 1 else " ".join(words[:-1])  # drop the parameter name
    if base == "liger_stream_t":
        return "ptr"
    return SCALARS[base]


def _param_type(param):
    # "const void* x" -> "const void*"; "int64_t rows" -> "int64_t"
    p = param.replace("*", "* ")
    words = p.split()
    return " ".join(words[:-1]) if len(words) > 1 else words[0]


def test_every_header_function_is_declared_and_matches():
    funcs = _functions()
    assert len(funcs) >= 8, f"parsed only {sorted(funcs)} from {HDR_DIR}"
    problems = []
    for fname, (header, ret, params) in sorted(funcs.items()):
        if fname not in _lib._DECLARATIONS:
            problems.append(f"{header}: {fname} has no ctypes declaration")
            continue
        restype, argtypes = _lib._DECLARATIONS[fname]
        if len(argtypes) != len(params):
            problems.append(f"{fname}: {len(argtypes)} argtypes for {len(params)} parameters")
            continue
        for i, (param, at) in enumerate(zip(params, argtypes)):
            k = "host_i64_array" if "[" in param else _kind(_param_type(param))
            if k == "host_i64_array":  # e.g. const int64_t strides[3]: a host pointer
                ok = at is _lib.P_I64 and "int64_t" in param
            elif k == "ptr":
                ok = at is ctypes.c_void_p
            elif k == "size_t*":
                ok = at is _lib.P_SZ
            elif isinstance(k, tuple):
                ok = hasattr(at, "_type_") and issubclass(at._type_, ctypes.Structure)
                if ok and k[1] == "liger_tunables":
                    ok = at._type_ is _lib.LigerTunables
            else:
                ok = at is k
            if not ok:
                problems.append(f"{fname} parameter {i} '{param}': declared {at}, header says {k}")
        want_ret = None if ret == "void" else (ctypes.c_char_p if ret.endswith("char*") else SCALARS.get(ret))
        if restype is not want_ret:
            problems.append(f"{fname}: restype {restype}, header returns {ret}")
    assert not problems, "\n".join(problems)


def _struct_fields(struct):
    for text in _headers().values():
        m = re.search(r"typedef\s+struct\s+" + struct + r"\s*\{(.*?)\}\s*" + struct + r"\s*;", text, flags=re.S)
        if m:
            return [re.sub(r"\[.*\]", "", decl.split()[-1]).strip("*") for decl in m.group(1).split(";") if decl.strip()]
    return None


@pytest.mark.parametrize("struct,cls", [
    ("liger_tunables", _lib.LigerTunables),
    ("liger_rms_norm_options", norms.RmsNormOptions),
    ("liger_layer_norm_options", norms.LayerNormOptions),
    ("liger_cross_entropy_options", losses.CrossEntropyOptions),
])
def test_struct_fields_match_headers(struct, cls):
    fields = _struct_fields(struct)
    assert fields is not None, f"{struct} not found in the headers"
    assert [f[0] for f in cls._fields_] == fields


def test_library_exports_every_declared_function():
    missing = [n for n in _lib._DECLARATIONS if not hasattr(_lib.lib(), n)]
    assert not missing, f"declared but not exported by {_lib.library_path()}: {missing}"
