#!/usr/bin/env python3
"""Attributes a generated integration's convergence mismatch (issue 19) to its cause, on a GPU.

    python3 scripts/gpu/conv_diag.py MODEL [MODEL...] [--dtype fp32|bf16] [--steps 20]

For each model (the module name of tests/python/test_autopatch_<MODEL>.py) it trains the mini
model of that test the way test_convergence does (same init, batches, AdamW, clipping) and prints
per-step loss differences against the unpatched reference for:

  - the unpatched model a second time: the reference's own run-to-run noise (non-deterministic
    kernels such as atomics in embedding or attention backwards); a test bound tighter than this
    cannot pass, whatever the patch does;
  - each kernel of the integration alone (one keyword of apply_liger_kernel_to_<MODEL> on, the
    others off): which replacement moves the losses;
  - every kernel on (what the test runs).

Columns: first step whose loss differs by more than 1e-4, max |loss diff| over the steps, and the
worst parameter relative-error norm after the last step (with the parameter's name).
"""
import argparse
import importlib.util
import inspect
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "kernels", "python"))
sys.path.insert(0, os.path.join(REPO, "tests", "python"))

import torch  # noqa: E402

from liger_kernels.transformers import _autopatch_testing as T  # noqa: E402


def load_test_module(model):
    path = os.path.join(REPO, "tests", "python", f"test_autopatch_{model}.py")
    if not os.path.exists(path):
        sys.exit(f"conv_diag: {path} does not exist (name a model with a generated integration test)")
    spec = importlib.util.spec_from_file_location(f"test_autopatch_{model}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def train(mod, cfg, dtype, init_state, steps, kernels):
    """One training run; kernels: None = unpatched, else the apply function's keyword arguments."""
    integ = mod.integ
    apply_fn = next(getattr(integ, a) for a in dir(integ) if a.startswith("apply_liger_kernel_to_"))
    revert_fn = next(getattr(integ, a) for a in dir(integ) if a.startswith("revert_liger_kernel_to_"))
    if kernels is not None:
        apply_fn(**kernels)
    try:
        torch.manual_seed(0)
        model = mod.CAUSAL_LM(cfg)
        model.load_state_dict(init_state)
        model.to(T.DEV, dtype)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
        losses = []
        for step in range(steps):
            ids, labels, mask = T.batch(cfg, 100 + step, sub_vocab=T.SUB_VOCAB)
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(float(out.loss.detach()))
        params = {n: p.detach().double().clone() for n, p in model.named_parameters()}
        return losses, params
    finally:
        revert_fn()


def compare(ref, other):
    (rl, rp), (ol, op) = ref, other
    diffs = [abs(a - b) for a, b in zip(rl, ol)]
    first = next((i for i, d in enumerate(diffs) if d > 1e-4), None)
    worst, worst_name = 0.0, "-"
    for n, r in rp.items():
        e = float((op[n] - r).norm() / r.norm().clamp_min(1e-30))
        if e > worst:
            worst, worst_name = e, n
    return first, max(diffs), worst, worst_name


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--steps", type=int, default=T.STEPS)
    args = ap.parse_args()
    dtype = torch.float32 if args.dtype == "fp32" else torch.bfloat16
    print(f"| model | run | first step off by > 1e-4 | max loss diff | worst param rel. norm |")
    print("|---|---|---|---|---|")
    for model in args.models:
        mod = load_test_module(model)
        apply_fn = next(getattr(mod.integ, a) for a in dir(mod.integ) if a.startswith("apply_liger_kernel_to_"))
        kinds = [p for p, v in inspect.signature(apply_fn).parameters.items() if isinstance(v.default, bool)]
        cfg = mod.mini_config()
        torch.manual_seed(42)
        init_state = {k: v.clone() for k, v in mod.CAUSAL_LM(cfg).state_dict().items()}
        ref = train(mod, cfg, dtype, init_state, args.steps, None)
        runs = [("unpatched again", None)]
        for kind in kinds:
            if kind == "cross_entropy":
                continue  # the test's logits variant; fused_linear_cross_entropy covers the loss
            runs.append((f"{kind} alone", {k: k == kind for k in kinds}))
        runs.append(("all (as the test)", {}))
        for label, kernels in runs:
            first, dmax, worst, wname = compare(ref, train(mod, cfg, dtype, init_state, args.steps, kernels))
            print(f"| {model} | {label} | {'-' if first is None else first} | {dmax:.3e} | {worst:.3e} ({wname}) |",
                  flush=True)


if __name__ == "__main__":
    main()
