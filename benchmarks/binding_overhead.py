#!/usr/bin/env python3
"""Host overhead and GPU work of the liger_kernels Python binding, op by op, against PyTorch eager.

    python3 benchmarks/binding_overhead.py --json binding_overhead.json
    python3 benchmarks/binding_overhead.py --ops rms_norm,swiglu --calls 5000 --no-profile
    python3 benchmarks/binding_overhead.py --quick            # compare_torch.py's --quick shapes for (b)

(a) Host cost: microseconds per call of the forward, and of forward+backward, on a tiny input
    (GPU work negligible): `--calls` calls back to back after warm-ups, wall clock, one
    torch.cuda.synchronize() at the end. While the GPU keeps up this is the CPU cost of one call:
    Python, autograd, the dispatcher, the caching allocator, ctypes, the launches. Providers: torch
    (eager), liger_agent (the public functional API), and liger_agent via torch.ops (the same
    autograd.Function with the direct eager path switched off, so every launch goes through the
    registered torch.ops.liger.* op: what the dispatcher costs).
(b) GPU work: torch.profiler over one forward+backward (after a warm-up one) at compare_torch.py's
    benchmark shape (bf16): every CUDA kernel, memcpy and memset, with its count and total GPU time,
    so that any work beyond the op's own kernels (copies, casts, fills, extra reductions) shows.

The backward takes gradients with torch.autograd.grad and the upstream gradients compare_torch.py
uses (random, ones for a scalar loss). A scalar loss's upstream gradient is never read on the host:
the library's scale kernel skips a factor of exactly 1 on the device (Liger-Kernel reads it with a
device sync instead).

Prints tables; --json writes everything. Exit 0 measured; 3 not run (the last line says why: no
torch, no CUDA device); 1 error.
"""
import argparse
import contextlib
import datetime
import json
import os
import platform
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

OPS = ["rms_norm", "layer_norm", "fused_add_rms_norm", "swiglu", "geglu", "rope", "cross_entropy",
       "fused_linear_cross_entropy"]
HOST_PROVIDERS = ["torch", "liger_agent", "liger_agent via torch.ops"]
PROFILE_PROVIDERS = ["torch", "liger_agent"]
DEV = "cuda"


def not_run(reason):
    print(f"not run: {reason}")
    sys.exit(3)


def tiny_inputs(op, torch):
    """Inputs of the same structure as compare_torch.py's, small enough that the GPU time is negligible."""
    bf = torch.bfloat16

    def leaf(*shape, scale=1.0, offset=0.0):
        return (torch.randn(*shape, device=DEV, dtype=bf) * scale + offset).requires_grad_()

    rows, cols = 8, 256
    if op == "rms_norm":
        return [leaf(rows, cols), leaf(cols, scale=0.1, offset=1.0)]
    if op == "layer_norm":
        return [leaf(rows, cols), leaf(cols, scale=0.1, offset=1.0), leaf(cols, scale=0.1)]
    if op == "fused_add_rms_norm":
        return [leaf(rows, cols), leaf(rows, cols), leaf(cols, scale=0.1, offset=1.0)]
    if op in ("swiglu", "geglu"):
        return [leaf(rows, cols), leaf(rows, cols)]
    if op == "rope":
        B, Hq, Hk, S, D = 1, 4, 2, 8, 64
        pos = torch.arange(S, device=DEV, dtype=torch.float32)
        inv = 1.0 / (10000 ** (torch.arange(0, D, 2, device=DEV, dtype=torch.float32) / D))
        emb = torch.cat([torch.outer(pos, inv)] * 2, dim=-1)[None]
        return [leaf(B, Hq, S, D), leaf(B, Hk, S, D), emb.cos().to(bf), emb.sin().to(bf)]
    if op == "cross_entropy":
        return [leaf(rows, 512), torch.randint(0, 512, (rows,), device=DEV)]
    if op == "fused_linear_cross_entropy":
        return [leaf(rows, cols), leaf(512, cols, scale=0.02), torch.randint(0, 512, (rows,), device=DEV)]
    raise ValueError(f"unknown op {op}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", default=",".join(OPS), help="comma-separated subset of: " + ", ".join(OPS))
    ap.add_argument("--calls", type=int, default=2000, help="timed calls per host measurement")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="compare_torch.py's --quick shapes for the kernel lists")
    ap.add_argument("--no-profile", action="store_true", help="host timings only")
    ap.add_argument("--json", default="", help="write the results to this file")
    a = ap.parse_args()

    try:
        import torch
    except Exception as e:  # noqa: BLE001
        not_run(f"torch not importable ({e.__class__.__name__})")
    if not torch.cuda.is_available():
        not_run("no CUDA device visible to torch")
    sys.path.insert(0, os.path.join(REPO, "kernels", "python"))
    sys.path.insert(0, HERE)
    try:
        import compare_torch as CT  # the benchmark shapes and the eager/ours functions
        from liger_kernels import _lib
        from liger_kernels import _torch as LT
    except Exception as e:  # noqa: BLE001
        print(f"cannot import liger_kernels / compare_torch: {e.__class__.__name__}: {e}")
        return 1

    ops = [o for o in a.ops.split(",") if o]
    unknown = [o for o in ops if o not in OPS]
    if unknown:
        print(f"unknown op(s) {unknown}; known: {OPS}")
        return 1
    torch.manual_seed(0)
    specs = CT.op_specs(a.quick)

    @contextlib.contextmanager
    def through_dispatcher():
        """Every liger op call through torch.ops.liger.* (the eager bypass off)."""
        saved = LT.direct
        LT.direct = lambda *tensors: False
        try:
            yield
        finally:
            LT.direct = saved

    def provider_fn(op, provider):
        fns = specs[op][1]
        return fns["torch"] if provider == "torch" else fns["liger_agent"]

    def make_step(fn, args, mode):
        leaves = [t for t in args if isinstance(t, torch.Tensor) and t.requires_grad]
        cache = {}

        def upstream(outs):  # as compare_torch.py
            key = tuple((tuple(o.shape), o.dtype) for o in outs)
            if key not in cache:
                cache[key] = [torch.randn_like(o) if o.dim() else torch.ones_like(o) for o in outs]
            return cache[key]

        if mode == "forward":
            return lambda: fn(*args)

        def full():
            outs = CT._outputs(fn(*args))
            return torch.autograd.grad(outs, leaves, upstream(outs), allow_unused=True)

        return full

    def host_us(step):
        for _ in range(a.warmup):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.calls):
            step()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / a.calls * 1e6

    def kernel_list(fn, make_inputs):
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        args = make_inputs()
        step = make_step(fn, args, "full")
        step()  # warm-up: lazy initialisation, library load, cuBLAS handles, allocator growth
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        agg = {}
        for evt in prof.events():
            if evt.device_type != DeviceType.CUDA:
                continue
            entry = agg.setdefault(evt.name, {"name": evt.name, "count": 0, "gpu_us": 0.0})
            entry["count"] += 1
            entry["gpu_us"] += evt.time_range.elapsed_us()
        del args, step
        torch.cuda.empty_cache()
        return sorted(agg.values(), key=lambda e: -e["gpu_us"])

    meta = {
        "device": torch.cuda.get_device_name(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": CT.git_commit(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "library_version": _lib.version(),
        "library_path": _lib.library_path(),
        "calls": a.calls,
        "warmup": a.warmup,
        "host_inputs": "bf16, tiny (8 x 256 rows; vocab 512; rope 1x4x8x64)",
        "profile_shapes": "compare_torch.py " + ("--quick" if a.quick else "full") + " shapes, bf16",
    }
    host, kernels = [], []
    status = 0
    print(f"# {meta['device']}, torch {meta['torch']}, library {meta['library_version']}")
    print(f"\n(a) host microseconds per call, tiny inputs ({a.calls} calls, wall clock, one sync at the end)")
    print(f"{'op':28s} {'mode':8s} " + " ".join(f"{p:>26s}" for p in HOST_PROVIDERS))
    for op in ops:
        for mode in ("forward", "full"):
            cells = []
            for provider in HOST_PROVIDERS:
                rec = {"op": op, "mode": mode, "provider": provider}
                try:
                    args = tiny_inputs(op, torch)
                    step = make_step(provider_fn(op, provider), args, mode)
                    if provider == "liger_agent via torch.ops":
                        with through_dispatcher():
                            rec["us_per_call"] = host_us(step)
                    else:
                        rec["us_per_call"] = host_us(step)
                    cells.append(f"{rec['us_per_call']:26.1f}")
                except Exception as exc:  # noqa: BLE001  (recorded, the run goes on)
                    rec["error"] = f"{exc.__class__.__name__}: {exc}"
                    cells.append(f"{'ERROR':>26s}")
                    traceback.print_exc(limit=3)
                    status = 1
                host.append(rec)
            print(f"{op:28s} {'fwd+bwd' if mode == 'full' else mode:8s} " + " ".join(cells), flush=True)

    if not a.no_profile:
        print("\n(b) CUDA kernels (and memcpy/memset) of one forward+backward at the benchmark shape (torch.profiler)")
        for op in ops:
            make_inputs, _, shape = specs[op]
            for provider in PROFILE_PROVIDERS:
                rec = {"op": op, "provider": provider, "shape": shape}
                try:
                    rec["kernels"] = kernel_list(provider_fn(op, provider), make_inputs)
                    rec["launches"] = sum(k["count"] for k in rec["kernels"])
                    rec["total_gpu_us"] = sum(k["gpu_us"] for k in rec["kernels"])
                    print(f"\n{op} [{shape}] {provider}: {rec['launches']} launches, {rec['total_gpu_us']:.1f} us GPU")
                    for k in rec["kernels"]:
                        name = k["name"] if len(k["name"]) <= 100 else k["name"][:97] + "..."
                        print(f"  {k['count']:4d} x {k['gpu_us']:10.1f} us  {name}")
                except Exception as exc:  # noqa: BLE001
                    rec["error"] = f"{exc.__class__.__name__}: {exc}"
                    print(f"\n{op} {provider}: ERROR {rec['error'][:200]}")
                    traceback.print_exc(limit=3)
                    status = 1
                kernels.append(rec)
                torch.cuda.empty_cache()

    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "host": host, "kernels": kernels}, f, indent=1)
        print(f"\nwrote {a.json}")
    return status


if __name__ == "__main__":
    sys.exit(main())
