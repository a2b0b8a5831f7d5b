"""Where a profiled training step's GPU time goes, from a torch.profiler Chrome trace: every CUDA
kernel (and memcpy/memset) as an interval, sorted into classes by its name, and the interval
arithmetic that says how much communication the compute hid.

Shared by benchmarks/step_profile.py (one GPU: which classes of kernels make the step) and
benchmarks/train_distributed.py --profile-dir (several GPUs: how much NCCL time is exposed).
Pure Python, no torch import: the CPU tests exercise it on a small hand-written trace.
"""
from __future__ import annotations

import json
import re

# Ordered: the first class whose pattern matches the (demangled) kernel name wins. Attention comes
# before GEMM because cuDNN's and FlashAttention's kernels carry "gemm"-like tile names too; this
# library's kernels (namespace liger::kernels) before everything, so a kernel of ours is never
# counted as PyTorch's.
KERNEL_CLASSES = [
    ("communication", re.compile(r"nccl", re.I)),
    ("this library", re.compile(r"liger::kernels|liger_kernels")),
    ("attention", re.compile(r"flash|fmha|attention|sdpa|cudnn_generated_fort_native_sdpa", re.I)),
    ("GEMM", re.compile(r"gemm|nvjet|cutlass|xmma|cublas|sm\d+_.*_tn|s16816|Kernel2", re.I)),
    ("optimizer", re.compile(r"multi_tensor_apply|fused_adam|adamw?_", re.I)),
    ("Liger-Kernel (Triton)", re.compile(r"^(liger_\w*|_\w*(rms_norm|swiglu|geglu|layer_norm)\w*_kernel\w*|_triton_rope|element_mul_kernel)$")),
    ("Inductor (Triton)", re.compile(r"^triton_", re.I)),
    ("copy / fill", re.compile(r"^Memcpy|^Memset|copy_kernel|fill_kernel|CatArrayBatchedCopy", re.I)),
    ("other PyTorch", re.compile(r".")),
]


def classify(name: str) -> str:
    for cls, pattern in KERNEL_CLASSES:
        if pattern.search(name):
            return cls
    return "other PyTorch"


def load_intervals(trace_path: str):
    """[(start_us, end_us, name, stream)] of the GPU work in a Chrome trace that torch.profiler wrote."""
    with open(trace_path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    out = []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        start = float(e["ts"])
        out.append((start, start + float(e.get("dur", 0.0)), e.get("name", ""), e.get("args", {}).get("stream", e.get("tid"))))
    out.sort()
    return out


def merge(intervals):
    """The union of [start, end) intervals as disjoint sorted intervals."""
    merged = []
    for s, e in sorted((s, e) for s, e, *_ in intervals):
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1][1] = e
        else:
            merged.append([s, e])
    return merged


def length(merged) -> float:
    return sum(e - s for s, e in merged)


def uncovered(intervals, cover) -> float:
    """Time inside `intervals` (their union) that no interval of `cover` overlaps."""
    a, b = merge(intervals), merge(cover)
    total, j = 0.0, 0
    for s, e in a:
        t = s
        while j < len(b) and b[j][1] <= t:
            j += 1
        k = j
        while t < e:
            if k >= len(b) or b[k][0] >= e:
                total += e - t
                break
            if b[k][0] > t:
                total += b[k][0] - t
            t = max(t, b[k][1])
            k += 1
    return total


def summarize(intervals, steps: int) -> dict:
    """Per-step figures in ms: time by kernel class (summed kernel durations), the GPU's busy span
    (the union of everything), communication time, and the communication no compute overlapped."""
    if not intervals:
        return dict(steps=steps, classes_ms={}, busy_ms=0.0, span_ms=0.0, comm_ms=0.0, comm_exposed_ms=0.0)
    by_class: dict[str, float] = {}
    comm, compute = [], []
    for iv in intervals:
        cls = classify(iv[2])
        by_class[cls] = by_class.get(cls, 0.0) + (iv[1] - iv[0])
        (comm if cls == "communication" else compute).append(iv)
    span = max(e for _, e, *_ in intervals) - min(s for s, *_ in intervals)
    per = 1e-3 / max(steps, 1)
    return dict(steps=steps,
                classes_ms={k: round(v * per, 3) for k, v in sorted(by_class.items(), key=lambda kv: -kv[1])},
                busy_ms=round(length(merge(intervals)) * per, 3),
                span_ms=round(span * per, 3),
                comm_ms=round(length(merge(comm)) * per, 3),
                comm_exposed_ms=round(uncovered(comm, compute) * per, 3))


def top_kernels(intervals, steps: int, n: int = 12):
    totals: dict[str, float] = {}
    for s, e, name, _ in intervals:
        totals[name] = totals.get(name, 0.0) + (e - s)
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:n]
    return [(name[:110], classify(name), round(t * 1e-3 / max(steps, 1), 3)) for name, t in ranked]
