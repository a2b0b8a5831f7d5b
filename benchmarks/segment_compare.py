#!/usr/bin/env python3
"""A kernel-dev segment reduction (liger_kernels.ops.<op> with a SEGMENT description) against PyTorch.

    python3 benchmarks/segment_compare.py --op segment_mean --dtype bf16 --json out.json
    python3 benchmarks/segment_compare.py --op segment_mean --dtype bf16 --check-only --json check.json

kernel_dev_compare.py hands segment ops here (Verify calls that script), so the arguments are the
same plus the jagged shape. Inputs: `--segments` segments of uniform random length in
[`--min-rows`, `--max-rows`] (fixed seed) x `--features`, x laid out with the rows along the op's
pooled dim, the index given as the op takes it (offsets or lengths).

--check-only (Verify's hard gate): y and dx of ours in the dtype against two PyTorch versions of
the op evaluated in fp64 on the same (already quantised) inputs and upstream gradient: the Python
loop over the segments and index_add_ / scatter_reduce. Empty segments are included; for max/min
the values are distinct within every segment (integers, exact in bf16), so the gradient's row is
unambiguous (PyTorch splits a tie's gradient, the kernel sends it to the first row).

Timing (default): forward, backward and forward+backward ("full") of ours, the PyTorch loop,
index_add_ / scatter_reduce ("eager"), torch.compile of that, and torch.segment_reduce, each the
median of CUDA-event timings with a 256 MiB L2 flush before each repetition. % of copy: the bytes
the op must move (x, y, the offsets, argmax for max/min; dy, dx in the backward; each once) over
the time, against a device-to-device copy of 1 GiB measured in the same process.
Exit 0 measured / agreed; 1 disagreement or error; 3 not run (no torch, no GPU).
"""
import json
import sys

from compare_common import (add_leading_arguments, add_trailing_arguments, family_main, flushed_median_us, judged,
                            parser, relative_l2, tolerance_entry, torch_dtype)

DEFAULT_TOL = {"fp32": (1e-5, 1e-5, 1e-5), "fp16": (1e-3, 4e-3, 2e-3), "bf16": (4e-3, 1.6e-2, 8e-3)}


def arguments(argv=None):
    ap = parser(__doc__)
    add_leading_arguments(ap, "ignored (kernel_dev_compare.py's argument): the PyTorch versions come from the binding",
                          "ignored (segment ops have no parameters)")
    ap.add_argument("--segments", type=int, default=16384)
    ap.add_argument("--min-rows", type=int, default=1)
    ap.add_argument("--max-rows", type=int, default=512)
    ap.add_argument("--features", type=int, default=256)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--loop-runs", type=int, default=3, help="repetitions of the (slow) Python loop")
    add_trailing_arguments(ap)
    return ap.parse_args(argv)


def jagged(torch, segments, min_rows, max_rows, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    lengths = torch.randint(min_rows, max_rows + 1, (segments,), generator=g)
    offsets = torch.zeros(segments + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)
    return lengths.cuda(), offsets.cuda()


def make_x(torch, spec, lengths, offsets, features, dtype, seed, distinct):
    """x [rows, features] (rows along the pooled dim afterwards); distinct: integer values distinct
    within each segment and feature ((local_row * 67 + shift) mod length, 67 prime above the lengths)."""
    rows = int(offsets[-1])
    g = torch.Generator(device="cuda").manual_seed(seed)
    if distinct:
        seg = torch.repeat_interleave(torch.arange(lengths.numel(), device="cuda"), lengths)
        local = torch.arange(rows, device="cuda") - offsets[seg]
        length = lengths[seg]
        shift = torch.randint(0, 1 << 20, (features,), device="cuda", generator=g)
        v = (local[:, None] * 67 + shift[None, :]) % length[:, None] - length[:, None] // 2
        x = v.to(dtype)
    else:
        x = torch.randn(rows, features, device="cuda", generator=g).to(dtype)
    d = spec["pooled_dim"]
    return x if d in (0, -2) else x.movedim(0, d)


def compare(torch, name, ours, ref, table_entry):
    atol, rtol, l2 = table_entry
    o = ours.detach().double()
    r = ref.detach().double()
    if o.shape != r.shape:
        return {"tensor": name, "agree": False, "why": f"shape {tuple(o.shape)} != {tuple(r.shape)}"}, \
            f"DISAGREE {name}: shape {tuple(o.shape)} vs PyTorch {tuple(r.shape)}"
    both_inf = torch.isinf(o) & torch.isinf(r) & (torch.sign(o) == torch.sign(r))
    diff = torch.where(both_inf, torch.zeros_like(o), (o - r).abs())
    diff = torch.nan_to_num(diff, nan=float("inf"))
    bad = diff > atol + rtol * torch.where(both_inf, torch.zeros_like(r), r.abs())
    rk = torch.where(torch.isfinite(r), r, torch.zeros_like(r))
    ok = torch.where(torch.isfinite(r), o, torch.zeros_like(o))
    rel_l2, _ = relative_l2(ok, rk)

    def at_of(worst):
        return [int(i) for i in torch.unravel_index(torch.tensor(worst), r.shape)] if r.dim() and r.numel() else []
    return judged(torch, name, diff, bad, r, rel_l2, table_entry, at_of)


def check(torch, a, mod, dtype):
    spec = mod.SEGMENT
    ours_fn = getattr(mod, a.op)
    table = tolerance_entry(a, DEFAULT_TOL, float)
    lengths, offsets = jagged(torch, 512, 0, 64, 1)
    distinct = spec["reduce"] in ("max", "min")
    x = make_x(torch, spec, lengths, offsets, 33, dtype, 2, distinct)
    index = offsets if spec["index"] == "offsets" else lengths
    tensors, lines, agree = [], [], True

    def run(fn, to):
        xt = x.detach().to(to).requires_grad_(True)
        y = fn(xt, index)
        return y, xt

    y_ours, x_ours = run(ours_fn, dtype)
    g = torch.Generator(device="cuda").manual_seed(3)
    dy = torch.randn(y_ours.shape, device="cuda", generator=g).to(dtype)
    (dx_ours,) = torch.autograd.grad(y_ours, x_ours, dy)
    for label, fn in (("the PyTorch loop", mod.reference_loop), ("index_add_/scatter_reduce", mod.reference)):
        y_ref, x_ref = run(fn, torch.float64)
        (dx_ref,) = torch.autograd.grad(y_ref, x_ref, dy.double())
        for name, o, r in (("output y", y_ours, y_ref), ("dx", dx_ours, dx_ref)):
            entry, line = compare(torch, f"{name} vs {label}", o, r, table)
            tensors.append(entry)
            lines.append(line)
            agree = agree and entry["agree"]
    lines.append(f"{a.op} vs the PyTorch loop and index_add_/scatter_reduce in fp64, {a.dtype}, 512 segments of 0..64 "
                 f"rows x 33 features: {'all outputs and gradients agree' if agree else 'DISAGREEMENT: the kernel fails Verify'}")
    return {"op": a.op, "dtype": a.dtype, "agree": agree, "tensors": tensors, "lines": lines}


def measure_all(torch, a, mod, dtype):
    spec = mod.SEGMENT
    lengths, offsets = jagged(torch, a.segments, a.min_rows, a.max_rows, 1)
    rows = int(offsets[-1])
    x = make_x(torch, spec, lengths, offsets, a.features, dtype, 2, False)
    index = offsets if spec["index"] == "offsets" else lengths
    elem = x.element_size()
    arg = spec["reduce"] in ("max", "min")
    f_bytes = rows * a.features * elem + a.segments * a.features * elem + (a.segments + 1) * 8 \
        + (a.segments * a.features * 4 if arg else 0)
    bytes_ = {"forward": f_bytes, "backward": f_bytes, "full": 2 * f_bytes}
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")

    def median_us(setup, fn, runs, warmup):
        for _ in range(warmup):
            fn(setup())
        torch.cuda.synchronize()
        return flushed_median_us(torch, flush, setup, fn, runs)

    # Device copy bandwidth: read + write of 1 GiB.
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_us = median_us(lambda: None, lambda _: dst.copy_(src), 20, 3)
    copy_gbps = 2 * src.numel() / copy_us / 1e3
    del src, dst
    g = torch.Generator(device="cuda").manual_seed(3)
    dy = torch.randn((a.segments, a.features), device="cuda", generator=g).to(dtype)
    d = spec["pooled_dim"]
    if d not in (0, -2):
        dy = dy.movedim(0, d)

    def measure(fn, runs, warmup, grad_runs=None, grad_warmup=None):
        def leaf():
            return x.detach().requires_grad_(True)
        grad_runs = runs if grad_runs is None else grad_runs
        grad_warmup = warmup if grad_warmup is None else grad_warmup
        with torch.no_grad():
            fwd = median_us(lambda: None, lambda _: fn(x, index), runs, warmup)
        bwd = median_us(lambda: (lambda t: (fn(t, index), t))(leaf()),
                        lambda s: torch.autograd.grad(s[0], s[1], dy), grad_runs, grad_warmup)
        full = median_us(leaf, lambda t: torch.autograd.grad(fn(t, index), t, dy), grad_runs, grad_warmup)
        torch.cuda.empty_cache()
        return {"forward_us": fwd, "backward_us": bwd, "full_us": full}

    results, errors = {}, {}
    # The loop's backward runs one slice backward per segment, each writing a zero gradient of x's
    # full size (PyTorch's SliceBackward), so it is seconds per call at the shape: timed
    # once, after the forward repetitions warmed the allocator.
    impls = [("ours", getattr(mod, a.op), a.runs, 5, None, None), ("eager", mod.reference, a.runs, 3, None, None),
             ("torch_compile", torch.compile(mod.reference), a.runs, 3, None, None),
             ("segment_reduce", mod.reference_segment_reduce, a.runs, 3, None, None),
             ("loop", mod.reference_loop, a.loop_runs, 1, 1, 0)]
    for name, fn, runs, warmup, grad_runs, grad_warmup in impls:
        try:
            results[name] = measure(fn, runs, warmup, grad_runs, grad_warmup)
        except Exception as exc:  # noqa: BLE001 - a baseline that fails is reported, the rest stands
            errors[name] = f"{exc.__class__.__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    ours = results["ours"]
    modes = ("forward", "backward", "full")

    def speedup(base):
        if base not in results:
            return {}
        return {m: results[base][f"{m}_us"] / ours[f"{m}_us"] for m in modes}

    copy_fraction = {m: bytes_[m] / (ours[f"{m}_us"] * 1e3) / copy_gbps for m in modes}
    return {
        "op": a.op, "dtype": a.dtype, "device": torch.cuda.get_device_name(), "reduce": spec["reduce"],
        "index": spec["index"], "shape": f"{a.segments} segments of {a.min_rows}..{a.max_rows} rows ({rows} rows) x {a.features}",
        "timing": f"median of CUDA-event timings ({a.runs}; loop forward {a.loop_runs}, loop backward and full 1), "
                  "256 MiB L2 flush before each",
        "copy_gbps": copy_gbps, "bytes": bytes_, "copy_fraction": copy_fraction,
        "ours": ours, "eager_results": results.get("eager", {}), "torch_compile": results.get("torch_compile", {}),
        "segment_reduce": results.get("segment_reduce", {}), "loop": results.get("loop", {}),
        "eager": "index_add_/scatter_reduce (liger_kernels.ops.%s.reference)" % a.op,
        "speedup": speedup("eager"), "speedup_vs_compile": speedup("torch_compile"),
        "speedup_vs_loop": speedup("loop"), "speedup_vs_segment_reduce": speedup("segment_reduce"),
        "torch_compile_error": errors.get("torch_compile", ""), "errors": errors,
    }


def run(a, torch, mod):
    """Entry from kernel_dev_compare.py (its parsed arguments, torch imported, the op's module)."""
    dtype = torch_dtype(torch, a.dtype)
    for name, default in (("segments", 16384), ("min_rows", 1), ("max_rows", 512), ("features", 256), ("loop_runs", 3)):
        if not hasattr(a, name):
            setattr(a, name, default)
    if a.check_only:
        report = check(torch, a, mod, dtype)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(report, f, indent=2)
        for line in report["lines"]:
            print(line)
        return 0 if report["agree"] else 1
    result = measure_all(torch, a, mod, dtype)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)
    cf = result["copy_fraction"]
    print(f"{a.op} ({result['reduce']}, {result['index']}) {a.dtype}, {result['shape']}, {result['device']}:")
    print("  % of copy (bytes once, copy " + f"{result['copy_gbps']:.0f} GB/s): " +
          ", ".join(f"{m} {cf[m] * 100:.1f}%" for m in ("forward", "backward", "full")))
    for label, key in (("PyTorch loop", "speedup_vs_loop"), ("index_add_/scatter_reduce", "speedup"),
                       ("torch.compile(index_add_)", "speedup_vs_compile"), ("torch.segment_reduce", "speedup_vs_segment_reduce")):
        s = result[key]
        print(f"  vs {label}: " + (", ".join(f"{m} {v:.2f}x" for m, v in s.items()) if s else
                                   "not measured (" + result["errors"].get(key.replace("speedup_vs_", "").replace("speedup", "eager"), "?") + ")"))
    return 0


def main():
    return family_main(arguments(), "SEGMENT", "a segment reduction (no SEGMENT); use kernel_dev_compare.py", run)


if __name__ == "__main__":
    sys.exit(main())
