#!/usr/bin/env bash
# Autonomous kernel-perf from the tuned defaults of the library's ops, one after another, each
# with a wall-clock budget (issue 20: every op ends in "no change" or in a win that holds).
#
#   scripts/gpu/kernel_perf_all.sh TABLE.md [OP...]
#
# OP... defaults to the ops kernel-perf has a search space for (skills/kernel_perf/search_spaces.yaml:
# the library's eight; an op kernel-dev added has none yet). TABLE.md gets one row per op (the header
# once; rows are appended, so two calls with halves of the op list fill one table):
#   op | v1 seconds | variants tried | outcome | total seconds
# outcome: no change | win N.NNNx confirmed by A/B | win rejected by A/B (...) | timed out |
# error: <why>. Each op's log (and its run directory, without binaries) lands under $OUT.
#
# Environment:
#   KPERF_OP_BUDGET_S     wall-clock limit of one op's run (default 120)
#   KPERF_CALL_BUDGET_S   the whole call (default 540): an op that could not finish within what is
#                         left is listed as "not run (call budget)", never started and cut off
#   KPERF_ALL_VARIANTS    --max-variants per op (default 2: the launch search and one more)
#   OUT, LIGER_COMMIT     as in kernel_perf_demo.sh
# Needs only what the GPU machine has: nvcc, cmake, ninja, python3; the repository's build/ (built
# here when missing) and .deps/include/mustache.hpp.
#
# Timing: the first call builds (about 2 minutes) unless build/ and build-kperf-work/ exist; each
# op then takes its Profile (ptxas reports), v1, one variant and Finalize. Eight ops do not fit one
# 10-minute call: split them, e.g.
#   scripts/gpu/kernel_perf_all.sh all.md swiglu geglu rms_norm fused_add_rms_norm
#   scripts/gpu/kernel_perf_all.sh all.md layer_norm cross_entropy rope fused_linear_cross_entropy
set -uo pipefail
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  echo "usage: $0 TABLE.md [OP...]   (default: every op of skills/kernel_perf/search_spaces.yaml)" >&2
  exit 2
fi
table_arg="$1"; shift
case "$table_arg" in /*) table="$table_arg" ;; *) table="$PWD/$table_arg" ;; esac
KPERF_NAME=kperf-all
# shellcheck source=scripts/gpu/kernel_perf_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/kernel_perf_lib.sh"
call_start=$SECONDS
op_budget="${KPERF_OP_BUDGET_S:-120}"
call_budget="${KPERF_CALL_BUDGET_S:-540}"
variants="${KPERF_ALL_VARIANTS:-2}"

ops=("$@")
if [ ${#ops[@]} -eq 0 ]; then
  mapfile -t ops < <(sed -n 's/^  \([a-z_0-9]*\):$/\1/p' "$repo/skills/kernel_perf/search_spaces.yaml")
fi
[ ${#ops[@]} -gt 0 ] || { echo "no ops given and none found in skills/kernel_perf/search_spaces.yaml" >&2; exit 2; }

[ -f "$summary" ] || printf '# kernel-perf of every op from the tuned defaults\n\nDevice: %s (sm_%s); commit %s; %s\n' \
  "$device" "$arch" "$commit" "$(date -u +%Y-%m-%dT%H:%MZ)" >"$summary"
if [ ! -s "$table" ]; then
  mkdir -p "$(dirname "$table")"
  printf '# kernel-perf from the tuned defaults, op by op\n\nDevice: %s (sm_%s); commit %s; %s; --max-variants %s, %s s per op\n\n' \
    "$device" "$arch" "$commit" "$(date -u +%Y-%m-%dT%H:%MZ)" "$variants" "$op_budget" >"$table"
  printf '| op | v1 seconds | variants tried | outcome | total seconds |\n|---|---:|---:|---|---:|\n' >>"$table"
fi

ensure_built || exit 1

# The row's outcome from the run directory: act.json's winner and Finalize's A/B line.
outcome_of() {
  local run="$1" rc="$2" oplog="$3"
  python3 - "$run" "$rc" "$oplog" <<'PY'
import json, os, re, sys
run, rc, oplog = sys.argv[1], int(sys.argv[2]), sys.argv[3]
od = os.path.join(run, "optimization") if run else ""
variants = "0"
try:
    act = json.load(open(os.path.join(od, "act.json")))
    variants = str(len(act.get("variants", [])))
    winner = act.get("winner", "")
except Exception:
    act, winner = None, None
report = ""
try:
    report = open(os.path.join(od, "final", "report.md")).read()
except Exception:
    pass
if rc == 124:
    outcome = "timed out"
elif act is None or (rc != 0 and not report):
    why = ""
    try:
        lines = [l.strip() for l in open(oplog) if re.search(r"error|Error|failed", l)]
        why = re.sub(r"^(error:\s*)+", "", lines[-1], flags=re.I)[:160] if lines else ""
    except Exception:
        pass
    outcome = "error: " + (why or f"exit {rc}")
elif not winner:
    outcome = "no change"
else:
    m = re.search(r"(\d+) rounds A/B interleaved: (\d+) target case\(s\) faster and (\d+) slower[^;]*; ([0-9.]+)x geo-mean", report)
    if m and int(m.group(2)) > 0 and int(m.group(3)) == 0:
        outcome = f"win {m.group(4)}x confirmed by A/B ({winner})"
    elif m:
        outcome = f"win rejected by A/B ({winner}: {m.group(2)} faster, {m.group(3)} slower)"
    else:
        na = re.search(r"^not run.*$", report, re.M)
        outcome = f"win not re-measured ({winner}; {na.group(0)[:100] if na else 'no A/B line'})"
print(variants + "\t" + outcome.replace("|", "/"))
PY
}

for op in "${ops[@]}"; do
  left=$((call_budget - (SECONDS - call_start)))
  if [ "$left" -lt "$op_budget" ]; then
    say "$op: not run ($left s of the call budget left, an op may take $op_budget s)"
    printf '| %s | - | - | not run (call budget) | - |\n' "$op" >>"$table"
    continue
  fi
  section "$op"
  oplog="$out/kperf-all-$op.log"
  start=$SECONDS
  run="$(KPERF_RUN_LIMIT_S="$op_budget" log="$oplog" kperf "$(fresh_copy)" "$op" --goal speed --dtype bf16 \
    --max-variants "$variants" --search-min-time-ms 60 --bench-min-time-ms 200 | tail -1)"
  read -r rc _ <"$scratch/last-run"
  total=$((SECONDS - start))
  v1="n/a"
  [ -n "$run" ] && v1="$(v1_seconds "$run")"
  IFS=$'\t' read -r tried outcome < <(outcome_of "$run" "$rc" "$oplog")
  printf '| %s | %s | %s | %s | %s |\n' "$op" "$v1" "$tried" "$outcome" "$total" >>"$table"
  say "$op: v1 $v1 s, $tried variant(s), $outcome, $total s"
  report_run "$run"
done
say "done; table: $table"
