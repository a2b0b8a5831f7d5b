"""The parts shared by kernel-dev's comparison scripts (kernel_dev_compare.py and the op families it
hands over to: fused_linear_compare.py, segment_compare.py): the command line Verify passes to all
of them, the exit for a machine that cannot run them, loading the op's binding, the judgement of
one tensor against PyTorch's fp64 result, and the L2-flushed CUDA-event timing.

Nothing here imports torch at module level: the scripts must report "not run" (exit 3) on a machine
without it, and the pure parts can be checked there.
"""
import argparse
import importlib
import json
import math
import statistics
import sys


def not_run(reason):
    """The last line says why; exit 3 tells Verify the comparison did not run (no torch, no GPU)."""
    print(f"not run: {reason}")
    sys.exit(3)


def parser(doc):
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_leading_arguments(ap, eager_help, params_help):
    """--op, --eager, --inputs, --params, --dtype: kernel_dev_compare.py's first arguments, which a
    family script accepts (Verify calls kernel_dev_compare.py, which hands its arguments over)."""
    ap.add_argument("--op", required=True)
    ap.add_argument("--eager", default="", help=eager_help)
    ap.add_argument("--inputs", default="", help="ignored (kernel_dev_compare.py's argument)")
    ap.add_argument("--params", default="", help=params_help)
    ap.add_argument("--dtype", default="bf16", choices=["fp32", "fp16", "bf16"])


def add_trailing_arguments(ap):
    """--json, --check-only, --tolerances and kernel_dev_compare.py's shape arguments (ignored)."""
    ap.add_argument("--json", default="")
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--tolerances", default="", help='JSON {"outputs and input gradients": [atol, rtol, max_rel_l2]}')
    ap.add_argument("--rows", type=int, default=0, help="ignored (kernel_dev_compare.py's argument)")
    ap.add_argument("--cols", type=int, default=0, help="ignored (kernel_dev_compare.py's argument)")
    ap.add_argument("--check-rows", type=int, default=0, help="ignored (kernel_dev_compare.py's argument)")


def torch_dtype(torch, name):
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def tolerance_entry(a, defaults, cast=None):
    """(atol, rtol, max_rel_l2) for a.dtype: --tolerances' "outputs and input gradients" where given
    (each value through `cast` where one is named), else defaults[a.dtype]."""
    table = defaults[a.dtype]
    if a.tolerances:
        t = json.loads(a.tolerances).get("outputs and input gradients")
        if t:
            table = tuple(t) if cast is None else tuple(cast(v) for v in t)
    return table


def relative_l2(o, r):
    """(||o - r|| / ||r||, ||r||); the absolute L2 error where the reference is all zero."""
    denom = float(r.norm())
    err = float((o - r).norm())
    return (err / denom if denom > 0 else err), denom


def judged(torch, name, diff, bad, r, rel_l2, entry, at_of):
    """The verdict on one tensor: `diff` |ours - ref| (NaN as inf), `bad` the elements outside
    atol + rtol*|ref|, `r` the fp64 reference, `entry` (atol, rtol, max_rel_l2), `at_of(flat index)`
    the position reported for the worst element. Returns (the JSON entry, the line printed)."""
    atol, rtol, l2 = entry
    worst = int(torch.argmax(diff)) if diff.numel() else 0
    at = at_of(worst)
    max_abs = float(diff.flatten()[worst]) if diff.numel() else 0.0
    max_rel = max_abs / max(abs(float(r.flatten()[worst])), 1e-30) if diff.numel() else 0.0
    n_bad = int(bad.sum())
    good = n_bad == 0 and math.isfinite(rel_l2) and rel_l2 <= l2
    report = {"tensor": name, "agree": good, "elements_outside": n_bad, "elements": int(r.numel()),
              "max_abs_error": max_abs, "max_rel_error": max_rel, "at": at, "rel_l2": rel_l2, "max_rel_l2": l2}
    line = (f"{'agree' if good else 'DISAGREE'} {name}: max abs error {max_abs:.3e} at {at}, relative L2 {rel_l2:.3e} "
            f"(bound {l2:.1e}), {n_bad}/{r.numel()} elements outside atol {atol:.1e} + rtol {rtol:.1e}*|ref|")
    return report, line


def flushed_median_us(torch, flush, setup, fn, runs):
    """Median microseconds of fn(setup()) (setup untimed), with an L2 flush (`flush.zero_()`)
    enqueued before each repetition and a CUDA event pair per repetition, synchronised once at
    the end."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for i in range(runs):
        state = setup()
        flush.zero_()
        starts[i].record()
        fn(state)
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends))


def import_torch():
    """torch with a CUDA device, else not run (exit 3)."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        not_run(f"torch not importable ({e.__class__.__name__})")
    if not torch.cuda.is_available():
        not_run("no CUDA device visible to torch")
    return torch


def import_op(op, *names):
    """The op's generated binding (with each of `names` looked up in it), or None after saying why not."""
    try:
        mod = importlib.import_module(f"liger_kernels.ops.{op}")
        for name in names:
            getattr(mod, name)
        return mod
    except Exception as e:  # noqa: BLE001
        print(f"cannot import the generated binding liger_kernels.ops.{op}: {e}")
        return None


def family_main(a, attr, what, run):
    """A family script run on its own: torch and a GPU (else not run), the op's binding, which must
    be of the family (`attr` present, else "is not <what>"), then run(a, torch, mod)."""
    torch = import_torch()
    mod = import_op(a.op)
    if mod is None:
        return 1
    if not hasattr(mod, attr):
        print(f"liger_kernels.ops.{a.op} is not {what}")
        return 1
    return run(a, torch, mod)
