#!/usr/bin/env bash
# kernel-perf on a GPU machine (issue 20): v1 timing, an autonomous run from the tuned defaults,
# a naive norm backward recovered by code variants, and a de-tuned launch-parameter start.
#
#   scripts/gpu/kernel_perf_demo.sh [STEP...]      default: build v1 naive auto detuned
#   steps:
#     build    the agent (only the liger-agent target) and the shared kernel-perf work tree (the
#              kernel library, liger-bench and kernel_tests for this GPU's sm, built once and
#              reused by every run through --work-dir; only what a run changes recompiles)
#     v1       kernel-perf with one variant each on $KPERF_V1_OPS (default: rms_norm swiglu; v1 is
#              the launch search in batched liger-bench processes with successive halving):
#              seconds from the start of Optimize to v1's verdict
#     naive    a copy of the repository whose rms_norm backward keeps every row vector live in fp32
#              (BwdVariant<0, 1, 0>: spills), autonomous kernel-perf --mode backward; recovery =
#              tuned library time / final time per case, in the same call
#     auto     autonomous kernel-perf layer_norm --mode backward from the tuned defaults: "no
#              change" or a win that holds on the A/B interleaved re-measurement
#     detuned  swiglu from a de-tuned launch shape (--start-tunables), recovery vs the tuned library
#
# Output under $OUT (or ./kernel-perf-demo-out/), at most 5 files: kperf-demo.log (everything),
# kperf-summary.md (one section per step), kperf-runs.tar.gz (the run directories without work
# trees), build.log (only when the build fails). A step that runs out of its time limit says so.
# Environment: LIGER_COMMIT (recorded), KPERF_STEP_LIMIT_S (per kernel-perf run, default 540),
# KPERF_V1_OPS. A run rebuilds its op's .cu for every variant and twice in Finalize, so within a
# 10-minute call limit run one step per call on one warm machine (build/ and build-kperf-work/
# are kept between calls): build | naive | KPERF_V1_OPS=rms_norm v1 | auto | detuned
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo" || exit 1
out="${OUT:-$repo/kernel-perf-demo-out}"
mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
log="$out/kperf-demo.log"
summary="$out/kperf-summary.md"
build="$repo/build"
agent="$build/src/liger-agent"
work="$repo/build-kperf-work"          # the shared work tree (gitignored: /build*/)
runs_list="$(mktemp /tmp/kperf-runs.XXXXXX)"
scratch="$(mktemp -d /tmp/kperf-demo.XXXXXX)"
limit="${KPERF_STEP_LIMIT_S:-540}"
commit="${LIGER_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)"
arch="${arch:-90}"
device="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"

pack() {
  if [ -s "$runs_list" ]; then
    tar -czf "$out/kperf-runs.tar.gz" --exclude='*/optimization/work' --exclude='*.o' --exclude='*/abab/*/liger-bench' \
      --exclude='*/abab/*/libliger_kernels.so*' -T "$runs_list" 2>/dev/null
  fi
  rm -rf "$scratch" "$runs_list"
}
trap pack EXIT

say() { echo "$*" | tee -a "$log"; }
section() { printf '\n## %s\n\n' "$*" >>"$summary"; say "==> $*"; }

[ -f "$summary" ] || printf '# kernel-perf demo\n\nDevice: %s (sm_%s); commit %s; %s\n' "$device" "$arch" "$commit" \
  "$(date -u +%Y-%m-%dT%H:%MZ)" >"$summary"

step_build() {
  section "build"
  local start=$SECONDS
  if [ ! -x "$agent" ]; then
    { cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
        -DCMAKE_CUDA_COMPILER="$(which nvcc)" &&
        cmake --build "$build" -j "$(nproc)" --target liger-agent; } >"$scratch/build.log" 2>&1 ||
      { cp "$scratch/build.log" "$out/build.log"; say "agent build failed ($out/build.log)"; return 1; }
  fi
  # The shared work tree, built once: a profile-only run would not build it, so build it here the
  # way kernel-perf does (a copy of the CMake project, liger-bench + kernel_tests).
  mkdir -p "$work"
  for item in CMakeLists.txt CMakePresets.json cmake kernels benchmarks tests; do
    [ -e "$repo/$item" ] && cp -a "$repo/$item" "$work/" 2>/dev/null
  done
  if [ ! -f "$work/build/CMakeCache.txt" ]; then
    cmake -S "$work" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIGER_BUILD_AGENT=OFF \
      -DCMAKE_CUDA_ARCHITECTURES="$arch" >>"$scratch/build.log" 2>&1
  fi
  cmake --build "$work/build" -j "$(nproc)" --target liger-bench kernel_tests >>"$scratch/build.log" 2>&1 ||
    { cp "$scratch/build.log" "$out/build.log"; say "work tree build failed ($out/build.log)"; return 1; }
  say "build: $((SECONDS - start)) s"
  echo "agent and shared work tree built in $((SECONDS - start)) s" >>"$summary"
}

# The tuned library's benchmark of one op (the reference for recovery), measured in the same call
# before the run: the shared work tree is put back to the repository's sources (only files whose
# bytes differ are copied, with a new timestamp, so ninja rebuilds exactly those).
tuned_bench() {
  local op="$1" mode="$2" json="$scratch/tuned-$1.json"
  (cd "$repo" && find kernels/src -type f) | while read -r f; do
    cmp -s "$repo/$f" "$work/$f" || { mkdir -p "$(dirname "$work/$f")" && cp "$repo/$f" "$work/$f"; }
  done
  cmake --build "$work/build" -j "$(nproc)" --target liger-bench >>"$log" 2>&1 || return 1
  # Exit 1 is a failed case (the others are in the JSON); no JSON is a failed run.
  "$work/build/benchmarks/liger-bench" --op "$op" --mode "$mode" --dtype bf16 --json "$json" --min-time-ms 200 \
    --no-copy >>"$log" 2>&1
  [ -s "$json" ] || return 1
  echo "$json"
}

# A fresh copy of the repository (no builds, runs or .git): every run works on its own copy, so a
# winner Finalize applies never changes the repository the next step starts from.
fresh_copy() {
  local copy
  copy="$(mktemp -d "$scratch/tree.XXXXXX")"
  tar --exclude='./build*' --exclude='./.liger-agent' --exclude='./.git' --exclude='./kernel-perf-demo-out' -cf - . |
    tar -xf - -C "$copy"
  echo "$copy"
}

# kernel-perf with a time limit; echoes the run directory.
kperf() {
  local tree="$1"; shift
  local start=$SECONDS
  (cd "$tree" && timeout "$limit" "$agent" --autonomous kernel-perf "$@" --tree "$tree" --work-dir "$work") >>"$log" 2>&1
  local rc=$?
  local run
  run="$(ls -td "$tree"/.liger-agent/runs/*kernel-perf* 2>/dev/null | head -1)"
  [ -n "$run" ] && echo "$run" >>"$runs_list"
  say "kernel-perf $* -> exit $rc in $((SECONDS - start)) s ($run)"
  [ $rc -eq 124 ] && echo "- TIMED OUT after ${limit} s: kernel-perf $*" >>"$summary"
  echo "$run"
}

# Recovery table: the tuned library (measured before the run, same call) over the final build.
recovery() {
  local json="$1" run="$2"
  python3 - "$json" "$run/optimization/final/optimized.json" "$run/optimization/final/original.json" <<'PY' >>"$summary"
import json, sys
def cases(path):
    try:
        return {(r["mode"], r["shape"], r["dtype"]): r["median_us"] for r in json.load(open(path))["results"] if r.get("ok")}
    except Exception as e:
        print(f"(cannot read {path}: {e})"); return {}
tuned, final, start = cases(sys.argv[1]), cases(sys.argv[2]), cases(sys.argv[3])
print("| case | tuned library us | start us | after kernel-perf us | recovery |\n|---|---:|---:|---:|---:|")
worst = None
for key in sorted(tuned):
    if key in final:
        rec = tuned[key] / final[key]
        worst = rec if worst is None else min(worst, rec)
        print(f"| {' '.join(key)} | {tuned[key]:.2f} | {start.get(key, float('nan')):.2f} | {final[key]:.2f} | {rec * 100:.1f}% |")
print(f"\nworst-case recovery: {worst * 100:.1f}% (bar: >= 95%)" if worst else "\nno common cases")
PY
}

report_run() {
  local run="$1"
  [ -n "$run" ] || { echo "no run directory" >>"$summary"; return; }
  local od="$run/optimization"
  grep -E '^\| v[0-9]' "$od/comparison.md" >>"$summary" 2>/dev/null
  grep -E '^Winner|^Stopped' "$od/comparison.md" >>"$summary" 2>/dev/null
  grep -E 'rounds A/B interleaved|^not run' "$od/final/report.md" >>"$summary" 2>/dev/null
  grep -E 'class:|evidence:' "$run/profile.yaml" | head -2 | sed 's/^/    /' >>"$summary"
}

# Seconds from the start of Optimize (its first work-tree build) to v1's final notebook.
v1_seconds() {
  local od="$1/optimization"
  if [ ! -f "$od/work-build.log" ] || [ ! -f "$od/v1/notebook.md" ]; then
    echo "n/a"
    return
  fi
  echo $(($(stat -c %Y "$od/v1/notebook.md") - $(stat -c %Y "$od/work-build.log")))
}

step_v1() {
  section "v1 timing (launch search: batched liger-bench processes, successive halving)"
  for op in ${KPERF_V1_OPS:-rms_norm swiglu}; do
    local run
    run="$(kperf "$(fresh_copy)" "$op" --goal speed --dtype bf16 --max-variants 1 --search-min-time-ms 60 --bench-min-time-ms 200 | tail -1)"
    echo "- $op: v1 took $(v1_seconds "$run") s (Optimize start to v1 verdict); processes with --candidate: $(grep -l -- '--candidate' "$run"/optimization/search/*/bench.log 2>/dev/null | wc -l)" >>"$summary"
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
  local run
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

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build v1 naive auto detuned)
if [ "${steps[0]}" != build ] && { [ ! -x "$agent" ] || [ ! -f "$work/build/CMakeCache.txt" ]; }; then
  steps=(build "${steps[@]}")
fi
for s in "${steps[@]}"; do
  case "$s" in
    build | v1 | naive | auto | detuned) "step_$s" || say "step $s failed" ;;
    *) echo "unknown step '$s' (steps: build v1 naive auto detuned)" >&2; exit 2 ;;
  esac
done
say "done; summary: $summary"
