#!/usr/bin/env bash
# autopatch end to end on the GPU machine: one dense, one Gemma-family and one MoE model through the
# built binary against the installed transformers, then pytest on the generated tests and on the
# hand-written references, then the training-step benchmark.
#
#   scripts/autopatch-e2e.sh                       # uses build/ (or $LIGER_AGENT) and python3
#   OUT=/some/dir scripts/autopatch-e2e.sh         # logs, run directories and results under $OUT
#
# Environment: LIGER_AGENT (binary), PYTHON (interpreter), MODELS ("llama gemma2 qwen3_moe"),
# SKIP_BENCH=1 to skip the benchmark. The generated files are applied to this checkout (the tree the
# binary was built from); `git status` shows them afterwards. A model whose integration already
# exists is updated through --modify (a re-run is safe). Exit status: 0 when every step passed.
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/.liger-agent/autopatch-e2e}"
mkdir -p "$OUT"
LOG="$OUT/e2e.log"
: > "$LOG"
PYTHON="${PYTHON:-python3}"
MODELS="${MODELS:-llama gemma2 qwen3_moe}"

log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG"; }

BIN="${LIGER_AGENT:-}"
if [ -z "$BIN" ]; then
  for c in build/liger-agent build-release/liger-agent build-apwire/liger-agent build/src/liger-agent; do
    [ -x "$c" ] && BIN="$c" && break
  done
fi
configure() {
  [ -f build/CMakeCache.txt ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >>"$LOG" 2>&1
}
if [ -z "$BIN" ] || [ ! -x "$BIN" ]; then
  log "building liger-agent into build/"
  configure && cmake --build build -j "$(nproc)" --target liger-agent >>"$LOG" 2>&1 || { log "build failed (see $LOG)"; exit 2; }
  BIN="$(find build -name liger-agent -type f -perm -u+x | head -1)"
fi
# The kernel library the Python bindings load (tests and benchmark need it).
if ! PYTHONPATH="$ROOT/kernels/python" "$PYTHON" -c "from liger_kernels import _lib; print(_lib.library_path())" >>"$LOG" 2>&1; then
  log "building the kernel library (liger_kernels) into build/"
  configure && cmake --build build -j "$(nproc)" --target liger_kernels >>"$LOG" 2>&1 || { log "kernel library build failed (see $LOG)"; exit 2; }
fi
log "binary: $BIN"
"$PYTHON" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__)" 2>&1 | tee -a "$LOG"
export PYTHONPATH="$ROOT/kernels/python${PYTHONPATH:+:$PYTHONPATH}"

status=0
declare -A RESULT
tests=()
for model in $MODELS; do
  module="$model"
  extra=()
  # llama has a hand-written integration (the dense reference): generate beside it.
  if [ -f "kernels/python/liger_kernels/transformers/$model.py" ] &&
     ! grep -q '^# autopatch-profile:' "kernels/python/liger_kernels/transformers/$model.py"; then
    module="${model}_autopatch"
    extra+=(--module "$module")
  fi
  if [ -f "kernels/python/liger_kernels/transformers/$module.py" ]; then extra+=(--modify); fi
  log "autopatch $model (module $module) ${extra[*]:-}"
  "$BIN" --json --yes autopatch "$model" "${extra[@]}" --python "$PYTHON" >"$OUT/autopatch-$module.json" 2>"$OUT/autopatch-$module.stderr"
  rc=$?
  RESULT[$model]="exit $rc"
  log "  exit $rc: $(tr -d '\n' < "$OUT/autopatch-$module.json" | head -c 600)"
  run_dir="$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1])).get('run_dir',''))" "$OUT/autopatch-$module.json" 2>/dev/null)"
  if [ -n "$run_dir" ] && [ -d "$run_dir" ]; then
    mkdir -p "$OUT/runs"
    cp -r "$run_dir" "$OUT/runs/" 2>/dev/null
    [ -f "$run_dir/autopatch/verify.md" ] && cat "$run_dir/autopatch/verify.md" | tee -a "$LOG"
  fi
  [ $rc -eq 0 ] || status=1
  [ -f "tests/python/test_autopatch_$module.py" ] && tests+=("tests/python/test_autopatch_$module.py")
done

# The generated tests once more in one pytest (Verify ran them per model; this is the summary the
# lead reads), plus the hand-written references' generic tests if present.
for t in tests/python/test_autopatch_gemma.py tests/python/test_autopatch_qwen3_moe.py; do
  [ -f "$t" ] && tests+=("$t")
done
if [ ${#tests[@]} -gt 0 ]; then
  log "pytest ${tests[*]}"
  LIGER_TEST_REPORT_DIR="$OUT/test-reports" "$PYTHON" -m pytest -q -rA -p no:cacheprovider "${tests[@]}" \
    --junitxml="$OUT/autopatch-tests.xml" 2>&1 | tee "$OUT/pytest.log" | tail -60 | tee -a "$LOG"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

if [ "${SKIP_BENCH:-0}" != "1" ]; then
  log "benchmark: benchmarks/autopatch_step.py"
  "$PYTHON" benchmarks/autopatch_step.py --out "$OUT/bench" 2>&1 | tee -a "$LOG" | tail -40
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  [ -f "$OUT/bench/autopatch_step.md" ] && mkdir -p docs/benchmarks && cp "$OUT/bench/autopatch_step.md" docs/benchmarks/autopatch_step.md &&
    cp "$OUT/bench/autopatch_step.json" docs/benchmarks/autopatch_step.json
fi

for model in $MODELS; do log "summary: $model ${RESULT[$model]}"; done
log "done (status $status); logs in $OUT"
exit $status
