#!/usr/bin/env python3
"""Where FusedLinearCrossEntropy's time goes (bf16, tokens 8192, hidden 4096, vocab 128256).

    python3 benchmarks/flce_study.py [--chunks 2048,4096,8192] [--out prefix]

1. forward+backward median (CUDA events, L2 flushed, compare_torch's Timer) and transient memory of
   this library per chunk_rows tunable, next to torch.compile in the same process;
2. a torch.profiler timeline of one forward+backward at the default chunking: every GPU kernel in
   order with its start, duration and the idle gap before it, so idle time between the chunked
   launches shows where it is (host-side stalls vs kernel time); and the same for torch.compile
   (<out>-timeline-compile.txt), to compare GEMM by GEMM.
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
    ap.add_argument("--rounds", type=int, default=3, help="rounds rotating the configurations' order")
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
    configs = [("torch.compile", None), ("liger_agent", None)] + [("liger_agent", int(c)) for c in a.chunks.split(",") if c]
    # Rounds rotate the configurations' order (as compare_torch.py): a GEMM-bound loop runs the GPU at
    # its power limit, clocks drift over seconds, and a fixed order would bill that to one of them.
    times = [[] for _ in configs]
    mem = [None] * len(configs)
    per_round = max(1, -(-a.reps // a.rounds))
    for r in range(a.rounds):
        for i in [(r + j) % len(configs) for j in range(len(configs))]:
            provider, chunk = configs[i]
            _lib.set_tunables(OP, {"chunk_rows": chunk} if chunk else None)
            res = ct.bench_one(timer, make_inputs, fns[provider], "full", per_round, measure_memory=(r == 0))
            times[i] += res.pop("times_ms")
            if r == 0:
                mem[i] = res["peak_mem_gb"]
    for i, (provider, chunk) in enumerate(configs):
        stats = ct.summarize(times[i])
        stats.pop("times_ms")
        row = {"provider": provider, "chunk_rows": chunk or "default", **stats, "rounds": a.rounds, "peak_mem_gb": mem[i]}
        results["rows"].append(row)
        print(json.dumps(row), flush=True)
    _lib.set_tunables(OP, None)
    args = make_inputs()
    leaves = [t for t in args if isinstance(t, torch.Tensor) and t.requires_grad]
    timeline(lambda: torch.autograd.grad(ours(*args), leaves), a.out + "-timeline.txt")
    # torch.compile's kernels for the same call: where its time goes, GEMM by GEMM, next to ours.
    timeline(lambda: torch.autograd.grad(fns["torch.compile"](*args), leaves), a.out + "-timeline-compile.txt")
    with open(a.out + ".json", "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
