#!/usr/bin/env python3
"""Exhaustive sweep of one op's tunables with liger-bench (a grid, not kernel-perf's guided search).

    python3 benchmarks/tunable_sweep.py --bench build/benchmarks/liger-bench --op rms_norm \
        --mode backward --shape 16384x4096 --dtype bf16 \
        threads_per_block=128,256,512 rows_per_block=1,2 reduction_blocks=0,264,528 pipeline_depth=1,2

Every combination runs in its own liger-bench process (the defaults first, as the reference);
combinations the library rejects (status != success) are listed as such. Prints a table sorted by
median time and, with --json, writes every row. Used to refresh the tuned defaults in
kernels/src/<op>/tuning.h from measurements on the target GPU.
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile


def run(bench, op, mode, shape, dtype, tunables, min_time_ms):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [bench, "--op", op, "--mode", mode, "--shape", shape, "--dtype", dtype, "--json", out,
               "--min-time-ms", str(min_time_ms)]
        for k, v in tunables.items():
            cmd += ["--tunable", f"{k}={v}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if not os.path.exists(out):
            return {"ok": False, "message": (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]}
        rows = json.load(open(out))["results"]
        return rows[0] if rows else {"ok": False, "message": "no result"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--op", required=True)
    ap.add_argument("--mode", default="backward")
    ap.add_argument("--shape", default="16384x4096")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--min-time-ms", type=float, default=60)
    ap.add_argument("--json", default="")
    ap.add_argument("grid", nargs="+", help="name=v1,v2,...")
    a = ap.parse_args()
    names, values = [], []
    for g in a.grid:
        k, vs = g.split("=", 1)
        names.append(k)
        values.append([int(v) for v in vs.split(",")])
    rows = [{"tunables": "defaults", **run(a.bench, a.op, a.mode, a.shape, a.dtype, {}, a.min_time_ms)}]
    for combo in itertools.product(*values):
        t = {k: v for k, v in zip(names, combo) if v != 0}
        r = run(a.bench, a.op, a.mode, a.shape, a.dtype, t, a.min_time_ms)
        rows.append({"tunables": " ".join(f"{k}={v}" for k, v in t.items()) or "defaults", **r})
    ok = sorted((r for r in rows if r.get("ok")), key=lambda r: r["median_us"])
    print(f"{a.op} {a.mode} {a.shape} {a.dtype}: {len(ok)} of {len(rows)} combinations ran")
    for r in ok:
        print(f'{r["median_us"]:9.1f} us  {r["copy_fraction"] * 100:5.1f}% copy  {r["tunables"]}')
    for r in rows:
        if not r.get("ok"):
            print(f'   rejected  {r["tunables"]}: {r.get("message")}')
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
