#!/usr/bin/env python3
"""Where one training step's GPU time goes, per provider: the step of benchmarks/train_step.py under
torch.profiler, its kernels sorted into classes (GEMM, attention, this library, optimizer, ...), and
what that leaves a kernel library to win.

    python3 benchmarks/step_profile.py --model llama --providers hf,ours,ours+compile --out /tmp/prof

The question it answers: a speed-up target over HF eager (--target, default 1.5) needs a step of
at most eager/target ms. GEMMs and attention are cuBLAS's and cuDNN's in every provider; the
report gives the speed-up those alone would leave (everything else at zero) and the time the other
kernels and the GPU's idle gaps must fit in, so a miss is explained by numbers from the trace
rather than a guess. Each provider runs in its own process (as train_step.py does);
the Chrome traces are kept next to the report.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import trace_summary  # noqa: E402
import train_step  # noqa: E402  (model shapes and the patching rule)

PROFILED_STEPS = 3


def one(model_name, provider, out_dir):
    import torch
    import transformers
    from torch.profiler import ProfilerActivity, profile

    spec = train_step.MODELS[model_name]
    train_step.patch(provider, spec["model_type"])
    cfg = transformers.AutoConfig.for_model(spec["model_type"], **spec["kw"])
    cfg._attn_implementation = "sdpa"
    cfg.use_cache = False
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to("cuda", torch.bfloat16)
    fwd = torch.compile(model) if "+compile" in provider else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    g = torch.Generator(device="cpu").manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (spec["batch"], spec["seq"]), generator=g).to("cuda")

    def step():
        fwd(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(4):  # compiled providers compile here
        step()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        s.record()
        for _ in range(PROFILED_STEPS):
            step()
        e.record()
        torch.cuda.synchronize()
    trace = os.path.join(out_dir, f"{model_name}-{provider}.trace.json")
    prof.export_chrome_trace(trace)
    intervals = trace_summary.load_intervals(trace)
    summary = trace_summary.summarize(intervals, PROFILED_STEPS)
    summary.update(model=model_name, provider=provider, step_ms=round(s.elapsed_time(e) / PROFILED_STEPS, 3),
                   top=trace_summary.top_kernels(intervals, PROFILED_STEPS), trace=os.path.basename(trace))
    print(json.dumps(summary))


def report(results, target):
    classes = []
    for r in results:
        for c in r.get("classes_ms", {}):
            if c not in classes:
                classes.append(c)
    lines = ["| class | " + " | ".join(r["provider"] for r in results) + " |",
             "|---|" + "---|" * len(results)]
    for c in classes:
        lines.append(f"| {c} | " + " | ".join(f"{r['classes_ms'].get(c, 0.0):.2f}" for r in results) + " |")
    lines.append("| **GPU busy (union)** | " + " | ".join(f"{r['busy_ms']:.2f}" for r in results) + " |")
    lines.append("| **step (CUDA events)** | " + " | ".join(f"{r['step_ms']:.2f}" for r in results) + " |")
    out = ["Per step, ms (kernel durations summed by class; the step includes the GPU's idle gaps).", ""] + lines
    base = next((r for r in results if r["provider"] == "hf"), None)
    if base:
        need = base["step_ms"] / target
        out += ["", f"Target {target}x HF eager: a step of at most {need:.2f} ms (HF eager {base['step_ms']:.2f} ms)."]
        for r in results:
            if r["provider"] == "hf":
                continue
            cl = r["classes_ms"]
            floor = cl.get("GEMM", 0.0) + cl.get("attention", 0.0)
            idle = r["step_ms"] - r["busy_ms"]
            rest = r["busy_ms"] - floor
            out.append(f"- {r['provider']}: {r['step_ms']:.2f} ms = GEMM + attention {floor:.2f} + every other kernel "
                       f"{rest:.2f} + GPU idle {idle:.2f}; {base['step_ms'] / r['step_ms']:.2f}x now. GEMM + attention "
                       f"alone would be {base['step_ms'] / max(floor, 1e-9):.2f}x; meeting {target}x needs the other kernels and the idle "
                       f"time within {need - floor:.2f} ms (now {rest + idle:.2f}).")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="llama", choices=sorted(train_step.MODELS))
    ap.add_argument("--providers", default="hf,ours,ours+compile")
    ap.add_argument("--target", type=float, default=1.5, help="speed-up over HF eager the report measures against")
    ap.add_argument("--out", default="step_profile", help="directory for the report (report.md, report.json) and traces")
    ap.add_argument("--one", nargs=2, metavar=("MODEL", "PROVIDER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.one:
        one(args.one[0], args.one[1], args.out)
        return 0
    results = []
    for provider in args.providers.split(","):
        if provider not in train_step.PROVIDERS:
            print(f"unknown provider {provider!r}; one of {', '.join(train_step.PROVIDERS)}", file=sys.stderr)
            return 2
        proc = subprocess.run([sys.executable, __file__, "--one", args.model, provider, "--out", args.out],
                              capture_output=True, text=True)
        line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
        if proc.returncode != 0 or line is None:
            print(f"{provider}: failed (exit {proc.returncode})\n{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        results.append(json.loads(line))
        print(f"{provider}: step {results[-1]['step_ms']:.2f} ms", flush=True)
    if not results:
        return 1
    text = report(results, args.target)
    for r in results:
        text += f"\nTop kernels, {r['provider']} (ms per step):\n\n| kernel | class | ms |\n|---|---|---|\n"
        text += "".join(f"| `{n}` | {c} | {t:.3f} |\n" for n, c, t in r["top"])
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
