"""Comparison helpers: elementwise atol/rtol AND a relative-error norm, NaN/Inf never pass.

Tolerance table (bf16/fp16 tolerances are set by rounding, not by accepting wrong answers):
| dtype | elementwise atol/rtol | rel. norm | why |
| fp32  | 2e-5 / 2e-5 (reductions: 1e-4) | 2e-5 | fp32 math against a float64 reference: accumulation order only |
| fp16  | 5e-3 / 5e-3 | 2e-3 | 10-bit mantissa: one rounding of the output (~5e-4 rel) plus casts the casting modes define |
| bf16  | 4e-2 / 2e-2 | 1e-2 | 7-bit mantissa: one or two roundings of ~4e-3 each, e.g. llama mode rounds x*rstd before the weight multiply |
Weight gradients sum over rows: their atol scales with the row count (see `tol`).
"""
import torch

TOL = {
    torch.float32: dict(atol=2e-5, rtol=2e-5, rel=2e-5),
    torch.float16: dict(atol=5e-3, rtol=5e-3, rel=2e-3),
    torch.bfloat16: dict(atol=4e-2, rtol=2e-2, rel=1e-2),
}


def tol(dtype, scale=1.0):
    t = dict(TOL[dtype])
    t["atol"] *= scale
    t["rel"] = t["rel"] * max(1.0, scale ** 0.5) if dtype != torch.float32 else t["rel"] * scale
    return t


def rel_err(out, ref):
    out = out.double()
    ref = ref.double()
    denom = ref.norm().item()
    num = (out - ref).norm().item()
    return num / denom if denom > 0 else num


def check(out, ref, dtype=None, name="", atol=None, rtol=None, rel=None):
    """Asserts out ~ ref. `ref` is float64 (or anything); out is compared after upcasting."""
    dtype = dtype or out.dtype
    t = dict(TOL.get(dtype, TOL[torch.float32]))
    if atol is not None:
        t["atol"] = atol
    if rtol is not None:
        t["rtol"] = rtol
    if rel is not None:
        t["rel"] = rel
    assert out.shape == ref.shape, f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    assert torch.isfinite(out).all(), f"{name}: non-finite values in the output"
    o = out.double().cpu()
    r = ref.double().cpu()
    e = rel_err(o, r)
    bad = (o - r).abs() > t["atol"] + t["rtol"] * r.abs()
    nbad = int(bad.sum())
    worst = float((o - r).abs().max()) if o.numel() else 0.0
    assert nbad == 0, f"{name}: {nbad}/{o.numel()} elements outside atol={t['atol']} rtol={t['rtol']} (max abs err {worst:.3e}, rel norm {e:.3e})"
    assert e <= t["rel"], f"{name}: relative error norm {e:.3e} > {t['rel']:.1e}"


def check_step_parity(label, loss, ref_loss, grads, ref_grads):
    """One compiled (or rewritten) training step against the eager one, fp32: the loss, and every
    parameter gradient, present on both sides."""
    check(loss.reshape(1), ref_loss.reshape(1).double(), torch.float32, f"{label} loss", atol=1e-4, rtol=1e-4)
    assert set(grads) == set(ref_grads), f"{label}: gradients differ in presence: {sorted(set(grads) ^ set(ref_grads))[:5]}"
    for n in ref_grads:
        check(grads[n], ref_grads[n].double(), torch.float32, f"{label} grad {n}", atol=1e-4, rtol=1e-3, rel=1e-3)


# Small sizes for any decoder config; only the fields a config class has are set.
MINI = dict(vocab_size=1024, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
            max_position_embeddings=256, num_experts=4, num_experts_per_tok=2, sliding_window=64,
            tie_word_embeddings=False, use_cache=False)


def mini_model(model_type, dtype=torch.float32, device="cuda", **overrides):
    """A small HF causal LM of `model_type` from its own config class (no checkpoint), eager attention."""
    import transformers

    cfg = transformers.AutoConfig.for_model(model_type)
    for k, v in {**MINI, **overrides}.items():
        if hasattr(cfg, k):
            setattr(cfg, k, v)
    for tok in ("pad_token_id", "bos_token_id", "eos_token_id"):  # ids inside the small vocabulary
        if isinstance(getattr(cfg, tok, None), int) and getattr(cfg, tok) >= cfg.vocab_size:
            setattr(cfg, tok, 0)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).to(device, dtype)
