#!/usr/bin/env bash
# kernel-dev end to end on a GPU machine.
#
#   scripts/kernel-dev-e2e.sh            # ReLU² through Verify: GPU tests + benchmark vs eager
#   scripts/kernel-dev-e2e.sh --all      # + every op of tests/workflows/fixtures/kernel_dev/ops/ops.txt
#                                        #   (--skip-bench except ReLU²; %copy fwd/bwd per op)
#   scripts/kernel-dev-e2e.sh --bench    # only the %copy table of the ops an earlier --all generated
#                                        #   in the same KD_WORK (for sweeps split over parallel trees,
#                                        #   whose benchmarks must not share the GPU: KD_BENCH=0 there)
#   scripts/kernel-dev-e2e.sh --tier2    # Tier 2 through the real CLI, replaying the recorded LLM
#                                        #   exchanges (tests/workflows/fixtures/kernel_dev/cassettes/
#                                        #   softmax_llm, no network, no key): the model's softmax with a
#                                        #   wrong gradient is rendered, built, and rejected by the real
#                                        #   reference tests; the repair is rendered and passes. With a GPU
#                                        #   also the GPU tests and the benchmark; without one (CPU-only
#                                        #   machine) the CUDA library is not configured and the GPU tests
#                                        #   report "not run: no GPU".
#
# Works in a scratch copy of the repository (tracked + untracked-not-ignored files), so the
# generated ops never land in this checkout; one build directory serves every op, so each op
# compiles only its own new files. Logs, run directories and the summary go to $OUT (or
# ./kernel-dev-e2e-out). Environment: LIGER_CUDA_ARCHS (default 90), JOBS (default nproc).
# Bars (the issue's): ReLU² bf16 vs PyTorch eager >= 1.9x forward, >= 3.2x backward, >= 37.5%
# less peak memory; every generated kernel >= 85% of copy bandwidth forward and backward.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$PWD/kernel-dev-e2e-out}"
mode="${1:-relu}"
jobs="${JOBS:-$(nproc)}"
archs="${LIGER_CUDA_ARCHS:-90}"
mkdir -p "$out/logs" "$out/runs"
# KD_WORK: the scratch copy (default build-kd-e2e/repo, git-ignored, kept between invocations so
# a second call reuses the build). KD_FRESH=1 starts from a new copy. KD_OPS=a,b,c limits --all
# to those ops (to split the list across calls with a time limit). KD_SKIP_RELU=1 skips the
# ReLU² full run (when an earlier call did it).
work="${KD_WORK:-$repo/build-kd-e2e/repo}"
build="$work/build"
log() { printf '[kernel-dev-e2e] %s\n' "$*" | tee -a "$out/summary.log" >&2; }

if [ "$mode" = "--tier2" ]; then
  # A fresh copy every time (the run adds softmax to it), the build directory kept beside it.
  work="${KD_WORK:-$repo/build-kd-e2e/tier2}"
  build="${KD_BUILD:-$repo/build-kd-e2e/tier2-build}"
  log "copying the tree to $work"
  rm -rf "$work"
  mkdir -p "$work"
  (cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -P -t "$work/" 2>/dev/null)
  [ -d "$repo/.deps" ] && cp -r "$repo/.deps" "$work/"
  cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
  # KD_AGENT=<path>: an already built liger-agent of this checkout (saves building the agent).
  targets=(reference_tests)
  [ -n "${KD_AGENT:-}" ] || targets+=(liger-agent)
  if nvidia-smi -L >/dev/null 2>&1; then
    nvcc_path="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
    export PATH="$(dirname "$nvcc_path"):$PATH"
    cmake_args+=(-DCMAKE_CUDA_COMPILER="$nvcc_path" -DCMAKE_CUDA_ARCHITECTURES="$archs")
    targets+=(liger_kernels kernel_tests liger-bench)
    nvidia-smi -L | tee -a "$out/summary.log"
  else
    log "no GPU: the CUDA library is not configured (reference tests only; GPU tests and benchmark not run)"
    cmake_args+=(-DLIGER_BUILD_KERNELS=OFF)
  fi
  log "configuring + building (${targets[*]}) in $build"
  cmake -S "$work" -B "$build" "${cmake_args[@]}" >"$out/logs/configure.log" 2>&1 || { log "configure failed (logs/configure.log)"; exit 1; }
  cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$out/logs/build.log" 2>&1 ||
    { log "build failed (logs/build.log)"; tail -30 "$out/logs/build.log"; exit 1; }
  agent="${KD_AGENT:-$build/src/liger-agent}"
  [ -x "$agent" ] || agent="$(find "$build" -name liger-agent -type f -perm -u+x | head -1)"
  # The recorded exchanges, replayed only (record mode none: a request that differs from the
  # recording is an error, not a network call); the base URL is the recording's.
  cassette="$out/tier2-cassette"
  rm -rf "$cassette" && mkdir -p "$cassette"
  cp "$repo/tests/workflows/fixtures/kernel_dev/cassettes/softmax_llm/llm.json" "$cassette/"
  url="$(python3 -c 'import json,sys; u=json.load(open(sys.argv[1]))["interactions"][0]["request"]["url"]; print(u[:u.rfind("/chat/completions")])' "$cassette/llm.json")"
  export LIGER_AGENT_DATA_DIR="$work" LIGER_BUILD_DIR="$build" LIGER_BUILD_JOBS="$jobs"
  export LIGER_AGENT_LLM_BASE_URL="$url" LIGER_AGENT_LLM_MODEL=gpt-4o LIGER_AGENT_LLM_API_KEY_ENV=none \
    LIGER_AGENT_LLM_CASSETTE_DIR="$cassette" LIGER_AGENT_LLM_RECORD=none
  log "liger-agent --llm openai kernel-dev 'softmax with temperature one' --yes (cassette $cassette, replay only)"
  start=$SECONDS
  (cd "$work" && "$agent" --llm openai kernel-dev "softmax with temperature one" --yes --tree "$work" --run-dir "$out/runs") >"$out/logs/softmax.log" 2>&1
  rc=$?
  run="$(ls -td "$out/runs"/*-kernel-dev-softmax 2>/dev/null | head -1)"
  log "softmax: exit $rc in $((SECONDS - start))s; run $run"
  [ -n "$run" ] && cp "$run/report.md" "$out/softmax_report.md" 2>/dev/null
  python3 - "$run" "$rc" <<'PY' | tee -a "$out/summary.log"
import json, os, sys
run, rc = sys.argv[1], int(sys.argv[2])
state = json.load(open(os.path.join(run, "state.json")))
attempts = state.get("attempts", [])
story = []
for a in attempts:
    hard = "; ".join(f["summary"] for f in a.get("hard", [])) or "no hard failure"
    story.append(f'  attempt {a["attempt"]}: {hard}')
    for fix in a.get("fixes", []):
        story.append(f"    fix: {fix}")
print("\n".join(story))
first = attempts[0] if attempts else {}
rejected = any("reference tests failed for softmax" in f["summary"] and "gradient check failed" in f.get("detail", "")
               for f in first.get("hard", []))
verify = json.load(open(os.path.join(run, "kernel-dev", "verify.json")))
print("final verdict:", verify["verdict"])
for c in verify["checks"]:
    print(f'  {c["check"]}: {c["result"]} {c["detail"]}')
ok = rc == 0 and len(attempts) == 2 and rejected and verify["verdict"] != "fail"
print("Tier-2 story (wrong gradient rejected by the reference tests, repaired, verified):", "MET" if ok else "NOT MET")
sys.exit(0 if ok else 1)
PY
  exit $?
fi

if [ "${KD_FRESH:-0}" = 1 ] || [ ! -f "$work/CMakeLists.txt" ]; then
  log "copying the tree to $work"
  rm -rf "$work"
  mkdir -p "$work"
  (cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -P -t "$work/" 2>/dev/null)
  [ -d "$repo/.deps" ] && cp -r "$repo/.deps" "$work/"   # header-only dependencies that travel git-ignored
else
  log "reusing $work (KD_FRESH=1 for a new copy)"
fi
# Start from the library as committed: no generated op of an earlier run.
nvcc_path="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
export PATH="$(dirname "$nvcc_path"):$PATH"

log "configuring + building (liger-agent, liger_kernels, tests, liger-bench) in $build"
cmake -S "$work" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc_path" \
  -DCMAKE_CUDA_ARCHITECTURES="$archs" >"$out/logs/configure.log" 2>&1 || { log "configure failed (logs/configure.log)"; exit 1; }
cmake --build "$build" -j "$jobs" --target liger-agent liger_kernels reference_tests kernel_tests liger-bench \
  >"$out/logs/build.log" 2>&1 || { log "build failed (logs/build.log)"; tail -30 "$out/logs/build.log"; exit 1; }
agent="$build/liger-agent"
[ -x "$agent" ] || agent="$(find "$build" -name liger-agent -type f -perm -u+x | head -1)"
export LIGER_AGENT_DATA_DIR="$work" LIGER_BUILD_DIR="$build" LIGER_BUILD_JOBS="$jobs"
nvidia-smi -L | tee -a "$out/summary.log"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" 2>&1 | tee -a "$out/summary.log"

# run_op <name> <input> [extra args...]: one kernel-dev run; prints the exit code.
run_op() {
  local name="$1" input="$2"; shift 2
  local fixture="$repo/tests/workflows/fixtures/kernel_dev/ops/$input"
  [ -f "$fixture" ] && input="$fixture"
  local name_args=()
  case "$name" in relu_squared) ;; *) name_args=(--name "$name") ;; esac
  local start=$SECONDS
  (cd "$work" && "$agent" kernel-dev "$input" "${name_args[@]}" --yes --tree "$work" --run-dir "$out/runs" "$@") \
    >"$out/logs/$name.log" 2>&1
  local rc=$?
  echo "$rc $((SECONDS - start))"
}

# copy_pct <op>: "fwd% bwd%" at the largest shape (liger-bench, bf16).
copy_pct() {
  local json="$out/logs/bench_$1.json"
  "$build/benchmarks/liger-bench" --op "$1" --dtype bf16 --mode forward,backward --json "$json" >"$out/logs/bench_$1.log" 2>&1 || true
  python3 - "$json" <<'PY' 2>/dev/null || echo "- -"
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["results"] if r["ok"]]
def pick(mode):
    rs = [r for r in rows if r["mode"] == mode]
    return f'{rs[-1]["copy_fraction"] * 100:.1f}' if rs else "-"
print(pick("forward"), pick("backward"))
PY
}

latest_run() { ls -td "$out/runs"/*-kernel-dev-* 2>/dev/null | head -1; }

if [ "$mode" = "--bench" ]; then
  table="$out/bench_summary.md"
  printf '| op | fwd %%copy | bwd %%copy |\n|---|---|---|\n' >"$table"
  while IFS='|' read -r name input; do
    case "$name" in ''|'#'*) continue ;; esac
    if [ -n "${KD_OPS:-}" ] && [[ ",$KD_OPS," != *",$name,"* ]]; then continue; fi
    [ -d "$work/kernels/src/$name" ] || { printf '| %s | not generated | |\n' "$name" >>"$table"; continue; }
    read -r fwd bwd < <(copy_pct "$name")
    printf '| %s | %s | %s |\n' "$name" "$fwd" "$bwd" | tee -a "$table"
  done <"$repo/tests/workflows/fixtures/kernel_dev/ops/ops.txt"
  exit 0
fi

rc=0; secs=0; run=""
if [ "${KD_SKIP_RELU:-0}" != 1 ]; then
log "ReLU squared activation function --yes (full Verify: GPU tests + benchmarks vs eager)"
read -r rc secs < <(run_op relu_squared "ReLU squared activation function")
run="$(latest_run)"
log "relu_squared: exit $rc in ${secs}s; run $run"
[ -n "$run" ] && cp "$run/report.md" "$out/relu_squared_report.md" 2>/dev/null
if [ -n "$run" ] && [ -f "$run/kernel-dev/verify.json" ]; then
  python3 - "$run/kernel-dev/verify.json" <<'PY' | tee -a "$out/summary.log"
import json, sys
v = json.load(open(sys.argv[1]))
print("verdict:", v["verdict"])
for c in v["checks"]:
    print(f'  {c["check"]}: {c["result"]} {c["detail"]}')
e = v.get("metrics", {}).get("eager")
if e:
    s = e["speedup"]
    bars = [("forward", s["forward"], 1.9), ("backward", s["backward"], 3.2)]
    for mode, got, bar in bars:
        print(f'  bar {mode} vs eager: {got:.2f}x (need >= {bar}x): {"MET" if got >= bar else "NOT MET"}')
    d = e.get("speedup_device", {})
    for mode, bar in (("forward", 1.9), ("backward", 3.2)):
        if mode in d:
            print(f'  device time (CUDA graphs) {mode} vs eager: {d[mode]:.2f}x (bar {bar}x): {"MET" if d[mode] >= bar else "NOT MET"}')
    m = e["memory_saving"] * 100
    print(f'  bar memory: {m:.1f}% less (need >= 37.5%): {"MET" if m >= 37.5 else "NOT MET"}')
lb = v.get("metrics", {}).get("liger_bench", {}).get("op", {})
for mode in ("forward", "backward"):
    if mode in lb:
        f = lb[mode]["copy_fraction"] * 100
        print(f'  bar {mode} %copy: {f:.1f}% (need >= 85%): {"MET" if f >= 85 else "NOT MET"}')
PY
fi
fi
[ "$mode" = "--all" ] || { log "done (logs in $out)"; exit "$rc"; }

summary="$out/ops_summary.md"
[ -f "$summary" ] || printf '| op | input | exit | Verify | fwd %%copy | bwd %%copy | s |\n|---|---|---|---|---|---|---|\n' >"$summary"
pass=0; total=0
while IFS='|' read -r name input; do
  case "$name" in ''|'#'*) continue ;; esac
  if [ -n "${KD_OPS:-}" ] && [[ ",$KD_OPS," != *",$name,"* ]]; then continue; fi
  total=$((total + 1))
  if [ "$name" = relu_squared ] && [ -n "$run" ]; then rc_op=$rc; secs_op=$secs; run_dir="$run"
  else
    read -r rc_op secs_op < <(run_op "$name" "$input" --skip-bench)
    run_dir="$(latest_run)"
  fi
  verdict="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['verdict'])" "$run_dir/kernel-dev/verify.json" 2>/dev/null || echo "no verify ($(tail -1 "$out/logs/$name.log" | cut -c1-80))")"
  if [ "$rc_op" = 0 ]; then
    pass=$((pass + 1))
    if [ "${KD_BENCH:-1}" = 1 ]; then read -r fwd bwd < <(copy_pct "$name"); else fwd=deferred; bwd=deferred; fi
  else fwd=-; bwd=-; fi
  printf '| %s | `%s` | %s | %s | %s | %s | %s |\n' "$name" "$input" "$rc_op" "$verdict" "$fwd" "$bwd" "$secs_op" | tee -a "$summary"
done <"$repo/tests/workflows/fixtures/kernel_dev/ops/ops.txt"
log "$pass of $total ops passed Verify; table: $summary"
cp "$summary" "$out/" 2>/dev/null
exit 0
