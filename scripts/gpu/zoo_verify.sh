#!/usr/bin/env bash
# The generated integrations' tests on a GPU machine (issue 19, "Ship the zoo"): every
# tests/python/test_autopatch_<model>.py of a generated integration (or the models named) in one
# pytest process, spread over pytest-xdist workers when it is installed, and a per-model table.
#
#   scripts/gpu/zoo_verify.sh RESULT.md [MODEL...]
#   scripts/gpu/zoo_verify.sh RESULT.md --shard I/N      the I-th of N equal slices (1-based) of all models
#
# RESULT.md gets: model | mini build | instance | fp32 | bf16 | first failure, plus the totals, the
# device, torch/transformers versions and the commit. Beside it: RESULT.jsonl (one line per test
# as it finishes, so a run cut short still has what it did) and RESULT.log (pytest's output).
# A cell is "pass" when every test of that column passed, "FAIL" when one failed, "skip (reason)"
# when all were skipped, "-" when the model has none. Columns: mini build = the mini model built on
# CPU (test_mini_model_builds_on_cpu); instance = registry, class patch + revert, instance patch +
# revert; fp32 / bf16 = test_convergence with the fused loss and with logits.
#
# Environment: ZOO_JOBS (xdist workers; default 8, 0 = no xdist), ZOO_TIMEOUT_S (whole pytest run,
# default 480), LIGER_KERNELS_LIBRARY (else build/kernels/libliger_kernels.so, else the liger_kernels
# target is built into build/ first: configure + build are not counted in ZOO_TIMEOUT_S), PYTHON.
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
  { echo "zoo_verify.sh: pytest is not importable with $py (pip install pytest pytest-xdist, or set PYTHON)" >&2; exit 2; }

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

files=(); for m in "${models[@]}"; do files+=("tests/python/test_autopatch_$m.py"); done
xdist=()
if [ "$jobs" != "0" ] && "$py" -c "import xdist" 2>/dev/null; then xdist=(-n "$jobs" --dist loadfile); fi
jsonl="${result%.md}.jsonl"; log="${result%.md}.log"
: > "$jsonl"
export PYTHONPATH="$repo/scripts/gpu:$repo/kernels/python${PYTHONPATH:+:$PYTHONPATH}"
export ZOO_RESULTS_JSONL="$jsonl" PYTHONUNBUFFERED=1
start=$(date +%s)
echo "[zoo_verify] ${#models[@]} model(s), ${xdist[*]:-one process}, limit ${limit}s: ${models[*]}" >&2
timeout --signal=INT --kill-after=20 "$limit" "$py" -m pytest -q -rfEs -p zoo_results -p no:cacheprovider \
  "${xdist[@]}" "${files[@]}" > "$log" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
tail -5 "$log" >&2
"$py" "$repo/scripts/gpu/zoo_table.py" "$jsonl" "$result" "$rc" "$secs" "${models[@]}"
echo "[zoo_verify] pytest exit $rc in ${secs}s; table: $result" >&2
exit $rc
