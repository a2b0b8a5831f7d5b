"""CrossEntropy and FusedLinearCrossEntropy (cross_entropy.h, fused_linear_cross_entropy.h): the
launches are torch.library custom ops (namespace `liger`) with fake implementations; autograd lives in
torch.autograd.Functions outside them, which call the ops' Python implementations directly in plain
eager execution and torch.ops.liger.* while compiling or tracing.

The library computes the gradient in the forward pass; the autograd backward only scales it by
the upstream gradient (in place in eager mode, through the library's backward entry; under
torch.compile as a functional multiply, same numbers). For FLCE with reduction="none" the forward
runs without gradients and the backward recomputes them with row_grad_scale = grad_output, so
per-token upstream gradients are exact (SPEC section 9).

z_loss is returned for logging: its gradient is already part of `loss` (lse_square_scale * lse^2 is
added into each row's loss), so z_loss does not require grad (it is marked non-differentiable)."""

import ctypes
from typing import Optional, Tuple

import torch
from torch import Tensor

from .. import _lib
from .. import _torch as T

REDUCTIONS = {"mean": 0, "sum": 1, "none": 2}


class CrossEntropyOptions(ctypes.Structure):
    _fields_ = [
        ("ignore_index", ctypes.c_int64),
        ("label_smoothing", ctypes.c_float),
        ("lse_square_scale", ctypes.c_float),
        ("softcap", ctypes.c_float),
        ("reduction", ctypes.c_int32),
        ("class_weight", ctypes.c_void_p),
        ("reserved", ctypes.c_int32 * 4),
    ]


P, I64, I32, SZ, DT, ST = _lib.P, _lib.I64, _lib.I32, _lib.SZ, _lib.DT, _lib.ST
P_CE = ctypes.POINTER(CrossEntropyOptions)
P_TUN = _lib.P_TUN

_lib.declare("liger_cross_entropy_options_init", None, [P_CE])
_lib.declare("liger_cross_entropy_workspace_size", ST, [I64, I64, P_CE, _lib.P_SZ])
_lib.declare("liger_cross_entropy_forward", ST, [P, I64, P, P, I64, P, P, I64, I64, DT, P_CE, P, SZ, P_TUN, P])
_lib.declare("liger_cross_entropy_backward", ST, [P, I64, I64, I64, DT, P, I32, P_TUN, P])
_lib.declare("liger_cross_entropy_default_tunables", ST, [ctypes.c_int, I64, I64, DT, P_TUN])
_lib.declare("liger_fused_linear_cross_entropy_workspace_size", ST, [I64, I64, I64, DT, P_CE, P_TUN, _lib.P_SZ])
_lib.declare(
    "liger_fused_linear_cross_entropy_forward",
    ST,
    [P, I64, P, I64, P, P, P, P, P, P, I64, P, DT, P, DT, I64, I64, I64, DT, P_CE, P, SZ, P_TUN, P],
)
_lib.declare("liger_fused_linear_cross_entropy_backward", ST, [P, P, I64, I64, I64, P, DT, I64, P, DT, DT, P])
_lib.declare("liger_fused_linear_cross_entropy_default_tunables", ST, [ctypes.c_int, I64, I64, DT, P_TUN])


# liger_cross_entropy_options_init's defaults, read once; then one struct per distinct option values
# (the per-call struct only when class weights are given: their pointer is per call).
_CE_DEFAULTS: list = []
_CE_OPTS: dict = {}
_CE_OPTS_MAX = 256


def _ce_options(ignore_index, label_smoothing, lse_square_scale, softcap, reduction, class_weight: Optional[Tensor]):
    """(struct, byref(struct), key): key holds what the struct's contents depend on (for caches)."""
    key = (ignore_index, label_smoothing, lse_square_scale, softcap, reduction, class_weight is not None)
    if class_weight is None:
        cached = _CE_OPTS.get(key)
        if cached is not None:
            return cached
    if not _CE_DEFAULTS:
        defaults = CrossEntropyOptions()
        _lib.function("liger_cross_entropy_options_init")(ctypes.byref(defaults))
        _CE_DEFAULTS.append(defaults)
    opts = CrossEntropyOptions.from_buffer_copy(_CE_DEFAULTS[0])
    opts.ignore_index = int(ignore_index)
    opts.label_smoothing = float(label_smoothing)
    opts.lse_square_scale = float(lse_square_scale)
    opts.softcap = float(softcap)
    opts.reduction = int(reduction)
    opts.class_weight = T.ptr(class_weight)
    entry = (opts, ctypes.byref(opts), key)
    if class_weight is None:
        if len(_CE_OPTS) >= _CE_OPTS_MAX:
            _CE_OPTS.clear()
        _CE_OPTS[key] = entry
    return entry


def _check_targets(op: str, target: Tensor, rows: int) -> Tensor:
    if target.dtype != torch.int64:
        raise TypeError(f"liger {op}: target must be int64 (torch.long), got {target.dtype}")
    if target.numel() != rows:
        raise ValueError(f"liger {op}: {target.numel()} targets for {rows} rows")
    return target.reshape(rows).contiguous()


def _check_class_weight(op: str, weight: Optional[Tensor], vocab: int) -> Optional[Tensor]:
    if weight is None:
        return None
    if weight.dtype != torch.float32 or weight.shape != (vocab,):
        raise ValueError(f"liger {op}: class weights must be float32 of shape ({vocab},)")
    return weight.contiguous()


def _loss_shape(reduction: int, rows: int):
    return (rows,) if reduction == REDUCTIONS["none"] else ()


# ---------------------------------------------------------------- CrossEntropy
def _cross_entropy_fwd(
    logits: Tensor, target: Tensor, class_weight: Optional[Tensor], ignore_index: int, label_smoothing: float,
    lse_square_scale: float, softcap: float, reduction: int, compute_grad: bool
) -> Tuple[Tensor, Tensor, Tensor]:
    op = "cross_entropy"
    device = T.check_cuda(op, logits=logits, target=target, class_weight=class_weight)
    if logits.dim() != 2:
        raise ValueError(f"liger {op}: logits must be [rows, vocab], got shape {tuple(logits.shape)}")
    rows, vocab = logits.shape
    logits = T.rows_view(logits, op, "logits")
    target = _check_targets(op, target, rows)
    class_weight = _check_class_weight(op, class_weight, vocab)
    dtype = T.dtype_enum(logits, op, "logits")
    loss = torch.empty(_loss_shape(reduction, rows), dtype=torch.float32, device=device)
    z_loss = torch.empty_like(loss)
    grad = torch.empty((rows, vocab), dtype=logits.dtype, device=device) if compute_grad else logits.new_empty((0,))
    opts, opts_ref, opts_key = _ce_options(ignore_index, label_smoothing, lse_square_scale, softcap, reduction, class_weight)
    with T.on_device(device):
        name = "liger_cross_entropy_workspace_size"
        ws_bytes = _lib.call_size_cached((name, rows, vocab) + opts_key, name, rows, vocab, opts_ref)
        ws = T.workspace(ws_bytes, device)
        _lib.call(
            "liger_cross_entropy_forward", T.ptr(logits), T.row_stride(logits), T.ptr(target),
            T.ptr(grad) if compute_grad else None, vocab, T.ptr(loss), T.ptr(z_loss), rows, vocab, dtype,
            opts_ref, T.ptr(ws), ws_bytes, _lib.op_tunables(op), T.stream(device),
        )
    return loss, z_loss, grad


cross_entropy_fwd = torch.library.custom_op("liger::cross_entropy_fwd", _cross_entropy_fwd, mutates_args=())


@cross_entropy_fwd.register_fake
def _(logits, target, class_weight, ignore_index, label_smoothing, lse_square_scale, softcap, reduction, compute_grad):
    rows = logits.shape[0]
    loss = logits.new_empty(_loss_shape(reduction, rows), dtype=torch.float32)
    grad = logits.new_empty(logits.shape, dtype=logits.dtype) if compute_grad else logits.new_empty((0,))
    return loss, torch.empty_like(loss), grad


def _cross_entropy_scale_(grad: Tensor, grad_output: Tensor) -> None:
    """grad *= grad_output (scalar, or per row for reduction none), in place, by the library."""
    op = "cross_entropy"
    rows, vocab = grad.shape
    per_row = grad_output.dim() == 1
    go = grad_output.to(torch.float32).contiguous()
    with T.on_device(grad.device):
        _lib.call(
            "liger_cross_entropy_backward", T.ptr(grad), vocab, rows, vocab, T.dtype_enum(grad, op), T.ptr(go),
            1 if per_row else 0, _lib.op_tunables(op), T.stream(grad.device),
        )


cross_entropy_scale_ = torch.library.custom_op("liger::cross_entropy_scale_", _cross_entropy_scale_, mutates_args=("grad",))


@cross_entropy_scale_.register_fake
def _(grad, grad_output):
    return None


def _scale_functional(grad: Tensor, grad_output: Tensor) -> Tensor:
    go = grad_output.to(torch.float32)
    if go.dim() == 1:
        go = go[:, None]
    return (grad.to(torch.float32) * go).to(grad.dtype)


class CrossEntropyFunction(torch.autograd.Function):
    """loss (and z_loss when asked, not differentiable) of [rows, vocab] logits; saves the gradient the
    forward computed (an intermediate, not an output)."""

    @staticmethod
    def forward(ctx, logits, target, class_weight, ignore_index, label_smoothing, lse_square_scale, softcap, reduction,
                compute_grad, return_z_loss):
        args = (logits, target, class_weight, ignore_index, label_smoothing, lse_square_scale, softcap, reduction,
                compute_grad)
        if T.direct(logits, target, class_weight):
            loss, z_loss, grad = _cross_entropy_fwd(*args)
        else:
            loss, z_loss, grad = torch.ops.liger.cross_entropy_fwd(*args)
        ctx.save_for_backward(grad)
        if return_z_loss:
            ctx.mark_non_differentiable(z_loss)
            return loss, z_loss
        return loss

    @staticmethod
    def backward(ctx, dloss, *_dz):
        (grad,) = ctx.saved_tensors
        if grad.numel() == 0 and dloss.numel() != 0:
            raise RuntimeError("liger cross_entropy: the forward ran without gradients (compute_grad=False)")
        direct = T.direct(grad, dloss)
        if not direct and T.tracing(grad, dloss):
            dlogits = _scale_functional(grad, dloss)
        else:
            # No host read of dloss (a device sync that would leave the GPU idle through the rest of
            # the backward's host work): the library's scale kernel reads it and skips rows whose
            # factor is exactly 1, so loss.backward() costs a few microseconds of device time.
            if direct:
                _cross_entropy_scale_(grad, dloss)
                T.written(grad)
            else:
                torch.ops.liger.cross_entropy_scale_(grad, dloss)
            dlogits = grad
        return dlogits, None, None, None, None, None, None, None, None, None


def cross_entropy(
    logits: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    lse_square_scale: float = 0.0,
    softcap: Optional[float] = None,
    reduction: str = "mean",
    return_z_loss: bool = False,
):
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {tuple(REDUCTIONS)}, got {reduction!r}")
    vocab = logits.shape[-1]
    out_shape = target.shape
    logits2 = logits.reshape(-1, vocab)
    compute_grad = bool(torch.is_grad_enabled() and logits.requires_grad)
    cw = weight.to(device=logits.device, dtype=torch.float32) if weight is not None else None
    out = CrossEntropyFunction.apply(
        logits2, target.reshape(-1), cw, int(ignore_index), float(label_smoothing), float(lse_square_scale),
        float(softcap or 0.0), REDUCTIONS[reduction], compute_grad, bool(return_z_loss),
    )
    if not return_z_loss:
        return out.view(out_shape) if reduction == "none" else out
    loss, z_loss = out
    if reduction == "none":
        loss = loss.view(out_shape)
        z_loss = z_loss.view(out_shape)
    return loss, z_loss


# ---------------------------------------------------------------- FusedLinearCrossEntropy
def _flce_launch(
    op, x, w, bias, target, class_weight, row_scale, opts, need_gx, need_gw, need_gb, gw_fp32, with_loss
):
    """One library call; returns (loss, z_loss, grad_input, grad_weight, grad_bias) (empty for not needed).
    opts: (struct, byref, key) from _ce_options."""
    opts, opts_ref, opts_key = opts
    device = x.device
    tokens, hidden = x.shape
    vocab = w.shape[0]
    dtype = T.dtype_enum(x, op)
    loss = torch.empty(_loss_shape(opts.reduction, tokens), dtype=torch.float32, device=device)
    z_loss = torch.empty_like(loss)
    # Distinct empty tensors: a custom op's outputs may not alias each other.
    gx = torch.empty_like(x) if need_gx else x.new_empty((0,))
    gw = torch.empty((vocab, hidden), dtype=torch.float32 if gw_fp32 else x.dtype, device=device) if need_gw else x.new_empty((0,))
    gb = torch.empty((vocab,), dtype=torch.float32, device=device) if need_gb else x.new_empty((0,))
    tun = _lib.op_tunables(op)
    with T.on_device(device):
        name = "liger_fused_linear_cross_entropy_workspace_size"
        # The size depends on the current device's architecture (the default chunk_rows).
        key = None if tun is not None else (name, device.index, tokens, hidden, vocab, dtype) + opts_key
        ws_bytes = _lib.call_size_cached(key, name, tokens, hidden, vocab, dtype, opts_ref, tun)
        ws = T.workspace(ws_bytes, device)
        _lib.call(
            "liger_fused_linear_cross_entropy_forward", T.ptr(x), hidden, T.ptr(w), hidden, T.ptr(bias),
            T.ptr(target), T.ptr(row_scale), T.ptr(loss), T.ptr(z_loss),
            T.ptr(gx) if need_gx else None, hidden,
            T.ptr(gw) if need_gw else None, _lib.DTYPE_FLOAT32 if gw_fp32 else dtype,
            T.ptr(gb) if need_gb else None, _lib.DTYPE_FLOAT32,
            tokens, hidden, vocab, dtype, opts_ref, T.ptr(ws), ws_bytes, tun, T.stream(device),
        )
    return loss, z_loss, gx, gw, gb


def _flce_prepare(op, input, weight, target, bias, class_weight):
    device = T.check_cuda(op, input=input, weight=weight, target=target, bias=bias, class_weight=class_weight)
    if input.dim() != 2 or weight.dim() != 2 or input.shape[1] != weight.shape[1]:
        raise ValueError(
            f"liger {op}: input must be [tokens, hidden] and weight [vocab, hidden]; got {tuple(input.shape)} and {tuple(weight.shape)}"
        )
    T.dtype_enum(input, op)
    if weight.dtype not in (input.dtype, torch.float32):
        raise TypeError(f"liger {op}: weight dtype {weight.dtype} must be the input's ({input.dtype}) or float32")
    x = input.contiguous()
    w = weight.to(input.dtype).contiguous()  # fp32 master weights: cast for the GEMM, grad stays fp32
    b = bias.to(input.dtype).contiguous() if bias is not None else None
    if b is not None and b.shape != (w.shape[0],):
        raise ValueError(f"liger {op}: bias must have shape ({w.shape[0]},)")
    tgt = _check_targets(op, target, x.shape[0])
    cw = _check_class_weight(op, class_weight, w.shape[0])
    return device, x, w, b, tgt, cw


def _fused_linear_cross_entropy_fwd(
    input: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor], class_weight: Optional[Tensor],
    ignore_index: int, label_smoothing: float, lse_square_scale: float, softcap: float, reduction: int,
    need_grad_input: bool, need_grad_weight: bool, need_grad_bias: bool, grad_weight_fp32: bool
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    op = "fused_linear_cross_entropy"
    device, x, w, b, tgt, cw = _flce_prepare(op, input, weight, target, bias, class_weight)
    opts = _ce_options(ignore_index, label_smoothing, lse_square_scale, softcap, reduction, cw)
    if reduction == REDUCTIONS["none"]:
        need_grad_input = need_grad_weight = need_grad_bias = False  # recomputed in backward
    need_grad_bias = need_grad_bias and b is not None
    gw_fp32 = grad_weight_fp32 or weight.dtype == torch.float32
    loss, z_loss, gx, gw, gb = _flce_launch(
        op, x, w, b, tgt, cw, None, opts, need_grad_input, need_grad_weight, need_grad_bias, gw_fp32, True
    )
    if need_grad_weight and gw.dtype != weight.dtype:
        gw = gw.to(weight.dtype)
    if need_grad_bias and gb.dtype != bias.dtype:
        gb = gb.to(bias.dtype)
    return loss, z_loss, gx, gw, gb


fused_linear_cross_entropy_fwd = torch.library.custom_op(
    "liger::fused_linear_cross_entropy_fwd", _fused_linear_cross_entropy_fwd, mutates_args=()
)


@fused_linear_cross_entropy_fwd.register_fake
def _(input, weight, target, bias, class_weight, ignore_index, label_smoothing, lse_square_scale, softcap, reduction,
      need_grad_input, need_grad_weight, need_grad_bias, grad_weight_fp32):
    tokens = input.shape[0]
    loss = input.new_empty(_loss_shape(reduction, tokens), dtype=torch.float32)
    none = reduction == REDUCTIONS["none"]
    gx = input.new_empty(input.shape) if need_grad_input and not none else input.new_empty((0,))
    gw = weight.new_empty(weight.shape) if need_grad_weight and not none else input.new_empty((0,))
    gb = bias.new_empty(bias.shape) if (bias is not None and need_grad_bias and not none) else input.new_empty((0,))
    return loss, torch.empty_like(loss), gx, gw, gb


def _fused_linear_cross_entropy_recompute(
    input: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor], class_weight: Optional[Tensor],
    row_grad_scale: Tensor, ignore_index: int, label_smoothing: float, lse_square_scale: float, softcap: float,
    need_grad_input: bool, need_grad_weight: bool, need_grad_bias: bool, grad_weight_fp32: bool
) -> Tuple[Tensor, Tensor, Tensor]:
    """Gradients of sum_r row_grad_scale[r] * loss_r (reduction none's backward)."""
    op = "fused_linear_cross_entropy"
    device, x, w, b, tgt, cw = _flce_prepare(op, input, weight, target, bias, class_weight)
    opts = _ce_options(ignore_index, label_smoothing, lse_square_scale, softcap, REDUCTIONS["none"], cw)
    scale = row_grad_scale.to(torch.float32).reshape(-1).contiguous()
    need_grad_bias = need_grad_bias and b is not None
    gw_fp32 = grad_weight_fp32 or weight.dtype == torch.float32
    _, _, gx, gw, gb = _flce_launch(
        op, x, w, b, tgt, cw, scale, opts, need_grad_input, need_grad_weight, need_grad_bias, gw_fp32, False
    )
    if need_grad_weight and gw.dtype != weight.dtype:
        gw = gw.to(weight.dtype)
    if need_grad_bias and gb.dtype != bias.dtype:
        gb = gb.to(bias.dtype)
    return gx, gw, gb


fused_linear_cross_entropy_recompute = torch.library.custom_op(
    "liger::fused_linear_cross_entropy_recompute", _fused_linear_cross_entropy_recompute, mutates_args=()
)


@fused_linear_cross_entropy_recompute.register_fake
def _(input, weight, target, bias, class_weight, row_grad_scale, ignore_index, label_smoothing, lse_square_scale,
      softcap, need_grad_input, need_grad_weight, need_grad_bias, grad_weight_fp32):
    return (
        input.new_empty(input.shape) if need_grad_input else input.new_empty((0,)),
        weight.new_empty(weight.shape) if need_grad_weight else input.new_empty((0,)),
        bias.new_empty(bias.shape) if (bias is not None and need_grad_bias) else input.new_empty((0,)),
    )


def _fused_linear_cross_entropy_scale_(grad_input: Tensor, grad_weight: Tensor, grad_bias: Tensor, grad_output: Tensor) -> None:
    """Multiplies the stored gradients (empty ones skipped) by the scalar grad_output, in place."""
    op = "fused_linear_cross_entropy"
    ref = next((t for t in (grad_input, grad_weight, grad_bias) if t.numel()), None)
    if ref is None:
        return
    device = ref.device
    go = grad_output.to(torch.float32).reshape(1).contiguous()
    # The library takes one activation dtype plus per-gradient dtypes for weight and bias.
    dtype_t = grad_input if grad_input.numel() else grad_weight if grad_weight.numel() else grad_bias
    dtype = T.dtype_enum(dtype_t, op)
    tokens, hidden = (grad_input.shape if grad_input.numel() else (0, grad_weight.shape[1] if grad_weight.numel() else 0))
    vocab = grad_weight.shape[0] if grad_weight.numel() else grad_bias.shape[0] if grad_bias.numel() else 0
    with T.on_device(device):
        _lib.call(
            "liger_fused_linear_cross_entropy_backward", T.ptr(go),
            T.ptr(grad_input) if grad_input.numel() else None, hidden, tokens, hidden,
            T.ptr(grad_weight) if grad_weight.numel() else None,
            T.dtype_enum(grad_weight, op) if grad_weight.numel() else dtype, vocab,
            T.ptr(grad_bias) if grad_bias.numel() else None,
            T.dtype_enum(grad_bias, op) if grad_bias.numel() else dtype, dtype, T.stream(device),
        )


fused_linear_cross_entropy_scale_ = torch.library.custom_op(
    "liger::fused_linear_cross_entropy_scale_", _fused_linear_cross_entropy_scale_,
    mutates_args=("grad_input", "grad_weight", "grad_bias"),
)


@fused_linear_cross_entropy_scale_.register_fake
def _(grad_input, grad_weight, grad_bias, grad_output):
    return None


class FusedLinearCrossEntropyFunction(torch.autograd.Function):
    """loss (and z_loss when asked, not differentiable) of input @ weight.T (+ bias). mean/sum: saves the
    gradients the forward computed (intermediates); none: saves the inputs, the backward recomputes."""

    @staticmethod
    def forward(ctx, input, weight, target, bias, class_weight, ignore_index, label_smoothing, lse_square_scale,
                softcap, reduction, need_gx, need_gw, need_gb, gw_fp32, return_z_loss):
        args = (input, weight, target, bias, class_weight, ignore_index, label_smoothing, lse_square_scale, softcap,
                reduction, need_gx, need_gw, need_gb, gw_fp32)
        if T.direct(input, weight, target, bias, class_weight):
            loss, z_loss, gx, gw, gb = _fused_linear_cross_entropy_fwd(*args)
        else:
            loss, z_loss, gx, gw, gb = torch.ops.liger.fused_linear_cross_entropy_fwd(*args)
        ctx.reduction = reduction
        ctx.has_bias = bias is not None
        if reduction == REDUCTIONS["none"]:
            ctx.save_for_backward(input, weight, target, bias, class_weight)
            ctx.args = (ignore_index, label_smoothing, lse_square_scale, softcap)
            ctx.flags = (need_gx, need_gw, need_gb, gw_fp32)
        else:
            ctx.save_for_backward(gx, gw, gb)
        if return_z_loss:
            ctx.mark_non_differentiable(z_loss)
            return loss, z_loss
        return loss

    @staticmethod
    def backward(ctx, dloss, *_dz):
        if ctx.reduction == REDUCTIONS["none"]:
            input, weight, target, bias, class_weight = ctx.saved_tensors
            need_gx, need_gw, need_gb, gw_fp32 = ctx.flags
            args = (input, weight, target, bias, class_weight, dloss, *ctx.args, need_gx, need_gw, need_gb, gw_fp32)
            if T.direct(dloss, input, weight, target, bias, class_weight):
                gx, gw, gb = _fused_linear_cross_entropy_recompute(*args)
            else:
                gx, gw, gb = torch.ops.liger.fused_linear_cross_entropy_recompute(*args)
        else:
            gx, gw, gb = ctx.saved_tensors
            direct = T.direct(dloss, gx, gw, gb)
            if not direct and T.tracing(dloss, gx, gw, gb):
                s = dloss.to(torch.float32)
                gx = (gx.to(torch.float32) * s).to(gx.dtype) if gx.numel() else gx
                gw = (gw.to(torch.float32) * s).to(gw.dtype) if gw.numel() else gw
                gb = (gb.to(torch.float32) * s).to(gb.dtype) if gb.numel() else gb
            elif direct:  # scaled on the device, unit factors skipped there (see CrossEntropyFunction)
                _fused_linear_cross_entropy_scale_(gx, gw, gb, dloss)
                T.written(gx, gw, gb)
            else:
                torch.ops.liger.fused_linear_cross_entropy_scale_(gx, gw, gb, dloss)
        return (
            gx if gx.numel() else None,
            gw if gw.numel() else None,
            None,
            (gb if gb.numel() else None) if ctx.has_bias else None,
            None, None, None, None, None, None, None, None, None, None, None,
        )


def fused_linear_cross_entropy(
    input: Tensor,
    weight: Tensor,
    target: Tensor,
    bias: Optional[Tensor] = None,
    ce_weight: Optional[Tensor] = None,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    lse_square_scale: float = 0.0,
    softcap: Optional[float] = None,
    reduction: str = "mean",
    return_z_loss: bool = False,
    accum_dtype: Optional[torch.dtype] = None,
):
    """cross_entropy(input @ weight.T + bias, target) without the [tokens, vocab] logits.

    input [..., hidden] (flattened to tokens), weight [vocab, hidden] in the input dtype or fp32
    (fp32 master weights keep an fp32 gradient), accum_dtype=torch.float32 accumulates the weight
    gradient across chunks in fp32."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {tuple(REDUCTIONS)}, got {reduction!r}")
    if accum_dtype not in (None, torch.float32, input.dtype):
        raise ValueError("accum_dtype must be None or torch.float32")
    out_shape = target.shape
    x = input.reshape(-1, input.shape[-1])
    grad_on = torch.is_grad_enabled()
    cw = ce_weight.to(device=input.device, dtype=torch.float32) if ce_weight is not None else None
    out = FusedLinearCrossEntropyFunction.apply(
        x, weight, target.reshape(-1), bias, cw, int(ignore_index), float(label_smoothing), float(lse_square_scale),
        float(softcap or 0.0), REDUCTIONS[reduction],
        bool(grad_on and input.requires_grad), bool(grad_on and weight.requires_grad),
        bool(grad_on and bias is not None and bias.requires_grad), accum_dtype == torch.float32, bool(return_z_loss),
    )
    if not return_z_loss:
        return out.view(out_shape) if reduction == "none" else out
    loss, z_loss = out
    if reduction == "none":
        loss = loss.view(out_shape)
        z_loss = z_loss.view(out_shape)
    return loss, z_loss
