#!/usr/bin/env python3
"""Training-step speed of unpatched HF models under the liger compile backend, against HF compiled
with Inductor and against the monkey-patched model compiled, measured in one process.

    python benchmarks/compile_backend.py --models llama,qwen3 --size mini --json out.json
    python benchmarks/compile_backend.py --models llama --size 1b

A step is `loss = model(input_ids, labels).loss; loss.backward()` with the loss function compiled
(so the logits never leave the graph and lm_head + loss can fuse). Reported per variant: median step
time over --steps steps after warm-up (compilation excluded), tokens/s, peak memory, the loss
relative to eager, and for the backend the replacements it made."""
import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "kernels", "python"))

import transformers  # noqa: E402

import liger_kernels.transformers as LT  # noqa: E402
from liger_kernels.compile import Backend  # noqa: E402

MINI = dict(vocab_size=32000, hidden_size=512, intermediate_size=1408, moe_intermediate_size=256,
            num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4, head_dim=64,
            max_position_embeddings=4096, num_experts=8, num_experts_per_tok=2, sliding_window=4096,
            tie_word_embeddings=False, use_cache=False)
ONE_B = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, moe_intermediate_size=1024,
             num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
             max_position_embeddings=8192, num_experts=8, num_experts_per_tok=2, sliding_window=4096,
             tie_word_embeddings=False, use_cache=False)


def build(model_type, sizes, dtype, attn):
    cfg = transformers.AutoConfig.for_model(model_type)
    for k, v in sizes.items():
        if hasattr(cfg, k):
            setattr(cfg, k, v)
    for tok in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if isinstance(getattr(cfg, tok, None), int) and getattr(cfg, tok) >= cfg.vocab_size:
            setattr(cfg, tok, 0)
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).to("cuda", dtype)


def measure(model, run, ids, labels, steps):
    def step():
        model.zero_grad(set_to_none=True)
        loss = run(ids, labels)
        loss.backward()
        return loss

    t0 = time.time()
    first = step().item()
    step()
    compile_s = time.time() - t0
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return {"ms": times[len(times) // 2], "spread_ms": times[-1] - times[0], "loss": first,
            "peak_gib": torch.cuda.max_memory_allocated() / 2 ** 30, "warmup_s": round(compile_s, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="llama")
    ap.add_argument("--size", choices=["mini", "1b"], default="mini")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("--variants", default="hf_eager,hf_compiled,liger_backend,liger_always,patched_compiled",
                    help="hf_eager, hf_compiled, liger_backend (table, goal speed), liger_memory (table, goal "
                         "memory), liger_device (table, GPU-time metric), liger_always (every match), patched_compiled (monkey patch + Inductor), "
                         "hf_compiled_mask (Inductor with only the causal-mask pass: what the backend's mask rewrite alone gives)")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    sizes = MINI if args.size == "mini" else ONE_B
    results = {}
    for model_type in [m for m in args.models.split(",") if m]:
        g = torch.Generator(device="cpu").manual_seed(1)
        ids = torch.randint(0, sizes["vocab_size"], (args.batch, args.seq), generator=g).to("cuda")
        labels = ids.clone()
        row = {}
        for variant in args.variants.split(","):
            torch._dynamo.reset()
            patched = variant == "patched_compiled"
            mask_only = variant == "hf_compiled_mask"
            if mask_only and not LT.implicit_causal_mask_under_compile():
                from liger_kernels.transformers import _causal_mask

                row[variant] = {"skipped": f"causal-mask pass {_causal_mask.status()}"}
                continue
            if patched and model_type not in LT.MODEL_TYPE_TO_APPLY_LIGER_FN:
                row[variant] = {"skipped": f"no monkey-patch integration for {model_type}"}
                continue
            if patched:
                LT.MODEL_TYPE_TO_APPLY_LIGER_FN[model_type]()
            try:
                model = build(model_type, sizes, dtype, args.attn)
                loss_fn = lambda i, l, m=model: m(input_ids=i, labels=l).loss  # noqa: E731
                backend = None
                if variant == "hf_eager":
                    run = loss_fn
                elif variant in ("hf_compiled", "patched_compiled", "hf_compiled_mask"):
                    run = torch.compile(loss_fn)
                else:
                    policy = {"liger_backend": "table", "liger_memory": "table", "liger_device": "table",
                              "liger_always": "always"}.get(variant)
                    if policy is None:
                        raise ValueError(f"unknown variant {variant}")
                    backend = Backend(policy=policy, goal="memory" if variant == "liger_memory" else "speed",
                                      metric="device" if variant == "liger_device" else "wall")
                    run = torch.compile(loss_fn, backend=backend)
                r = measure(model, run, ids, labels, args.steps)
                r["tokens_per_s"] = round(args.batch * args.seq / (r["ms"] / 1e3))
                if backend is not None:
                    r["replaced"] = backend.summary()
                    r["kept"] = sorted({f"{d.op} {d.shape_class}: {d.reason}" for d in backend.report if not d.replaced})[:12]
                row[variant] = r
                print(f"{model_type:12s} {variant:17s} {r['ms']:8.2f} ms  {r['tokens_per_s']:>9} tok/s  "
                      f"peak {r['peak_gib']:6.2f} GiB  loss {r['loss']:.4f}  warm-up {r['warmup_s']} s"
                      + (f"  replaced {r['replaced']}" if backend is not None else ""), flush=True)
                del model, run
            except Exception as exc:  # one failing variant is reported, the others still run
                row[variant] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                print(f"{model_type:12s} {variant:17s} FAILED {row[variant]['error']}", flush=True)
            finally:
                if patched:
                    LT.MODEL_TYPE_TO_REVERT_LIGER_FN[model_type]()
                if mask_only:
                    LT.implicit_causal_mask_under_compile(False)
                torch.cuda.empty_cache()
        results[model_type] = row
        write(args, results)  # after each model: a run cut short keeps what it measured


def write(args, results):
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "transformers": transformers.__version__,
            "commit": os.environ.get("LIGER_COMMIT", ""), "size": args.size, "batch": args.batch, "seq": args.seq,
            "dtype": args.dtype, "attn": args.attn}
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
        os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    main()
