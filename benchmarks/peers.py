#!/usr/bin/env python3
"""Every op of the library against its peers, in one process: PyTorch eager, torch.compile of the
same eager code, Liger-Kernel (Triton, from its source), this library through its Python binding, and
this library under torch.compile.

    PYTHONPATH=.peers/liger-kernel/src python3 benchmarks/peers.py --out docs/benchmarks/peers_h100
    python3 benchmarks/peers.py --ops swiglu --shapes table --profile     # + a profiler trace per provider

Method (as in the issue that asked for it): forward + backward through autograd on leaf inputs
(`grad_to_none` clears their .grad between repetitions), `triton.testing.do_bench` median with the L2
cleared between runs, bf16; peak memory = torch.cuda.max_memory_allocated over one call minus what was
allocated before it (the call's transient memory). The gated MLP is also timed the way a model runs it
("mlp" shapes): a and b produced by linear layers from a leaf x, so the activation's inputs are
intermediates, which both libraries then overwrite in the backward.

In-place behaviour, and why the leaf figures differ in memory:
- Liger-Kernel's SwiGLU/GeGLU backward always writes da and db into a's and b's buffers, its RMSNorm
  (in_place=True by default) writes dx into dy's, and its cross-entropy writes the gradient into the
  logits during the forward. On leaf inputs that overwrites tensors the caller still holds (a, b, the
  incoming gradient, the logits a model returns to its caller as `out.logits`).
- This library does that only where no caller can hold the tensor: the MLP modules (the projections'
  outputs) and RMSNorm/FusedAddRMSNorm with in_place=True; its functional ops keep the caller's tensors
  intact. So on leaf inputs its peak memory is higher by exactly those buffers, by design.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import traceback

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "kernels", "python"))
peer_src = os.path.join(REPO, ".peers", "liger-kernel", "src")
if os.path.isdir(peer_src) and peer_src not in sys.path:
    sys.path.insert(0, peer_src)

import liger_kernels.functional as LF  # noqa: E402
from liger_kernels import _torch_ops  # noqa: E402

try:
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
    from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction
    from liger_kernel.ops.geglu import LigerGELUMulFunction
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    from liger_kernel.ops.rope import LigerRopeFunction
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    LIGER_WHY = None
except Exception as exc:  # noqa: BLE001
    LIGER_WHY = f"{type(exc).__name__}: {exc}"

DEV = "cuda"
DT = torch.bfloat16
PROVIDERS = ["eager", "torch.compile", "liger_kernel", "ours", "ours+compile"]


# ------------------------------------------------------------------ eager references
def rms_eager(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_eager(q, k, cos, sin):
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * c + rotate_half(q) * s, k * c + rotate_half(k) * s


# ------------------------------------------------------------------ ops: inputs and providers
def op_table():
    """name -> (shapes {label: dims}, make_inputs(dims) -> (leaves, extra), {provider: fn(leaves, extra)})."""
    r = lambda *s: torch.randn(*s, device=DEV, dtype=DT)  # noqa: E731
    leaf = lambda t: t.requires_grad_()  # noqa: E731

    def norm_inputs(d):
        n, h = d
        return [leaf(r(n, h)), leaf(torch.ones(h, device=DEV, dtype=DT))], None

    def ln_inputs(d):
        n, h = d
        return [leaf(r(n, h)), leaf(torch.ones(h, device=DEV, dtype=DT)), leaf(torch.zeros(h, device=DEV, dtype=DT))], None

    def glu_inputs(d):
        n, h = d
        return [leaf(r(n, h)), leaf(r(n, h))], None

    def mlp_inputs(d):  # x -> (gate, up) projections: the activation's inputs are intermediates
        n, h, i = d
        x = leaf(r(n, h) * 0.1)
        wg, wu = (torch.randn(i, h, device=DEV, dtype=DT) * h ** -0.5 for _ in range(2))
        return [x], (wg, wu)

    def rope_inputs(d):
        b, hq, hk, t, dd = d
        q = leaf(r(b, t, hq * dd).view(b, t, hq, dd).transpose(1, 2).detach())  # HF layout
        k = leaf(r(b, t, hk * dd).view(b, t, hk, dd).transpose(1, 2).detach())
        pos = torch.arange(t, device=DEV, dtype=torch.float32)
        inv = 1.0 / (10000 ** (torch.arange(0, dd, 2, device=DEV, dtype=torch.float32) / dd))
        ang = torch.outer(pos, inv)
        emb = torch.cat((ang, ang), -1)[None]
        return [q, k], (emb.cos().to(DT), emb.sin().to(DT))

    def ce_inputs(d):
        n, v = d
        return [leaf(r(n, v))], torch.randint(0, v, (n,), device=DEV)

    def flce_inputs(d):
        n, h, v = d
        return [leaf(r(n, h) * 0.5), leaf(r(v, h) * h ** -0.5)], torch.randint(0, v, (n,), device=DEV)

    liger = LIGER_WHY is None
    rms = {
        "eager": lambda L, e: rms_eager(L[0], L[1]),
        "ours": lambda L, e: LF.rms_norm(L[0], L[1], 1e-6),
    }
    if liger:
        rms["liger_kernel"] = lambda L, e: LigerRMSNormFunction.apply(L[0], L[1], 1e-6, 0.0, "llama", True)
    ln = {
        "eager": lambda L, e: F.layer_norm(L[0], (L[0].shape[-1],), L[1], L[2], 1e-5),
        "ours": lambda L, e: LF.layer_norm(L[0], L[1], L[2], 1e-5),
    }
    if liger:
        ln["liger_kernel"] = lambda L, e: LigerLayerNormFunction.apply(L[0], L[1], L[2], 1e-5)
    sw = {"eager": lambda L, e: F.silu(L[0]) * L[1], "ours": lambda L, e: LF.swiglu(L[0], L[1])}
    ge = {"eager": lambda L, e: F.gelu(L[0], approximate="tanh") * L[1], "ours": lambda L, e: LF.geglu(L[0], L[1])}
    if liger:
        sw["liger_kernel"] = lambda L, e: LigerSiLUMulFunction.apply(L[0], L[1])
        ge["liger_kernel"] = lambda L, e: LigerGELUMulFunction.apply(L[0], L[1])

    def mlp(act):
        def run(kind, L, e):
            x = L[0]
            a, b = x @ e[0].t(), x @ e[1].t()
            if kind == "eager":
                return (F.silu(a) if act == "swiglu" else F.gelu(a, approximate="tanh")) * b
            if kind == "ours":  # what the MLP modules call
                return (LF.swiglu if act == "swiglu" else LF.geglu)(a, b, in_place_backward=True)
            return (LigerSiLUMulFunction if act == "swiglu" else LigerGELUMulFunction).apply(a, b)
        fns = {"eager": lambda L, e: run("eager", L, e), "ours": lambda L, e: run("ours", L, e)}
        if liger:
            fns["liger_kernel"] = lambda L, e: run("liger", L, e)
        return fns

    rope = {"eager": lambda L, e: rope_eager(L[0], L[1], *e), "ours": lambda L, e: LF.rope(L[0], L[1], *e)}
    if liger:
        rope["liger_kernel"] = lambda L, e: LigerRopeFunction.apply(L[0], L[1], *e)
    ce = {"eager": lambda L, e: F.cross_entropy(L[0].float(), e), "ours": lambda L, e: LF.cross_entropy(L[0], e)}
    if liger:
        ce["liger_kernel"] = lambda L, e: LigerCrossEntropyFunction.apply(L[0], e, None, -100, 0.0, 0.0, "mean", None, False)[0]
    flce = {
        "eager": lambda L, e: F.cross_entropy((L[0] @ L[1].t()).float(), e),
        "ours": lambda L, e: LF.fused_linear_cross_entropy(L[0], L[1], e),
    }
    if liger:
        flce["liger_kernel"] = lambda L, e: LigerFusedLinearCrossEntropyFunction.apply(L[0], L[1], e)[0]

    return {
        "rms_norm": (dict(table=(16384, 4096), small=(4096, 4096), medium=(8192, 8192)), norm_inputs, rms),
        "layer_norm": (dict(table=(16384, 4096), small=(4096, 4096), medium=(8192, 8192)), ln_inputs, ln),
        "swiglu": (dict(table=(16384, 14336), small=(4096, 4096), medium=(2048, 14336)), glu_inputs, sw),
        "geglu": (dict(table=(16384, 14336), small=(4096, 4096), medium=(2048, 14336)), glu_inputs, ge),
        "swiglu_mlp": (dict(table=(16384, 4096, 14336), small=(4096, 1024, 4096)), mlp_inputs, mlp("swiglu")),
        "geglu_mlp": (dict(table=(16384, 4096, 14336), small=(4096, 1024, 4096)), mlp_inputs, mlp("geglu")),
        "rope": (dict(table=(4, 32, 8, 4096, 128), small=(1, 32, 8, 1024, 128), medium=(2, 32, 8, 2048, 128)),
                 rope_inputs, rope),
        "cross_entropy": (dict(table=(8192, 128256), small=(4096, 32000), medium=(4096, 128256)), ce_inputs, ce),
        "fused_linear_cross_entropy": (dict(table=(8192, 4096, 128256), small=(4096, 2048, 32000)), flce_inputs, flce),
    }


def _as_loss(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return outs


def measure(fn, leaves, extra, grads):
    """(median ms, transient peak MB) of forward + backward of fn on the leaves."""
    import triton.testing

    def call():
        outs = _as_loss(fn(leaves, extra))
        torch.autograd.backward(outs, grads)

    call()  # compile / autotune outside the timing
    torch.cuda.synchronize()
    for t in leaves:
        t.grad = None
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    call()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    for t in leaves:
        t.grad = None
    ms = triton.testing.do_bench(call, grad_to_none=leaves, return_mode="median", warmup=25, rep=200)
    return ms, peak


def run_op(name, shape_label, dims, make, fns, profile_dir=None):
    torch.manual_seed(0)
    leaves, extra = make(dims)
    with torch.no_grad():
        outs = _as_loss(fns["eager"](leaves, extra))
    grads = [torch.randn_like(o) if o.dim() else torch.ones_like(o) for o in outs]
    providers = dict(fns)
    providers["torch.compile"] = torch.compile(fns["eager"])
    providers["ours+compile"] = torch.compile(fns["ours"])
    row = dict(op=name, shape=shape_label, dims=list(dims))
    for p in PROVIDERS:
        if p not in providers:
            row[p] = dict(error=f"not importable: {LIGER_WHY}")
            continue
        try:
            ms, mb = measure(providers[p], leaves, extra, grads)
            row[p] = dict(ms=round(ms, 4), peak_mb=round(mb, 1))
        except Exception as exc:  # noqa: BLE001 - a failing provider is a result, not the end of the run
            row[p] = dict(error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            traceback.print_exc()
        torch._dynamo.reset() if p.endswith("compile") else None
        if profile_dir and p in ("ours", "liger_kernel") and p in providers:
            profile(providers[p], leaves, extra, grads, os.path.join(profile_dir, f"{name}-{shape_label}-{p}"))
    return row


def profile(fn, leaves, extra, grads, stem):
    from torch.profiler import ProfilerActivity, profile as tprofile

    def call():
        torch.autograd.backward(_as_loss(fn(leaves, extra)), grads)
        for t in leaves:
            t.grad = None

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    with tprofile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            call()
        torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=14)
    # One file for every profile of a run (the GPU machine returns few files).
    with open(os.path.join(os.path.dirname(stem), "profiles.txt"), "a") as f:
        f.write(f"== {os.path.basename(stem)} (5 calls)\n{table}\n")
    print(f"== profile {os.path.basename(stem)} (5 calls)\n{table}", flush=True)


def git_commit():
    try:
        return os.environ.get("LIGER_COMMIT") or subprocess.check_output(
            ["git", "-C", REPO, "rev-parse", "--short", "HEAD"], text=True).strip()
    except Exception:  # noqa: BLE001
        return "unknown"


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def write(out, meta, rows, quiet=False):
    with open(out + ".json", "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    lines = [f"# Peers, one process: {meta['device']}, {meta['date']}, commit {meta['commit']}", "",
             f"torch {meta['torch']}, triton {meta['triton']}, Liger-Kernel: {meta['liger_kernel']}. "
             "bf16, forward + backward on leaf inputs, do_bench median (ms); peak = transient MB of one call.",
             f"Our launch ops: {meta.get('ours_ops', 'Python implementations')}.", "",
             "| op | shape | eager | torch.compile | Liger-Kernel | ours | ours+compile | ours vs Liger | ours vs compile "
             "| peak MB ours / Liger / compile |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ms = {p: r[p].get("ms") for p in PROVIDERS}
        mb = {p: r[p].get("peak_mb") for p in PROVIDERS}
        cell = lambda p: f"{ms[p]:.3f}" if ms[p] else r[p].get("error", "-")[:40]  # noqa: E731
        best_ours = min(x for x in (ms["ours"], ms["ours+compile"]) if x) if (ms["ours"] or ms["ours+compile"]) else None
        lines.append(f"| {r['op']} | {r['shape']} {tuple(r['dims'])} | " + " | ".join(cell(p) for p in PROVIDERS)
                     + f" | {ratio(ms['liger_kernel'], best_ours)} | {ratio(ms['torch.compile'], best_ours)} | "
                     f"{mb['ours']} / {mb['liger_kernel']} / {mb['torch.compile']} |")
    lines += ["", "Ratios > 1 mean ours is faster (peer time / ours, the better of ours eager and compiled)."]
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    if not quiet:
        print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", default="all", help="comma-separated op names (default: all)")
    ap.add_argument("--shapes", default="table,small,medium", help="shape labels to run")
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "benchmarks", "peers"))
    ap.add_argument("--profile", action="store_true", help="also write a profiler table per op for ours and Liger")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("not run: no CUDA device", file=sys.stderr)
        return 77
    table = op_table()
    names = list(table) if args.ops == "all" else args.ops.split(",")
    unknown = [n for n in names if n not in table]
    if unknown:
        print(f"unknown op(s) {unknown}; known: {', '.join(table)}", file=sys.stderr)
        return 2
    import triton

    meta = dict(device=torch.cuda.get_device_name(), date=datetime.date.today().isoformat(), commit=git_commit(),
                torch=torch.__version__, triton=triton.__version__, host=platform.node(),
                liger_kernel=LIGER_WHY or "from .peers/liger-kernel/src", ours_ops=_torch_ops.status())
    rows = []
    for n in names:
        shapes, make, fns = table[n]
        for label in args.shapes.split(","):
            if label in shapes:
                rows.append(run_op(n, label, shapes[label], make, fns, os.path.dirname(args.out) if args.profile else None))
                print(json.dumps(rows[-1]), flush=True)
                write(args.out, meta, rows, quiet=True)  # a run cut short keeps its finished rows
                torch.cuda.empty_cache()
    write(args.out, meta, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
