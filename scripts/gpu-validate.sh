#!/usr/bin/env bash
# Builds and validates everything on a GPU machine in as few calls as possible: the whole test
# suite (GPU kernel tests, PyTorch binding tests, autopatch on the installed transformers), a
# compute-sanitizer pass, the benchmark sweep (liger-bench + PyTorch eager / torch.compile in the
# same process), and the three workflows end to end.
#
#   scripts/gpu-validate.sh [STEP...]
#   steps: build ctest unit sanitizer bench compare kernel-dev autopatch kernel-perf
#          (default: all of them, in that order; `build` always runs first)
#
# Logs go to a scratch folder packed into $OUT/gpu-logs.tar.gz (or ./gpu-out/), with a one-line
# result per step in summary.txt. Each step has its own time limit so one slow step cannot eat
# the others' time.
set -uo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
final_out="${OUT:-$repo_root/gpu-out}"
logs="$(mktemp -d /tmp/gpu-validate.XXXXXX)"
mkdir -p "$final_out"
# The scratch log folder is packed into $final_out and removed on every exit path.
trap 'cp "$logs/summary.txt" "$final_out/" 2>/dev/null; tar -C "$logs" -czf "$final_out/gpu-logs.tar.gz" . 2>/dev/null; rm -rf "$logs"' EXIT
build_dir="${LIGER_BUILD_DIR:-$repo_root/build-gpu}"
export LIGER_BUILD_DIR="$build_dir"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
export PATH="/usr/local/cuda/bin:$PATH"
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)"
arch="${arch:-90}"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(ctest sanitizer bench compare kernel-dev autopatch kernel-perf)

log() { printf '[gpu-validate %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
# Results and logs are packed after every step, so a call cut short still returns what it did.
result() {
  printf '%-12s %s\n' "$1" "$2" | tee -a "$logs/summary.txt"
  cp "$logs/summary.txt" "$final_out/" 2>/dev/null
  tar -C "$logs" -czf "$final_out/gpu-logs.tar.gz" . 2>/dev/null
}

log "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null); commit $commit; sm_$arch"
echo "device: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1); date: $(date -u +%FT%TZ); commit: $commit (+ working tree)" > "$logs/summary.txt"

if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    > "$logs/configure.log" 2>&1 || { tail -40 "$logs/configure.log"; result build "FAILED (configure)"; exit 1; }
fi
start=$(date +%s)
if cmake --build "$build_dir" -j "$(nproc)" > "$logs/build.log" 2>&1; then
  result build "ok ($(( $(date +%s) - start )) s)"
else
  grep -E "error" "$logs/build.log" | head -40
  result build "FAILED"
  exit 1
fi
agent="$build_dir/src/liger-agent"
bench="$build_dir/benchmarks/liger-bench"
export LIGER_KERNELS_LIBRARY="$build_dir/kernels/libliger_kernels.so"
export PYTHONPATH="$repo_root/kernels/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
status=0

run_step() {  # name, time limit (s), command...
  local name="$1" limit="$2"
  shift 2
  log "$name (limit ${limit}s)"
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  local took=$(( $(date +%s) - t0 ))
  if [ $rc -eq 0 ]; then result "$name" "ok (${took} s)"; else result "$name" "FAILED rc=$rc (${took} s)"; status=1; fi
  tail -${TAIL_LINES:-25} "$logs/$name.log"
  return 0
}

for step in "${steps[@]}"; do
  case "$step" in
    ctest)
      run_step ctest "${CTEST_LIMIT:-300}" bash -c "cd '$build_dir' && ctest --output-on-failure --timeout 280 -j 8"
      grep -E "tests passed|tests failed|\\*\\*\\*Failed|\\*\\*\\*Skipped|Not Run" "$logs/ctest.log" | tail -30 ;;
    unit)  # the test binaries directly (no CTest): one line of result each
      run_step kernel_tests "${KERNEL_TESTS_LIMIT:-120}" "$build_dir/tests/kernels/kernel_tests" --gtest_brief=1
      run_step python_tests "${PYTHON_TESTS_LIMIT:-150}" python3 tests/python/run_python_tests.py -x -q
      # The CPU-only suites (agent, llm, workflows, references) run on every CI machine; here only
      # what needs this machine: autopatch over the installed transformers' real modeling files.
      run_step real_models "${REAL_MODELS_LIMIT:-40}" "$build_dir/tests/workflow_tests" --gtest_filter='AutopatchRealModels.*' ;;
    sanitizer)
      run_step sanitizer "${SANITIZER_LIMIT:-90}" compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$build_dir/tests/kernels/kernel_tests" --gtest_brief=1 \
        --gtest_filter="${LIGER_SANITIZER_FILTER:-*fp32*37*:*bf16*123*:*PipelineDepth*:*_st3*:*RopeStaged*:*CrossEntropy*vocab37*}" ;;
    bench)
      run_step bench "${BENCH_LIMIT:-150}" "$bench" --dtype bf16 --min-time-ms "${BENCH_MIN_MS:-200}" --commit "$commit" \
        --csv "$logs/liger_bench.csv" --json "$logs/liger_bench.json" ;;
    compare)
      run_step compare "${COMPARE_LIMIT:-240}" python3 benchmarks/compare_torch.py --out "$logs/compare_torch" ${LIGER_COMPARE_ARGS:-} ;;
    kernel-dev)
      run_step kernel-dev "${KERNEL_DEV_LIMIT:-180}" env OUT="$logs/kernel-dev" bash scripts/kernel-dev-e2e.sh ;;
    autopatch)
      run_step autopatch "${AUTOPATCH_LIMIT:-240}" env OUT="$logs/autopatch" LIGER_AGENT="$agent" bash scripts/autopatch-e2e.sh ;;
    kernel-perf)
      run_step kernel-perf "${KERNEL_PERF_LIMIT:-240}" "$agent" --autonomous kernel-perf swiglu --goal speed \
        --start-tunables threads_per_block=64,vector_bytes=4 --max-variants "${KERNEL_PERF_VARIANTS:-3}" \
        --search-min-time-ms 30 --bench-min-time-ms 100
      run_dir=$(ls -d .liger-agent/runs/*kernel-perf-swiglu* 2>/dev/null | tail -1)
      [ -n "$run_dir" ] && tar -czf "$logs/kernel-perf-run.tar.gz" -C "$(dirname "$run_dir")" "$(basename "$run_dir")" ;;
    *) log "unknown step $step"; status=2 ;;
  esac
done
log "done (status $status)"
cat "$logs/summary.txt"
exit $status
