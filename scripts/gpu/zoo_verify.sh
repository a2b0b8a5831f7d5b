#!/usr/bin/env bash
# The generated integrations' tests on a GPU machine (issue 19, "Ship the zoo"): every
# tests/python/test_autopatch_<model>.py of a generated integration (or the models named), each
# model's file in its own pytest process, ZOO_JOBS of them at a time, and a per-model table.
# One process per model because a CUDA device-side assert poisons the CUDA context of the process
# it happens in: under one shared pytest-xdist session every later test of that worker failed at
# setup with "device-side assert triggered", so one model's bug showed as twenty models' failures.
#
#   scripts/gpu/zoo_verify.sh RESULT.md [MODEL...]
#   scripts/gpu/zoo_verify.sh RESULT.md --shard I/N      the I-th of N equal slices (1-based) of all models
#
# RESULT.md gets: model | mini build | instance | fp32 | bf16 | first failure, plus the totals, the
# device, torch/transformers versions and the commit. Beside it: RESULT.jsonl (one line per test,
# model by model), RESULT.log (each model's pytest output, model by model) and RESULT.d/ (each
# model's own <model>.jsonl, <model>.log and <model>.rc, written as it runs, so a run cut short
# still has what it did).
# A cell is "pass" when every test of that column passed, "FAIL" when one failed, "skip (reason)"
# when all were skipped, "-" when the model has none, "not run (...)" when the model's process
# ended (time limit, crash) before reaching it. Columns: mini build = the mini model built on CPU
# (test_mini_model_builds_on_cpu); instance = registry, class patch + revert, instance patch +
# revert; fp32 / bf16 = test_convergence with the fused loss and with logits; images =
# test_convergence_multimodal (models with a vision tower: images and text, fp32 and bf16).
#
# Environment: ZOO_JOBS (model processes at once; default 8), ZOO_MODEL_TIMEOUT_S (one model's
# process, default 240), ZOO_TIMEOUT_S (the whole run, default 480), ZOO_THREADS (CPU threads per
# process, default nproc / ZOO_JOBS), LIGER_KERNELS_LIBRARY (else build/kernels/libliger_kernels.so,
# else the liger_kernels target is built into build/ first: configure + build are not counted in
# ZOO_TIMEOUT_S), PYTHON. A model whose process ran out of GPU memory while others shared the
# device is run once more alone afterwards, inside ZOO_TIMEOUT_S.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo" || exit 1
if [ $# -lt 1 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  [ $# -lt 1 ] && exit 2 || exit 0
fi
result="$1"; shift
case "$result" in /*) ;; *) result="$PWD/$result" ;; esac
mkdir -p "$(dirname "$result")"
py="${PYTHON:-python3}"
jobs="${ZOO_JOBS:-8}"
limit="${ZOO_TIMEOUT_S:-480}"
model_limit="${ZOO_MODEL_TIMEOUT_S:-240}"
for v in "$jobs" "$limit" "$model_limit"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "zoo_verify.sh: ZOO_JOBS, ZOO_TIMEOUT_S and ZOO_MODEL_TIMEOUT_S take positive integers, got '$v'" >&2; exit 2; }
done
pkg="kernels/python/liger_kernels/transformers"

# Every generated integration: a module with the autopatch profile header and its test file.
all_models=()
for f in "$pkg"/*.py; do
  m="$(basename "$f" .py)"
  case "$m" in _*) continue ;; esac
  grep -q '^# autopatch-profile:' "$f" && [ -f "tests/python/test_autopatch_$m.py" ] && all_models+=("$m")
done
models=()
if [ "${1:-}" = "--shard" ]; then
  i="${2%/*}"; n="${2#*/}"
  if ! [[ "$i" =~ ^[0-9]+$ && "$n" =~ ^[0-9]+$ ]] || [ "$i" -lt 1 ] || [ "$i" -gt "$n" ]; then
    echo "zoo_verify.sh: --shard takes I/N with 1 <= I <= N, got '${2:-}'" >&2; exit 2
  fi
  for k in "${!all_models[@]}"; do [ $(( k % n )) -eq $(( i - 1 )) ] && models+=("${all_models[$k]}"); done
elif [ $# -gt 0 ]; then
  for m in "$@"; do
    if [ ! -f "tests/python/test_autopatch_$m.py" ]; then
      echo "zoo_verify.sh: no tests/python/test_autopatch_$m.py (generated models: ${all_models[*]})" >&2; exit 2
    fi
    models+=("$m")
  done
else
  models=("${all_models[@]}")
fi
[ ${#models[@]} -gt 0 ] || { echo "zoo_verify.sh: no generated integration found under $pkg" >&2; exit 2; }
"$py" -c "import pytest" 2>/dev/null ||
  { echo "zoo_verify.sh: pytest is not importable with $py (pip install pytest, or set PYTHON)" >&2; exit 2; }

if [ -z "${LIGER_KERNELS_LIBRARY:-}" ]; then
  lib="$repo/build/kernels/libliger_kernels.so"
  if [ ! -f "$lib" ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
    arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)"
    echo "[zoo_verify] building the kernel library (sm_${arch:-90}) into build/ ..." >&2
    { [ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES="${arch:-90}"; } > "${result%.md}.build.log" 2>&1 &&
      cmake --build build -j "$(nproc)" --target liger_kernels >> "${result%.md}.build.log" 2>&1 ||
      { tail -30 "${result%.md}.build.log" >&2; echo "zoo_verify.sh: the kernel library did not build" >&2; exit 1; }
  fi
  export LIGER_KERNELS_LIBRARY="$lib"
fi

jsonl="${result%.md}.jsonl"; log="${result%.md}.log"; dir="${result%.md}.d"
rm -rf "$dir"; mkdir -p "$dir"
: > "$jsonl"; : > "$log"
export PYTHONPATH="$repo/scripts/gpu:$repo/kernels/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# Processes share the CPU (the mini model is built on CPU first): without a cap each would start
# one thread per core.
threads="${ZOO_THREADS:-$(( $(nproc) / jobs > 0 ? $(nproc) / jobs : 1 ))}"
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
export ZOO_PY="$py" ZOO_DIR="$dir" ZOO_MODEL_LIMIT="$model_limit"
# One model: its pytest process with its own results file; the exit status kept beside them.
# -p no:xdist: a model's tests share one CUDA context, so they run in that one process.
run_model='m="$1"
timeout --signal=INT --kill-after=20 "$ZOO_MODEL_LIMIT" env ZOO_RESULTS_JSONL="$ZOO_DIR/$m.jsonl" \
  "$ZOO_PY" -m pytest -q -rfEs -p zoo_results -p no:cacheprovider -p no:xdist \
  "tests/python/test_autopatch_$m.py" > "$ZOO_DIR/$m.log" 2>&1
echo $? > "$ZOO_DIR/$m.rc"
echo "[zoo_verify] $m: pytest exit $(cat "$ZOO_DIR/$m.rc")" >&2'
start=$(date +%s)
echo "[zoo_verify] ${#models[@]} model(s), one process each, $jobs at a time ($threads CPU threads each), limit ${model_limit}s a model, ${limit}s in all: ${models[*]}" >&2
printf '%s\n' "${models[@]}" |
  timeout --signal=TERM --kill-after=30 "$limit" xargs -P "$jobs" -n 1 bash -c "$run_model" zoo_model
rc=$?
# A model that ran out of GPU memory while ZOO_JOBS processes shared the device did not fail on
# its own merits: it is run again alone (its shared-run log kept as <model>.shared.log), as long as
# the run's time limit leaves room. Only the alone run's result counts.
if [ "$jobs" -gt 1 ]; then
  for m in "${models[@]}"; do
    [ "$(cat "$dir/$m.rc" 2>/dev/null)" = 0 ] && continue
    grep -qE 'OutOfMemoryError|CUDA out of memory' "$dir/$m.log" 2>/dev/null || continue
    left=$(( limit - ($(date +%s) - start) ))
    if [ "$left" -le 30 ]; then echo "[zoo_verify] $m ran out of GPU memory beside other models; no time left to run it alone" >&2; continue; fi
    echo "[zoo_verify] $m ran out of GPU memory beside other models: running it alone" >&2
    mv "$dir/$m.log" "$dir/$m.shared.log"; rm -f "$dir/$m.jsonl" "$dir/$m.rc"
    ZOO_MODEL_LIMIT=$(( left < model_limit ? left : model_limit )) \
      OMP_NUM_THREADS="$(nproc)" MKL_NUM_THREADS="$(nproc)" bash -c "$run_model" zoo_model "$m"
  done
  rc=0
  for m in "${models[@]}"; do [ "$(cat "$dir/$m.rc" 2>/dev/null)" = 0 ] || rc=1; done
fi
secs=$(( $(date +%s) - start ))
# The per-model results gathered in model order; a process that ended badly with no failing test
# of its own to show for it (a time limit, a crash) gets one "process" line that says so.
for m in "${models[@]}"; do
  mrc="$(cat "$dir/$m.rc" 2>/dev/null || echo none)"
  [ -f "$dir/$m.jsonl" ] && cat "$dir/$m.jsonl" >> "$jsonl"
  { echo "===== $m: pytest exit $mrc ====="; cat "$dir/$m.log" 2>/dev/null; } >> "$log"
  why=""
  case "$mrc" in
    0|1|5) ;;
    124|137) why="its pytest process ran past ZOO_MODEL_TIMEOUT_S=${model_limit}s" ;;
    none) why="its pytest process did not finish within ZOO_TIMEOUT_S=${limit}s" ;;
    *) why="its pytest process exited with $mrc (see $log)" ;;
  esac
  [ -n "$why" ] && printf '{"nodeid": "tests/python/test_autopatch_%s.py", "when": "process", "outcome": "failed", "message": "%s"}\n' "$m" "$why" >> "$jsonl"
  [ "$mrc" != 0 ] && [ "$rc" = 0 ] && rc=1
done
grep -h '^=\+ .* in [0-9.]\+s' "$dir"/*.log 2>/dev/null | tail -5 >&2
"$py" "$repo/scripts/gpu/zoo_table.py" "$jsonl" "$result" "$rc" "$secs" "${models[@]}"
echo "[zoo_verify] exit $rc in ${secs}s; table: $result" >&2
exit $rc
