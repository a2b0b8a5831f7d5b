"""RMSNorm, FusedAddRMSNorm and LayerNorm (rms_norm.h, fused_add_rms_norm.h, layer_norm.h).

The forward and backward launches are the ops liger::* with fake implementations: C++ dispatcher
kernels when libliger_torch_ops.so is loaded (_torch_ops.py), else torch.library custom ops of the
`*_python` functions below. Autograd lives in a torch.autograd.Function outside them (a registered
op with register_autograd costs tens of microseconds per forward+backward). In plain eager
execution the Function calls the launch directly; while compiling or tracing it calls
torch.ops.liger.*, which the compiler keeps opaque and traces through the fake implementations."""

import ctypes
from typing import Optional, Tuple

import torch
from torch import Tensor

from .. import _lib
from .. import _torch as T
from .. import _torch_ops

# ---------------------------------------------------------------- C declarations
CASTING = {"llama": 0, "gemma": 1, "none": 2}


class RmsNormOptions(ctypes.Structure):
    _fields_ = [("eps", ctypes.c_float), ("offset", ctypes.c_float), ("casting_mode", ctypes.c_int32), ("reserved", ctypes.c_int32)]


class LayerNormOptions(ctypes.Structure):
    _fields_ = [("eps", ctypes.c_float), ("reserved", ctypes.c_int32 * 3)]


P, I64, I32, SZ, DT, ST = _lib.P, _lib.I64, _lib.I32, _lib.SZ, _lib.DT, _lib.ST
P_RMS = ctypes.POINTER(RmsNormOptions)
P_LN = ctypes.POINTER(LayerNormOptions)
P_TUN = _lib.P_TUN

_lib.declare("liger_rms_norm_forward", ST, [P, I64, P, DT, P, I64, P, I64, I64, DT, P_RMS, P_TUN, P])
_lib.declare("liger_rms_norm_backward", ST, [P, I64, P, I64, P, DT, P, P, I64, P, P, SZ, I64, I64, DT, P_RMS, P_TUN, P])
_lib.declare("liger_rms_norm_backward_workspace_size", ST, [ctypes.c_int, I64, I64, DT, P_TUN, _lib.P_SZ])
_lib.declare("liger_rms_norm_default_tunables", ST, [ctypes.c_int, I64, I64, DT, P_TUN])
_lib.declare(
    "liger_fused_add_rms_norm_forward", ST, [P, I64, P, I64, P, DT, P, I64, P, I64, P, I64, I64, DT, P_RMS, P_TUN, P]
)
_lib.declare(
    "liger_fused_add_rms_norm_backward",
    ST,
    [P, I64, P, I64, P, I64, P, DT, P, P, I64, P, P, SZ, I64, I64, DT, P_RMS, P_TUN, P],
)
_lib.declare("liger_fused_add_rms_norm_backward_workspace_size", ST, [ctypes.c_int, I64, I64, DT, P_TUN, _lib.P_SZ])
_lib.declare("liger_fused_add_rms_norm_default_tunables", ST, [ctypes.c_int, I64, I64, DT, P_TUN])
_lib.declare("liger_layer_norm_forward", ST, [P, I64, P, P, DT, P, I64, P, P, I64, I64, DT, P_LN, P_TUN, P])
_lib.declare(
    "liger_layer_norm_backward", ST, [P, I64, P, I64, P, DT, P, P, P, I64, P, P, P, SZ, I64, I64, DT, P_TUN, P]
)
_lib.declare("liger_layer_norm_backward_workspace_size", ST, [ctypes.c_int, I64, I64, DT, ctypes.c_int, P_TUN, _lib.P_SZ])
_lib.declare("liger_layer_norm_default_tunables", ST, [ctypes.c_int, I64, I64, DT, P_TUN])


# Options structs by value: one per distinct (eps, offset, casting_mode) / eps, not one per launch.
_RMS_OPTS: dict = {}
_LN_OPTS: dict = {}
_OPTS_MAX = 256


def _rms_opts(eps: float, offset: float, casting_mode: int):
    key = (eps, offset, casting_mode)
    ref = _RMS_OPTS.get(key)
    if ref is None:
        if len(_RMS_OPTS) >= _OPTS_MAX:
            _RMS_OPTS.clear()
        ref = _RMS_OPTS[key] = ctypes.byref(RmsNormOptions(float(eps), float(offset), int(casting_mode), 0))
    return ref


def _ln_opts(eps: float):
    ref = _LN_OPTS.get(eps)
    if ref is None:
        if len(_LN_OPTS) >= _OPTS_MAX:
            _LN_OPTS.clear()
        ref = _LN_OPTS[eps] = ctypes.byref(LayerNormOptions(float(eps)))
    return ref


def _ws_size(name: str, device, rows: int, cols: int, dtype: int, tun, *extra) -> int:
    """Backward workspace bytes (`name`(device, rows, cols, dtype, *extra, tunables)); cached for the
    tuned defaults."""
    key = None if tun is not None else (name, device.index, rows, cols, dtype) + extra
    return _lib.call_size_cached(key, name, device.index, rows, cols, dtype, *extra, tun)


def _weight_dtype(op: str, weight: Tensor, x: Tensor) -> int:
    if weight.dtype not in (x.dtype, torch.float32):
        raise TypeError(f"liger {op}: weight dtype {weight.dtype} must be the input's ({x.dtype}) or float32")
    return T.dtype_enum(weight, op, "weight")


def _rows_cols(x: Tensor) -> Tuple[int, int]:
    cols = x.shape[-1]
    return x.numel() // cols if cols else 0, cols


# ---------------------------------------------------------------- RMSNorm
def _rms_norm_fwd_python(x: Tensor, weight: Tensor, eps: float, offset: float, casting_mode: int, in_place: bool) -> Tuple[Tensor, Tensor]:
    op = "rms_norm"
    device = T.check_cuda(op, x=x, weight=weight)
    x = x.contiguous()
    weight = weight.contiguous()
    rows, cols = _rows_cols(x)
    if weight.shape != (cols,):
        raise ValueError(f"liger {op}: weight shape {tuple(weight.shape)} must be ({cols},)")
    y = torch.empty_like(x)
    rstd = torch.empty(rows, dtype=torch.float32, device=device)
    with T.on_device(device):
        _lib.call(
            "liger_rms_norm_forward", T.ptr(x), cols, T.ptr(weight), _weight_dtype(op, weight, x), T.ptr(y), cols,
            T.ptr(rstd), rows, cols, T.dtype_enum(x, op), _rms_opts(eps, offset, casting_mode),
            _lib.op_tunables(op), T.stream(device),
        )
    return y, rstd


def _rms_norm_fwd_fake(x, weight, eps, offset, casting_mode, in_place):
    rows = x.numel() // x.shape[-1]
    return torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty((rows,), dtype=torch.float32)


_rms_norm_fwd = _torch_ops.define("rms_norm_fwd", _rms_norm_fwd_python, _rms_norm_fwd_fake)


def _rms_bwd_impl(dy: Tensor, dx: Tensor, x: Tensor, weight: Tensor, rstd: Tensor, eps, offset, casting_mode, need_dw: bool) -> Tensor:
    op = "rms_norm"
    device = x.device
    rows, cols = _rows_cols(x)
    dw = torch.empty_like(weight) if need_dw else weight.new_empty((0,))
    dtype = T.dtype_enum(x, op)
    tun = _lib.op_tunables(op)
    with T.on_device(device):
        ws_bytes = _ws_size("liger_rms_norm_backward_workspace_size", device, rows, cols, dtype, tun) if need_dw else 0
        ws = T.workspace(ws_bytes, device)
        _lib.call(
            "liger_rms_norm_backward", T.ptr(dy), cols, T.ptr(x), cols, T.ptr(weight), _weight_dtype(op, weight, x),
            T.ptr(rstd), T.ptr(dx), cols, T.ptr(dw) if need_dw else None, T.ptr(ws), ws_bytes, rows, cols, dtype,
            _rms_opts(eps, offset, casting_mode), tun, T.stream(device),
        )
    return dw


def _rms_norm_bwd_python(
    dy: Tensor, x: Tensor, weight: Tensor, rstd: Tensor, eps: float, offset: float, casting_mode: int, need_dw: bool
) -> Tuple[Tensor, Tensor]:
    dy = dy.contiguous()
    dx = torch.empty_like(x)
    dw = _rms_bwd_impl(dy, dx, x, weight, rstd, eps, offset, casting_mode, need_dw)
    return dx, dw


def _rms_norm_bwd_fake(dy, x, weight, rstd, eps, offset, casting_mode, need_dw):
    return torch.empty_like(x), (torch.empty_like(weight) if need_dw else weight.new_empty((0,)))


_rms_norm_bwd = _torch_ops.define("rms_norm_bwd", _rms_norm_bwd_python, _rms_norm_bwd_fake)


def _rms_norm_bwd_inplace_python(
    dy: Tensor, x: Tensor, weight: Tensor, rstd: Tensor, eps: float, offset: float, casting_mode: int, need_dw: bool
) -> Tensor:
    """dx is written into dy (which must be contiguous); returns dweight."""
    if not dy.is_contiguous():
        raise ValueError("liger rms_norm: the in-place backward needs a contiguous gradient")
    return _rms_bwd_impl(dy, dy, x, weight, rstd, eps, offset, casting_mode, need_dw)


def _rms_norm_bwd_inplace_fake(dy, x, weight, rstd, eps, offset, casting_mode, need_dw):
    return torch.empty_like(weight) if need_dw else weight.new_empty((0,))


_rms_norm_bwd_inplace = _torch_ops.define("rms_norm_bwd_inplace", _rms_norm_bwd_inplace_python, _rms_norm_bwd_inplace_fake, mutates_args=("dy",))


class RMSNormFunction(torch.autograd.Function):
    """y = RMSNorm(x); saves x, weight and rstd (fp32, one per row)."""

    @staticmethod
    def forward(ctx, x, weight, eps, offset, casting_mode, in_place):
        x = x.contiguous()
        weight = weight.contiguous()
        if T.direct(x, weight):
            y, rstd = _rms_norm_fwd(x, weight, eps, offset, casting_mode, in_place)
        else:
            y, rstd = torch.ops.liger.rms_norm_fwd(x, weight, eps, offset, casting_mode, in_place)
        ctx.save_for_backward(x, weight, rstd)
        ctx.args = (eps, offset, casting_mode)
        ctx.in_place = in_place
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, rstd = ctx.saved_tensors
        need_dw = bool(ctx.needs_input_grad[1])
        direct = T.direct(dy, x)
        # In place in eager mode only (tracing is checked before dy's layout: torch.compile traces
        # this backward in a mode that forbids layout queries); under torch.compile the functional
        # op is used (same numbers, the compiler plans the buffers).
        if ctx.in_place and (direct or not T.tracing(dy, x)) and dy.is_contiguous():
            if direct:
                dw = _rms_norm_bwd_inplace(dy, x, weight, rstd, *ctx.args, need_dw)
                T.written(dy)
            else:
                dw = torch.ops.liger.rms_norm_bwd_inplace(dy, x, weight, rstd, *ctx.args, need_dw)
            dx = dy
        elif direct:
            dx, dw = _rms_norm_bwd(dy, x, weight, rstd, *ctx.args, need_dw)
        else:
            dx, dw = torch.ops.liger.rms_norm_bwd(dy, x, weight, rstd, *ctx.args, need_dw)
        return dx, (dw if need_dw else None), None, None, None, None


def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6, offset: float = 0.0, casting_mode: str = "llama", in_place: bool = False) -> Tensor:
    if casting_mode not in CASTING:
        raise ValueError(f"casting_mode must be one of {tuple(CASTING)}, got {casting_mode!r}")
    return RMSNormFunction.apply(x, weight, float(eps), float(offset), CASTING[casting_mode], bool(in_place))


# ---------------------------------------------------------------- FusedAddRMSNorm
def _fused_add_rms_norm_fwd_python(
    x: Tensor, residual: Tensor, weight: Tensor, eps: float, offset: float, casting_mode: int, in_place: bool
) -> Tuple[Tensor, Tensor, Tensor]:
    op = "fused_add_rms_norm"
    device = T.check_cuda(op, x=x, residual=residual, weight=weight)
    if residual.shape != x.shape:
        raise ValueError(f"liger {op}: residual shape {tuple(residual.shape)} != input shape {tuple(x.shape)}")
    T.check_same_dtype(op, x, residual=residual)
    x = x.contiguous()
    residual = residual.contiguous()
    weight = weight.contiguous()
    rows, cols = _rows_cols(x)
    if weight.shape != (cols,):
        raise ValueError(f"liger {op}: weight shape {tuple(weight.shape)} must be ({cols},)")
    y = torch.empty_like(x)
    s = torch.empty_like(x)
    rstd = torch.empty(rows, dtype=torch.float32, device=device)
    with T.on_device(device):
        _lib.call(
            "liger_fused_add_rms_norm_forward", T.ptr(x), cols, T.ptr(residual), cols, T.ptr(weight),
            _weight_dtype(op, weight, x), T.ptr(y), cols, T.ptr(s), cols, T.ptr(rstd), rows, cols, T.dtype_enum(x, op),
            _rms_opts(eps, offset, casting_mode), _lib.op_tunables(op), T.stream(device),
        )
    return y, s, rstd


def _fused_add_rms_norm_fwd_fake(x, residual, weight, eps, offset, casting_mode, in_place):
    # The real op computes on x.contiguous(): its outputs are contiguous whatever x's layout.
    rows = x.numel() // x.shape[-1]
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    return y, torch.empty_like(y), x.new_empty((rows,), dtype=torch.float32)


_fused_add_rms_norm_fwd = _torch_ops.define("fused_add_rms_norm_fwd", _fused_add_rms_norm_fwd_python, _fused_add_rms_norm_fwd_fake)


def _fused_add_rms_norm_bwd_python(
    dy: Tensor, ds_out: Optional[Tensor], s: Tensor, weight: Tensor, rstd: Tensor, eps: float, offset: float,
    casting_mode: int, need_dw: bool
) -> Tuple[Tensor, Tensor]:
    op = "fused_add_rms_norm"
    device = s.device
    dy = dy.contiguous()
    ds_out = ds_out.contiguous() if ds_out is not None else None
    rows, cols = _rows_cols(s)
    dx = torch.empty_like(s)
    dw = torch.empty_like(weight) if need_dw else weight.new_empty((0,))
    dtype = T.dtype_enum(s, op)
    tun = _lib.op_tunables(op)
    with T.on_device(device):
        ws_bytes = (
            _ws_size("liger_fused_add_rms_norm_backward_workspace_size", device, rows, cols, dtype, tun)
            if need_dw else 0
        )
        ws = T.workspace(ws_bytes, device)
        _lib.call(
            "liger_fused_add_rms_norm_backward", T.ptr(dy), cols, T.ptr(ds_out), cols, T.ptr(s), cols, T.ptr(weight),
            _weight_dtype(op, weight, s), T.ptr(rstd), T.ptr(dx), cols, T.ptr(dw) if need_dw else None, T.ptr(ws),
            ws_bytes, rows, cols, dtype, _rms_opts(eps, offset, casting_mode), tun, T.stream(device),
        )
    return dx, dw


def _fused_add_rms_norm_bwd_fake(dy, ds_out, s, weight, rstd, eps, offset, casting_mode, need_dw):
    return torch.empty_like(s), (torch.empty_like(weight) if need_dw else weight.new_empty((0,)))


_fused_add_rms_norm_bwd = _torch_ops.define("fused_add_rms_norm_bwd", _fused_add_rms_norm_bwd_python, _fused_add_rms_norm_bwd_fake)


class FusedAddRMSNormFunction(torch.autograd.Function):
    """(y, s) = (RMSNorm(x + residual), x + residual); saves s, weight and rstd."""

    @staticmethod
    def forward(ctx, x, residual, weight, eps, offset, casting_mode, in_place):
        weight = weight.contiguous()
        if T.direct(x, residual, weight):
            y, s, rstd = _fused_add_rms_norm_fwd(x, residual, weight, eps, offset, casting_mode, in_place)
        else:
            y, s, rstd = torch.ops.liger.fused_add_rms_norm_fwd(x, residual, weight, eps, offset, casting_mode, in_place)
        ctx.save_for_backward(s, weight, rstd)
        ctx.args = (eps, offset, casting_mode)
        return y, s

    @staticmethod
    def backward(ctx, dy, ds_out):
        s, weight, rstd = ctx.saved_tensors
        need_dw = bool(ctx.needs_input_grad[2])
        if T.direct(dy, ds_out, s):
            dx, dw = _fused_add_rms_norm_bwd(dy, ds_out, s, weight, rstd, *ctx.args, need_dw)
        else:
            dx, dw = torch.ops.liger.fused_add_rms_norm_bwd(dy, ds_out, s, weight, rstd, *ctx.args, need_dw)
        # x and residual get the same gradient.
        return dx, dx, (dw if need_dw else None), None, None, None, None


def fused_add_rms_norm(
    x: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6, offset: float = 0.0, casting_mode: str = "llama",
    in_place: bool = False,
) -> Tuple[Tensor, Tensor]:
    """Returns (RMSNorm(x + residual), x + residual)."""
    if casting_mode not in CASTING:
        raise ValueError(f"casting_mode must be one of {tuple(CASTING)}, got {casting_mode!r}")
    return FusedAddRMSNormFunction.apply(
        x, residual, weight, float(eps), float(offset), CASTING[casting_mode], bool(in_place)
    )


# ---------------------------------------------------------------- LayerNorm
def _layer_norm_fwd_python(x: Tensor, weight: Tensor, bias: Optional[Tensor], eps: float) -> Tuple[Tensor, Tensor, Tensor]:
    op = "layer_norm"
    device = T.check_cuda(op, x=x, weight=weight, bias=bias)
    x = x.contiguous()
    weight = weight.contiguous()
    rows, cols = _rows_cols(x)
    if weight.shape != (cols,):
        raise ValueError(f"liger {op}: weight shape {tuple(weight.shape)} must be ({cols},)")
    if bias is not None:
        bias = bias.contiguous()
        if bias.shape != (cols,) or bias.dtype != weight.dtype:
            raise ValueError(f"liger {op}: bias must have shape ({cols},) and the weight's dtype {weight.dtype}")
    y = torch.empty_like(x)
    mean = torch.empty(rows, dtype=torch.float32, device=device)
    rstd = torch.empty(rows, dtype=torch.float32, device=device)
    with T.on_device(device):
        _lib.call(
            "liger_layer_norm_forward", T.ptr(x), cols, T.ptr(weight), T.ptr(bias), _weight_dtype(op, weight, x),
            T.ptr(y), cols, T.ptr(mean), T.ptr(rstd), rows, cols, T.dtype_enum(x, op),
            _ln_opts(eps), _lib.op_tunables(op), T.stream(device),
        )
    return y, mean, rstd


def _layer_norm_fwd_fake(x, weight, bias, eps):
    # The real op computes on x.contiguous(): y is contiguous whatever x's layout.
    rows = x.numel() // x.shape[-1]
    return torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty((rows,), dtype=torch.float32), x.new_empty((rows,), dtype=torch.float32)


_layer_norm_fwd = _torch_ops.define("layer_norm_fwd", _layer_norm_fwd_python, _layer_norm_fwd_fake)


def _layer_norm_bwd_python(
    dy: Tensor, x: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor, need_dw: bool, need_db: bool
) -> Tuple[Tensor, Tensor, Tensor]:
    op = "layer_norm"
    device = x.device
    dy = dy.contiguous()
    rows, cols = _rows_cols(x)
    dx = torch.empty_like(x)
    dw = torch.empty_like(weight) if need_dw else weight.new_empty((0,))
    db = torch.empty_like(weight) if need_db else weight.new_empty((0,))
    dtype = T.dtype_enum(x, op)
    tun = _lib.op_tunables(op)
    with T.on_device(device):
        ws_bytes = 0
        if need_dw or need_db:
            ws_bytes = _ws_size("liger_layer_norm_backward_workspace_size", device, rows, cols, dtype, tun, int(need_db))
        ws = T.workspace(ws_bytes, device)
        _lib.call(
            "liger_layer_norm_backward", T.ptr(dy), cols, T.ptr(x), cols, T.ptr(weight), _weight_dtype(op, weight, x),
            T.ptr(mean), T.ptr(rstd), T.ptr(dx), cols, T.ptr(dw) if need_dw else None, T.ptr(db) if need_db else None,
            T.ptr(ws), ws_bytes, rows, cols, dtype, tun, T.stream(device),
        )
    return dx, dw, db


def _layer_norm_bwd_fake(dy, x, weight, mean, rstd, need_dw, need_db):
    return (
        torch.empty_like(x),
        torch.empty_like(weight) if need_dw else weight.new_empty((0,)),
        torch.empty_like(weight) if need_db else weight.new_empty((0,)),
    )


_layer_norm_bwd = _torch_ops.define("layer_norm_bwd", _layer_norm_bwd_python, _layer_norm_bwd_fake)


class LayerNormFunction(torch.autograd.Function):
    """y = LayerNorm(x); saves x, weight, mean and rstd (fp32, one per row)."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        x = x.contiguous()
        weight = weight.contiguous()
        if T.direct(x, weight, bias):
            y, mean, rstd = _layer_norm_fwd(x, weight, bias, eps)
        else:
            y, mean, rstd = torch.ops.liger.layer_norm_fwd(x, weight, bias, eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.has_bias = bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        need_dw = bool(ctx.needs_input_grad[1])
        need_db = bool(ctx.has_bias and ctx.needs_input_grad[2])
        if T.direct(dy, x):
            dx, dw, db = _layer_norm_bwd(dy, x, weight, mean, rstd, need_dw, need_db)
        else:
            dx, dw, db = torch.ops.liger.layer_norm_bwd(dy, x, weight, mean, rstd, need_dw, need_db)
        return dx, (dw if need_dw else None), (db if need_db else None), None


def layer_norm(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    return LayerNormFunction.apply(x, weight, bias, float(eps))
