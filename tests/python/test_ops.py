"""Each op against a float64 PyTorch reference, forward and backward, fp32/fp16/bf16, odd shapes.

Inputs are fresh random values (several seeds through parametrisation), never zeros or constants;
tolerances as in helpers.py (bf16/fp16 set by the roundings each op's header defines)."""
import math

import pytest
import torch
import torch.nn.functional as F

from helpers import TOL, check, rel_err, tol

import liger_kernels as lk
from liger_kernels import functional as LF

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DEV = "cuda"


def _grad_atol(ref, dtype, factor=1.0):
    """Gradients can be tiny (softmax probabilities / N): scale atol to the reference's magnitude."""
    return TOL[dtype]["atol"] * factor * max(float(ref.abs().max()), 1e-30)


# ------------------------------------------------------------------ RMSNorm
def ref_rms_norm(x, w, eps, offset, mode):
    dtype = x.dtype
    xd = x.double()
    rstd = torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps)
    wd = w.double()
    if mode == "llama":
        return (xd * rstd).to(dtype).double() * (offset + wd)
    if mode == "gemma":
        return xd * rstd * (offset + wd)
    r = rstd.to(dtype).double()
    return (xd * r).to(dtype).double() * (offset + wd).to(dtype).double()


def ref_rms_norm_grads(x, w, dy, eps, offset):
    xd = x.detach().double().requires_grad_()
    wd = w.detach().double().requires_grad_()
    rstd = torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps)
    y = xd * rstd * (offset + wd)
    y.backward(dy.double())
    return xd.grad, wd.grad


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5, 65), (37, 1000), (2, 4096), (1, 7)])
@pytest.mark.parametrize("mode,offset", [("llama", 0.0), ("gemma", 1.0), ("none", 0.0)])
@pytest.mark.parametrize("in_place", [False, True])
def test_rms_norm(dtype, shape, mode, offset, in_place):
    eps = 1e-6
    x = torch.randn(shape, device=DEV, dtype=dtype).requires_grad_()
    w = (1.0 + 0.1 * torch.randn(shape[-1], device=DEV, dtype=dtype)).requires_grad_()
    if offset:
        w.data -= 1.0  # Gemma stores weight around 0
    x_before = x.detach().clone()
    y = LF.rms_norm(x, w, eps=eps, offset=offset, casting_mode=mode, in_place=in_place)
    check(y, ref_rms_norm(x.detach(), w.detach(), eps, offset, mode), dtype, "rms_norm y")
    assert torch.equal(x.detach(), x_before), "rms_norm modified its input"
    dy = torch.randn_like(y)
    y.backward(dy.clone())
    gx, gw = ref_rms_norm_grads(x, w, dy, eps, offset)
    check(x.grad, gx, dtype, "rms_norm dx", atol=_grad_atol(gx, dtype, 1.0))
    rows = x.numel() // shape[-1]
    t = tol(dtype, max(1.0, rows / 64))
    check(w.grad, gw, dtype, "rms_norm dw", atol=_grad_atol(gw, dtype) if dtype != torch.float32 else 1e-4 * max(1, rows / 64),
          rtol=t["rtol"] if dtype != torch.float32 else 1e-4, rel=max(t["rel"], 1e-5))


def test_rms_norm_fp32_weight_with_bf16_activations():
    x = torch.randn(9, 257, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    w = (1 + 0.1 * torch.randn(257, device=DEV)).requires_grad_()
    y = LF.rms_norm(x, w)
    assert y.dtype == torch.bfloat16
    check(y, ref_rms_norm(x.detach(), w.detach().to(torch.bfloat16).float(), 1e-6, 0.0, "llama"), torch.bfloat16, "y", rel=2e-2)
    y.sum().backward()
    assert w.grad.dtype == torch.float32 and torch.isfinite(w.grad).all()


def test_rms_norm_module_matches_llama_rmsnorm_semantics():
    m = lk.LigerRMSNorm(128, eps=1e-5).to(DEV)
    m.weight.data.normal_(1.0, 0.1)
    x = torch.randn(4, 6, 128, device=DEV)
    var = x.pow(2).mean(-1, keepdim=True)
    ref = m.weight * (x * torch.rsqrt(var + 1e-5))
    check(m(x), ref.detach().double(), torch.float32, "LigerRMSNorm")
    assert set(m.state_dict()) == {"weight"}


# ------------------------------------------------------------------ FusedAddRMSNorm
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5, 65), (16, 2048)])
def test_fused_add_rms_norm(dtype, shape):
    eps = 1e-6
    x = torch.randn(shape, device=DEV, dtype=dtype, requires_grad=True)
    r = torch.randn(shape, device=DEV, dtype=dtype, requires_grad=True)
    w = (1 + 0.1 * torch.randn(shape[-1], device=DEV, dtype=dtype)).requires_grad_()
    y, s = LF.fused_add_rms_norm(x, r, w, eps=eps)
    s_ref = (x.detach() + r.detach())  # rounded to dtype, as the header says
    check(s, s_ref.double(), dtype, "s")
    check(y, ref_rms_norm(s_ref, w.detach(), eps, 0.0, "llama"), dtype, "y")
    dy = torch.randn_like(y)
    ds = torch.randn_like(s)
    torch.autograd.backward([y, s], [dy, ds])
    sd = s_ref.double().requires_grad_()
    wd = w.detach().double().requires_grad_()
    yd = sd * torch.rsqrt(sd.pow(2).mean(-1, keepdim=True) + eps) * wd
    torch.autograd.backward([yd, sd * 1.0], [dy.double(), ds.double()])
    check(x.grad, sd.grad, dtype, "dx", atol=_grad_atol(sd.grad, dtype))
    check(r.grad, sd.grad, dtype, "dresidual", atol=_grad_atol(sd.grad, dtype))
    rows = x.numel() // shape[-1]
    check(w.grad, wd.grad, dtype, "dw", atol=_grad_atol(wd.grad, dtype) if dtype != torch.float32 else 1e-4 * max(1, rows / 64),
          rtol=1e-4 if dtype == torch.float32 else None)


# ------------------------------------------------------------------ LayerNorm
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5, 65), (64, 1024), (1, 3)])
@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm(dtype, shape, bias):
    eps = 1e-5
    H = shape[-1]
    x = (torch.randn(shape, device=DEV, dtype=dtype) * 2 + 0.5).requires_grad_()
    w = (1 + 0.1 * torch.randn(H, device=DEV, dtype=dtype)).requires_grad_()
    b = (0.1 * torch.randn(H, device=DEV, dtype=dtype)).requires_grad_() if bias else None
    y = LF.layer_norm(x, w, b, eps=eps)
    xd = x.detach().double().requires_grad_()
    wd = w.detach().double().requires_grad_()
    bd = b.detach().double().requires_grad_() if bias else None
    yd = F.layer_norm(xd, (H,), wd, bd, eps)
    check(y, yd.detach(), dtype, "layer_norm y")
    dy = torch.randn_like(y)
    y.backward(dy)
    yd.backward(dy.double())
    check(x.grad, xd.grad, dtype, "layer_norm dx", atol=_grad_atol(xd.grad, dtype))
    rows = x.numel() // H
    f32 = dtype == torch.float32
    check(w.grad, wd.grad, dtype, "layer_norm dw", atol=1e-4 * max(1, rows / 64) if f32 else _grad_atol(wd.grad, dtype),
          rtol=1e-4 if f32 else None)
    if bias:
        check(b.grad, bd.grad, dtype, "layer_norm db", atol=1e-4 * max(1, rows / 64) if f32 else _grad_atol(bd.grad, dtype),
              rtol=1e-4 if f32 else None)


# ------------------------------------------------------------------ SwiGLU / GeGLU
def _gelu_tanh(a):
    return 0.5 * a * (1 + torch.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a.pow(3))))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5, 67), (128, 1376), (1, 1)])
@pytest.mark.parametrize("kind", ["swiglu", "geglu"])
@pytest.mark.parametrize("in_place", [False, True])
def test_glu(dtype, shape, kind, in_place):
    a = (torch.randn(shape, device=DEV, dtype=dtype) * 2).requires_grad_()
    b = torch.randn(shape, device=DEV, dtype=dtype).requires_grad_()
    fn = LF.swiglu if kind == "swiglu" else LF.geglu
    act = F.silu if kind == "swiglu" else _gelu_tanh
    # The in-place backward overwrites the saved a and b: give it non-leaf copies (as in an MLP).
    a_in, b_in = (a * 1, b * 1) if in_place else (a, b)
    c = fn(a_in, b_in, in_place_backward=in_place)
    ad = a.detach().double().requires_grad_()
    bd = b.detach().double().requires_grad_()
    cd = act(ad) * bd
    # fp32 GeGLU evaluates tanh through exp: where gelu(a) -> 0 (a << 0), 1 + tanh cancels and the
    # relative error of those tiny outputs reaches ~1.2e-4 (absolute < 1e-6; seen on H100, shape (1, 1)).
    rel_c = 2e-4 if (kind == "geglu" and dtype == torch.float32) else None
    check(c, cd.detach(), dtype, f"{kind} c", rel=rel_c)
    dc = torch.randn_like(c)
    c.backward(dc)
    cd.backward(dc.double())
    # The same cancellation enters the backward through 1 + tanh and 1 - tanh^2: tanh via exp is
    # good to ~1e-7 absolute, so da and db of fp32 GeGLU are bounded by that, scaled by |dc * b|
    # (seen on H100, shape (1, 1): da off by 7.4e-8 absolute, 1.2e-4 relative).
    if kind == "geglu" and dtype == torch.float32:
        # d gelu'/d tanh = 0.5 - a*tanh*k*(1 + 3*0.044715*a^2): |a| = 4 amplifies the tanh error ~10x.
        x = ad.detach().abs()
        sensitivity = 0.5 + x * 0.7978845608 * (1 + 0.134145 * x * x)
        tanh_floor = float((2.5e-7 * sensitivity * (dc.double() * bd.detach()).abs()).max())
        check(a.grad, ad.grad, dtype, f"{kind} da", atol=max(_grad_atol(ad.grad, dtype), tanh_floor), rel=2e-4)
        gelu_floor = float((2.5e-7 * 0.5 * x * dc.double().abs()).max())  # db = dc * gelu(a)
        check(b.grad, bd.grad, dtype, f"{kind} db", atol=max(_grad_atol(bd.grad, dtype), gelu_floor), rel=2e-4)
        return
    check(a.grad, ad.grad, dtype, f"{kind} da", atol=_grad_atol(ad.grad, dtype))
    check(b.grad, bd.grad, dtype, f"{kind} db", atol=_grad_atol(bd.grad, dtype))


def test_swiglu_mlp_state_dict_compatible():
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.configuration_llama import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP

    cfg = LlamaConfig(hidden_size=64, intermediate_size=176, hidden_act="silu")
    ref = LlamaMLP(cfg).to(DEV)
    mine = lk.LigerSwiGLUMLP(cfg).to(DEV)
    mine.load_state_dict(ref.state_dict())
    x = torch.randn(3, 5, 64, device=DEV)
    check(mine(x), ref(x).detach().double(), torch.float32, "SwiGLU MLP", atol=1e-5, rtol=1e-4, rel=1e-5)


# ------------------------------------------------------------------ CrossEntropy
def ref_cross_entropy(logits, target, weight=None, ignore_index=-100, label_smoothing=0.0, lse_square_scale=0.0,
                      softcap=None, reduction="mean"):
    """float64 reference (autograd-able): torch's CE on soft-capped logits, plus the z-loss as cross_entropy.h."""
    x = logits
    if softcap:
        x = softcap * torch.tanh(x / softcap)
    ce = F.cross_entropy(x, target, weight=weight.double() if weight is not None else None, ignore_index=ignore_index,
                         label_smoothing=label_smoothing, reduction=reduction)
    keep = target != ignore_index
    lse = torch.logsumexp(x, dim=-1)
    z = lse_square_scale * lse.pow(2) * keep
    if reduction == "mean":
        z = z.sum() / keep.sum().clamp(min=1)
        if keep.sum() == 0:
            ce = ce.nan_to_num(0.0) * 0
    elif reduction == "sum":
        z = z.sum()
    return ce + z, z


CE_CASES = {
    "plain": dict(),
    "ignore": dict(ignore_frac=0.3),
    "smooth": dict(label_smoothing=0.1),
    "zloss": dict(lse_square_scale=1e-4),
    "softcap": dict(softcap=30.0),
    "weights": dict(weights=True),
    "all": dict(ignore_frac=0.2, label_smoothing=0.05, lse_square_scale=1e-3, softcap=20.0, weights=True),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", list(CE_CASES))
@pytest.mark.parametrize("rows,vocab", [(37, 1000), (8, 32003)])
def test_cross_entropy(dtype, reduction, case, rows, vocab):
    c = CE_CASES[case]
    logits = (torch.randn(rows, vocab, device=DEV) * 3).to(dtype).requires_grad_()
    target = torch.randint(0, vocab, (rows,), device=DEV)
    if c.get("ignore_frac"):
        target[torch.rand(rows, device=DEV) < c["ignore_frac"]] = -100
        target[0] = -100
    weight = torch.rand(vocab, device=DEV) + 0.5 if c.get("weights") else None
    kw = dict(label_smoothing=c.get("label_smoothing", 0.0), lse_square_scale=c.get("lse_square_scale", 0.0),
              softcap=c.get("softcap"), reduction=reduction)
    before = logits.detach().clone()
    loss, z = LF.cross_entropy(logits, target, weight=weight, return_z_loss=True, **kw)
    assert torch.equal(logits.detach(), before), "cross_entropy modified the logits"
    ld = logits.detach().double().requires_grad_()
    loss_ref, z_ref = ref_cross_entropy(ld, target, weight=weight, **kw)
    # Loss from the same (rounded) logits: fp32 accuracy in every dtype.
    check(loss, loss_ref.detach(), torch.float32, "loss", atol=1e-4, rtol=1e-5, rel=1e-5)
    check(z, z_ref.detach(), torch.float32, "z_loss", atol=1e-5, rtol=1e-5, rel=1e-5)
    g = torch.randn_like(loss) if reduction == "none" else torch.tensor(1.7, device=DEV)
    loss.backward(g)
    loss_ref.backward(g.double())
    check(logits.grad, ld.grad, dtype, "dlogits", atol=_grad_atol(ld.grad, dtype, 0.5 if dtype == torch.float32 else 1.0))


def test_cross_entropy_all_ignored_gives_zero_not_nan():
    logits = torch.randn(5, 77, device=DEV, requires_grad=True)
    target = torch.full((5,), -100, device=DEV)
    loss = LF.cross_entropy(logits, target)
    loss.backward()
    assert float(loss) == 0.0
    assert torch.equal(logits.grad, torch.zeros_like(logits.grad))


def test_cross_entropy_extreme_logits():
    logits = (torch.randn(16, 5000, device=DEV) * 1e4).requires_grad_()
    target = torch.randint(0, 5000, (16,), device=DEV)
    loss = LF.cross_entropy(logits, target)
    ld = logits.detach().double().requires_grad_()
    ref = F.cross_entropy(ld, target)
    check(loss, ref.detach(), torch.float32, "loss", atol=1e-2, rtol=1e-5, rel=1e-5)
    loss.backward()
    ref.backward()
    check(logits.grad, ld.grad, torch.float32, "dlogits", atol=1e-6, rtol=1e-4, rel=1e-4)


def test_cross_entropy_loss_module():
    m = lk.LigerCrossEntropyLoss(ignore_index=3, label_smoothing=0.1)
    logits = torch.randn(4, 6, 100, device=DEV, requires_grad=True)
    target = torch.randint(0, 100, (4, 6), device=DEV)
    out = m(logits.view(-1, 100), target.view(-1))
    ref = F.cross_entropy(logits.detach().double().view(-1, 100), target.view(-1), ignore_index=3, label_smoothing=0.1)
    check(out, ref, torch.float32, "module", atol=1e-5)


# ------------------------------------------------------------------ FusedLinearCrossEntropy
def _flce_tol(dtype):
    # The logits chunk is a GEMM in `dtype` (fp32 accumulation) rounded to `dtype`: bf16/fp16 logits
    # carry one rounding each (~4e-3 / 5e-4 relative), which moves the loss and the gradients.
    return {torch.float32: 2e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2}[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", ["plain", "all"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("chunk_rows", [0, 16])
def test_fused_linear_cross_entropy(dtype, reduction, case, bias, chunk_rows):
    tokens, hidden, vocab = 67, 96, 1001
    c = CE_CASES[case]
    if chunk_rows:
        lk.set_tunables("fused_linear_cross_entropy", {"chunk_rows": chunk_rows})
    x = (torch.randn(tokens, hidden, device=DEV) * 0.5).to(dtype).requires_grad_()
    w = (torch.randn(vocab, hidden, device=DEV) * 0.2).to(dtype).requires_grad_()
    b = (torch.randn(vocab, device=DEV) * 0.1).to(dtype).requires_grad_() if bias else None
    target = torch.randint(0, vocab, (tokens,), device=DEV)
    if c.get("ignore_frac"):
        target[torch.rand(tokens, device=DEV) < c["ignore_frac"]] = -100
    cw = torch.rand(vocab, device=DEV) + 0.5 if c.get("weights") else None
    kw = dict(label_smoothing=c.get("label_smoothing", 0.0), lse_square_scale=c.get("lse_square_scale", 0.0),
              softcap=c.get("softcap"), reduction=reduction)
    loss, z = LF.fused_linear_cross_entropy(x, w, target, bias=b, ce_weight=cw, return_z_loss=True, **kw)
    xd = x.detach().double().requires_grad_()
    wd = w.detach().double().requires_grad_()
    bd = b.detach().double().requires_grad_() if bias else None
    logits = xd @ wd.T + (bd if bias else 0)
    loss_ref, z_ref = ref_cross_entropy(logits, target, weight=cw, **kw)
    t = _flce_tol(dtype)
    check(loss, loss_ref.detach(), torch.float32, "loss", atol=t * max(1.0, float(loss_ref.abs().max())), rtol=t, rel=t)
    g = torch.rand_like(loss) + 0.5 if reduction == "none" else torch.tensor(0.7, device=DEV)
    loss.backward(g)
    loss_ref.backward(g.double())
    check(x.grad, xd.grad, dtype, "dinput", atol=t * float(xd.grad.abs().max()), rtol=t, rel=t)
    check(w.grad, wd.grad, dtype, "dweight", atol=t * float(wd.grad.abs().max()), rtol=t, rel=t)
    if bias:
        check(b.grad, bd.grad, dtype, "dbias", atol=t * float(bd.grad.abs().max()), rtol=t, rel=t)


def test_fused_linear_cross_entropy_fp32_master_weight():
    tokens, hidden, vocab = 50, 64, 3000
    x = torch.randn(tokens, hidden, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    w = (torch.randn(vocab, hidden, device=DEV) * 0.1).requires_grad_()
    target = torch.randint(0, vocab, (tokens,), device=DEV)
    loss = LF.fused_linear_cross_entropy(x, w, target, accum_dtype=torch.float32)
    loss.backward()
    assert w.grad.dtype == torch.float32 and x.grad.dtype == torch.bfloat16
    wd = w.detach().to(torch.bfloat16).double().requires_grad_()
    ref = F.cross_entropy(x.detach().double() @ wd.T, target)
    ref.backward()
    check(w.grad, wd.grad, torch.bfloat16, "dweight fp32", atol=3e-2 * float(wd.grad.abs().max()), rel=3e-2)


def test_flce_loss_module_matches_ce_of_linear():
    m = lk.LigerFusedLinearCrossEntropyLoss(label_smoothing=0.05)
    x = torch.randn(4, 9, 32, device=DEV, requires_grad=True)
    w = torch.randn(500, 32, device=DEV, requires_grad=True)
    t = torch.randint(0, 500, (4, 9), device=DEV)
    out = m(w, x, t)
    ref = F.cross_entropy((x.double() @ w.double().T).view(-1, 500), t.view(-1), label_smoothing=0.05)
    check(out, ref.detach(), torch.float32, "module", atol=2e-4, rtol=2e-4, rel=2e-4)


# ------------------------------------------------------------------ errors and devices
def test_clear_errors():
    x = torch.randn(4, 8)
    w = torch.ones(8)
    with pytest.raises(ValueError, match="CUDA"):
        LF.rms_norm(x, w)
    with pytest.raises(TypeError, match="dtype"):
        LF.rms_norm(torch.randn(4, 8, device=DEV, dtype=torch.float64), torch.ones(8, device=DEV, dtype=torch.float64))
    with pytest.raises(TypeError, match="int64"):
        LF.cross_entropy(torch.randn(4, 8, device=DEV), torch.zeros(4, device=DEV, dtype=torch.int32))
    with pytest.raises(ValueError, match="tunable"):
        lk.set_tunables("rms_norm", {"no_such_field": 1})


def test_library_error_carries_last_error():
    lk.set_tunables("rms_norm", {"threads_per_block": 33})  # not a multiple of 32: INVALID_ARGUMENT
    with pytest.raises(lk.LigerKernelError) as info:
        LF.rms_norm(torch.randn(4, 64, device=DEV), torch.ones(64, device=DEV))
    assert info.value.status_name == "INVALID_ARGUMENT" and info.value.detail


def _second_gpu_cases():
    """op name -> fn(device) returning (liger outputs, reference outputs) over fp32 tensors on device;
    the references are PyTorch expressions on the same device, gradients included."""

    def grads(out, leaves):
        return list(torch.autograd.grad(out.float().square().sum(), leaves))

    def norm(dev):
        x = torch.randn(8, 128, device=dev, requires_grad=True)
        w = (1 + 0.1 * torch.randn(128, device=dev)).requires_grad_()
        y = LF.rms_norm(x, w)
        ref = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6) * w
        return [y, *grads(y, [x, w])], [ref, *grads(ref, [x, w])]

    def layer(dev):
        x = torch.randn(8, 96, device=dev, requires_grad=True)
        w = torch.randn(96, device=dev, requires_grad=True)
        b = torch.randn(96, device=dev, requires_grad=True)
        y = LF.layer_norm(x, w, b)
        ref = F.layer_norm(x, (96,), w, b, 1e-5)
        return [y, *grads(y, [x, w, b])], [ref, *grads(ref, [x, w, b])]

    def add(dev):
        x = torch.randn(8, 128, device=dev, requires_grad=True)
        r = torch.randn(8, 128, device=dev, requires_grad=True)
        w = torch.randn(128, device=dev, requires_grad=True)
        y, s_out = LF.fused_add_rms_norm(x, r, w)
        s_ref = x + r
        ref = s_ref * torch.rsqrt(s_ref.square().mean(-1, keepdim=True) + 1e-6) * w
        out = y.float().square().sum() + s_out.float().sum()
        out_ref = ref.square().sum() + s_ref.sum()
        return ([y, s_out, *torch.autograd.grad(out, [x, r, w])],
                [ref, s_ref, *torch.autograd.grad(out_ref, [x, r, w])])

    def glu(dev):
        a = torch.randn(8, 200, device=dev, requires_grad=True)
        b = torch.randn(8, 200, device=dev, requires_grad=True)
        y = LF.swiglu(a, b)
        ref = F.silu(a) * b
        return [y, *grads(y, [a, b])], [ref, *grads(ref, [a, b])]

    def rope(dev):
        q = torch.randn(2, 4, 5, 16, device=dev, requires_grad=True)
        k = torch.randn(2, 2, 5, 16, device=dev, requires_grad=True)
        pos = torch.arange(5, device=dev, dtype=torch.float32)[None, :, None]
        inv = 1.0 / (10000 ** (torch.arange(0, 16, 2, device=dev, dtype=torch.float32) / 16))
        emb = torch.cat([pos * inv] * 2, dim=-1)  # [1, S, D], as transformers' rotary embedding
        cos, sin = emb.cos(), emb.sin()
        qo, ko = LF.rope(q, k, cos, sin)
        qr, kr = _rope_ref(q, k, cos, sin)
        out = qo.square().sum() + ko.square().sum()
        out_ref = qr.square().sum() + kr.square().sum()
        return [qo, ko, *torch.autograd.grad(out, [q, k])], [qr, kr, *torch.autograd.grad(out_ref, [q, k])]

    def ce(dev):
        logits = torch.randn(16, 301, device=dev, requires_grad=True)
        target = torch.randint(0, 301, (16,), device=dev)
        loss = LF.cross_entropy(logits, target)
        ref = F.cross_entropy(logits, target)
        return [loss, *torch.autograd.grad(loss, [logits])], [ref, *torch.autograd.grad(ref, [logits])]

    def flce(dev):
        x = torch.randn(16, 64, device=dev, requires_grad=True)
        w = (0.1 * torch.randn(301, 64, device=dev)).requires_grad_()
        target = torch.randint(0, 301, (16,), device=dev)
        loss = LF.fused_linear_cross_entropy(x, w, target)
        ref = F.cross_entropy(x @ w.T, target)
        return [loss, *torch.autograd.grad(loss, [x, w])], [ref, *torch.autograd.grad(ref, [x, w])]

    return {"rms_norm": norm, "layer_norm": layer, "fused_add_rms_norm": add, "swiglu": glu, "rope": rope,
            "cross_entropy": ce, "fused_linear_cross_entropy": flce}


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs (launch on the tensors' device, not the current one)")
@pytest.mark.parametrize("op", sorted(_second_gpu_cases()))
def test_runs_on_the_tensors_device(op):
    """Device 0 current, every tensor on cuda:1: the library must launch on cuda:1 (its stream, its
    cuBLAS handle) and agree with PyTorch there; a launch on device 0 would fail or read garbage."""
    with torch.cuda.device(0):
        got, ref = _second_gpu_cases()[op]("cuda:1")
        torch.cuda.synchronize(1)
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.device == torch.device("cuda:1"), f"{op} output {i} on {g.device}"
        check(g, r.detach(), torch.float32, f"{op} output {i} on cuda:1")


# ------------------------------------------------------------------ RoPE
def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def _rope_ref(q, k, cos, sin, unsqueeze_dim=1):
    c = cos.unsqueeze(unsqueeze_dim)
    s = sin.unsqueeze(unsqueeze_dim)
    return q * c + _rotate_half(q) * s, k * c + _rotate_half(k) * s


def _cos_sin(B, S, D, dtype, per_batch):
    pos = torch.arange(S, device=DEV, dtype=torch.float64)[None].repeat(B if per_batch else 1, 1)
    if per_batch:
        pos = pos + torch.arange(B, device=DEV, dtype=torch.float64)[:, None] * 3  # different positions per batch
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2, device=DEV, dtype=torch.float64) / D))
    emb = torch.cat([pos[..., None] * inv] * 2, dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("B,Hq,Hk,S,D", [(2, 4, 2, 7, 64), (1, 32, 8, 129, 128), (3, 3, 1, 5, 6)])
@pytest.mark.parametrize("per_batch", [False, True])
@pytest.mark.parametrize("layout", ["bhsd", "hf_transposed"])
def test_rope(dtype, B, Hq, Hk, S, D, per_batch, layout):
    if layout == "bhsd":
        q = torch.randn(B, Hq, S, D, device=DEV, dtype=dtype)
        k = torch.randn(B, Hk, S, D, device=DEV, dtype=dtype)
    else:  # what LlamaAttention passes: proj(x).view(B, S, H, D).transpose(1, 2), not contiguous
        q = torch.randn(B, S, Hq, D, device=DEV, dtype=dtype).transpose(1, 2)
        k = torch.randn(B, S, Hk, D, device=DEV, dtype=dtype).transpose(1, 2)
    q.requires_grad_()
    k.requires_grad_()
    cos, sin = _cos_sin(B, S, D, dtype, per_batch)
    q_before, k_before = q.detach().clone(), k.detach().clone()
    qo, ko = lk.liger_rotary_pos_emb(q, k, cos, sin)
    assert torch.equal(q.detach(), q_before) and torch.equal(k.detach(), k_before), "rope modified its inputs"
    qd, kd = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    qr, kr = _rope_ref(qd, kd, cos.double(), sin.double())
    check(qo, qr.detach(), dtype, "rope q")
    check(ko, kr.detach(), dtype, "rope k")
    dq, dk = torch.randn_like(qo), torch.randn_like(ko)
    torch.autograd.backward([qo, ko], [dq, dk])
    torch.autograd.backward([qr, kr], [dq.double(), dk.double()])
    check(q.grad, qd.grad, dtype, "rope dq")
    check(k.grad, kd.grad, dtype, "rope dk")
    # Outputs keep the inputs' layout, as PyTorch's elementwise ops do: HF-layout q/k stay
    # [B, T, H, D] storage (the layout the library stages whole token rows for).
    def layout(t):  # strides of the dimensions that have any (size-1 ones carry none)
        return [st for st, n in zip(t.stride(), t.shape) if n > 1]

    assert layout(qo) == layout(q) and layout(ko) == layout(k), (qo.stride(), q.stride(), ko.stride(), k.stride())


def test_rope_odd_head_dim_is_a_library_error():
    q = torch.randn(1, 2, 3, 5, device=DEV)
    cos = torch.randn(1, 3, 5, device=DEV)
    with pytest.raises((lk.LigerKernelError, ValueError)):
        lk.liger_rotary_pos_emb(q, q.clone(), cos, cos)


# ------------------------------------------------------------------ torch.compile
def test_torch_compile_matches_eager_without_graph_breaks():
    """A small block (RMSNorm -> RoPE-free MLP with SwiGLU -> LayerNorm -> CE) compiled with
    fullgraph=True (a graph break would raise) gives the eager numbers, forward and backward."""
    torch._dynamo.reset()
    H, I, V, N = 64, 96, 301, 24

    def block(x, wn, wg, wu, wd, wl, bl, target, wlm):
        h = LF.rms_norm(x, wn)
        h = LF.swiglu(h @ wg.T, h @ wu.T) @ wd.T
        r = LF.layer_norm(h, wl, bl)
        y, s = LF.fused_add_rms_norm(r, x, wn)
        loss = LF.cross_entropy(y @ wlm.T, target, label_smoothing=0.1)
        return loss + LF.fused_linear_cross_entropy(s, wlm, target, reduction="sum") * 1e-3

    def make():
        g = torch.Generator(device=DEV).manual_seed(7)
        r = lambda *s: (torch.randn(*s, device=DEV, generator=g) * 0.3).requires_grad_()  # noqa: E731
        return [r(N, H), r(H), r(I, H), r(I, H), r(H, I), r(H), r(H),
                torch.randint(0, V, (N,), device=DEV, generator=g), r(V, H)]

    eager_in, comp_in = make(), make()
    le = block(*eager_in)
    le.backward()
    compiled = torch.compile(block, fullgraph=True)
    lc = compiled(*comp_in)
    lc.backward()
    check(lc.detach(), le.detach().double(), torch.float32, "compiled loss", atol=1e-5, rtol=1e-5)
    for i, (a, b) in enumerate(zip(comp_in, eager_in)):
        if isinstance(a, torch.Tensor) and a.requires_grad:
            check(a.grad, b.grad.double(), torch.float32, f"compiled grad {i}", atol=1e-5, rtol=1e-4, rel=1e-5)
