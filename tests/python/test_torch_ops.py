"""The C++ dispatcher kernels of the launch ops (libliger_torch_ops.so) against the Python
implementations they replace: same outputs bit for bit (one CUDA kernel behind both), same layouts,
same errors, tunables honoured; and the fallback when the C++ library is switched off.

Skips visibly when the C++ library was not built (a build whose python3 has no CUDA PyTorch)."""
import os
import subprocess
import sys

import pytest
import torch

import liger_kernels as lk
from liger_kernels import _lib, _torch_ops
from liger_kernels.ops import glu, norms, rope

DEV = "cuda"
HERE = os.path.dirname(os.path.abspath(__file__))

if not _torch_ops.loaded():
    pytest.skip(f"the C++ op kernels are not in use: {_torch_ops.status()}", allow_module_level=True)


def _same(cpp, py, what):
    cpp = cpp if isinstance(cpp, (tuple, list)) else (cpp,)
    py = py if isinstance(py, (tuple, list)) else (py,)
    assert len(cpp) == len(py), what
    for i, (c, p) in enumerate(zip(cpp, py)):
        assert c.shape == p.shape and c.dtype == p.dtype, f"{what} output {i}: {c.shape}/{c.dtype} vs {p.shape}/{p.dtype}"
        assert c.stride() == p.stride(), f"{what} output {i}: strides {c.stride()} vs {p.stride()}"
        # Weight gradients are sums over row blocks: allow the last bit of their fp32 order.
        torch.testing.assert_close(c, p, rtol=1e-6, atol=1e-6, msg=f"{what} output {i}")


def test_status_names_the_cpp_library():
    assert lk.ops_backend().startswith("C++"), lk.ops_backend()
    assert torch.ops.liger.rope_fwd.default._schema.name == "liger::rope_fwd"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("weight_fp32", [False, True])
def test_norms_match_python(dtype, weight_fp32):
    rows, cols = 37, 1000
    x = torch.randn(3, rows, cols, device=DEV, dtype=dtype)[:, :, :]
    x_strided = torch.randn(rows, 2 * cols, device=DEV, dtype=dtype)[:, :cols]  # not contiguous
    w = torch.randn(cols, device=DEV, dtype=torch.float32 if weight_fp32 else dtype)
    b = torch.randn(cols, device=DEV, dtype=w.dtype)
    dy = torch.randn_like(x)
    # Forwards on a contiguous and a row-strided input; backwards on what the autograd Functions save
    # (contiguous tensors: the Python backwards assume it, the C++ ones copy otherwise).
    for xin in (x, x_strided):
        for mode in (0, 1, 2):
            args = (1e-6, 0.5 if mode == 1 else 0.0, mode)
            _same(norms._rms_norm_fwd(xin, w, *args, False), norms._rms_norm_fwd_python(xin, w, *args, False),
                  f"rms_norm_fwd mode {mode}")
        for bias in (b, None):
            _same(norms._layer_norm_fwd(xin, w, bias, 1e-5), norms._layer_norm_fwd_python(xin, w, bias, 1e-5),
                  "layer_norm_fwd")
    for mode in (0, 1, 2):
        args = (1e-6, 0.5 if mode == 1 else 0.0, mode)
        rstd = norms._rms_norm_fwd_python(x, w, *args, False)[1]
        for need_dw in (True, False):
            _same(norms._rms_norm_bwd(dy, x, w, rstd, *args, need_dw),
                  norms._rms_norm_bwd_python(dy, x, w, rstd, *args, need_dw), f"rms_norm_bwd {need_dw}")
        gc, gp = dy.clone(), dy.clone()
        _same((norms._rms_norm_bwd_inplace(gc, x, w, rstd, *args, True), gc),
              (norms._rms_norm_bwd_inplace_python(gp, x, w, rstd, *args, True), gp), "rms_norm_bwd_inplace")
    for bias in (b, None):
        _, mean, rstd = norms._layer_norm_fwd_python(x, w, bias, 1e-5)
        for need in ((True, bias is not None), (False, False)):
            _same(norms._layer_norm_bwd(dy, x, w, mean, rstd, *need),
                  norms._layer_norm_bwd_python(dy, x, w, mean, rstd, *need), f"layer_norm_bwd {need}")
    residual = torch.randn_like(x)
    out_c = norms._fused_add_rms_norm_fwd(x, residual, w, 1e-6, 0.0, 0, False)
    out_p = norms._fused_add_rms_norm_fwd_python(x, residual, w, 1e-6, 0.0, 0, False)
    _same(out_c, out_p, "fused_add_rms_norm_fwd")
    _, s, rstd = out_p
    for ds_out in (None, torch.randn_like(x)):
        _same(norms._fused_add_rms_norm_bwd(dy, ds_out, s, w, rstd, 1e-6, 0.0, 0, True),
              norms._fused_add_rms_norm_bwd_python(dy, ds_out, s, w, rstd, 1e-6, 0.0, 0, True), "fused_add_bwd")


@pytest.mark.parametrize("kind", ["swiglu", "geglu"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_glu_match_python(kind, dtype):
    a = torch.randn(5, 33, 700, device=DEV, dtype=dtype)
    b = torch.randn_like(a)
    dc = torch.randn_like(a)
    a_t = torch.randn(700, 165, device=DEV, dtype=dtype).t()  # not contiguous
    for aa, bb in ((a, b), (a_t, torch.randn_like(a_t))):
        _same(glu._glu_fwd(aa, bb, kind, False), glu._glu_fwd_python(aa, bb, kind, False), f"{kind} fwd")
    # The backward gets what GLUFunction saves: contiguous a and b.
    _same(glu._glu_bwd(dc, a, b, kind), glu._glu_bwd_python(dc, a, b, kind), f"{kind} bwd")
    ac, bc, ap, bp = a.clone(), b.clone(), a.clone(), b.clone()
    glu._glu_bwd_inplace(dc, ac, bc, kind)
    glu._glu_bwd_inplace_python(dc, ap, bp, kind)
    _same((ac, bc), (ap, bp), f"{kind} bwd in place")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["bhtd", "hf", "partial_cos"])
def test_rope_matches_python(dtype, layout):
    B, Hq, Hk, T, D = 2, 8, 2, 37, 64
    if layout == "hf":  # proj(x).view(B, T, H, D).transpose(1, 2)
        q = torch.randn(B, T, Hq, D, device=DEV, dtype=dtype).transpose(1, 2)
        k = torch.randn(B, T, Hk, D, device=DEV, dtype=dtype).transpose(1, 2)
    else:
        q = torch.randn(B, Hq, T, D, device=DEV, dtype=dtype)
        k = torch.randn(B, Hk, T, D, device=DEV, dtype=dtype)
    cos = torch.randn(1 if layout == "partial_cos" else B, T, D, device=DEV, dtype=torch.float32)
    sin = torch.randn_like(cos)
    _same(rope._rope_fwd(q, k, cos, sin), rope._rope_fwd_python(q, k, cos, sin), f"rope fwd {layout}")
    _same(rope._rope_bwd(q, k, cos, sin), rope._rope_bwd_python(q, k, cos, sin), f"rope bwd {layout}")


def test_errors_keep_their_python_types():
    with pytest.raises(ValueError, match="CUDA"):
        norms._rms_norm_fwd(torch.randn(4, 8), torch.ones(8), 1e-6, 0.0, 0, False)
    with pytest.raises(ValueError, match="weight shape"):
        norms._rms_norm_fwd(torch.randn(4, 8, device=DEV), torch.ones(9, device=DEV), 1e-6, 0.0, 0, False)
    with pytest.raises(TypeError, match="dtype"):
        glu._glu_fwd(torch.randn(4, 8, device=DEV, dtype=torch.float64),
                     torch.randn(4, 8, device=DEV, dtype=torch.float64), "swiglu", False)
    with pytest.raises(ValueError, match="same shape"):
        glu._glu_fwd(torch.randn(4, 8, device=DEV), torch.randn(4, 9, device=DEV), "swiglu", False)
    with pytest.raises(ValueError, match="kind"):
        glu._glu_fwd(torch.randn(4, 8, device=DEV), torch.randn(4, 8, device=DEV), "reglu", False)
    with pytest.raises(ValueError, match=r"\[B, H, T, D\]"):
        rope._rope_fwd(torch.randn(4, 8, device=DEV), torch.randn(4, 8, device=DEV),
                       torch.randn(4, 8, device=DEV), torch.randn(4, 8, device=DEV))


def test_tunables_reach_the_cpp_kernels():
    x = torch.randn(64, 512, device=DEV)
    w = torch.ones(512, device=DEV)
    lk.set_tunables("rms_norm", {"threads_per_block": 33})  # not a multiple of 32
    with pytest.raises(lk.LigerKernelError) as info:
        norms._rms_norm_fwd(x, w, 1e-6, 0.0, 0, False)
    assert info.value.function == "liger_rms_norm_forward"
    assert info.value.status_name == "INVALID_ARGUMENT" and info.value.detail
    lk.set_tunables("rms_norm", None)
    norms._rms_norm_fwd(x, w, 1e-6, 0.0, 0, False)  # the defaults again
    lk.set_tunables("swiglu", {"threads_per_block": 64, "vector_bytes": 4})  # valid, non-default
    a, b = torch.randn(64, 512, device=DEV), torch.randn(64, 512, device=DEV)
    _same(glu._glu_fwd(a, b, "swiglu", False), glu._glu_fwd_python(a, b, "swiglu", False), "swiglu tuned")
    _lib.reset_tunables()


def test_in_place_backward_bumps_versions():
    a = torch.randn(8, 64, device=DEV)
    b = torch.randn(8, 64, device=DEV)
    before = (a._version, b._version)
    torch.ops.liger.glu_bwd_inplace(torch.randn(8, 64, device=DEV), a, b, "swiglu")
    assert a._version > before[0] and b._version > before[1]


def test_switched_off_falls_back_to_python():
    script = (
        "import torch, liger_kernels as lk\n"
        "from liger_kernels import functional as LF\n"
        "assert lk.ops_backend().startswith('Python'), lk.ops_backend()\n"
        "x = torch.randn(16, 256, device='cuda', requires_grad=True)\n"
        "w = torch.ones(256, device='cuda', requires_grad=True)\n"
        "LF.rms_norm(x, w).sum().backward()\n"
        "assert x.grad is not None and torch.isfinite(x.grad).all()\n"
        "print(lk.ops_backend())\n"
    )
    env = dict(os.environ, LIGER_KERNELS_TORCH_OPS="0")
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "disabled by LIGER_KERNELS_TORCH_OPS=0" in done.stdout
