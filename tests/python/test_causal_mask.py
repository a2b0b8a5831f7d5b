"""The causal-mask graph pass (liger_kernels/compile/causal_mask.py) and its installation.

1. The proof, on small graphs: a constant causal mask (bool, or 0 / -inf float) becomes
   is_causal=True; a mask computed from an input, a finite bias, a shifted or windowed pattern, or a
   non-square one stays.
2. transformers under torch.compile: the premise (the compiled llama graph hands SDPA a mask), the
   rewrite through liger_kernels.compile.Backend and through Inductor's pre-grad slot (what a
   patched model gets), and the cases that must keep their mask (padding, a window shorter than the
   sequence).
3. Compiled loss and gradients with the pass match the eager model (fp32): the patched llama, and
   mistral with a window shorter and longer than the sequence.
4. Apply installs it, revert removes it, two integrations share it, the environment switch keeps
   it out.
"""
import copy

import pytest
import torch
import torch.nn.functional as F

from helpers import check, check_step_parity, mini_model

from liger_kernels.compile import Backend
from liger_kernels.compile.causal_mask import keep_causal_masks_implicit

DEV = "cuda"


class _RecordSdpa:
    """An inner backend that records, per SDPA call of each graph, (has a mask, is_causal)."""

    def __init__(self):
        self.calls = []

    def __call__(self, gm, example_inputs):
        for node in gm.graph.nodes:
            if node.op == "call_function" and "scaled_dot_product_attention" in str(node.target):
                mask = node.kwargs.get("attn_mask", node.args[3] if len(node.args) > 3 else None)
                self.calls.append((mask is not None, bool(node.kwargs.get("is_causal", False))))
        return gm.forward


def _run(fn, *args, causal_mask=True):
    torch._dynamo.reset()
    rec = _RecordSdpa()
    backend = Backend(policy="never", inner=rec, causal_mask=causal_mask)
    out = torch.compile(fn, backend=backend)(*args)
    torch._dynamo.reset()
    assert rec.calls, "the compiled graph has no scaled_dot_product_attention call"
    return out, rec.calls


# ------------------------------------------------------------------ 1. the proof on small graphs
T = 32


def _qkv():
    return [torch.randn(2, 4, T, 16, device=DEV) for _ in range(3)]


def _positions():
    return torch.arange(T, device=DEV)


def bool_causal(q, k, v):
    i = _positions()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=i[None, :] <= i[:, None])


def float_causal(q, k, v):
    i = _positions()
    bias = torch.zeros(T, T, device=DEV).masked_fill(i[None, :] > i[:, None], torch.finfo(torch.float32).min)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias[None, None])


def shifted(q, k, v):  # the diagonal hidden: not SDPA's causal pattern
    i = _positions()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=(i[None, :] < i[:, None]) | (i[:, None] == 0))


def windowed(q, k, v):
    i = _positions()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=(i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < 8))


def finite_bias(q, k, v):  # ALiBi-like: a real bias, not a pattern
    i = _positions().float()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=-(i[:, None] - i[None, :]).abs()[None, None])


def from_input(q, k, v, keep):
    i = _positions()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=(i[None, :] <= i[:, None]) & keep[:, None, None, :])


@pytest.mark.parametrize("fn,replaced", [(bool_causal, True), (float_causal, True), (shifted, False),
                                         (windowed, False), (finite_bias, False)],
                         ids=["bool-causal", "float-causal", "shifted", "windowed", "finite-bias"])
def test_only_a_constant_causal_mask_is_replaced(fn, replaced):
    q, k, v = _qkv()
    out, calls = _run(fn, q, k, v)
    assert calls == [(not replaced, replaced)], calls
    check(out, fn(q, k, v).double(), torch.float32, fn.__name__, atol=1e-5, rtol=1e-5)


def test_a_mask_computed_from_an_input_is_kept():
    q, k, v = _qkv()
    keep = torch.ones(2, T, dtype=torch.bool, device=DEV)
    out, calls = _run(from_input, q, k, v, keep)
    assert calls == [(True, False)], calls


def _graph_writing_a_buffer(written_into_mask: bool) -> torch.fx.GraphModule:
    """A graph whose mask is a module buffer (get_attr) that the graph edits in place, built by hand:
    symbolic_trace would run the in-place op at trace time and keep its result as a constant."""
    root = torch.nn.Module()
    root.register_buffer("allowed", torch.ones(T, T, dtype=torch.bool, device=DEV))
    g = torch.fx.Graph()
    q, k, v = (g.placeholder(name) for name in ("q", "k", "v"))
    written = g.call_method("tril_", (g.get_attr("allowed"),))
    # The in-place result is the mask, or the buffer is read again after the write: either way its
    # compile-time value is not its run-time one.
    mask = written if written_into_mask else g.get_attr("allowed")
    g.output(g.call_function(F.scaled_dot_product_attention, (q, k, v), {"attn_mask": mask}))
    return torch.fx.GraphModule(root, g)


@pytest.mark.parametrize("written_into_mask", [True, False], ids=["in-place-result", "written-elsewhere"])
def test_a_mask_from_a_buffer_the_graph_writes_in_place_is_kept_and_the_buffer_untouched(written_into_mask):
    gm = _graph_writing_a_buffer(written_into_mask)
    q, k, v = _qkv()
    for n, value in zip([n for n in gm.graph.nodes if n.op == "placeholder"], (q, k, v)):
        n.meta["val"] = value
    lines = keep_causal_masks_implicit(gm, log=False)
    assert len(lines) == 1 and "kept the mask" in lines[0] and "allowed" in lines[0], lines
    # Evaluating the mask would have run tril_ on the real buffer at compile time.
    assert bool(gm.allowed.all()), "the pass wrote the module's buffer"
    sdpa = [n for n in gm.graph.nodes if n.op == "call_function" and "scaled_dot_product_attention" in str(n.target)]
    assert sdpa and not sdpa[0].kwargs.get("is_causal", False)
    # The same graph without the write is a constant (all-visible, not causal) mask, evaluated.
    assert "not causal" in keep_causal_masks_implicit(_graph_without_write(), log=False)[0]


def _graph_without_write() -> torch.fx.GraphModule:
    root = torch.nn.Module()
    root.register_buffer("allowed", torch.ones(T, T, dtype=torch.bool, device=DEV))
    g = torch.fx.Graph()
    q, k, v = (g.placeholder(name) for name in ("q", "k", "v"))
    g.output(g.call_function(F.scaled_dot_product_attention, (q, k, v), {"attn_mask": g.get_attr("allowed")}))
    gm = torch.fx.GraphModule(root, g)
    for n, value in zip([n for n in gm.graph.nodes if n.op == "placeholder"], _qkv()):
        n.meta["val"] = value
    return gm


def test_the_pass_reports_each_decision():
    torch._dynamo.reset()
    lines = []

    def capture(gm, example_inputs):
        lines.extend(keep_causal_masks_implicit(gm))
        return gm.forward

    torch.compile(bool_causal, backend=capture)(*_qkv())
    torch.compile(shifted, backend=capture)(*_qkv())
    torch._dynamo.reset()
    assert any("is_causal=True (a constant causal mask 32x32)" in ln for ln in lines), lines
    assert any("kept the mask (a constant mask that is not causal)" in ln for ln in lines), lines


# ------------------------------------------------------------------ 2-4. transformers
try:
    import transformers  # noqa: F401

    import liger_kernels.transformers as LT
    from liger_kernels.transformers import _causal_mask
except ImportError as _exc:  # the graph tests above still run
    LT = _causal_mask = None
    _NO_TRANSFORMERS = f"transformers not available: {_exc}"
needs_transformers = pytest.mark.skipif(LT is None, reason=globals().get("_NO_TRANSFORMERS", ""))


def _sdpa_model(model_type, **overrides):
    model = mini_model(model_type, torch.float32, **overrides)
    model.config._attn_implementation = "sdpa"
    return model


def _ids(T=64, seed=1):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(0, 1024, (2, T), generator=g).to(DEV)


def _model_calls(model, ids, attention_mask=None, causal_mask=True):
    def step(i, m):
        return model(input_ids=i, attention_mask=m, labels=i).loss

    loss, calls = _run(step, ids, attention_mask, causal_mask=causal_mask)
    loss.backward()
    return calls


@pytest.fixture(autouse=True)
def uninstalled(monkeypatch):
    """Each test starts with Inductor's slot as it was and no holders, whatever earlier modules left."""
    from torch._inductor import config as inductor_config

    if _causal_mask is None:
        yield
        return
    current = inductor_config.pre_grad_custom_pass
    monkeypatch.setattr(inductor_config, "pre_grad_custom_pass",
                        _causal_mask._previous if current is _causal_mask._installed and current else current)
    monkeypatch.setattr(_causal_mask, "_holders", set())
    monkeypatch.setattr(_causal_mask, "_installed", None)
    monkeypatch.setattr(_causal_mask, "_previous", None)
    yield


@needs_transformers
def test_transformers_hands_compiled_sdpa_a_mask_without_the_pass():
    calls = _model_calls(_sdpa_model("llama"), _ids(), causal_mask=False)
    assert all(has_mask for has_mask, _ in calls), f"transformers no longer materialises the mask here: {calls}"


@needs_transformers
def test_the_backend_makes_llama_sdpa_causal_without_a_mask():
    calls = _model_calls(_sdpa_model("llama"), _ids())
    assert all(not has_mask and causal for has_mask, causal in calls), calls


@needs_transformers
def test_a_padding_mask_is_kept():
    ids = _ids()
    pad = torch.ones_like(ids)
    pad[0, :7] = 0
    calls = _model_calls(_sdpa_model("llama"), ids, attention_mask=pad)
    assert all(has_mask for has_mask, _ in calls), calls


@needs_transformers
def test_a_window_shorter_than_the_sequence_is_kept():
    calls = _model_calls(_sdpa_model("mistral", sliding_window=16), _ids(T=64))
    assert all(has_mask for has_mask, _ in calls), calls


def _loss_and_grads(model, ids, run=None):
    out = (model if run is None else run)(input_ids=ids, labels=ids)
    out.loss.backward()
    return out.loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


@needs_transformers
@pytest.mark.parametrize("model_type,overrides,replaced", [("llama", {}, True), ("mistral", {"sliding_window": 16}, False),
                                                           ("mistral", {"sliding_window": 256}, True)],
                         ids=["llama-patched", "mistral-window16", "mistral-window256"])
def test_patched_model_compiled_by_inductor_matches_eager(model_type, overrides, replaced, caplog):
    LT.MODEL_TYPE_TO_APPLY_LIGER_FN[model_type]()  # installs the pass into Inductor's pre-grad slot
    try:
        assert _causal_mask.status().startswith("installed"), _causal_mask.status()
        torch._dynamo.reset()
        eager = _sdpa_model(model_type, **overrides)
        compiled = copy.deepcopy(eager)
        ids = _ids(T=64, seed=3)
        le, ge = _loss_and_grads(eager, ids)
        with caplog.at_level("INFO", logger="liger_kernels.compile"):
            lc, gc = _loss_and_grads(compiled, ids, run=torch.compile(compiled))
        decided = [r.getMessage() for r in caplog.records if r.getMessage().startswith("causal mask:")]
        assert decided, "Inductor did not run the pre-grad pass"
        assert any("is_causal=True" in d for d in decided) == replaced, decided
        check_step_parity(model_type, lc, le, gc, ge)
    finally:
        LT.MODEL_TYPE_TO_REVERT_LIGER_FN[model_type]()
        torch._dynamo.reset()


@needs_transformers
def test_apply_installs_and_the_last_revert_restores():
    from torch._inductor import config as inductor_config

    before = inductor_config.pre_grad_custom_pass
    LT.MODEL_TYPE_TO_APPLY_LIGER_FN["llama"]()
    LT.MODEL_TYPE_TO_APPLY_LIGER_FN["mistral"]()
    try:
        installed = inductor_config.pre_grad_custom_pass
        assert installed is not before and installed is _causal_mask._installed
        LT.MODEL_TYPE_TO_REVERT_LIGER_FN["llama"]()
        assert inductor_config.pre_grad_custom_pass is installed, "released while mistral holds it"
    finally:
        LT.MODEL_TYPE_TO_REVERT_LIGER_FN["llama"]()
        LT.MODEL_TYPE_TO_REVERT_LIGER_FN["mistral"]()
    assert inductor_config.pre_grad_custom_pass is before


@needs_transformers
def test_a_users_own_pre_grad_pass_still_runs(monkeypatch):
    from torch._inductor import config as inductor_config

    seen = []
    monkeypatch.setattr(inductor_config, "pre_grad_custom_pass", lambda graph: seen.append(len(graph.nodes)))
    assert LT.implicit_causal_mask_under_compile()
    try:
        torch._dynamo.reset()
        torch.compile(bool_causal)(*_qkv())
    finally:
        LT.implicit_causal_mask_under_compile(False)
        torch._dynamo.reset()
    assert seen, "the user's pass was dropped"


@needs_transformers
def test_the_environment_switch_keeps_it_out(monkeypatch):
    from torch._inductor import config as inductor_config

    before = inductor_config.pre_grad_custom_pass
    monkeypatch.setenv(_causal_mask.ENV, "0")
    assert not LT.implicit_causal_mask_under_compile()
    assert f"{_causal_mask.ENV}=0" in _causal_mask.status()
    assert inductor_config.pre_grad_custom_pass is before
    assert Backend().causal_mask is False
