#!/usr/bin/env python3
"""Why a compiled patched model is slower or faster than the eager one: graph breaks, recompiles and
the step's top CUDA kernels, eager vs torch.compile, for one model of train_step.py.

    python3 benchmarks/compile_diag.py --model llama --out /tmp/diag.txt
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_step  # noqa: E402  (model shapes and the patching rule)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="llama")
    ap.add_argument("--provider", default="ours")
    ap.add_argument("--out", default="compile_diag.txt")
    args = ap.parse_args()
    import torch
    import transformers
    from torch.profiler import ProfilerActivity, profile

    spec = train_step.MODELS[args.model]
    train_step.patch(args.provider, spec["model_type"])
    cfg = transformers.AutoConfig.for_model(spec["model_type"], **spec["kw"])
    cfg._attn_implementation = "sdpa"
    cfg.use_cache = False
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to("cuda", torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    ids = torch.randint(0, cfg.vocab_size, (spec["batch"], spec["seq"]), device="cuda")
    out = open(args.out, "w")
    for name, fwd in (("eager", model), ("compiled", torch.compile(model))):
        def step():
            fwd(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        out.write(f"===== {args.provider} {name}\n")
        out.write(prof.key_averages().table(sort_by="cuda_time_total", row_limit=40) + "\n")
        if name == "compiled":
            from torch._dynamo.utils import counters
            out.write(f"graph breaks: {dict(counters['graph_break'])}\n")
            out.write(f"dynamo stats: {dict(counters['stats'])}\n")
    out.close()
    print(open(args.out).read()[-6000:])


if __name__ == "__main__":
    main()
