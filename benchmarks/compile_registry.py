#!/usr/bin/env python3
"""Fills the compile backend's decision table: per op and shape class, the library op against
Inductor compiling the same PyTorch, forward + backward, on this GPU.

    python benchmarks/compile_registry.py                 # all ops, writes liger_kernels/compile/decisions.json
    python benchmarks/compile_registry.py --ops rms_norm,swiglu --out /tmp/d.json

Entries of other GPUs (sm) already in the table are kept; this GPU's are replaced. Both sides are
compiled, as in a training step: Inductor alone on the PyTorch the rule replaces, against the same
function compiled with the liger backend replacing only this op (so each side pays the same guard
and launch costs, and the library side pays what a custom op costs inside a compiled graph). Times
are the median of --repeats CUDA-event timings of --iters forward+backward calls each, after warm-up,
shapes static; the range of the repeats is recorded, and the library counts as faster only when its
slowest repeat beats Inductor's fastest (a win inside the noise is not a win)."""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "kernels", "python"))

from liger_kernels.compile import Backend  # noqa: E402
from liger_kernels.compile.registry import TABLE_PATH, library_wins, registry, shape_class  # noqa: E402


def _outputs(out):
    return out if isinstance(out, (tuple, list)) else (out,)


def _timed(fn, inputs, grads, iters, repeats):
    def step():
        for t in inputs:
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.grad = None
        outs = _outputs(fn(*inputs))
        torch.autograd.backward(outs, grads)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / iters)
    times.sort()
    spread = (times[0], times[-1])
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    return times[len(times) // 2], spread, peak, _device_ms(step, iters)


def _device_ms(step, iters):
    """GPU kernel time per step (the profiler's self device time, summed): what a step costs when
    the host runs ahead of the GPU, as in large-model training, without the per-call host work."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            step()
        torch.cuda.synchronize()
    total_us = 0.0
    for e in prof.key_averages():
        total_us += getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0.0)
    return total_us / iters / 1e3


def save(args, kept, rows, sm):
    commit = os.environ.get("LIGER_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    table = {"device": torch.cuda.get_device_name(), "date": datetime.date.today().isoformat(), "commit": commit,
             "torch": torch.__version__, "dtype": args.dtype,
             "method": "median of %d x %d fwd+bwd, CUDA events; Inductor vs the liger backend (this op only), both torch.compile(dynamic=False)" % (
                 args.repeats, args.iters),
             "entries": kept + rows}
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(table, f, indent=1)
    os.replace(tmp, args.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", default="", help="comma-separated op names (default: every registered op with a benchmark)")
    ap.add_argument("--out", default=TABLE_PATH)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("compile_registry.py: needs a CUDA device (the table records GPU measurements)")
    dtype = getattr(torch, args.dtype)
    major, minor = torch.cuda.get_device_capability()
    sm = major * 10 + minor
    wanted = [o for o in args.ops.split(",") if o]
    entries = [e for e in registry().entries() if e.bench and (not wanted or e.name in wanted)]
    unknown = set(wanted) - {e.name for e in registry().entries()}
    if unknown:
        sys.exit(f"compile_registry.py: unknown op(s) {sorted(unknown)}; known: {sorted(registry().ops)}")

    old = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
    kept = [e for e in old.get("entries", []) if int(e["sm"]) != sm or (wanted and e["op"] not in wanted)]
    rows = []
    t0 = time.time()
    for entry in entries:
        for dims in entry.bench_dims:
            torch._dynamo.reset()
            _lib_fn, ref_fn, inputs = entry.bench(dims, dtype, "cuda")
            with torch.no_grad():
                outs = _outputs(ref_fn(*inputs))
            grads = [torch.randn_like(o) if o.is_floating_point() else None for o in outs]
            compiled = torch.compile(ref_fn, dynamic=False)
            ind_ms, ind_range, ind_mib, ind_dev = _timed(compiled, inputs, grads, args.iters, args.repeats)
            torch._dynamo.reset()
            backend = Backend(policy="always", ops=[entry.name])
            with_library = torch.compile(ref_fn, dynamic=False, backend=backend)
            lib_ms, lib_range, lib_mib, lib_dev = _timed(with_library, inputs, grads, args.iters, args.repeats)
            cls = shape_class(entry.name, dims)
            if not backend.summary().get(entry.name):
                print(f"{entry.name} {cls}: the backend did not place the op in its own reference "
                      f"({[str(d) for d in backend.report]}); not recorded", flush=True)
                continue
            row = {"op": entry.name, "sm": sm, "class": cls, "dims": dims, "dtype": args.dtype,
                   "library_ms": round(lib_ms, 4), "inductor_ms": round(ind_ms, 4),
                   "library_device_ms": round(lib_dev, 4), "inductor_device_ms": round(ind_dev, 4),
                   "library_ms_range": [round(v, 4) for v in lib_range],
                   "inductor_ms_range": [round(v, 4) for v in ind_range],
                   "library_peak_mib": round(lib_mib, 1), "inductor_peak_mib": round(ind_mib, 1)}
            rows.append(row)
            print(f"[{time.time() - t0:6.1f}s] {entry.name:28s} {cls:28s} library {lib_ms:8.4f} ms  "
                  f"inductor {ind_ms:8.4f} ms  x{ind_ms / lib_ms:5.2f}  device {lib_dev:7.4f} / {ind_dev:7.4f} ms  peak {lib_mib:8.1f} / {ind_mib:8.1f} MiB",
                  flush=True)
            del inputs, grads, outs
        save(args, kept, rows, sm)  # after each op: a run cut short keeps what it measured
    save(args, kept, rows, sm)
    wins = sum(1 for r in rows if library_wins(r, "speed")[0])
    dev_wins = sum(1 for r in rows if library_wins(r, "speed", "device")[0])
    print(f"wrote {args.out}: {len(rows)} measurements on sm_{sm}, library faster in {wins} (wall, outside the "
          f"spread), in {dev_wins} (GPU time)")

if __name__ == "__main__":
    main()
