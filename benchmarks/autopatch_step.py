#!/usr/bin/env python3
"""Training-step benchmark of the autopatch integrations: one dense (llama), one Gemma-family (gemma2)
and one MoE (qwen3_moe) model, patched vs unpatched.

For each model: a mini model with realistic widths (a few layers, the real hidden/intermediate/vocab
sizes), bf16 weights, random init (no downloads), AdamW. A step = forward with labels + backward +
optimizer step + zero_grad. Timing: CUDA events around each step after warm-up, median (and the
spread: min..max) of the timed steps; memory: torch.cuda.max_memory_allocated over the timed steps
(the peak of a training step, parameters and optimizer state included). Both variants build the model
from the same seed, in separate processes' worth of state (the patched one is reverted afterwards).

    python3 benchmarks/autopatch_step.py --out docs/benchmarks       # writes autopatch_step.{md,json}
    python3 benchmarks/autopatch_step.py --models llama --steps 5    # quick

The patched variant uses the integration registered for the model type
(liger_kernels.transformers.MODEL_TYPE_TO_APPLY_LIGER_FN): hand-written llama, generated gemma2 (run
`liger-agent autopatch gemma2` first), hand-written or generated qwen3_moe.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "kernels", "python"))

MODELS = {
    # Llama-3.2-1B/3B-like widths.
    "llama": dict(
        config="LlamaConfig", causal_lm="LlamaForCausalLM",
        kw=dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=4,
                num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=4096, rms_norm_eps=1e-5,
                tie_word_embeddings=False)),
    # Gemma-2-2B widths.
    "gemma2": dict(
        config="Gemma2Config", causal_lm="Gemma2ForCausalLM",
        kw=dict(vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=4,
                num_attention_heads=8, num_key_value_heads=4, head_dim=256, max_position_embeddings=4096,
                sliding_window=4096, final_logit_softcapping=30.0, attn_logit_softcapping=50.0)),
    # Qwen3-30B-A3B widths with fewer experts.
    "qwen3_moe": dict(
        config="Qwen3MoeConfig", causal_lm="Qwen3MoeForCausalLM",
        kw=dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
                num_hidden_layers=4, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
                num_experts=32, num_experts_per_tok=4, max_position_embeddings=4096, tie_word_embeddings=False)),
}


def build(name, spec, patched, dtype, seed=0):
    import torch
    import transformers

    import liger_kernels.transformers as LT

    cfg = getattr(transformers, spec["config"])(**spec["kw"])
    cfg._attn_implementation = "sdpa"
    cfg.use_cache = False
    if patched:
        if name not in LT.MODEL_TYPE_TO_APPLY_LIGER_FN:
            raise RuntimeError(f"no integration registered for {name!r} (run liger-agent autopatch {name})")
        LT.MODEL_TYPE_TO_APPLY_LIGER_FN[name]()
    torch.manual_seed(seed)
    model = getattr(transformers, spec["causal_lm"])(cfg).to("cuda", dtype)
    model.train()
    return cfg, model


def run_variant(name, spec, patched, args):
    import torch

    import liger_kernels.transformers as LT

    torch.cuda.empty_cache()
    cfg, model = build(name, spec, patched, torch.bfloat16)
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
        g = torch.Generator(device="cpu").manual_seed(1)
        ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), generator=g).to("cuda")
        labels = ids.clone()

        def step():
            out = model(input_ids=ids, labels=labels)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return out.loss.detach()

        losses = []
        for _ in range(args.warmup):
            losses.append(float(step()))
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(args.steps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            loss = step()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
            losses.append(float(loss))
        peak = torch.cuda.max_memory_allocated() / 2**30
        return dict(median_ms=statistics.median(times), min_ms=min(times), max_ms=max(times), peak_gib=peak,
                    first_loss=losses[0], last_loss=losses[-1],
                    params_m=sum(p.numel() for p in model.parameters()) / 1e6)
    finally:
        del model
        gc.collect()
        torch.cuda.empty_cache()
        if patched:
            LT.MODEL_TYPE_TO_REVERT_LIGER_FN[name]()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "docs", "benchmarks"))
    args = ap.parse_args()

    try:
        import torch
        import transformers
    except ImportError as exc:
        print(f"not run: {exc}", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("not run: no CUDA device", file=sys.stderr)
        return 77

    results = []
    for name in args.models.split(","):
        spec = MODELS[name]
        row = dict(model=name, batch=args.batch, seq=args.seq, dtype="bf16", layers=spec["kw"]["num_hidden_layers"])
        for variant, patched in (("unpatched", False), ("liger", True)):
            t0 = time.time()
            try:
                row[variant] = run_variant(name, spec, patched, args)
            except Exception as exc:  # reported in the table, never as a number
                row[variant] = dict(error=f"{type(exc).__name__}: {exc}"[:300])
            print(f"{name} {variant}: {row[variant]} ({time.time() - t0:.0f}s)", flush=True)
        u, l = row["unpatched"], row["liger"]
        if "error" not in u and "error" not in l:
            row["speedup"] = u["median_ms"] / l["median_ms"]
            row["memory_ratio"] = l["peak_gib"] / u["peak_gib"]
            # Within the run-to-run spread of either variant: no claim.
            row["speed_significant"] = l["max_ms"] < u["min_ms"] or u["max_ms"] < l["min_ms"]
        results.append(row)

    os.makedirs(args.out, exist_ok=True)
    meta = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, transformers=transformers.__version__,
                date=time.strftime("%Y-%m-%d"), warmup=args.warmup, steps=args.steps)
    with open(os.path.join(args.out, "autopatch_step.json"), "w") as f:
        json.dump(dict(meta=meta, results=results), f, indent=1)
    lines = [
        f"# Training step, patched vs unpatched ({meta['device']}, torch {meta['torch']}, transformers "
        f"{meta['transformers']}, {meta['date']})",
        "",
        "Forward + backward + AdamW step, bf16, batch x seq tokens, median of "
        f"{args.steps} steps after {args.warmup} warm-up (min..max); peak = max_memory_allocated. "
        "Produced by benchmarks/autopatch_step.py.",
        "",
        "| model | layers | tokens | unpatched ms | liger ms | speedup | unpatched peak GiB | liger peak GiB | memory | outside spread |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        u, l = r["unpatched"], r["liger"]
        if "error" in u or "error" in l:
            lines.append(f"| {r['model']} | {r['layers']} | {r['batch']}x{r['seq']} | {u.get('error', '%.1f' % u.get('median_ms', 0))} | "
                         f"{l.get('error', '%.1f' % l.get('median_ms', 0))} | - | - | - | - | - |")
            continue
        lines.append(
            f"| {r['model']} | {r['layers']} | {r['batch']}x{r['seq']} | {u['median_ms']:.1f} ({u['min_ms']:.1f}..{u['max_ms']:.1f}) | "
            f"{l['median_ms']:.1f} ({l['min_ms']:.1f}..{l['max_ms']:.1f}) | {r['speedup']:.2f}x | {u['peak_gib']:.2f} | "
            f"{l['peak_gib']:.2f} | {100 * (1 - r['memory_ratio']):.0f}% less | {'yes' if r['speed_significant'] else 'no'} |")
    with open(os.path.join(args.out, "autopatch_step.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all("error" not in r["unpatched"] and "error" not in r["liger"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
