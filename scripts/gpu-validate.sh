#!/usr/bin/env bash
# One call on a GPU machine: build everything for the local GPU, run the whole test suite
# (GPU kernel tests, PyTorch binding tests, autopatch on the installed transformers), a
# compute-sanitizer pass, and the benchmark sweep (liger-bench + PyTorch eager/torch.compile
# comparison measured in the same call). Logs and tables go to $OUT (or ./gpu-out).
#
#   scripts/gpu-validate.sh [tests|bench|all]     (default: all)
set -uo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
out="${OUT:-$repo_root/gpu-out}"
mkdir -p "$out"
what="${1:-all}"
build_dir="${LIGER_BUILD_DIR:-$repo_root/build-gpu}"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)"
arch="${arch:-90}"
export PATH="/usr/local/cuda/bin:$PATH"

log() { printf '[gpu-validate %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

log "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null); commit $commit; sm_$arch"
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    > "$out/configure.log" 2>&1 || { tail -50 "$out/configure.log"; exit 1; }
fi
log "building"
cmake --build "$build_dir" -j "$(nproc)" > "$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
log "build ok"
status=0

if [ "$what" = tests ] || [ "$what" = all ]; then
  log "ctest"
  (cd "$build_dir" && ctest --output-on-failure --timeout 600 -j 8) > "$out/ctest.log" 2>&1 || status=1
  grep -E "tests passed|tests failed|Skipped|\*\*\*Failed|Not Run" "$out/ctest.log" | tail -40
  if command -v compute-sanitizer >/dev/null; then
    log "compute-sanitizer (memcheck) on a small filter"
    compute-sanitizer --tool memcheck --error-exitcode 9 "$build_dir/tests/kernels/kernel_tests" \
      --gtest_filter="${LIGER_SANITIZER_FILTER:-*fp32*37*:*Odd*:*odd*}" --gtest_brief=1 > "$out/sanitizer.log" 2>&1 \
      && log "sanitizer clean" || { log "sanitizer reported problems"; tail -30 "$out/sanitizer.log"; status=1; }
  fi
fi

if [ "$what" = bench ] || [ "$what" = all ]; then
  log "liger-bench (bar shapes, bf16)"
  "$build_dir/benchmarks/liger-bench" --dtype bf16 --commit "$commit" \
    --csv "$out/liger_bench.csv" --json "$out/liger_bench.json" ${LIGER_BENCH_ARGS:-} > "$out/liger_bench.txt" 2>&1 || status=1
  cat "$out/liger_bench.txt" | tail -60
  log "PyTorch eager / torch.compile / liger comparison"
  LIGER_KERNELS_LIBRARY="$build_dir/kernels/libliger_kernels.so" PYTHONUNBUFFERED=1 \
    python3 benchmarks/compare_torch.py --out "$out/compare_torch" ${LIGER_COMPARE_ARGS:-} > "$out/compare_torch.txt" 2>&1 || status=1
  tail -40 "$out/compare_torch.txt"
fi
log "done (status $status)"
exit $status
