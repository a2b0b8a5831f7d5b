"""A scalar logits scale folded into the fused loss (autopatch decision 10, `logits_scale`): the
factor's resolution (no GPU) and the folded loss against logits scaled the stock way (GPU)."""
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch", reason="the autopatch runtime imports torch")
from liger_kernels.transformers import _autopatch as A  # noqa: E402


class _Head(torch.nn.Module):
    def __init__(self, hidden=64, vocab=300, bias=True):
        super().__init__()
        self.config = SimpleNamespace(logits_scaling=4.0, get_text_config=lambda: SimpleNamespace())
        self.model = SimpleNamespace(lm_head_multiplier=0.25)
        self.logit_scale = 0.0625
        self.lm_head = torch.nn.Linear(hidden, vocab, bias=bias)


def test_factors_resolve_from_the_config_an_attribute_path_and_literals():
    head = _Head()
    scales = A.parse_logits_scale([("/", "config.logits_scaling"), ("*", "model.lm_head_multiplier"),
                                   ("*", "logit_scale"), ("*", "2")])
    assert A.logits_scale_of(head, scales) == pytest.approx(1 / 4.0 * 0.25 * 0.0625 * 2)
    assert A.logits_scale_of(head, []) is None


def test_a_factor_of_several_elements_is_not_folded_and_none_is_an_error():
    head = _Head()
    head.logit_scale = torch.ones(300)
    assert A.logits_scale_of(head, A.parse_logits_scale([("*", "logit_scale")])) is A._NOT_SCALAR
    head.logit_scale = None
    with pytest.raises(ValueError, match="logit_scale is None"):
        A.logits_scale_of(head, A.parse_logits_scale([("*", "logit_scale")]))
    with pytest.raises(ValueError, match="not '\\*' or '/'"):
        A.parse_logits_scale([("+", "logit_scale")])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the fused loss kernel needs a CUDA device")
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.bfloat16, 2e-2)])
@pytest.mark.parametrize("bias", [False, True])
def test_folded_scale_matches_scaled_logits_in_loss_and_gradients(dtype, tol, bias):
    torch.manual_seed(0)
    head = _Head(bias=bias).cuda().to(dtype)
    # A learned scalar factor: its gradient must flow through the fold too.
    head.logit_scale = torch.nn.Parameter(torch.tensor(0.5, device="cuda"))
    scales = A.parse_logits_scale([("/", "config.logits_scaling"), ("*", "logit_scale")])
    h = torch.randn(2, 33, 64, device="cuda", dtype=dtype, requires_grad=True)
    labels = torch.randint(0, 300, (2, 33), device="cuda")
    labels[0, 5] = -100

    def grads(loss):
        params = [h, head.lm_head.weight, head.logit_scale] + ([head.lm_head.bias] if bias else [])
        return torch.autograd.grad(loss, params)

    scale = A.logits_scale_of(head, scales)
    fused = A.causal_lm_loss(head, h, labels, {}, scale=scale)
    g_fused = grads(fused)
    logits = A.apply_logits_scale(head.lm_head(h), head, scales).float()
    shift = torch.nn.functional.pad(labels, (0, 1), value=-100)[..., 1:]
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, 300), shift.reshape(-1), ignore_index=-100)
    g_ref = grads(ref)
    assert fused.item() == pytest.approx(ref.item(), rel=tol)
    for a, b in zip(g_fused, g_ref):
        err = (a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-12)
        assert err.item() < tol * 5, err.item()
    # Without the fold the loss differs: the test would catch a forward that dropped the scale.
    unscaled = A.causal_lm_loss(head, h, labels, {})
    assert abs(unscaled.item() - ref.item()) > max(0.05, 10 * abs(fused.item() - ref.item()))
