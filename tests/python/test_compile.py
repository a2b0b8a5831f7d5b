"""torch.compile support of every custom op and every shipped integration.

1. Every torch.ops.liger.* op, reached through the public functions on realistic inputs (contiguous,
   HF-layout views, row slices; fp32/fp16/bf16), passes torch.library.opcheck: schema, fake
   implementation (shape, dtype, strides, storage offset against the real output), autograd
   registration and dynamo tracing. The calls are recorded from the public functions with a dispatch
   mode rather than written out by hand, so a new op or a new internal call is covered as soon as a
   public function reaches it.
2. Every integration registered in liger_kernels.transformers compiles: a mini model of the
   model type, patched, under torch.compile gives the eager patched model's loss and gradients
   (fp32, tolerance below); llama also under fullgraph=True when the unpatched model allows it.
"""
import copy

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from helpers import check, check_step_parity, mini_model

import liger_kernels.functional as LF

DEV = "cuda"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


class _RecordLigerCalls(TorchDispatchMode):
    """Records (op, args, kwargs) of every torch.ops.liger.* call; under a dispatch mode the public
    functions take the registered ops (not the direct eager path), as under torch.compile."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "liger":
            # The ops run inside autograd.Functions (below autograd): record plain tensors, as they see.
            clone = lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v  # noqa: E731
            self.calls.append((func, tuple(clone(a) for a in args), {k: clone(v) for k, v in kwargs.items()}))
        return func(*args, **kwargs)


def _hf_layout(B, T, H, D, dtype):
    """What LlamaAttention passes to apply_rotary_pos_emb: proj(x).view(B, T, H, D).transpose(1, 2)."""
    return torch.randn(B, T, H * D, device=DEV, dtype=dtype).view(B, T, H, D).transpose(1, 2)


def _cases(dtype):
    """(name, thunk) pairs: each thunk runs forward and backward of one public function."""
    r = lambda *s, **kw: torch.randn(*s, device=DEV, dtype=kw.pop("dt", dtype), **kw)  # noqa: E731
    rows, cols = 48, 320

    def norm_input(layout):
        if layout == "slice":  # a row-strided view (every other row)
            return r(2 * rows, cols)[::2].requires_grad_()
        if layout == "permuted":  # dense but not contiguous
            return r(cols, 4, rows // 4).permute(1, 2, 0).requires_grad_()
        return r(rows, cols, requires_grad=True)

    def bwd(*outs):
        loss = sum((o.float() * torch.randn_like(o.float())).sum() for o in outs)
        loss.backward()

    cases = []
    for layout in ("contiguous", "slice", "permuted"):
        for in_place in (False, True):
            cases.append((f"rms_norm-{layout}-inplace{in_place}", lambda layout=layout, ip=in_place: bwd(
                LF.rms_norm(norm_input(layout), r(cols, requires_grad=True), casting_mode="llama", in_place=ip))))
        cases.append((f"rms_norm_gemma-{layout}", lambda layout=layout: bwd(
            LF.rms_norm(norm_input(layout), r(cols, requires_grad=True), offset=1.0, casting_mode="gemma"))))
        cases.append((f"fused_add_rms_norm-{layout}", lambda layout=layout: bwd(
            *LF.fused_add_rms_norm(norm_input(layout), norm_input(layout), r(cols, requires_grad=True)))))
        cases.append((f"layer_norm-{layout}", lambda layout=layout: bwd(
            LF.layer_norm(norm_input(layout), r(cols, requires_grad=True), r(cols, requires_grad=True)))))
    for in_place in (False, True):
        for fn in (LF.swiglu, LF.geglu):
            cases.append((f"{fn.__name__}-inplace{in_place}", lambda fn=fn, ip=in_place: bwd(
                fn(r(rows, cols, requires_grad=True), r(rows, cols, requires_grad=True), in_place_backward=ip))))
    B, T, D = 2, 24, 64
    for layout in ("hf", "contiguous"):
        def rope_case(layout=layout):
            if layout == "hf":
                q, k = _hf_layout(B, T, 4, D, dtype), _hf_layout(B, T, 2, D, dtype)
            else:
                q, k = r(B, 4, T, D), r(B, 2, T, D)
            q.requires_grad_()
            k.requires_grad_()
            cos, sin = r(1, T, D), r(1, T, D)
            bwd(*LF.rope(q, k, cos, sin))
        cases.append((f"rope-{layout}", rope_case))
    V = 500
    for reduction in ("mean", "sum", "none"):
        def ce_case(reduction=reduction):
            target = torch.randint(0, V, (rows,), device=DEV)
            target[:3] = -100
            bwd(LF.cross_entropy(r(rows, V, requires_grad=True), target, reduction=reduction))
        cases.append((f"cross_entropy-{reduction}", ce_case))

        def flce_case(reduction=reduction):
            target = torch.randint(0, V, (rows,), device=DEV)
            bwd(LF.fused_linear_cross_entropy(r(rows, 64, requires_grad=True), r(V, 64, requires_grad=True), target,
                                              reduction=reduction))
        cases.append((f"fused_linear_cross_entropy-{reduction}", flce_case))
    return cases


def _recorded_calls(dtype):
    out = []
    for name, thunk in _cases(dtype):
        rec = _RecordLigerCalls()
        with rec:
            thunk()
        assert rec.calls, f"{name}: no torch.ops.liger call was recorded"
        out += [(name, c) for c in rec.calls]
    return out


def test_every_registered_op_is_reached():
    """Each op the package registers is exercised by the recorded cases (a new op needs a case)."""
    reached = {str(func.overloadpacket) for _, (func, _, _) in _recorded_calls(torch.float32)}
    # The library's own ops (kernel-dev's generated bindings register theirs in the same namespace
    # and are covered by their own tests): each is bound to a module variable of its own name.
    from torch._library.custom_ops import CustomOpDef

    from liger_kernels import _torch_ops
    from liger_kernels.ops import glu, losses, norms, rope

    library_ops = {f"liger.{name}" for module in (glu, losses, norms, rope)
                   for name, value in vars(module).items() if isinstance(value, CustomOpDef)}
    # The launch ops registered through _torch_ops.define (C++ kernels or Python custom ops).
    library_ops |= {f"liger.{name}" for name in _torch_ops.DEFINED}
    assert library_ops, "no torch.library custom ops found in liger_kernels.ops"
    missing = sorted(library_ops - reached)
    assert not missing, f"ops never reached by a public function in this test: {missing}"


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16"])
def test_opcheck_every_op(dtype):
    failures = []
    seen = set()
    for name, (func, args, kwargs) in _recorded_calls(dtype):
        meta = (str(func), tuple((tuple(a.shape), a.stride(), a.dtype) if isinstance(a, torch.Tensor) else a
                                 for a in args))
        if meta in seen:
            continue
        seen.add(meta)
        try:
            torch.library.opcheck(func, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - collect every failing op, report all
            failures.append(f"{name}: {func}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    assert not failures, "opcheck failed:\n" + "\n".join(failures)


def test_fake_outputs_match_real_layout():
    """The check torch.compile's crash came from, stated directly: for every recorded call, the fake
    implementation's outputs have the real outputs' shape, dtype and strides."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    bad = []
    for name, (func, args, kwargs) in _recorded_calls(torch.bfloat16):
        if func._schema.is_mutable:
            continue
        real = func(*[a.detach() if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
        mode = FakeTensorMode()
        fargs = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        with mode:
            fake = func(*fargs, **kwargs)
        reals = real if isinstance(real, (tuple, list)) else (real,)
        fakes = fake if isinstance(fake, (tuple, list)) else (fake,)
        for i, (rt, ft) in enumerate(zip(reals, fakes)):
            if rt is None:
                continue
            significant = lambda t: tuple(s for s, n in zip(t.stride(), t.shape) if n > 1)  # noqa: E731
            if rt.shape != ft.shape or rt.dtype != ft.dtype or significant(rt) != significant(ft):
                bad.append(f"{name}: {func} output {i}: real {tuple(rt.shape)} {rt.dtype} {rt.stride()} vs "
                           f"fake {tuple(ft.shape)} {ft.dtype} {ft.stride()}")
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------ integrations under torch.compile
try:
    import transformers

    import liger_kernels.transformers as LT
except ImportError as _exc:  # the op tests above still run
    transformers = LT = None
    _NO_TRANSFORMERS = f"transformers not available: {_exc}"
needs_transformers = pytest.mark.skipif(transformers is None, reason=globals().get("_NO_TRANSFORMERS", ""))

def _step(model, ids, labels, run=None):
    """Loss and parameter gradients of one forward+backward; `run` is the callable (a compiled
    wrapper, whose parameter names carry a prefix), `model` names the parameters."""
    out = (model if run is None else run)(input_ids=ids, labels=labels)
    out.loss.backward()
    return out.loss.detach().float(), {n: p.grad.detach().float().clone() for n, p in model.named_parameters()
                                       if p.grad is not None}


# The four integrations this test was written for (one per reference family, text-only heads that
# helpers.mini_model builds through AutoModelForCausalLM). The generated zoo (40+ model types,
# multimodal heads included) is verified by its own tests (scripts/gpu/zoo_verify.sh); compiling
# every one of them here would multiply this file's GPU time.
COMPILE_INTEGRATIONS = ("gemma", "gemma2", "llama", "qwen3_moe")
INTEGRATIONS = sorted(t for t in COMPILE_INTEGRATIONS if t in LT.MODEL_TYPE_TO_APPLY_LIGER_FN) if LT else ["none"]


@needs_transformers
@pytest.mark.parametrize("model_type", INTEGRATIONS)
def test_integration_compiles_and_matches_eager(model_type):
    torch._dynamo.reset()
    LT.MODEL_TYPE_TO_APPLY_LIGER_FN[model_type]()
    try:
        eager = mini_model(model_type, torch.float32)
        compiled_model = copy.deepcopy(eager)
        g = torch.Generator(device="cpu").manual_seed(1)
        ids = torch.randint(0, 1024, (2, 64), generator=g).to(DEV)
        labels = ids.clone()
        labels[0, -5:] = -100
        le, ge = _step(eager, ids, labels)
        lc, gc = _step(compiled_model, ids, labels, run=torch.compile(compiled_model))
        check_step_parity(f"{model_type} compiled", lc, le, gc, ge)
    finally:
        LT.MODEL_TYPE_TO_REVERT_LIGER_FN[model_type]()
        torch._dynamo.reset()


@needs_transformers
def test_llama_fullgraph_where_hf_allows_it():
    torch._dynamo.reset()
    g = torch.Generator(device="cpu").manual_seed(2)
    ids = torch.randint(0, 1024, (2, 32), generator=g).to(DEV)
    plain = mini_model("llama", torch.float32)
    try:
        torch.compile(plain, fullgraph=True)(input_ids=ids, labels=ids).loss.backward()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"HF's own llama does not compile with fullgraph=True here: {type(exc).__name__}")
    torch._dynamo.reset()
    LT.MODEL_TYPE_TO_APPLY_LIGER_FN["llama"]()
    try:
        model = mini_model("llama", torch.float32)
        ref = copy.deepcopy(model)
        loss = torch.compile(model, fullgraph=True)(input_ids=ids, labels=ids).loss
        check(loss.detach().reshape(1), ref(input_ids=ids, labels=ids).loss.detach().reshape(1).double(),
              torch.float32, "llama fullgraph loss", atol=1e-4, rtol=1e-4)
    finally:
        LT.MODEL_TYPE_TO_REVERT_LIGER_FN["llama"]()
        torch._dynamo.reset()
