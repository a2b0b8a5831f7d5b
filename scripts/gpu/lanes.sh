#!/usr/bin/env bash
# Runs independent GPU jobs side by side, one per GPU of a multi-GPU machine, so that one call of
# device time measures several things. Every timing a job reports is taken on its own GPU in its
# own processes (ratios stay within one job; compare nothing across lanes).
#
#   scripts/gpu/lanes.sh 'COMMAND0' 'COMMAND1' ...
#
# Lane i runs `bash -c COMMANDi` from the repository root with CUDA_VISIBLE_DEVICES=i,
# OUT=$OUT/lane-i (the job's own output folder), KPERF_WORK_DIR=build-kperf-work-i (kernel-perf's
# work tree is edited and rebuilt by a run, so lanes never share one) and its stdout/stderr in
# lane-i/lane.log. There must be at least as many GPUs as lanes.
# Before the lanes start, the agent and the kernel library are built once (build/, shared
# read-only by the lanes). At the end every lane's folder is packed into $OUT/lanes.tar.gz and
# $OUT/lanes.md lists each lane's command, exit status and seconds (the device's $OUT returns only
# a few files, two folders deep).
# Environment: OUT (default ./lanes-out), LANES_SKIP_BUILD=1 to use build/ as it is,
# LANES_LIMIT_S (default 540): the lanes' wall-clock limit, counted after the build; a lane still
# running then gets SIGTERM (its scripts' exit traps still pack their outputs), so the packing
# here happens within the device call's own limit.
set -uo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 'COMMAND0' ['COMMAND1' ...]   (one command per GPU)" >&2
  exit 2
fi
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo" || exit 1
out="${OUT:-$repo/lanes-out}"
mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
gpus="$(nvidia-smi --list-gpus 2>/dev/null | wc -l)"
if [ "$gpus" -lt $# ]; then
  echo "$# lanes need $# GPUs; this machine has $gpus" >&2
  exit 2
fi
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)"
summary="$out/lanes.md"
printf '# GPU lanes\n\nDevice: %s x %s; commit %s; %s\n\n| lane | command | exit | seconds |\n|---|---|---:|---:|\n' \
  "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" "$gpus" "${LIGER_COMMIT:-unknown}" \
  "$(date -u +%Y-%m-%dT%H:%MZ)" >"$summary"

if [ "${LANES_SKIP_BUILD:-0}" != 1 ]; then
  start=$SECONDS
  { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${arch:-90}" &&
      cmake --build build -j "$(nproc)"; } >"$out/build.log" 2>&1 ||
    { echo "build failed: $out/build.log" >&2; exit 1; }
  echo "build: $((SECONDS - start)) s" | tee -a "$summary"
fi

cmds=("$@")
limit="${LANES_LIMIT_S:-540}"
pids=()
for i in $(seq 0 $(($# - 1))); do
  cmd="${cmds[$i]}"
  mkdir -p "$out/lane-$i"
  (
    start=$SECONDS
    CUDA_VISIBLE_DEVICES=$i OUT="$out/lane-$i" KPERF_WORK_DIR="$repo/build-kperf-work-$i" \
      timeout -k 15 "$limit" bash -c "$cmd" >"$out/lane-$i/lane.log" 2>&1
    echo "$? $((SECONDS - start))" >"$out/lane-$i/.status"
  ) &
  pids+=($!)
  echo "lane $i started: $cmd"
done
for pid in "${pids[@]}"; do wait "$pid"; done

for i in $(seq 0 $(($# - 1))); do
  cmd="${cmds[$i]}"
  read -r rc secs <"$out/lane-$i/.status" 2>/dev/null || { rc="?"; secs="?"; }
  rm -f "$out/lane-$i/.status"
  # shellcheck disable=SC2016  # the backquotes are Markdown
  printf '| %s | `%s` | %s | %s |\n' "$i" "${cmd//|/\\|}" "$rc" "$secs" >>"$summary"
done
(cd "$out" && tar -czf lanes.tar.gz lane-* && rm -rf lane-*)
cat "$summary"
