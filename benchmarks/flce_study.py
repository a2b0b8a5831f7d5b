#!/usr/bin/env python3
"""Where FusedLinearCrossEntropy's time goes (bf16, tokens 8192, hidden 4096, vocab 128256).

    python3 benchmarks/flce_study.py [--chunks 2048,4096,8192] [--out prefix]

1. forward+backward median (CUDA events, L2 flushed, compare_torch's Timer) and transient memory of
   this library per chunk_rows tunable, next to torch.compile in the same process;
2. a torch.profiler timeline of one forward+backward at the default chunking: every GPU kernel in
   order with its start, duration and the idle gap before it, so idle time between the chunked
   launches shows where it is (host-side stalls vs kernel time).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_torch as ct  # noqa: E402
from liger_kernels import _lib  # noqa: E402
import liger_kernels.functional as LF  # noqa: E402

OP = "fused_linear_cross_entropy"


def timeline(fn, path):
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    events.sort(key=lambda e: e.time_range.start)
    t0 = events[0].time_range.start if events else 0
    prev_end = t0
    lines, busy, idle = [], 0.0, 0.0
    for e in events:
        start, end = e.time_range.start, e.time_range.end
        gap = max(0.0, start - prev_end)
        idle += gap
        busy += end - start
        lines.append(f"{(start - t0) / 1e3:9.3f} ms  gap {gap:8.1f} us  dur {(end - start):9.1f} us  {e.name[:110]}")
        prev_end = max(prev_end, end)
    head = f"kernels {len(events)}, busy {busy / 1e3:.3f} ms, idle gaps {idle / 1e3:.3f} ms, span {(prev_end - t0) / 1e3:.3f} ms"
    cpu = sorted(((e.key, e.cpu_time_total) for e in prof.key_averages()), key=lambda x: -x[1])[:25]
    with open(path, "w") as f:
        f.write(head + "\n\n" + "\n".join(lines) + "\n\nCPU totals (us):\n")
        f.write("\n".join(f"{t:12.1f}  {n}" for n, t in cpu) + "\n")
    print(head)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", default="2048,4096,8192")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--out", default="flce_study")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("not run: no CUDA device")
        return 3
    specs = ct.op_specs(quick=False)
    make_inputs, fns, shape = specs[OP]
    timer = ct.Timer(a.reps, 3)
    results = {"shape": shape, "device": torch.cuda.get_device_name(), "rows": []}
    ours = fns["liger_agent"]
    for provider, chunk in [("torch.compile", None), ("liger_agent", None)] + [("liger_agent", int(c)) for c in a.chunks.split(",") if c]:
        _lib.set_tunables(OP, {"chunk_rows": chunk} if chunk else None)
        r = ct.bench_one(timer, make_inputs, fns[provider], "full")
        row = {"provider": provider, "chunk_rows": chunk or "default", **r}
        results["rows"].append(row)
        print(json.dumps(row), flush=True)
    _lib.set_tunables(OP, None)
    args = make_inputs()
    leaves = [t for t in args if isinstance(t, torch.Tensor) and t.requires_grad]
    timeline(lambda: torch.autograd.grad(ours(*args), leaves), a.out + "-timeline.txt")
    with open(a.out + ".json", "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
