#!/usr/bin/env bash
# kernel-dev Tier 3 (fused linear + a row loss) end to end on a GPU machine (issue 18 item 4):
# three requests through Understand -> Act -> Verify (reference tests, GPU tests, agreement with the
# unfused PyTorch version in fp64, liger-bench, and benchmarks/fused_linear_compare.py at the
# profile's LM-head shape, 8192 tokens x hidden 4096 x vocab 128256 bf16: fused vs the GEMMs alone
# with the same chunks, vs unfused PyTorch, peak memory), then a summary with the issue's bars
# (fused time <= 1.10 x the GEMMs alone; fused peak memory <= 1/4 of unfused).
#
#   scripts/gpu/tier3_e2e.sh             # in this checkout; the generated files are removed afterwards
#   T3_KEEP=1 scripts/gpu/tier3_e2e.sh   # keep the generated ops in the checkout
#   T3_OPS=t3_jsd_e2e scripts/gpu/tier3_e2e.sh   # only these requests (names below, comma-separated)
#
# Build directory: $LIGER_BUILD_DIR, else ./build (configured for this GPU's sm when it is not).
# Output under $OUT (default ./tier3-e2e-out): tier3.log (everything), summary.md, runs/<op>/.
set -uo pipefail
E2E_NAME=tier3
# shellcheck source=scripts/gpu/kernel_dev_e2e_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/kernel_dev_e2e_lib.sh"  # 1. the GPU check and the build

# 2. The requests (op name | input): a description with options, the issue's PyTorch spelling, and
# a distillation loss against a teacher.
names=(t3_ce_zloss_softcap_e2e t3_ce_pytorch_e2e t3_jsd_e2e)
inputs=("fused linear cross entropy with z-loss 1e-4 and softcap 30"
        "def f(x, w, target): return F.cross_entropy(x @ w.T, target)"
        "fused linear JSD distillation beta 0.5")

e2e_save_lists
cleanup() {
  if [ "${T3_KEEP:-0}" = "1" ]; then rm -rf "$e2e_backup"; return; fi
  for act in "$out"/runs/*/*-kernel-dev-*/kernel-dev/act.json; do
    [ -f "$act" ] || continue
    e2e_remove_created "$act"
  done
  for op in "${names[@]}"; do rmdir "$repo/kernels/src/$op" 2>/dev/null; done
  e2e_restore_lists
  say "generated files removed (T3_KEEP=1 keeps them)"
}
trap cleanup EXIT

# 3. kernel-dev end to end, one request after another.
rm -rf "$out/runs"
overall=0
for i in "${!names[@]}"; do
  op="${names[$i]}"
  if [ -n "${T3_OPS:-}" ] && [[ ",$T3_OPS," != *",$op,"* ]]; then continue; fi
  say "kernel-dev --yes '${inputs[$i]}' (op $op)"
  start=$(date +%s)
  (cd "$repo" && "$agent" --yes kernel-dev "${inputs[$i]}" --name "$op" --tree "$repo" --run-dir "$out/runs/$op") >>"$log" 2>&1
  status=$?
  [ $status -eq 0 ] || overall=1
  say "$op: kernel-dev exit $status in $(( $(date +%s) - start )) s"
done

# 4. Summary from Verify's own records.
python3 - "$out/runs" "${names[@]}" >"$summary" <<'PY'
import glob, json, os, sys
runs, ops = sys.argv[1], sys.argv[2:]
print("# kernel-dev Tier 3 (fused linear + loss) end to end\n")
bars = []
for op in ops:
    run = sorted(glob.glob(os.path.join(runs, op, "*-kernel-dev-*")))
    print(f"## `{op}`\n")
    if not run:
        print("(no run directory)\n")
        bars.append(f"{op}: no run")
        continue
    run = run[-1]
    verify = os.path.join(run, "kernel-dev", "verify.md")
    print(open(verify).read() if os.path.exists(verify) else "(no verify.md: the run stopped before Verify)\n")
    attempt = sorted(glob.glob(os.path.join(run, "kernel-dev", "attempt-*")))
    attempt = attempt[-1] if attempt else ""
    compare = os.path.join(attempt, "compare.json")
    if not os.path.exists(compare):
        print("(no compare.json: the PyTorch comparison did not run; see the run's logs)\n")
        bars.append(f"{op}: not measured")
        continue
    c = json.load(open(compare))
    s = c.get("shape", {})
    print(f"shape {s.get('tokens')} tokens x hidden {s.get('hidden')} x vocab {s.get('vocab')}, {c.get('dtype')}, "
          f"chunk_rows {s.get('chunk_rows')}\n")
    print("| measure | value |\n|---|---|")
    print(f"| fused (forward + backward) | {c['fused_ms']:.3f} ms |")
    print(f"| the GEMMs alone (same chunks) | {c['gemms_ms']:.3f} ms |")
    print(f"| fused / GEMMs | {c['vs_gemms']:.3f} |")
    if "unfused_ms" in c:
        print(f"| unfused PyTorch | {c['unfused_ms']:.3f} ms ({c['speedup']['full']:.2f}x the fused time) |")
        print(f"| peak memory fused / unfused | {c['peak_mib']['fused']:.0f} / {c['peak_mib']['unfused']:.0f} MiB "
              f"(ratio {c['memory_ratio']:.3f}) |")
    else:
        print(f"| unfused PyTorch | {c.get('unfused_error', 'not measured')} |")
    print()
    bars.append(f"{op}: fused / GEMMs {c['vs_gemms']:.3f} (bar 1.10): {'PASS' if c['vs_gemms'] <= 1.10 else 'FAIL'}")
    if "memory_ratio" in c:
        bars.append(f"{op}: peak memory ratio {c['memory_ratio']:.3f} (bar 0.25): {'PASS' if c['memory_ratio'] <= 0.25 else 'FAIL'}")
print("## Bars\n")
for b in bars:
    print(f"- {b}")
PY
cat "$summary" | tee -a "$log"
exit $overall
