"""The hand-written Llama integration: class patch, instance patch + revert, and convergence.

Convergence: a mini Llama (random weights, fixed seed, no downloads) is trained 30 AdamW steps
with and without the patch from the same initial state on the same batches; per-step losses,
the last-step logits and the final parameters are compared with per-dtype tolerances (tokens are
drawn from a 128-token sub-vocabulary, so both runs learn: the loss must fall by > 0.1):
| dtype | loss atol/rtol | logits atol/rtol (+ rel. norm) | params atol/rtol | why |
| fp32  | 1e-4 / 1e-4 | 5e-3 / 1e-4 (1e-4) | 5e-3 / 1e-4 | fp32 kernels differ from torch only in summation order; AdamW amplifies it a little over 30 steps |
| bf16  | 5e-2 / 2e-2 | 2e-1 / 5e-2 (5e-2) | 2e-2 / 2e-2 | bf16 activations and weights: every op rounds to 8 bits of mantissa, and the two paths round in different places |
If LIGER_TEST_REPORT_DIR is set, the measured differences are written there as JSON.
"""
import json
import os

import pytest
import torch

from helpers import check, rel_err

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.models.llama import modeling_llama as ml  # noqa: E402

from liger_kernels.modules import LigerRMSNorm, LigerSwiGLUMLP, _mlp_forward_swiglu, liger_rotary_pos_emb  # noqa: E402
from liger_kernels.transformers import (  # noqa: E402
    MODEL_TYPE_TO_APPLY_LIGER_FN,
    _apply_liger_kernel_to_instance,
    apply_liger_kernel_to_llama,
    revert_liger_kernel_to_llama,
)
from liger_kernels.transformers.llama import lce_forward  # noqa: E402

DEV = "cuda"


def mini_config(**over):
    kw = dict(
        vocab_size=4099,  # not a multiple of anything convenient
        hidden_size=128,
        intermediate_size=352,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        hidden_act="silu",
        tie_word_embeddings=False,
        use_cache=False,
    )
    kw.update(over)
    cfg = LlamaConfig(**kw)
    cfg._attn_implementation = "eager"  # deterministic, same attention on both sides
    return cfg


def batch(cfg, seed, B=4, T=64, sub_vocab=None):
    """Random tokens; with sub_vocab, drawn from the first sub_vocab ids only (a distribution the
    model can learn in a few dozen steps, so the runs compared actually train)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    ids = torch.randint(0, sub_vocab or cfg.vocab_size, (B, T), generator=g)
    labels = ids.clone()
    labels[0, -9:] = -100  # some ignored positions, as padding would give
    mask = torch.ones(B, T, dtype=torch.long)
    return ids.to(DEV), labels.to(DEV), mask.to(DEV)


@pytest.fixture(autouse=True)
def _always_revert():
    yield
    revert_liger_kernel_to_llama()


def _report(name, data):
    d = os.environ.get("LIGER_TEST_REPORT_DIR")
    if d:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"{name}.json"), "w") as f:
            json.dump(data, f, indent=1)


def test_registry():
    assert MODEL_TYPE_TO_APPLY_LIGER_FN["llama"] is apply_liger_kernel_to_llama


def test_class_patch_and_revert():
    originals = (ml.LlamaRMSNorm, ml.LlamaMLP, ml.apply_rotary_pos_emb, LlamaForCausalLM.forward)
    apply_liger_kernel_to_llama()
    assert ml.LlamaRMSNorm is LigerRMSNorm and ml.LlamaMLP is LigerSwiGLUMLP
    assert ml.apply_rotary_pos_emb is liger_rotary_pos_emb
    assert LlamaForCausalLM.forward is lce_forward
    model = LlamaForCausalLM(mini_config()).to(DEV)
    assert isinstance(model.model.layers[0].input_layernorm, LigerRMSNorm)
    assert isinstance(model.model.layers[0].mlp, LigerSwiGLUMLP)
    assert isinstance(model.model.norm, LigerRMSNorm)
    revert_liger_kernel_to_llama()
    assert (ml.LlamaRMSNorm, ml.LlamaMLP, ml.apply_rotary_pos_emb, LlamaForCausalLM.forward) == originals


def test_instance_patch_and_revert():
    cfg = mini_config()
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(DEV)
    ids, labels, mask = batch(cfg, 1)
    model.eval()
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, labels=labels)
    original_rope = ml.apply_rotary_pos_emb
    params_before = {n: p.data_ptr() for n, p in model.named_parameters()}

    _apply_liger_kernel_to_instance(model)  # by model type -> apply_liger_kernel_to_llama(model=...)
    base = model.model
    assert isinstance(base.norm, LigerRMSNorm)
    for layer in base.layers:
        assert isinstance(layer.input_layernorm, LigerRMSNorm)
        assert isinstance(layer.post_attention_layernorm, LigerRMSNorm)
        assert layer.mlp.forward.__func__ is _mlp_forward_swiglu
    assert ml.apply_rotary_pos_emb is liger_rotary_pos_emb
    assert model.forward.__func__ is lce_forward
    assert {n: p.data_ptr() for n, p in model.named_parameters()} == params_before, "parameters were replaced"

    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, labels=labels)  # eval: logits computed
    check(out.logits, ref.logits.double(), torch.float32, "patched logits", atol=1e-4, rtol=1e-4, rel=1e-5)
    check(out.loss, ref.loss.double(), torch.float32, "patched loss", atol=1e-5, rtol=1e-5)
    model.train()
    out = model(input_ids=ids, attention_mask=mask, labels=labels)  # train: fused loss, no logits
    assert out.logits is None
    check(out.loss.detach(), ref.loss.double(), torch.float32, "fused loss", atol=1e-4, rtol=1e-4)
    out.loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())

    revert_liger_kernel_to_llama(model=model)
    assert type(base.norm) is ml.LlamaRMSNorm
    for layer in base.layers:
        assert type(layer.input_layernorm) is ml.LlamaRMSNorm
        assert "forward" not in layer.mlp.__dict__
    assert "forward" not in model.__dict__
    assert ml.apply_rotary_pos_emb is original_rope
    model.eval()
    with torch.no_grad():
        again = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert torch.equal(again.logits, ref.logits), "revert did not restore the stock forward"


def _train(cfg, dtype, init_state, patched, steps=30):
    if patched:
        apply_liger_kernel_to_llama()  # class level, before instantiation
    try:
        torch.manual_seed(0)
        model = LlamaForCausalLM(cfg)
        if patched:
            assert isinstance(model.model.layers[0].mlp, LigerSwiGLUMLP)
        model.load_state_dict(init_state)
        model.to(DEV, dtype)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
        losses = []
        for step in range(steps):
            ids, labels, mask = batch(cfg, 100 + step, sub_vocab=SUB_VOCAB)
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
            if patched:
                assert out.logits is None  # the fused path ran
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(float(out.loss.detach()))
        model.eval()
        ids, labels, mask = batch(cfg, 100 + steps - 1, sub_vocab=SUB_VOCAB)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
        params = {n: p.detach().float().clone() for n, p in model.named_parameters()}
        return losses, logits, params
    finally:
        revert_liger_kernel_to_llama()


SUB_VOCAB = 128
CONV_TOL = {
    torch.float32: dict(loss=(1e-4, 1e-4), logits=(5e-3, 1e-4, 1e-4), params=(5e-3, 1e-4)),
    torch.bfloat16: dict(loss=(5e-2, 2e-2), logits=(2e-1, 5e-2, 5e-2), params=(2e-2, 2e-2)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_convergence(dtype):
    cfg = mini_config()
    torch.manual_seed(42)
    init_state = {k: v.clone() for k, v in LlamaForCausalLM(cfg).state_dict().items()}
    ref_losses, ref_logits, ref_params = _train(cfg, dtype, init_state, patched=False)
    lk_losses, lk_logits, lk_params = _train(cfg, dtype, init_state, patched=True)
    tol = CONV_TOL[dtype]
    rl = torch.tensor(ref_losses, dtype=torch.float64)
    ll = torch.tensor(lk_losses, dtype=torch.float64)
    param_errs = {n: float((lk_params[n] - ref_params[n]).abs().max()) for n in ref_params}
    _report(f"convergence_{str(dtype).split('.')[-1]}", {
        "ref_losses": ref_losses, "liger_losses": lk_losses,
        "max_loss_abs_diff": float((rl - ll).abs().max()),
        "logits_max_abs_diff": float((lk_logits - ref_logits).abs().max()),
        "logits_rel_norm": rel_err(lk_logits, ref_logits),
        "params_max_abs_diff": max(param_errs.values()),
    })
    assert ref_losses[-1] < ref_losses[0] - 0.1, f"the reference did not train: {ref_losses[0]} -> {ref_losses[-1]}"
    check(ll, rl, torch.float32, "per-step losses", atol=tol["loss"][0], rtol=tol["loss"][1], rel=tol["loss"][1])
    check(lk_logits, ref_logits.double(), torch.float32, "last-step logits",
          atol=tol["logits"][0], rtol=tol["logits"][1], rel=tol["logits"][2])
    for n in ref_params:
        check(lk_params[n], ref_params[n].double(), torch.float32, f"param {n}",
              atol=tol["params"][0], rtol=tol["params"][1], rel=max(tol["params"][1], 1e-3))
