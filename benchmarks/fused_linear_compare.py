#!/usr/bin/env python3
"""A kernel-dev fused linear + loss (liger_kernels.ops.<op> with a FUSED_LINEAR description) against PyTorch.

    python3 benchmarks/fused_linear_compare.py --op fused_linear_ce --dtype bf16 --json out.json
    python3 benchmarks/fused_linear_compare.py --op fused_linear_ce --dtype bf16 --check-only --json check.json

kernel_dev_compare.py hands fused-linear ops here (Verify calls that script), so the arguments are
the same plus the LM-head shape (default: the op's profile, FUSED_LINEAR["bench"]).

--check-only (Verify's hard gate): the loss, grad_x and grad_weight of ours in the dtype against the
binding's unfused `reference` evaluated in fp64 on the same (already quantised) inputs, with several
chunks (chunk_rows 64) and a ragged last chunk; cross-entropy targets include ignored rows.

Timing (default), forward + backward of each, the median of CUDA-event timings:
  fused    ours (the forward computes the gradients; the backward scales them)
  gemms    the same GEMMs alone, same shapes and chunks: per chunk logits = x_c @ w.T (and the
           teacher's), grad_x_c = dlogits @ w, grad_w += dlogits.T @ x_c (torch.mm / addmm, cuBLAS)
  unfused  the binding's `reference`: the whole logits, the loss in fp32, autograd
Peak memory: the most memory allocated during one forward + backward above what was allocated
before it (the inputs), for fused and unfused. Targets (issue 18): fused peak <= 1/4 of unfused,
fused time <= 1.10 x the GEMMs alone.
Exit 0 measured / agreed; 1 disagreement or error; 3 not run (no torch, no GPU).
"""
import ctypes
import json
import math
import statistics
import sys

from compare_common import (add_leading_arguments, add_trailing_arguments, family_main, judged, parser, relative_l2,
                            tolerance_entry, torch_dtype)

DEFAULT_TOL = {"fp32": (1e-5, 1e-3, 1e-4), "fp16": (2e-3, 2e-2, 5e-3), "bf16": (1.6e-2, 6e-2, 2e-2)}


def arguments(argv=None):
    ap = parser(__doc__)
    add_leading_arguments(ap, "ignored (kernel_dev_compare.py's argument)", "ignored")
    ap.add_argument("--tokens", type=int, default=0, help="default: the profile's benchmark tokens")
    ap.add_argument("--hidden", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=0)
    ap.add_argument("--runs", type=int, default=20)
    add_trailing_arguments(ap)
    return ap.parse_args(argv)


def make_inputs(torch, spec, tokens, hidden, vocab, dtype, seed, grads=True):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(tokens, hidden, device="cuda", generator=g).to(dtype)
    w = (torch.randn(vocab, hidden, device="cuda", generator=g) / math.sqrt(hidden)).to(dtype)
    x.requires_grad_(grads)
    w.requires_grad_(grads)
    if spec["loss"] == "cross_entropy":
        t = torch.randint(0, vocab, (tokens,), device="cuda", generator=g)
        t[3::7] = spec["ignore_index"]  # ignored rows
        return (x, w, t)
    tx = torch.randn(tokens, hidden, device="cuda", generator=g).to(dtype)
    tw = (1.5 * torch.randn(vocab, hidden, device="cuda", generator=g) / math.sqrt(hidden)).to(dtype)
    return (x, w, tx, tw)


def compare(torch, name, ours, ref, entry):
    o = ours.detach().double().reshape(-1)
    r = ref.detach().double().reshape(-1)
    diff = torch.nan_to_num((o - r).abs(), nan=float("inf"))
    atol, rtol, l2 = entry
    bad = diff > atol + rtol * r.abs()
    rel_l2, denom = relative_l2(o, r)
    # The bound grows by twice what storing the exact result in the output dtype alone costs: fp16
    # gradients of a loss averaged over rows sit in fp16's subnormal range (2^-24 apart), where no
    # kernel can store them closer (as the C++ tests' with_output_rounding).
    if denom > 0 and ours.dtype != torch.float64:
        l2 += 2.0 * float((r.to(ours.dtype).double() - r).norm()) / denom
    return judged(torch, name, diff, bad, r, rel_l2, (atol, rtol, l2), lambda worst: [worst])


def check(a, torch, mod):
    from liger_kernels import _lib
    spec = mod.FUSED_LINEAR
    ours_fn = getattr(mod, a.op)
    dtype = torch_dtype(torch, a.dtype)
    table = tolerance_entry(a, DEFAULT_TOL)
    tokens, hidden, vocab = 300, 256, 1000
    inputs = make_inputs(torch, spec, tokens, hidden, vocab, dtype, seed=1)
    _lib.set_tunables(a.op, {"chunk_rows": 64})  # five chunks, the last one ragged
    try:
        loss = ours_fn(*inputs)
        loss.backward()
    finally:
        _lib.set_tunables(a.op, None)
    leaves = [v.detach().double().requires_grad_(v.requires_grad) if v.is_floating_point() else v for v in inputs]
    ref = mod.reference(*leaves)
    ref.backward()
    lines, tensors, agree = [], [], True
    for name, ours, want, scale in (("loss", loss, ref, 1.0), ("grad_x", inputs[0].grad, leaves[0].grad, 1.0),
                                    ("grad_weight", inputs[1].grad, leaves[1].grad, 2.0)):
        entry, line = compare(torch, name, ours, want, (table[0] * scale, table[1] * scale, table[2] * scale))
        tensors.append(entry)
        lines.append(line)
        agree = agree and entry["agree"]
    lines.append(f"{a.op} vs its unfused PyTorch version in fp64, {a.dtype} {tokens}x{hidden}x{vocab}, chunk_rows 64: "
                 f"{'all outputs and gradients agree' if agree else 'DISAGREEMENT: the kernel fails Verify'}")
    print("\n".join(lines))
    rep = {"op": a.op, "eager": "reference (unfused)", "dtype": a.dtype, "rows": tokens, "cols": vocab, "agree": agree,
           "tensors": tensors, "lines": lines}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rep, f, indent=2)
    return 0 if agree else 1


def timed(torch, fn, runs):
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def peak_mib(torch, fn):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def chunk_rows(mod, op, tokens, hidden, vocab, dtype_enum):
    from liger_kernels import _lib
    t = _lib.LigerTunables()
    _lib.call(f"liger_{op}_default_tunables", 90, tokens, hidden, vocab, dtype_enum, ctypes.byref(t))
    return int(t.chunk_rows)


def measure(a, torch, mod):
    from liger_kernels import _torch as T
    spec = mod.FUSED_LINEAR
    ours_fn = getattr(mod, a.op)
    dtype = torch_dtype(torch, a.dtype)
    bench = spec["bench"]
    tokens = getattr(a, "tokens", 0) or bench["tokens"]
    hidden = getattr(a, "hidden", 0) or bench["hidden"]
    vocab = getattr(a, "vocab", 0) or bench["vocab"]
    runs = max(3, min(a.runs, 50))
    inputs = make_inputs(torch, spec, tokens, hidden, vocab, dtype, seed=0)
    x, w = inputs[0], inputs[1]
    chunk = chunk_rows(mod, a.op, tokens, hidden, vocab, T.dtype_enum(x, a.op))

    def clear():
        for v in inputs:
            if v.is_floating_point():
                v.grad = None

    def fused():
        clear()
        ours_fn(*inputs).backward()

    def unfused():
        clear()
        mod.reference(*inputs).backward()

    distill = spec["loss"] != "cross_entropy"
    xd, wd = x.detach(), w.detach()
    logits = torch.empty(chunk, vocab, device="cuda", dtype=dtype)
    teacher = torch.empty(chunk, vocab, device="cuda", dtype=dtype) if distill else None
    gx = torch.empty_like(xd)
    gw = torch.empty_like(wd)

    def gemms():
        for r0 in range(0, tokens, chunk):
            m = min(chunk, tokens - r0)
            xc, lc = xd[r0:r0 + m], logits[:m]
            torch.mm(xc, wd.t(), out=lc)
            if distill:
                torch.mm(inputs[2][r0:r0 + m], inputs[3].t(), out=teacher[:m])
            torch.mm(lc, wd, out=gx[r0:r0 + m])
            if r0 == 0:
                torch.mm(lc.t(), xc, out=gw)
            else:
                gw.addmm_(lc.t(), xc)

    rep = {"op": a.op, "dtype": a.dtype, "loss": spec["loss"],
           "shape": {"tokens": tokens, "hidden": hidden, "vocab": vocab, "chunk_rows": chunk},
           "torch_compile_error": "not measured for fused-linear ops (compared with the GEMMs alone and unfused eager)"}
    lines = []
    rep["fused_ms"] = timed(torch, fused, runs)
    rep["gemms_ms"] = timed(torch, gemms, runs)
    rep["vs_gemms"] = rep["fused_ms"] / rep["gemms_ms"]
    fused_peak = peak_mib(torch, fused)
    rep["peak_mib"] = {"fused": fused_peak}
    lines.append(f"fused {rep['fused_ms']:.3f} ms, GEMMs alone {rep['gemms_ms']:.3f} ms "
                 f"({rep['vs_gemms']:.3f}x; target <= 1.10), chunk_rows {chunk}")
    try:
        rep["unfused_ms"] = timed(torch, unfused, max(3, runs // 4))
        unfused_peak = peak_mib(torch, unfused)
        rep["peak_mib"]["unfused"] = unfused_peak
        rep["speedup"] = {"full": rep["unfused_ms"] / rep["fused_ms"]}
        rep["memory_ratio"] = fused_peak / unfused_peak if unfused_peak > 0 else float("nan")
        rep["memory_saving"] = 1.0 - rep["memory_ratio"]
        lines.append(f"unfused PyTorch {rep['unfused_ms']:.3f} ms ({rep['speedup']['full']:.2f}x slower than fused); peak "
                     f"memory fused {fused_peak:.0f} MiB vs unfused {unfused_peak:.0f} MiB "
                     f"(ratio {rep['memory_ratio']:.3f}; target <= 0.25)")
    except torch.cuda.OutOfMemoryError as e:  # the unfused logits may not fit: that is the point
        rep["unfused_error"] = f"out of memory ({str(e).splitlines()[0]})"
        lines.append("unfused PyTorch: out of memory at this shape")
        torch.cuda.empty_cache()
    rep["targets"] = {"vs_gemms_max": 1.10, "memory_ratio_max": 0.25, "speed_ok": rep["vs_gemms"] <= 1.10,
                      "memory_ok": rep.get("memory_ratio", 0.0) <= 0.25}
    rep["lines"] = lines
    print("\n".join(lines))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rep, f, indent=2)
    return 0


def run(a, torch, mod):
    # kernel_dev_compare.py's namespace lacks the shape arguments: the profile's shape is used.
    return check(a, torch, mod) if a.check_only else measure(a, torch, mod)


def main():
    return family_main(arguments(), "FUSED_LINEAR", "a fused linear + loss op (no FUSED_LINEAR)", run)


if __name__ == "__main__":
    sys.exit(main())
