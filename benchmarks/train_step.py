#!/usr/bin/env python3
"""One AdamW training step of HF models, six ways: HF eager, HF + torch.compile, Liger-Kernel,
Liger-Kernel + torch.compile, this library (its integration for the model type), and this library +
torch.compile; plus hf+compile+mask, HF's model compiled with only this library's implicit causal mask
(liger_kernels/transformers/_causal_mask.py, which every integration applies), which separates what
the mask rule gives a compiled step from what the kernels give.

    PYTHONPATH=.peers/liger-kernel/src python3 benchmarks/train_step.py --models llama --out docs/benchmarks/train_step_h100
    python3 benchmarks/train_step.py --models llama --providers hf,ours --steps 4      # quick

Each (model, provider) runs in its own Python process (patches and compile caches never leak between
providers). Every provider builds the model from the same seed and trains on the same batches; a
step = forward with labels + backward + AdamW step + zero_grad. Reported: median step time over the
timed steps (after warm-up; compiled variants compile during warm-up), tokens/s, peak memory
(torch.cuda.max_memory_allocated over the timed steps: weights, optimizer state and activations), the
loss after --steps steps (all providers must agree within --loss-tol; a disagreement is flagged), and
model FLOPs utilisation: 6 * parameters (the input embedding excluded) * tokens (+ attention 12 * layers * hidden * seq * tokens)
per step over the bf16 GEMM rate measured in the same process (an 8192^3 matmul).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "kernels", "python"))
peer_src = os.path.join(REPO, ".peers", "liger-kernel", "src")
if os.path.isdir(peer_src):
    sys.path.insert(0, peer_src)

MODELS = {
    # The Llama shape of the issue: 8 layers, hidden 2048, 128k vocabulary.
    "llama": dict(model_type="llama", batch=4, seq=2048,
                  kw=dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=8,
                          num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=4096,
                          rms_norm_eps=1e-5, tie_word_embeddings=False)),
    # Qwen3-1.7B-like (~1.4B parameters without tied embeddings' duplicate).
    "qwen3": dict(model_type="qwen3", batch=4, seq=2048,
                  kw=dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=12,
                          num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=4096,
                          tie_word_embeddings=False)),
    # Gemma2-2B widths, fewer layers: the Gemma-style norms (offset 1, fp32 casting) and GeGLU.
    "gemma2": dict(model_type="gemma2", batch=2, seq=2048,
                   kw=dict(vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=6,
                           num_attention_heads=8, num_key_value_heads=4, head_dim=256, max_position_embeddings=4096,
                           sliding_window=4096, final_logit_softcapping=30.0, attn_logit_softcapping=50.0)),
}
PROVIDERS = ["hf", "hf+compile", "hf+compile+mask", "liger_kernel", "liger_kernel+compile", "ours", "ours+compile"]


def gemm_tflops(torch):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        a @ b
    e.record()
    torch.cuda.synchronize()
    return 2 * 8192 ** 3 * 20 / (s.elapsed_time(e) / 1e3) / 1e12


def patch(provider, model_type):
    base = provider.split("+")[0]
    if provider.endswith("+mask"):
        import liger_kernels.transformers as LT

        if not LT.implicit_causal_mask_under_compile():
            from liger_kernels.transformers import _causal_mask

            raise RuntimeError(f"the implicit causal mask is {_causal_mask.status()}")
    if base == "ours":
        import liger_kernels.transformers as LT

        if model_type not in LT.MODEL_TYPE_TO_APPLY_LIGER_FN:
            raise RuntimeError(f"this library has no integration for {model_type!r} (liger-agent autopatch {model_type})")
        LT.MODEL_TYPE_TO_APPLY_LIGER_FN[model_type]()
    elif base == "liger_kernel":
        import liger_kernel.transformers as LKT

        getattr(LKT, f"apply_liger_kernel_to_{model_type}")()


def one(model_name, provider, steps, warmup):
    """Runs in a child process; prints one JSON line."""
    import torch
    import transformers

    spec = MODELS[model_name]
    patch(provider, spec["model_type"])
    cfg = transformers.AutoConfig.for_model(spec["model_type"], **spec["kw"])
    cfg._attn_implementation = "sdpa"
    cfg.use_cache = False
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to("cuda", torch.bfloat16)
    model.train()
    fwd = torch.compile(model) if "+compile" in provider else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    g = torch.Generator(device="cpu").manual_seed(1)
    B, T = spec["batch"], spec["seq"]
    batches = [torch.randint(0, cfg.vocab_size, (B, T), generator=g).to("cuda") for _ in range(4)]

    def step(i):
        ids = batches[i % len(batches)]
        loss = fwd(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    losses = [float(step(i)) for i in range(warmup)]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(warmup, warmup + steps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        loss = step(i)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
        losses.append(float(loss))
    n_params = sum(p.numel() for p in model.parameters())
    # The input embedding is a lookup, not a matmul: its parameters do no FLOPs.
    matmul_params = n_params - model.get_input_embeddings().weight.numel()
    ms = statistics.median(times)
    tokens = B * T
    L, H = cfg.num_hidden_layers, cfg.hidden_size
    flops = 6 * matmul_params * tokens + 12 * L * H * T * tokens
    peak_tflops = gemm_tflops(torch)
    print(json.dumps(dict(model=model_name, provider=provider, step_ms=round(ms, 2), tokens_per_s=round(tokens / ms * 1e3),
                          peak_gb=round(torch.cuda.max_memory_allocated() / 1e9, 2), losses=losses,
                          final_loss=losses[-1], params_m=round(n_params / 1e6, 1),
                          mfu=round(flops / (ms / 1e3) / 1e12 / peak_tflops, 3), gemm_tflops=round(peak_tflops, 1))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="llama")
    ap.add_argument("--providers", default=",".join(PROVIDERS))
    ap.add_argument("--steps", type=int, default=10, help="timed steps; the loss compared is the last one")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--loss-tol", type=float, default=0.05, help="relative disagreement of final losses flagged")
    ap.add_argument("--out", default="")
    ap.add_argument("--one", nargs=2, metavar=("MODEL", "PROVIDER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args.one[0], args.one[1], args.steps, args.warmup)
        return 0
    try:
        import torch
    except ImportError as exc:
        print(f"not run: {exc}", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("not run: no CUDA device", file=sys.stderr)
        return 77
    rows = []
    for m in args.models.split(","):
        if m not in MODELS:
            print(f"unknown model {m!r}; known: {', '.join(MODELS)}", file=sys.stderr)
            return 2
        for p in args.providers.split(","):
            proc = subprocess.run([sys.executable, __file__, "--one", m, p, "--steps", str(args.steps),
                                   "--warmup", str(args.warmup)], capture_output=True, text=True)
            line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
            if proc.returncode != 0 or line is None:
                err = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
                rows.append(dict(model=m, provider=p, error=err))
                sys.stderr.write(proc.stderr[-4000:])
            else:
                rows.append(json.loads(line))
            print(json.dumps(rows[-1]), flush=True)
    report(rows, args)
    return 0


def report(rows, args):
    import torch

    commit = os.environ.get("LIGER_COMMIT") or subprocess.run(
        ["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    meta = dict(device=torch.cuda.get_device_name(), date=datetime.date.today().isoformat(), commit=commit,
                torch=torch.__version__)
    lines = [f"# Training step, {meta['device']}, {meta['date']}, commit {meta['commit']}", "",
             "| model | provider | step ms | tokens/s | vs HF eager | vs HF compiled | peak GB | final loss | MFU |",
             "|---|---|---|---|---|---|---|---|---|"]
    for m in args.models.split(","):
        mine = {r["provider"]: r for r in rows if r["model"] == m}
        ref = mine.get("hf", {}).get("final_loss")
        base = mine.get("hf", {}).get("tokens_per_s")
        comp = mine.get("hf+compile", {}).get("tokens_per_s")
        for p in args.providers.split(","):
            r = mine.get(p, {})
            if "error" in r:
                lines.append(f"| {m} | {p} | error: {r['error'][:120]} | | | | | | |")
                continue
            flag = ""
            if ref is not None and abs(r["final_loss"] - ref) > args.loss_tol * abs(ref):
                flag = f" (**disagrees** with HF's {ref:.4f})"
            tps = r["tokens_per_s"]
            lines.append(f"| {m} | {p} | {r['step_ms']} | {tps} | {tps / base:.2f}x | {tps / comp:.2f}x | {r['peak_gb']} | "
                         f"{r['final_loss']:.4f}{flag} | {r['mfu']:.2f} |" if base and comp else
                         f"| {m} | {p} | {r['step_ms']} | {tps} | - | - | {r['peak_gb']} | {r['final_loss']:.4f}{flag} | {r['mfu']:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out + ".md", "w") as f:
            f.write(text)
        with open(args.out + ".json", "w") as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
