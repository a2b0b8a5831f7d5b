#!/usr/bin/env bash
# kernel-dev's generated Tier-1 kernels against the roofline, end to end on one GPU.
#
#   scripts/gpu/roofline_sweep.sh TABLE.md
#
# For each op below: `liger-agent kernel-dev <input> --yes` with the benchmarks (Verify builds the
# op, runs its reference and GPU tests, the agreement check against PyTorch in fp64, liger-bench in
# bf16 and the comparison with PyTorch eager and torch.compile of the same function). Prints and
# writes to TABLE.md:
#
#   | op | input | Verify | fwd % of copy | bwd % of copy | vs eager (fwd / bwd) | vs torch.compile (fwd / bwd) |
#
# % of copy: liger-bench's bytes (each tensor the kernel must move, once) / time, over the
# cudaMemcpy device-to-device bandwidth, at the largest bf16 shape; the bar is >= 85% both ways.
# vs eager / vs torch.compile: how many times faster the generated kernel is (median per call,
# benchmarks/kernel_dev_compare.py).
#
# Works in a scratch copy of this checkout (tracked + untracked-not-ignored files, timestamps
# kept), made fresh on every call so the library starts without generated ops; the build
# directory lives beside it and is kept, so a second call only compiles the new ops. The first
# call also builds the library and the tests there (minutes on 16 cores, not counted in the
# budget); KD_AGENT=<built liger-agent> (e.g. the checkout's build/liger-agent) skips building the
# agent there.
#
# Environment:
#   OPS=mish,dyt       only these ops (names of the list below)
#   RF_OPS_LIST        another list in the same "name|input" lines, e.g. the Tier-2 row ops:
#                      RF_OPS_LIST=$'softmax|def f(x): return torch.softmax(x, dim=-1)\nlog_softmax|def f(x): return F.log_softmax(x, dim=-1)'
#                      (the table's title still says Tier 1)
#   RF_BUDGET_S=420    wall-clock budget of the kernel-dev runs (after the build); an op that would
#                      start with less than 60 s left is reported "not run: time budget", a running
#                      one is stopped at it. OPS=... runs the rest in a second call.
#   RF_DEADLINE_EPOCH  a wall-clock end (date +%s) the budget never passes, however long the build
#                      took (for a job with a fixed limit, e.g. one lane of scripts/gpu/lanes.sh)
#   RF_WORK, RF_BUILD  the scratch copy and its build directory (default build-roofline/{repo,build})
#   OUT                logs and run directories (default build-roofline/out)
#   LIGER_CUDA_ARCHS   (default 90), JOBS (default nproc)
set -uo pipefail

usage() { echo "usage: $0 TABLE.md   (writes the op table there; see the header of this script)" >&2; exit 2; }
[ $# -eq 1 ] || usage
case "$1" in -h|--help) usage ;; esac
table="$1"
start=$SECONDS
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="${RF_WORK:-$repo/build-roofline/repo}"
build="${RF_BUILD:-$repo/build-roofline/build}"
out="${OUT:-$repo/build-roofline/out}"
budget="${RF_BUDGET_S:-420}"
jobs="${JOBS:-$(nproc)}"
archs="${LIGER_CUDA_ARCHS:-90}"
mkdir -p "$out/logs" "$out/runs" "$(dirname "$table")"
log() { printf '[roofline] %s\n' "$*" >&2; }

# name|input. DyT is the catalogue's `dyt` (gamma * tanh(alpha * x) + beta: a learnable scalar and
# two per-channel parameters); softplus runs with its default beta and threshold.
ops_list='mish|Mish
dyt|DyT
where_log|y = where(x > 1, log(x), x - 1)
sigmoid_gate|z = a * sigmoid(b) + c
gelu_tanh|gelu_tanh
silu|SiLU
softplus|softplus
relu_squared|ReLU squared activation function'
ops_list="${RF_OPS_LIST:-$ops_list}"

if ! nvidia-smi -L >/dev/null 2>&1; then log "no GPU visible (nvidia-smi -L failed): this sweep needs one"; exit 1; fi
nvcc_path="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
[ -x "$nvcc_path" ] || { log "nvcc not found (PATH, /usr/local/cuda/bin)"; exit 1; }
PATH="$(dirname "$nvcc_path"):$PATH"
export PATH

log "fresh scratch copy of the checkout in $work (build directory $build kept)"
rm -rf "$work"
mkdir -p "$work"
(cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 cp -p --parents -P -t "$work/" 2>/dev/null)
[ -d "$repo/.deps" ] && cp -rp "$repo/.deps" "$work/"

targets=(liger_kernels reference_tests kernel_tests liger-bench)
[ -n "${KD_AGENT:-}" ] || targets+=(liger-agent)
log "configuring + building (${targets[*]})"
cmake -S "$work" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc_path" \
  -DCMAKE_CUDA_ARCHITECTURES="$archs" >"$out/logs/configure.log" 2>&1 || { log "configure failed ($out/logs/configure.log)"; exit 1; }
cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$out/logs/build.log" 2>&1 ||
  { log "build failed ($out/logs/build.log)"; tail -30 "$out/logs/build.log" >&2; exit 1; }
agent="${KD_AGENT:-$build/liger-agent}"
[ -x "$agent" ] || agent="$(find "$build" -name liger-agent -type f -perm -u+x | head -1)"
[ -x "$agent" ] || { log "liger-agent not found in $build (KD_AGENT=<path> to name one)"; exit 1; }
export LIGER_AGENT_DATA_DIR="$work" LIGER_BUILD_DIR="$build" LIGER_BUILD_JOBS="$jobs"
device="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
build_s=$((SECONDS - start))
log "built in ${build_s} s; device: $device"
start=$SECONDS  # the budget covers the kernel-dev runs
if [ -n "${RF_DEADLINE_EPOCH:-}" ]; then
  until_deadline=$((RF_DEADLINE_EPOCH - $(date +%s)))
  [ "$until_deadline" -lt "$budget" ] && budget=$until_deadline
  log "budget ${budget} s (RF_DEADLINE_EPOCH)"
fi

rows="$out/rows.txt"
: >"$rows"
while IFS='|' read -r name input; do
  [ -n "$name" ] || continue
  if [ -n "${OPS:-}" ] && [[ ",$OPS," != *",$name,"* ]]; then continue; fi
  left=$((budget - (SECONDS - start)))
  if [ "$left" -lt 60 ]; then
    printf '%s|%s|not run: time budget (RF_BUDGET_S=%s)|||\n' "$name" "$input" "$budget" >>"$rows"
    log "$name: not run (time budget)"
    continue
  fi
  name_args=(--name "$name")
  [ "$name" = relu_squared ] && name_args=()
  log "$name: kernel-dev \"$input\" --yes (at most ${left} s)"
  t0=$SECONDS
  # One run directory per op, emptied first: the run found there is this op's.
  rm -rf "$out/runs/$name" && mkdir -p "$out/runs/$name"
  (cd "$work" && timeout "$left" "$agent" kernel-dev "$input" "${name_args[@]}" --yes --tree "$work" --run-dir "$out/runs/$name") \
    >"$out/logs/$name.log" 2>&1
  rc=$?
  run="$(ls -td "$out/runs/$name"/*-kernel-dev-* 2>/dev/null | head -1)"
  log "$name: exit $rc in $((SECONDS - t0)) s ($out/logs/$name.log)"
  python3 - "$name" "$input" "$rc" "${run:-/nonexistent}/kernel-dev/verify.json" >>"$rows" <<'PY'
import json, os, sys
name, source, rc, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if rc == 124:
    print(f"{name}|{source}|stopped at the time budget|||"); sys.exit(0)
if not os.path.exists(path):
    print(f"{name}|{source}|no Verify (exit {rc}; see its log)|||"); sys.exit(0)
v = json.load(open(path))
m = v.get("metrics", {})
lb = m.get("liger_bench", {}).get("op", {})
def pct(mode):
    return f'{lb[mode]["copy_fraction"] * 100:.1f}' if mode in lb else "-"
e = m.get("eager") or {}
def ratio(key):
    s = e.get(key) or {}
    return " / ".join(f"{s[k]:.2f}x" if k in s else "-" for k in ("forward", "backward")) if s else ""
eager = ratio("speedup") or "not run"
compiled = ratio("speedup_vs_compile")
if not compiled:
    why = next((c["result"] for c in v.get("checks", []) if c.get("check") == "benchmark vs torch.compile"), "")
    compiled = why or (("not run: " + e["torch_compile_error"]) if e.get("torch_compile_error") else "not run")
print(f"{name}|{source}|{v.get('verdict', '?')}|{pct('forward')}|{pct('backward')}|{eager}|{compiled}")
PY
done <<<"$ops_list"

{
  echo "kernel-dev Tier-1 roofline sweep: $device, bf16, $(date -u +%Y-%m-%dT%H:%MZ), commit $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "| op | input | Verify | fwd % of copy | bwd % of copy | vs eager (fwd / bwd) | vs torch.compile (fwd / bwd) |"
  echo "|---|---|---|---|---|---|---|"
  while IFS='|' read -r name input verdict fwd bwd eager compiled; do
    printf '| %s | `%s` | %s | %s | %s | %s | %s |\n' "$name" "$input" "$verdict" "${fwd:--}" "${bwd:--}" "${eager:--}" "${compiled:--}"
  done <"$rows"
  echo
  echo "% of copy: bytes each kernel must move (every tensor once) / time, over cudaMemcpy D2D bandwidth; bar >= 85%."
  echo "Build ${build_s} s, kernel-dev runs $((SECONDS - start)) s; logs and runs: $out."
} | tee "$table"
