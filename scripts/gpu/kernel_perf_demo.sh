#!/usr/bin/env bash
# kernel-perf on a GPU machine (issue 20): v1 timing, an autonomous run from the tuned defaults,
# a naive norm backward recovered by code variants, and de-tuned starts of two other op families.
#
#   scripts/gpu/kernel_perf_demo.sh [STEP...]      default: build v1 naive auto detuned detuned_ce
#   steps:
#     build    the agent (only the liger-agent target) and the shared kernel-perf work tree (the
#              kernel library, liger-bench and kernel_tests for this GPU's sm, built once and
#              reused by every run through --work-dir; only what a run changes recompiles)
#     v1       kernel-perf with one variant each on $KPERF_V1_OPS (default: rms_norm swiglu; v1 is
#              the launch search per size class in batched liger-bench processes with successive
#              halving and an early cut): v1's seconds as the sum of its recorded phases
#     naive    a copy of the repository whose rms_norm backward keeps every row vector live in fp32
#              (BwdVariant<0, 1, 0>: spills), autonomous kernel-perf --mode backward; recovery =
#              tuned library time / final time per case, in the same call
#     auto     autonomous kernel-perf layer_norm --mode backward from the tuned defaults: "no
#              change" or a win that holds on the A/B interleaved re-measurement
#     detuned  swiglu from a de-tuned launch shape (--start-tunables), recovery vs the tuned library
#     detuned_ce  cross_entropy from a de-tuned tuning.h (every sm_90 row: 128 threads, 8-byte
#              vectors, one load in flight), recovery vs the tuned library
#
# Output under $OUT (or ./kperf-demo-out/), at most 5 files: kperf-demo.log (everything),
# kperf-demo-summary.md (one section per step, with each run's per-phase timings),
# kperf-demo-runs.tar.gz (the run directories without work trees), build.log (only when the
# build fails). A step that runs out of its time limit says so.
# Environment: LIGER_COMMIT (recorded), KPERF_STEP_LIMIT_S (per kernel-perf run, default 540: an
# autonomous run with three variants and its A/B re-measurement), KPERF_V1_OPS. Within a 10-minute
# call limit run one or two steps per call on one warm machine (build/ and build-kperf-work/ are
# kept between calls): build naive | v1 | auto | detuned detuned_ce
set -uo pipefail
KPERF_NAME=kperf-demo
# shellcheck source=scripts/gpu/kernel_perf_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/kernel_perf_lib.sh"

[ -f "$summary" ] || printf '# kernel-perf demo\n\nDevice: %s (sm_%s); commit %s; %s\n' "$device" "$arch" "$commit" \
  "$(date -u +%Y-%m-%dT%H:%MZ)" >"$summary"

step_v1() {
  section "v1 timing (launch search: batched liger-bench processes, successive halving)"
  for op in ${KPERF_V1_OPS:-rms_norm swiglu}; do
    local run
    run="$(kperf "$(fresh_copy)" "$op" --goal speed --dtype bf16 --max-variants 1 --search-min-time-ms 60 --bench-min-time-ms 200 | tail -1)"
    echo "- $op: v1 took $(v1_seconds "$run") s (its recorded phases: search processes, build, smoke test, benchmark); processes with --candidate: $(grep -l -- '--candidate' "$run"/optimization/search/*/bench.log 2>/dev/null | wc -l)" >>"$summary"
    report_run "$run"
  done
}

step_naive() {
  section "naive rms_norm backward (all row vectors live in fp32) recovered by code variants"
  local tuned copy run
  tuned="$(tuned_bench rms_norm backward)" || { say "the tuned library's benchmark failed"; return 1; }
  copy="$(fresh_copy)"
  sed -i 's/using BwdVariant = norm::BwdVariant<0, 0, 0>;/using BwdVariant = norm::BwdVariant<0, 1, 0>;/' \
    "$copy/kernels/src/rms_norm/tuning.h"
  grep -q 'BwdVariant<0, 1, 0>' "$copy/kernels/src/rms_norm/tuning.h" || { say "the naive sed changed nothing"; return 1; }
  run="$(kperf "$copy" rms_norm --goal speed --mode backward --dtype bf16 --max-variants 3 --search-min-time-ms 60 \
    --bench-min-time-ms 200 | tail -1)"
  report_run "$run"
  echo >>"$summary"
  recovery "$tuned" "$run"
}

step_auto() {
  section "autonomous layer_norm backward from the tuned defaults (no change, or a win that holds)"
  local copy run
  copy="$(fresh_copy)"
  run="$(kperf "$copy" layer_norm --goal speed --mode backward --dtype bf16 --max-variants 4 --search-min-time-ms 60 \
    --bench-min-time-ms 200 | tail -1)"
  report_run "$run"
  echo '```diff' >>"$summary"
  diff -u "$repo/kernels/src/layer_norm/tuning.h" "$copy/kernels/src/layer_norm/tuning.h" >>"$summary" ||
    true
  echo '```' >>"$summary"
}

step_detuned() {
  section "swiglu from a de-tuned launch shape (threads_per_block=64, vector_bytes=4)"
  local tuned run
  tuned="$(tuned_bench swiglu full)" || { say "the tuned library's benchmark failed"; return 1; }
  run="$(kperf "$(fresh_copy)" swiglu --goal speed --mode full --dtype bf16 --max-variants 2 \
    --start-tunables threads_per_block=64,vector_bytes=4 --search-min-time-ms 60 --bench-min-time-ms 200 | tail -1)"
  report_run "$run"
  recovery "$tuned" "$run"
}

step_detuned_ce() {
  section "cross_entropy from a de-tuned tuning.h (sm_90 rows: 128 threads, 8-byte vectors, 1 load in flight)"
  local tuned copy run
  tuned="$(tuned_bench cross_entropy full)" || { say "the tuned library's benchmark failed"; return 1; }
  copy="$(fresh_copy)"
  # Every row of the sm_90 table keeps its size bound; its launch shape becomes a poor one.
  python3 - "$copy/kernels/src/cross_entropy/tuning.h" <<'PY' || { say "the de-tuning edit failed"; return 1; }
import re, sys
path = sys.argv[1]
text = open(path).read()
head, sep, rest = text.partition("kSm90Table[] = {")
body, end, tail = rest.partition("};")
detuned = re.sub(r"\{\s*([^,{}]+),\s*\d+,\s*\d+,\s*\d+\s*\}", r"{\1, 128, 8, 1}", body)
if not sep or detuned == body:
    sys.exit("kSm90Table not found or unchanged in " + path)
open(path, "w").write(head + sep + detuned + end + tail)
PY
  grep -A2 'kSm90Table\[\]' "$copy/kernels/src/cross_entropy/tuning.h" | sed 's/^/    /' >>"$summary"
  run="$(kperf "$copy" cross_entropy --goal speed --mode full --dtype bf16 --max-variants 2 --search-min-time-ms 60 \
    --bench-min-time-ms 200 | tail -1)"
  report_run "$run"
  recovery "$tuned" "$run"
}

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build v1 naive auto detuned detuned_ce)
for s in "${steps[@]}"; do
  case "$s" in
    build | v1 | naive | auto | detuned | detuned_ce) ;;
    *) echo "unknown step '$s' (steps: build v1 naive auto detuned detuned_ce)" >&2; exit 2 ;;
  esac
done
if [ "${steps[0]}" != build ]; then ensure_built || exit 1; fi
for s in "${steps[@]}"; do "step_$s" || say "step $s failed"; done
say "done; summary: $summary"
