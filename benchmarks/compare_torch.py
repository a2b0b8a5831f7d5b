#!/usr/bin/env python3
"""Side-by-side benchmark of every liger_kernels op against PyTorch eager, torch.compile and (when
importable) Liger-Kernel, in bf16 at the issue's shapes.

    python3 benchmarks/compare_torch.py --out docs/benchmarks/compare_torch_h100   # -> .json and .md
    python3 benchmarks/compare_torch.py --quick --out /tmp/quick                     # smaller subset

For each op, provider and mode (forward / backward / full = forward+backward): the median of CUDA-event
timings (each repetition preceded by untimed set-up, e.g. the forward for "backward", and an L2 flush;
taken in --rounds rounds that rotate the providers' order, so clock drift is shared, not billed to one;
with --launch-cushion-ms > 0, a GPU-side wait before each timing lets the host enqueue the whole timed
call first, so the times are device times, free of the host's launch overhead),
p20/p80, and the peak memory above what was allocated before the call (torch.cuda.max_memory_allocated
delta: the transient memory). The device-to-device copy bandwidth is measured in the same run so that
the figures can be read against the memory ceiling. Needs a CUDA GPU, torch and the built library
(LIGER_KERNELS_LIBRARY or build*/kernels/libliger_kernels.so)."""
import argparse
import datetime
import json
import math
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

import liger_kernels as lk  # noqa: E402
from liger_kernels import functional as LF  # noqa: E402

try:  # Liger-Kernel, the Triton library, if installed
    from liger_kernel.transformers import functional as LKT  # type: ignore

    LIGER_KERNEL = f"liger_kernel {getattr(__import__('liger_kernel'), '__version__', '?')}"
except Exception as exc:  # noqa: BLE001
    LKT = None
    LIGER_KERNEL = None
    LIGER_KERNEL_WHY = f"{exc.__class__.__name__}: {exc}"

DEV = "cuda"
PROVIDERS = ["torch", "torch.compile", "liger_agent", "liger_kernel"]
MODES = ["forward", "backward", "full"]


# ------------------------------------------------------------------ timing
class Timer:
    def __init__(self, reps, warmup, flush_bytes=256 << 20, cushion_ms=0.0):
        self.reps = reps
        self.warmup = warmup
        self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device=DEV)
        # A GPU spin of cushion_ms before each start event: the host launches the timed call while the
        # GPU still spins, so a call whose host side (Python, autograd, launches) outlasts the L2 flush
        # does not leave the GPU idle inside the timed span. Without it a slow or busy host CPU showed
        # as kernel time (H100, 2026-11-21: RMSNorm backward 0.17 ms on one machine, 0.26 ms with a
        # p20-p80 spread of 0.17-0.36 on another, for every provider, while liger-bench agreed).
        self.cushion_cycles = 0
        if cushion_ms > 0:
            torch.cuda._sleep(1 << 20)  # first call loads the kernel
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(1 << 24)
            end.record()
            torch.cuda.synchronize()
            self.cushion_cycles = int((1 << 24) * cushion_ms / max(start.elapsed_time(end), 1e-3))

    def run(self, setup, timed, reps=0):
        """Median, p20, p80 (and every time) in ms of `timed(state)` with state = setup() untimed before
        each rep."""
        reps = reps or self.reps
        for _ in range(self.warmup):
            timed(setup())
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            state = setup()
            self.flush.zero_()  # L2 flush, so inputs are not served from the 50 MB cache
            if self.cushion_cycles:
                torch.cuda._sleep(self.cushion_cycles)
            starts[i].record()
            timed(state)
            ends[i].record()
        torch.cuda.synchronize()
        return summarize([s.elapsed_time(e) for s, e in zip(starts, ends)])


def summarize(times_ms):
    t = sorted(times_ms)
    q = lambda f: t[min(len(t) - 1, int(f * len(t)))]  # noqa: E731
    return {"median_ms": q(0.5), "p20_ms": q(0.2), "p80_ms": q(0.8), "reps": len(t), "times_ms": t}


def peak_bytes(fn):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def copy_bandwidth(timer):
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=DEV).random_()
    b = torch.empty_like(a)
    r = timer.run(lambda: None, lambda _: b.copy_(a))
    del a, b
    return 2 * n / (r["median_ms"] * 1e-3) / 1e9  # GB/s, read + write


# ------------------------------------------------------------------ ops
def _rms_eager(x, w, eps=1e-6):
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def _rope_eager(q, k, cos, sin):
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _ce_eager(logits, target):
    return F.cross_entropy(logits.float(), target)  # as transformers' loss: upcast, then CE


def _flce_eager(x, w, target):
    return F.cross_entropy((x @ w.T).float(), target)


def op_specs(quick):
    """name -> (make_inputs() -> (args, grad_tensors), {provider: fn(*args) -> tensor or tuple}, shape text)."""
    bf = torch.bfloat16
    T, H, I = (4096, 4096, 14336) if not quick else (2048, 2048, 4096)
    if quick:
        ce_rows, vocab, flce_tokens, flce_hidden = 2048, 32000, 2048, 2048
        rope_shape = (2, 16, 1024, 128, 4)
    else:
        ce_rows, vocab, flce_tokens, flce_hidden = 8192, 128256, 8192, 4096
        rope_shape = (4, 32, 4096, 128, 8)
    rows = 16384 if not quick else 4096

    def norm_inputs(cols=H, bias=False, residual=False):
        x = torch.randn(rows, cols, device=DEV, dtype=bf, requires_grad=True)
        w = (1 + 0.1 * torch.randn(cols, device=DEV, dtype=bf)).requires_grad_()
        args = [x, w]
        if bias:
            args.append((0.1 * torch.randn(cols, device=DEV, dtype=bf)).requires_grad_())
        if residual:
            args.insert(1, torch.randn(rows, cols, device=DEV, dtype=bf, requires_grad=True))
        return args

    def glu_inputs():
        return [torch.randn(rows, I, device=DEV, dtype=bf, requires_grad=True) for _ in range(2)]

    def rope_inputs(hf_layout=True):
        # HF layout: the attention projections' [B, T, H, D] output seen as [B, H, T, D], as HF models
        # and Liger-Kernel's RoPE benchmark pass q and k; contiguous [B, H, T, D] as the second case.
        B, Hq, S, D, Hk = rope_shape
        if hf_layout:
            q = torch.randn(B, S, Hq, D, device=DEV, dtype=bf).transpose(1, 2).requires_grad_()
            k = torch.randn(B, S, Hk, D, device=DEV, dtype=bf).transpose(1, 2).requires_grad_()
        else:
            q = torch.randn(B, Hq, S, D, device=DEV, dtype=bf, requires_grad=True)
            k = torch.randn(B, Hk, S, D, device=DEV, dtype=bf, requires_grad=True)
        pos = torch.arange(S, device=DEV, dtype=torch.float32)
        inv = 1.0 / (10000 ** (torch.arange(0, D, 2, device=DEV, dtype=torch.float32) / D))
        emb = torch.cat([torch.outer(pos, inv)] * 2, dim=-1)[None]
        return [q, k, emb.cos().to(bf), emb.sin().to(bf)]

    def ce_inputs():
        logits = torch.randn(ce_rows, vocab, device=DEV, dtype=bf, requires_grad=True)
        return [logits, torch.randint(0, vocab, (ce_rows,), device=DEV)]

    def flce_inputs():
        x = torch.randn(flce_tokens, flce_hidden, device=DEV, dtype=bf, requires_grad=True)
        w = (torch.randn(vocab, flce_hidden, device=DEV, dtype=bf) * 0.02).requires_grad_()
        return [x, w, torch.randint(0, vocab, (flce_tokens,), device=DEV)]

    def far_eager(x, r, w):
        s = x + r
        return _rms_eager(s, w), s

    specs = {
        "rms_norm": (norm_inputs, {"torch": _rms_eager, "liger_agent": lambda x, w: LF.rms_norm(x, w),
                                   "liger_kernel": (lambda x, w: LKT.liger_rms_norm(x, w, 1e-6)) if LKT else None},
                     f"x [{rows}, {H}]"),
        "fused_add_rms_norm": (lambda: norm_inputs(residual=True),
                               {"torch": far_eager, "liger_agent": lambda x, r, w: LF.fused_add_rms_norm(x, r, w),
                                "liger_kernel": None}, f"x, residual [{rows}, {H}]"),
        "layer_norm": (lambda: norm_inputs(bias=True),
                       {"torch": lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5),
                        "liger_agent": lambda x, w, b: LF.layer_norm(x, w, b, 1e-5),
                        "liger_kernel": (lambda x, w, b: LKT.liger_layer_norm(x, w, b, 1e-5)) if LKT else None},
                       f"x [{rows}, {H}]"),
        "swiglu": (glu_inputs, {"torch": lambda a, b: F.silu(a) * b, "liger_agent": LF.swiglu,
                                "liger_kernel": (lambda a, b: LKT.liger_swiglu(a, b)) if LKT else None},
                   f"a, b [{rows}, {I}]"),
        "geglu": (glu_inputs, {"torch": lambda a, b: F.gelu(a, approximate="tanh") * b, "liger_agent": LF.geglu,
                               "liger_kernel": (lambda a, b: LKT.liger_geglu(a, b)) if LKT else None},
                  f"a, b [{rows}, {I}]"),
        "rope": (rope_inputs, {"torch": _rope_eager, "liger_agent": lambda q, k, c, s: LF.rope(q, k, c, s),
                               "liger_kernel": (lambda q, k, c, s: LKT.liger_rope(q, k, c, s)) if LKT else None},
                 "q [{0}, {1}, {2}, {3}], k [{0}, {4}, {2}, {3}] (HF layout)".format(*rope_shape)),
        "rope_bhtd": (lambda: rope_inputs(hf_layout=False),
                      {"torch": _rope_eager, "liger_agent": lambda q, k, c, s: LF.rope(q, k, c, s),
                       "liger_kernel": (lambda q, k, c, s: LKT.liger_rope(q, k, c, s)) if LKT else None},
                      "q [{0}, {1}, {2}, {3}], k [{0}, {4}, {2}, {3}] (contiguous)".format(*rope_shape)),
        "cross_entropy": (ce_inputs, {"torch": _ce_eager, "liger_agent": lambda l, t: LF.cross_entropy(l, t),
                                      "liger_kernel": (lambda l, t: LKT.liger_cross_entropy(l, t)) if LKT else None},
                          f"logits [{ce_rows}, {vocab}]"),
        "fused_linear_cross_entropy": (
            flce_inputs,
            {"torch": _flce_eager, "liger_agent": lambda x, w, t: LF.fused_linear_cross_entropy(x, w, t),
             "liger_kernel": (lambda x, w, t: LKT.liger_fused_linear_cross_entropy(x, w, t)) if LKT else None},
            f"tokens {flce_tokens}, hidden {flce_hidden}, vocab {vocab}"),
    }
    for name, (_, fns, _) in specs.items():
        fns["torch.compile"] = torch.compile(fns["torch"], dynamic=False)
    return specs


def _outputs(out):
    return [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if o.requires_grad]


def bench_one(timer, make_inputs, fn, mode, reps=0, measure_memory=True):
    args = make_inputs()
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    grads_cache = {}

    def clear():
        for a in leaves:
            a.grad = None

    def upstream(outs):
        key = tuple((tuple(o.shape), o.dtype) for o in outs)
        if key not in grads_cache:
            grads_cache[key] = [torch.randn_like(o) if o.dim() else torch.ones_like(o) for o in outs]
        return grads_cache[key]

    def fwd():
        return fn(*args)

    def bwd(out):
        # autograd.grad rather than .backward(): gradients come back as in a real model, where
        # these inputs are activations flowing on to the previous layer, instead of being
        # accumulated into leaf .grad fields (which copies any gradient an op still references,
        # e.g. one computed in the forward pass, and would bill that copy to the op).
        outs = _outputs(out)
        return torch.autograd.grad(outs, leaves, upstream(outs), allow_unused=True)

    mem = None
    if mode == "forward":
        res = timer.run(lambda: clear(), lambda _: fwd(), reps)
        if measure_memory:
            mem = peak_bytes(fwd)
    elif mode == "backward":
        def setup():
            clear()
            return fwd()
        res = timer.run(setup, bwd, reps)
        if measure_memory:
            clear()
            out = fwd()
            mem = peak_bytes(lambda: bwd(out))
            del out
    else:
        res = timer.run(lambda: clear(), lambda _: bwd(fwd()), reps)
        if measure_memory:
            clear()
            mem = peak_bytes(lambda: bwd(fwd()))
    if mem is not None:
        res["peak_mem_gb"] = mem / 1e9
    del args, leaves
    return res


def git_commit():
    # LIGER_COMMIT first: a copy of the working tree (the GPU machine's) can carry a stale .git.
    if os.environ.get("LIGER_COMMIT"):
        return os.environ["LIGER_COMMIT"]
    try:
        return subprocess.check_output(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], text=True).strip()
    except Exception:  # noqa: BLE001
        return "unknown"


def write_markdown(path, meta, results):
    lines = [
        f"# liger_kernels vs PyTorch ({meta['dtype']})",
        "",
        f"- device: {meta['device']}; date: {meta['date']}; commit: {meta['commit']}"
        + ("" if meta.get("complete") else " (run cut short: the ops below are those measured)"),
        f"- torch {meta['torch']}, triton {meta['triton']}, library {meta['library_version']}",
        f"- device-to-device copy bandwidth measured in this run: {meta['copy_bandwidth_gbps']:.0f} GB/s (read + write)",
        f"- Liger-Kernel: {meta['liger_kernel']}",
        f"- median of {meta['reps']} CUDA-event timings per cell, in {meta.get('rounds', 1)} round(s) that rotate the"
        f" providers' order, each after {meta['warmup']} warm-ups; L2 flushed before each timing;"
        + (f" a {meta['launch_cushion_ms']:g} ms GPU-side wait before each timing (device times: host launch"
           " overhead not timed);" if meta.get("launch_cushion_ms") else " host launch overhead included when it"
           " outlasts the flush;")
        + " memory = peak allocated above the inputs (transient)",
        "",
        "| op | shape | mode | " + " | ".join(PROVIDERS) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in PROVIDERS) + " |",
    ]
    by = {}
    for r in results:
        by.setdefault((r["op"], r["mode"]), {})[r["provider"]] = r
    shapes = {r["op"]: r["shape"] for r in results}
    for (op, mode), cells in by.items():
        row = []
        for p in PROVIDERS:
            r = cells.get(p)
            if r is None:
                row.append("n/a")
            elif "error" in r:
                row.append(f"error ({r['error'][:40]})")
            else:
                row.append(f"{r['median_ms']:.3f} ms ({r['peak_mem_gb']:.2f} GB)")
        lines.append(f"| {op} | {shapes[op]} | {mode} | " + " | ".join(row) + " |")
    lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/benchmarks/compare_torch", help="output path prefix (.json and .md are added)")
    ap.add_argument("--quick", action="store_true", help="smaller shapes, fewer repetitions")
    ap.add_argument("--ops", default="", help="comma-separated subset of ops")
    ap.add_argument("--providers", default=",".join(PROVIDERS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--reps", type=int, default=0)
    ap.add_argument("--launch-cushion-ms", type=float, default=1.0,
                    help="GPU-side wait before each timing, so host launch overhead is not timed (0 = off)")
    ap.add_argument("--rounds", type=int, default=0,
                    help="rounds per cell, the providers' order rotated each round (default 3; --quick 1)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("compare_torch: no CUDA device; nothing measured", file=sys.stderr)
        return 77
    torch.manual_seed(0)
    reps = a.reps or (10 if a.quick else 25)
    rounds = a.rounds or (1 if a.quick else 3)
    warmup = 2 if a.quick else 3
    timer = Timer(reps, warmup, cushion_ms=a.launch_cushion_ms)
    from liger_kernels import _lib

    meta = {
        "device": torch.cuda.get_device_name(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "torch": torch.__version__,
        "triton": getattr(__import__("triton"), "__version__", "?") if _has("triton") else "absent",
        "python": platform.python_version(),
        "library_version": _lib.version(),
        "library_path": _lib.library_path(),
        "dtype": "bf16",
        "quick": a.quick,
        "reps": reps,
        "warmup": warmup,
        "rounds": rounds,
        "launch_cushion_ms": a.launch_cushion_ms,
        "liger_kernel": LIGER_KERNEL or f"not importable, skipped ({LIGER_KERNEL_WHY})",
        "complete": False,
    }
    meta["copy_bandwidth_gbps"] = copy_bandwidth(timer)
    print(f"# {meta['device']}  copy {meta['copy_bandwidth_gbps']:.0f} GB/s  Liger-Kernel: {meta['liger_kernel']}", flush=True)
    specs = op_specs(a.quick)
    order = ["cross_entropy", "fused_linear_cross_entropy", "rms_norm", "swiglu", "rope", "layer_norm", "geglu",
             "fused_add_rms_norm", "rope_bhtd"]  # the headline ops first: partial runs still cover them
    ops = a.ops.split(",") if a.ops else [o for o in order if o in specs] + [o for o in specs if o not in order]
    out_dir = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(out_dir, exist_ok=True)

    def save():  # after every op, so a run cut short keeps what it measured
        with open(a.out + ".json", "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
        write_markdown(a.out + ".md", meta, results)

    providers = a.providers.split(",")
    modes = a.modes.split(",")
    results = []
    for op in ops:
        make_inputs, fns, shape = specs[op]
        available = []
        for p in providers:
            if fns.get(p) is None:
                why = "Liger-Kernel not importable" if p == "liger_kernel" and LKT is None else "no implementation"
                print(f"{op:28s} {p:14s} skipped: {why}", flush=True)
            else:
                available.append(p)
        for m in modes:
            # Rounds rotate the providers' order and pool their samples: a GPU that heats up (and
            # lowers its clocks) through a long GEMM-bound cell would otherwise bill the slowdown to
            # whichever provider runs last.
            recs = {p: {"op": op, "shape": shape, "provider": p, "mode": m} for p in available}
            times = {p: [] for p in available}
            per_round = max(1, math.ceil(reps / rounds))
            for r in range(rounds):
                order = available[r % len(available):] + available[:r % len(available)] if available else []
                for p in order:
                    rec = recs[p]
                    if "error" in rec:
                        continue
                    try:
                        res = bench_one(timer, make_inputs, fns[p], m, per_round, measure_memory=(r == 0))
                        times[p] += res.pop("times_ms")
                        if r == 0:
                            rec["peak_mem_gb"] = res["peak_mem_gb"]
                    except Exception as exc:  # noqa: BLE001  (recorded, the run goes on)
                        rec["error"] = f"{exc.__class__.__name__}: {exc}"
                        print(f"{op:28s} {p:14s} {m:9s} ERROR {rec['error'][:200]}", flush=True)
                        traceback.print_exc(limit=3)
                    torch.cuda.empty_cache()
            for p in available:
                rec = recs[p]
                if "error" not in rec:
                    pooled = summarize(times[p])
                    pooled.pop("times_ms")
                    rec.update(pooled, rounds=rounds)
                    print(f"{op:28s} {p:14s} {m:9s} {rec['median_ms']:9.3f} ms  peak {rec['peak_mem_gb']:6.2f} GB", flush=True)
                results.append(rec)
        save()
    meta["complete"] = True
    save()
    print(f"wrote {a.out}.json and {a.out}.md")
    return 0


def _has(mod):
    try:
        __import__(mod)
        return True
    except Exception:  # noqa: BLE001
        return False


if __name__ == "__main__":
    sys.exit(main())
