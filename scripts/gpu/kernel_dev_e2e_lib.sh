# Helpers shared by kernel-dev's end-to-end GPU scripts (segment_e2e.sh, tier3_e2e.sh); sourced, not
# run. The sourcing script sets E2E_NAME first (segment | tier3: the log prefix, the default output
# folder ./$E2E_NAME-e2e-out and the log $E2E_NAME.log).
#
# On sourcing: stops with exit 2 when no GPU is visible, builds (configuring $build for this GPU's
# sm the first time: CUDA library, kernel_tests, reference_tests, liger-bench) and the agent, exit 1
# when that fails. Sets: repo out log summary build jobs arch agent; exports LIGER_BUILD_DIR.
# Environment: OUT, LIGER_BUILD_DIR (default ./build), JOBS (default nproc).
# shellcheck shell=bash
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo" || exit 1
export PATH="/usr/local/cuda/bin:$PATH"
out="${OUT:-$repo/$E2E_NAME-e2e-out}"
mkdir -p "$out"
log="$out/$E2E_NAME.log"
summary="$out/summary.md"
build="${LIGER_BUILD_DIR:-$repo/build}"
case "$build" in /*) ;; *) build="$repo/$build" ;; esac
export LIGER_BUILD_DIR="$build"
jobs="${JOBS:-$(nproc)}"
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)"
arch="${arch:-90}"
say() { printf '[%s-e2e] %s\n' "$E2E_NAME" "$*" | tee -a "$log" >&2; }
: >"$log"

if ! nvidia-smi -L >>"$log" 2>&1; then
  say "no GPU visible (nvidia-smi -L failed): this script is for a GPU machine"
  exit 2
fi

# Build: the agent, and (first time) the CUDA library with its tests and liger-bench.
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  say "configuring $build for sm_$arch"
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" >>"$log" 2>&1 || { say "cmake configure failed (see $log)"; exit 1; }
  say "building the library, tests and liger-bench"
  cmake --build "$build" -j "$jobs" --target liger_kernels kernel_tests reference_tests liger-bench >>"$log" 2>&1 ||
    { say "build failed (see $log)"; exit 1; }
fi
cmake --build "$build" -j "$jobs" --target liger-agent >>"$log" 2>&1 || { say "building liger-agent failed (see $log)"; exit 1; }
agent="$build/src/liger-agent"

# The list files Act inserts into: e2e_save_lists copies them aside before the runs,
# e2e_restore_lists puts them back as they were (and drops the copies).
e2e_lists=(kernels/ops.yaml kernels/python/liger_kernels/functional.py docs/kernels/README.md)
e2e_save_lists() {
  e2e_backup="$(mktemp -d "/tmp/$E2E_NAME-e2e.XXXXXX")"
  for f in "${e2e_lists[@]}"; do cp -f "$repo/$f" "$e2e_backup/$(basename "$f")"; done
}
e2e_restore_lists() {
  for f in "${e2e_lists[@]}"; do cp -f "$e2e_backup/$(basename "$f")" "$repo/$f"; done
  rm -rf "$e2e_backup"
}

# Removes from the checkout every file a run's Act created (its act.json's "created" list).
e2e_remove_created() {
  python3 - "$1" "$repo" <<'PY'
import json, os, sys
act, repo = json.load(open(sys.argv[1])), sys.argv[2]
for path in act.get("created", []):
    try:
        os.remove(os.path.join(repo, path))
    except FileNotFoundError:
        pass
PY
}
