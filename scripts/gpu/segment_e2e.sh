#!/usr/bin/env bash
# kernel-dev segment reduction end to end on a GPU machine (issue 18 item 3): the index_add_ mean
# pooling below through Understand -> Act -> Verify (reference tests, GPU tests, agreement with the
# PyTorch loop and index_add_ in fp64, liger-bench, and the comparison with the PyTorch loop,
# index_add_, torch.compile of index_add_ and torch.segment_reduce at 16384 segments of 1..512 rows
# x 256 features), then a summary: % of copy (bytes counted once) and the speedups.
#
#   scripts/gpu/segment_e2e.sh            # in this checkout; the generated files are removed afterwards
#   SEG_KEEP=1 scripts/gpu/segment_e2e.sh # keep the generated op in the checkout
#
# Build directory: $LIGER_BUILD_DIR, else ./build. When it is not configured, it is configured
# for this GPU's sm (CUDA library, kernel_tests, liger-bench) and built; when it is, only the agent
# and the new op's files compile. Output under $OUT (default ./segment-e2e-out): segment.log
# (everything), summary.md, runs/ (the run directory: profile, verify.md, bench.json, compare.json).
# SEG_OP names the op (default segment_mean_e2e, so it never meets an op of the checkout).
set -uo pipefail
E2E_NAME=segment
# shellcheck source=scripts/gpu/kernel_dev_e2e_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/kernel_dev_e2e_lib.sh"  # 1. the GPU check and the build
op="${SEG_OP:-segment_mean_e2e}"

# 2. The request: the issue's index_add_ spelling.
snippet="$out/segment_index_add.py"
cat >"$snippet" <<'EOF'
import torch


def f(x, offsets):
    out = torch.zeros(offsets.numel() - 1, x.shape[1], dtype=x.dtype, device=x.device)
    lengths = offsets[1:] - offsets[:-1]
    seg = torch.repeat_interleave(torch.arange(lengths.numel(), device=x.device), lengths)
    out.index_add_(0, seg, x)
    return out / lengths[:, None]
EOF

cleanup() {
  if [ "${SEG_KEEP:-0}" = "1" ]; then rm -rf "$e2e_backup"; return; fi
  local act
  act="$(ls -d "$out"/runs/*-kernel-dev-*/kernel-dev/act.json 2>/dev/null | tail -1)"
  if [ -n "$act" ]; then
    e2e_remove_created "$act"
    rmdir "$repo/kernels/src/$op" 2>/dev/null
  fi
  e2e_restore_lists
  say "generated files removed (SEG_KEEP=1 keeps them)"
}
e2e_save_lists
trap cleanup EXIT

# 3. kernel-dev end to end.
rm -rf "$out/runs"
say "kernel-dev --yes on the index_add_ spelling (op $op), build $build"
start=$(date +%s)
(cd "$repo" && "$agent" --yes kernel-dev "$snippet" --name "$op" --tree "$repo" --run-dir "$out/runs") >>"$log" 2>&1
status=$?
run="$(ls -td "$out"/runs/*-kernel-dev-* 2>/dev/null | head -1)"
say "kernel-dev exit $status in $(( $(date +%s) - start )) s; run $run"
[ -n "$run" ] || { say "no run directory"; exit 1; }

# 4. Summary from Verify's own records.
python3 - "$run" "$op" >"$summary" <<'EOF'
import glob, json, os, sys
run, op = sys.argv[1], sys.argv[2]
print(f"# kernel-dev segment reduction end to end: `{op}`\n")
verify = os.path.join(run, "kernel-dev", "verify.md")
print(open(verify).read() if os.path.exists(verify) else "(no verify.md: the run stopped before Verify)\n")
attempt = sorted(glob.glob(os.path.join(run, "kernel-dev", "attempt-*")))
attempt = attempt[-1] if attempt else ""
bench = os.path.join(attempt, "bench.json")
if os.path.exists(bench):
    rows = [r for r in json.load(open(bench)).get("results", []) if r.get("op") == op and r.get("ok")]
    print("## liger-bench (bf16; bytes counted once)\n\n| mode | shape | median us | % of copy |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['shape']} | {r['median_us']:.1f} | {r['copy_fraction'] * 100:.1f}% |")
    print()
compare = os.path.join(attempt, "compare.json")
bars = []
if os.path.exists(compare):
    c = json.load(open(compare))
    print(f"## vs PyTorch ({c.get('device', '?')}, {c.get('dtype')}, {c.get('shape')})\n")
    print("| mode | ours us | % of copy | vs loop | vs index_add_ | vs torch.compile(index_add_) | vs segment_reduce |")
    print("|---|---|---|---|---|---|---|")
    for m in ("forward", "backward", "full"):
        def s(key):
            v = c.get(key, {}).get(m)
            return f"{v:.2f}x" if v else "—"
        print(f"| {m} | {c['ours'][m + '_us']:.1f} | {c['copy_fraction'][m] * 100:.1f}% | {s('speedup_vs_loop')} | "
              f"{s('speedup')} | {s('speedup_vs_compile')} | {s('speedup_vs_segment_reduce')} |")
    for name, err in c.get("errors", {}).items():
        print(f"\n{name} not measured: {err}")
    for m in ("forward", "backward"):
        cf = c["copy_fraction"][m]
        bars.append(f"{m} % of copy {cf * 100:.1f}% (bar 85%): {'PASS' if cf >= 0.85 else 'FAIL'}")
        loop = c.get("speedup_vs_loop", {}).get(m)
        bars.append(f"{m} vs the PyTorch loop {loop:.1f}x (bar 10x): {'PASS' if loop >= 10 else 'FAIL'}" if loop else
                    f"{m} vs the PyTorch loop: not measured")
else:
    print("(no compare.json: the PyTorch comparison did not run; see the run's logs)\n")
print("\n## Bars\n")
for b in bars:
    print(f"- {b}")
EOF
cat "$summary" | tee -a "$log"
exit $status
