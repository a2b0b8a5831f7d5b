# Helpers shared by the kernel-perf GPU scripts (kernel_perf_demo.sh, kernel_perf_all.sh); sourced,
# not run. The sourcing script sets KPERF_NAME (its output folder and log names) first.
#
# Sets: repo out log summary build agent work scratch runs_list limit commit arch device.
# Environment: OUT (output folder; default ./$KPERF_NAME-out), LIGER_COMMIT (recorded),
# KPERF_STEP_LIMIT_S (per kernel-perf run, default 540).
# shellcheck shell=bash
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo" || exit 1
out="${OUT:-$repo/$KPERF_NAME-out}"
mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
log="$out/$KPERF_NAME.log"
summary="$out/$KPERF_NAME-summary.md"
build="$repo/build"
agent="$build/src/liger-agent"
# The shared work tree (gitignored: /build*/); one per GPU when lanes run side by side
# (scripts/gpu/lanes.sh sets KPERF_WORK_DIR), since a run edits and rebuilds it.
work="${KPERF_WORK_DIR:-$repo/build-kperf-work}"
runs_list="$(mktemp /tmp/kperf-runs.XXXXXX)"
scratch="$(mktemp -d /tmp/kperf-scratch.XXXXXX)"
limit="${KPERF_STEP_LIMIT_S:-540}"
commit="${LIGER_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)"
arch="${arch:-90}"
device="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"

# The run directories (without work trees and binaries) in one archive, and the scratch space gone.
pack() {
  if [ -s "$runs_list" ]; then
    tar -czf "$out/$KPERF_NAME-runs.tar.gz" --exclude='*/optimization/work' --exclude='*.o' \
      --exclude='*/abab/*/liger-bench' --exclude='*/abab/*/libliger_kernels.so*' --exclude='*/v0-build/*' \
      -T "$runs_list" 2>/dev/null
  fi
  rm -rf "$scratch" "$runs_list"
}
trap pack EXIT

say() { echo "$*" | tee -a "$log"; }
section() { printf '\n## %s\n\n' "$*" >>"$summary"; say "==> $*"; }

# The agent (only the liger-agent target) and the shared kernel-perf work tree (the kernel library,
# liger-bench and kernel_tests for this GPU's sm), built once and reused by every run through
# --work-dir; only what a run changes recompiles.
step_build() {
  section "build"
  local start=$SECONDS
  if [ ! -x "$agent" ]; then
    { cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
        -DCMAKE_CUDA_COMPILER="$(which nvcc)" &&
        cmake --build "$build" -j "$(nproc)" --target liger-agent; } >"$scratch/build.log" 2>&1 ||
      { cp "$scratch/build.log" "$out/build.log"; say "agent build failed ($out/build.log)"; return 1; }
  fi
  # A profile-only run would not build the work tree, so build it here the way kernel-perf does
  # (a copy of the CMake project, liger-bench + kernel_tests).
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

# Builds first when a later step needs what is not there yet.
ensure_built() {
  if [ ! -x "$agent" ] || [ ! -f "$work/build/CMakeCache.txt" ]; then step_build || return 1; fi
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
  tar --exclude='./build*' --exclude='./.liger-agent' --exclude='./.git' --exclude='./*-out' -cf - . |
    tar -xf - -C "$copy"
  echo "$copy"
}

# kernel-perf with a time limit (KPERF_RUN_LIMIT_S, else $limit); echoes the run directory as its
# last line. The exit status and seconds go to the log and to $scratch/last-run.
kperf() {
  local tree="$1"; shift
  local start=$SECONDS run rc budget="${KPERF_RUN_LIMIT_S:-$limit}"
  (cd "$tree" && timeout "$budget" "$agent" --autonomous kernel-perf "$@" --tree "$tree" --work-dir "$work") >>"$log" 2>&1
  rc=$?
  run="$(ls -td "$tree"/.liger-agent/runs/*kernel-perf* 2>/dev/null | head -1)"
  [ -n "$run" ] && echo "$run" >>"$runs_list"
  say "kernel-perf $* -> exit $rc in $((SECONDS - start)) s ($run)"
  echo "$rc $((SECONDS - start))" >"$scratch/last-run"
  [ $rc -eq 124 ] && echo "- TIMED OUT after ${budget} s: kernel-perf $*" >>"$summary"
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
  # The profile's verdict (its bottleneck block), not the first case's class.
  sed -n '/^bottleneck:/,/^  evidence:/p' "$run/profile.yaml" 2>/dev/null | sed 's/^/    /' >>"$summary"
  if [ -f "$od/timings.md" ]; then
    printf '\nWhere the time went:\n\n' >>"$summary"
    grep -E '^\||^Totals' "$od/timings.md" >>"$summary"
  fi
}

# v1's seconds: the sum of its recorded phases (search processes, build, smoke test, benchmark);
# "n/a" when the run recorded none.
v1_seconds() {
  python3 - "$1/optimization/timings.json" <<'PY'
import json, sys
try:
    phases = [p for p in json.load(open(sys.argv[1])) if p.get("stage") == "optimize" and p.get("phase", "").startswith("v1 ")]
except Exception:
    phases = []
print(f"{sum(p['seconds'] for p in phases):.0f}" if phases else "n/a")
PY
}
