#!/usr/bin/env python3
"""The per-model table of scripts/gpu/zoo_verify.sh from the JSON lines of zoo_results.py.

usage: zoo_table.py RESULTS.jsonl TABLE.md PYTEST_EXIT SECONDS MODEL...
"""
import json
import os
import re
import subprocess
import sys

COLUMNS = [
    ("mini build", lambda t: t.startswith("test_mini_model_builds_on_cpu")),
    ("instance", lambda t: t.startswith(("test_registry", "test_class_patch_and_revert", "test_instance_patch_and_revert"))),
    ("fp32", lambda t: t.startswith("test_convergence[") and "fp32" in t),
    ("bf16", lambda t: t.startswith("test_convergence[") and "bf16" in t),
    # Models with a vision tower only: training on images and text, fp32 and bf16 ("-" elsewhere).
    ("images", lambda t: t.startswith("test_convergence_multimodal[")),
]


def model_of(nodeid):
    m = re.search(r"test_autopatch_(\w+)\.py", nodeid)
    return m.group(1) if m else None


def cell(results):
    if not results:
        return "-"
    if any(r["outcome"] == "failed" for r in results):
        return "FAIL"
    if all(r["outcome"] == "skipped" for r in results):
        return "skip (" + results[0]["message"].replace("Skipped: ", "")[:60] + ")"
    if any(r["outcome"] == "skipped" for r in results):
        return "pass (some skipped)"
    return "pass"


def versions():
    out = []
    for mod in ("torch", "transformers"):
        try:
            out.append(f"{mod} {__import__(mod).__version__}")
        except Exception as e:  # recorded, not fatal
            out.append(f"{mod} not importable ({type(e).__name__})")
    try:
        import torch

        out.append(torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device")
    except Exception:
        pass
    try:
        out.append("commit " + subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True, stderr=subprocess.DEVNULL).strip())
    except Exception:
        pass
    return ", ".join(out)


def main(argv):
    jsonl, table, rc, secs, models = argv[1], argv[2], int(argv[3]), argv[4], argv[5:]
    rows = {m: {c: [] for c, _ in COLUMNS} for m in models}
    collect_errors = {}
    process_errors = {}  # a model's pytest process ended badly (time limit, crash): zoo_verify.sh's "process" line
    first_failure = {}
    if os.path.exists(jsonl):
        for line in open(jsonl):
            r = json.loads(line)
            m = model_of(r["nodeid"])
            if m not in rows:
                continue
            if r["when"] == "collect":
                collect_errors[m] = r
                continue
            if r["when"] == "process":
                process_errors[m] = r["message"]
                continue
            test = r["nodeid"].split("::", 1)[-1]
            for c, match in COLUMNS:
                if match(test):
                    rows[m][c].append(r)
            if r["outcome"] == "failed" and m not in first_failure:
                first_failure[m] = f"{test} ({r['when']}): " + r["message"].splitlines()[0][:160] if r["message"] else test
    lines = ["# Generated integrations on the GPU (scripts/gpu/zoo_verify.sh)", "",
             f"{versions()}; pytest exit {rc} in {secs} s" + (" (stopped by the time limit)" if rc in (124, 130, 137) else ""),
             "", "| model | " + " | ".join(c for c, _ in COLUMNS) + " | first failure |",
             "| --- |" + " --- |" * (len(COLUMNS) + 1)]
    totals = {c: [0, 0] for c, _ in COLUMNS}
    for m in models:
        if m in collect_errors:
            r = collect_errors[m]
            status = "skip" if r["outcome"] == "skipped" else "ERROR"
            why = r["message"].splitlines()[0][:160] if r["message"] else ""
            lines.append(f"| {m} | " + " | ".join(f"{status}" for _ in COLUMNS) + f" | collection: {why} |")
            continue
        cells = []
        for c, _ in COLUMNS:
            v = cell(rows[m][c])
            if v == "-" and m in process_errors:
                v = "not run (process ended)"
            elif v == "-" and rc in (124, 130, 137):
                v = "not run (time limit)"
            elif v == "-" and not any(rows[m].values()) and rc != 0:
                v = f"not run (pytest exit {rc}, see the .log)"
            cells.append(v)
            if v != "-":  # a column the model has no test for is not counted
                totals[c][0] += v.startswith("pass")
                totals[c][1] += 1
        failure = first_failure.get(m) or process_errors.get(m, "")
        if m in first_failure and m in process_errors:
            failure += "; then " + process_errors[m]
        lines.append(f"| {m} | " + " | ".join(cells) + f" | {failure.replace('|', '/')} |")
    lines += ["", "passed: " + ", ".join(f"{c} {p}/{n}" for c, (p, n) in totals.items())]
    tmp = table + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, table)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
