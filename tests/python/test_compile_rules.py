"""The compile backend's rules on graphs written the ways models write them (no GPU needed to match).

Each case is a small module in one model family's spelling (method vs function vs operator calls,
casts in different places, operands swapped); the test traces it, records shapes and dtypes as
Dynamo would, runs the backend's rewrite, and checks what was replaced, with which arguments, and
what was refused and why. Numerics of the rewritten graphs are checked on the GPU by
test_compile_backend.py."""
import operator

import pytest
import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp

from liger_kernels.compile import Backend
from liger_kernels.compile import replacements as R
from liger_kernels.compile.registry import DecisionTable, shape_class


class _InlineAll(fx.Tracer):
    """Traces through nn.Linear, nn.SiLU, nn.LayerNorm... as Dynamo does (symbolic_trace keeps them opaque)."""

    def is_leaf_module(self, m, qualname):
        return False


def _trace(module):
    return fx.GraphModule(module, _InlineAll().trace(module))


def _rewrite(module, *inputs, policy="always", ops=None, cast_module=True):
    if cast_module and inputs[0].is_floating_point():
        module = module.to(inputs[0].dtype)  # as models run: parameters in the activations' dtype
    gm = _trace(module)
    ShapeProp(gm).propagate(*inputs)
    b = Backend(policy=policy, inner="eager", table=DecisionTable("/nonexistent/decisions.json"), ops=ops)
    decisions = b.rewrite(gm, inputs)
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and getattr(n.target, "__module__", "") == R.__name__]
    return gm, decisions, calls


class LlamaRMSNorm(nn.Module):
    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class GemmaRMSNorm(nn.Module):
    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(n))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class Olmo2StyleRMSNorm(LlamaRMSNorm):
    """Weight multiplied in fp32, cast last; squares written as x * x, rsqrt as a method."""

    def forward(self, x):
        h = x.to(torch.float32)
        var = torch.mean(h * h, dim=-1, keepdim=True)
        h = h * (var + self.variance_epsilon).rsqrt()
        return (self.weight * h).to(x.dtype)


def test_rms_norm_llama_casting_found_with_eps_and_weight():
    x = torch.randn(2, 5, 64, dtype=torch.bfloat16)
    gm, decisions, calls = _rewrite(LlamaRMSNorm(64, eps=1e-5), x)
    assert [c.target for c in calls] == [R.rms_norm]
    _x, weight, eps, offset, casting = calls[0].args
    assert (eps, offset, casting) == (1e-5, 0.0, "llama")
    assert weight.op in ("get_attr", "placeholder")
    assert [d.op for d in decisions if d.replaced] == ["rms_norm"]
    # Nothing of the original computation survives.
    assert not any(n.op == "call_function" and n.target is torch.rsqrt for n in gm.graph.nodes)


def test_rms_norm_gemma_offset_and_fp32_casting():
    x = torch.randn(3, 32, dtype=torch.bfloat16)
    _, _, calls = _rewrite(GemmaRMSNorm(32), x)
    assert [c.target for c in calls] == [R.rms_norm]
    assert calls[0].args[3:] == (1.0, "gemma")


def test_rms_norm_other_spellings_cast_after_weight():
    x = torch.randn(4, 48, dtype=torch.float16)
    _, _, calls = _rewrite(Olmo2StyleRMSNorm(48), x)
    assert [c.target for c in calls] == [R.rms_norm]
    assert calls[0].args[3:] == (0.0, "gemma")


class MixedPrecisionNorm(LlamaRMSNorm):
    def forward(self, x):  # an fp32 weight times a bf16 value: the output is fp32, the library's is not
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(x.dtype)


def test_rms_norm_refused_when_output_dtype_would_change():
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    _, decisions, calls = _rewrite(MixedPrecisionNorm(16), x, cast_module=False)
    assert calls == []
    assert any(d.op == "rms_norm" and not d.replaced and "differs" in d.reason for d in decisions)


class Mlp(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.gate, self.up, self.down = nn.Linear(16, 40, bias=False), nn.Linear(16, 40, bias=False), nn.Linear(40, 16, bias=False)
        self.act = act

    def forward(self, x):
        return self.down(self.act(self.gate(x)) * self.up(x))


class SwappedSigmoidMlp(Mlp):
    def forward(self, x):
        g = self.gate(x)
        return self.down(self.up(x) * (g * torch.sigmoid(g)))


@pytest.mark.parametrize("act,expect", [
    (nn.SiLU(), R.swiglu),
    (lambda t: F.gelu(t, approximate="tanh"), R.geglu),
])
def test_gated_mlp_activations(act, expect):
    _, _, calls = _rewrite(Mlp(act), torch.randn(2, 3, 16))
    assert [c.target for c in calls] == [expect]


def test_swiglu_as_x_times_sigmoid_with_operands_swapped():
    _, _, calls = _rewrite(SwappedSigmoidMlp(nn.SiLU()), torch.randn(6, 16))
    assert [c.target for c in calls] == [R.swiglu]


def test_exact_gelu_is_refused_with_reason():
    _, decisions, calls = _rewrite(Mlp(nn.GELU()), torch.randn(6, 16))
    assert calls == []
    assert any("tanh approximation" in d.reason for d in decisions)


class LayerNormModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(24, eps=1e-5)
        self.ln_noaffine = nn.LayerNorm(24, elementwise_affine=False)

    def forward(self, x):
        return self.ln(x) + self.ln_noaffine(x)


def test_layer_norm_with_and_without_weight():
    _, decisions, calls = _rewrite(LayerNormModel(), torch.randn(5, 24))
    assert [c.target for c in calls] == [R.layer_norm]
    assert any(d.op == "layer_norm" and not d.replaced and "no weight" in d.reason for d in decisions)


HEAD_DIM = 16


def rotate_half(x):
    x1 = x[..., : HEAD_DIM // 2]
    x2 = x[..., HEAD_DIM // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def forward(self, q, k, cos, sin):
        cos = cos.unsqueeze(1)
        sin = sin.unsqueeze(1)
        q_embed = (q * cos) + (rotate_half(q) * sin)
        k_embed = (rotate_half(k) * sin) + (cos * k)  # terms and factors in the other order
        return q_embed, k_embed


def test_rope_pairs_q_and_k_sharing_cos_sin():
    q = torch.randn(2, 4, 7, HEAD_DIM)
    k = torch.randn(2, 2, 7, HEAD_DIM)
    cos, sin = torch.randn(2, 7, HEAD_DIM), torch.randn(2, 7, HEAD_DIM)
    gm, decisions, calls = _rewrite(Attention(), q, k, cos, sin)
    assert [c.target for c in calls] == [R.rope]
    assert calls[0].args[4] == 1
    assert [d.op for d in decisions if d.replaced] == ["rope"]
    getitems = [n for n in gm.graph.nodes if n.target is operator.getitem and n.args[0] is calls[0]]
    assert sorted(n.args[1] for n in getitems) == [0, 1]


class QOnlyRotation(nn.Module):
    def forward(self, q, cos, sin):
        return q * cos.unsqueeze(1) + rotate_half(q) * sin.unsqueeze(1)


def test_lone_rotation_is_kept_with_reason():
    q = torch.randn(1, 2, 3, HEAD_DIM)
    cos = torch.randn(1, 3, HEAD_DIM)
    _, decisions, calls = _rewrite(QOnlyRotation(), q, cos, cos.clone())
    assert calls == []
    assert any(d.op == "rope" and "no partner" in d.reason for d in decisions)


VOCAB = 50


class CausalLMLoss(nn.Module):
    """transformers' ForCausalLMLoss after lm_head: logits.float(), view(-1, V), cross_entropy."""

    def __init__(self, return_logits):
        super().__init__()
        self.lm_head = nn.Linear(8, VOCAB, bias=False)
        self.return_logits = return_logits

    def forward(self, hidden, labels):
        logits = self.lm_head(hidden)
        flat = logits.float().view(-1, VOCAB)
        loss = F.cross_entropy(flat, labels.view(-1), ignore_index=-100, reduction="mean")
        return (loss, logits) if self.return_logits else loss


def test_lm_head_plus_loss_becomes_fused_linear_cross_entropy():
    hidden = torch.randn(2, 6, 8, dtype=torch.bfloat16)
    labels = torch.randint(0, VOCAB, (2, 6))
    module = CausalLMLoss(return_logits=False).to(torch.bfloat16)
    gm, decisions, calls = _rewrite(module, hidden, labels)
    assert [c.target for c in calls] == [R.fused_linear_cross_entropy]
    assert calls[0].args[9] == torch.float32  # the loss keeps the dtype the graph had
    assert not any(n.op == "call_function" and n.target is F.linear for n in gm.graph.nodes)


def test_logits_returned_keeps_the_linear_and_fuses_only_the_loss():
    hidden = torch.randn(2, 6, 8, dtype=torch.bfloat16)
    labels = torch.randint(0, VOCAB, (2, 6))
    module = CausalLMLoss(return_logits=True).to(torch.bfloat16)
    _, decisions, calls = _rewrite(module, hidden, labels)
    assert [c.target for c in calls] == [R.cross_entropy]
    # The loss reads the bf16 logits directly: the fp32 copy is gone.
    assert calls[0].args[0].op != "call_method"
    assert any(d.op == "fused_linear_cross_entropy" and "used outside" in d.reason for d in decisions)


class SoftcapLoss(CausalLMLoss):
    def forward(self, hidden, labels):
        logits = self.lm_head(hidden)
        logits = torch.tanh(logits / 30.0) * 30.0
        return F.cross_entropy(logits.float().view(-1, VOCAB), labels.view(-1))


def test_final_logit_softcap_is_folded_into_the_fused_loss():
    hidden = torch.randn(2, 3, 8)
    labels = torch.randint(0, VOCAB, (2, 3))
    _, _, calls = _rewrite(SoftcapLoss(False), hidden, labels)
    assert [c.target for c in calls] == [R.fused_linear_cross_entropy]
    assert calls[0].args[8] == 30.0


class ScaledLogitsLoss(CausalLMLoss):
    """granite: logits = lm_head(h) / logits_scaling before the loss."""

    def forward(self, hidden, labels):
        logits = self.lm_head(hidden) / 8.0
        return F.cross_entropy(logits.float().view(-1, VOCAB), labels.view(-1))


def test_constant_logit_scale_folds_into_the_fused_loss():
    hidden = torch.randn(2, 3, 8)
    labels = torch.randint(0, VOCAB, (2, 3))
    gm, _, calls = _rewrite(ScaledLogitsLoss(False), hidden, labels)
    assert [c.target for c in calls] == [R.fused_linear_cross_entropy]
    assert calls[0].args[10] == 1.0 / 8.0
    assert not any(n.op == "call_function" and n.target is operator.truediv for n in gm.graph.nodes)


def test_policy_table_without_a_measurement_keeps_inductor_and_says_how_to_measure(monkeypatch):
    import liger_kernels.compile as C

    monkeypatch.setattr(C, "_device_sm", lambda _inputs: 90)
    x = torch.randn(2, 5, 64, dtype=torch.bfloat16)
    _, decisions, calls = _rewrite(LlamaRMSNorm(64), x, policy="table")
    assert calls == []
    (d,) = [d for d in decisions if d.op == "rms_norm"]
    assert not d.replaced and "compile_registry.py" in d.reason


def test_policy_table_follows_the_measured_winner(monkeypatch, tmp_path):
    import json

    import liger_kernels.compile as C

    monkeypatch.setattr(C, "_device_sm", lambda _inputs: 90)
    cls = shape_class("rms_norm", {"rows": 10, "cols": 64})
    path = tmp_path / "decisions.json"
    for lib_ms, expect in ((0.5, True), (2.0, False)):
        path.write_text(json.dumps({"entries": [{"op": "rms_norm", "sm": 90, "class": cls, "library_ms": lib_ms,
                                                 "inductor_ms": 1.0}]}))
        gm = _trace(LlamaRMSNorm(64).to(torch.bfloat16))
        x = torch.randn(2, 5, 64, dtype=torch.bfloat16)
        ShapeProp(gm).propagate(x)
        decisions = Backend(policy="table", inner="eager", table=DecisionTable(str(path))).rewrite(gm, (x,))
        assert [d.replaced for d in decisions if d.op == "rms_norm"] == [expect]


def test_unmatched_graph_is_left_alone():
    class Plain(nn.Module):
        def forward(self, x):
            return torch.relu(x) * 2

    gm, decisions, calls = _rewrite(Plain(), torch.randn(3, 3))
    assert calls == [] and decisions == []


def test_pattern_entry_matches_its_function_in_other_spellings():
    from liger_kernels.compile.pattern import Pattern

    def dyt(x, alpha, weight, bias):
        return torch.tanh(alpha * x) * weight + bias

    def replacement(x, alpha, weight, bias):
        raise AssertionError("not run")

    p = Pattern("dyt", dyt, {"x": "input", "alpha": "param", "weight": "param", "bias": "param"}, replacement)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.alpha = nn.Parameter(torch.ones(1))
            self.weight = nn.Parameter(torch.ones(12))
            self.bias = nn.Parameter(torch.zeros(12))

        def forward(self, x):
            y = self.bias + self.weight * (x * self.alpha).tanh()
            z = torch.tanh(self.alpha * x) * self.weight  # no bias: not the op
            return y + z

    gm = _trace(Model())
    ShapeProp(gm).propagate(torch.randn(3, 12))
    matches, _ = p.scan(gm.graph)
    assert len(matches) == 1
    matches[0].apply(gm.graph)
    (call,) = [n for n in gm.graph.nodes if n.target is replacement]
    assert [a.name if isinstance(a, fx.Node) else a for a in call.args][1:] == ["alpha", "weight", "bias"]


def test_a_win_inside_the_spread_is_not_a_win():
    from liger_kernels.compile.registry import library_wins

    base = {"library_ms": 0.95, "inductor_ms": 1.0}
    assert library_wins(dict(base), "speed")[0]  # no ranges recorded: the medians decide
    noisy = dict(base, library_ms_range=[0.9, 1.05], inductor_ms_range=[0.97, 1.1])
    wins, why = library_wins(noisy, "speed")
    assert not wins and "inside the spread" in why
    clear = dict(base, library_ms_range=[0.9, 0.96], inductor_ms_range=[0.97, 1.1])
    assert library_wins(clear, "speed")[0]
    memory = dict(base, library_ms=1.08, library_peak_mib=500, inductor_peak_mib=2000)
    assert library_wins(memory, "memory")[0] and not library_wins(dict(memory, library_ms=1.2), "memory")[0]


def test_pattern_value_used_twice_must_be_one_graph_value():
    from liger_kernels.compile.pattern import Pattern

    def squared_softplus(x):
        s = F.softplus(x)
        return s * s

    p = Pattern("squared_softplus", squared_softplus, {"x": "input"}, lambda x: x)

    class TwoCopies(nn.Module):
        def forward(self, x):
            return F.softplus(x) * F.softplus(x)  # equal values, but not the pattern's one value

    class OneCopy(nn.Module):
        def forward(self, x):
            s = F.softplus(x)
            return s * s

    for module, expect in ((TwoCopies(), 0), (OneCopy(), 1)):
        gm = _trace(module)
        ShapeProp(gm).propagate(torch.randn(3, 5))
        assert len(p.scan(gm.graph)[0]) == expect, type(module).__name__


def test_pattern_with_an_unused_parameter_is_refused_when_registered():
    from liger_kernels.compile.pattern import Pattern

    with pytest.raises(ValueError, match="not used"):
        Pattern("bad", lambda x, unused: x * 2, {"x": "input", "unused": "scalar"}, lambda x, unused: x)


def test_device_metric_uses_gpu_time_and_falls_back_to_wall_time():
    from liger_kernels.compile.registry import library_wins

    e = {"library_ms": 1.2, "inductor_ms": 1.0, "library_device_ms": 0.3, "inductor_device_ms": 0.5}
    assert not library_wins(e, "speed", "wall")[0]
    wins, why = library_wins(e, "speed", "device")
    assert wins and "GPU time" in why
    no_device = {"library_ms": 1.2, "inductor_ms": 1.0}
    wins, why = library_wins(no_device, "speed", "device")
    assert not wins and "wall time decided" in why
    with pytest.raises(ValueError, match="metric"):
        Backend(metric="latency")
