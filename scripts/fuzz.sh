#!/usr/bin/env bash
# Builds the libFuzzer parser targets (fuzz/) with clang + ASan/UBSan and runs each for a bounded
# time on its committed corpus. Fails (non-zero) on any crash, sanitizer report, leak or timeout;
# the reproducer is left in $LIGER_FUZZ_DIR/artifacts/<target>/ (upload it from CI).
#
#   scripts/fuzz.sh [seconds-per-target]     default 60
#   scripts/fuzz.sh smoke                    CI: 30 s per target
#   scripts/fuzz.sh merge                    minimise fuzz/corpus/<target>/ with what runs found
#
# Environment:
#   LIGER_FUZZ_DIR       build and work directory (default: build-fuzz)
#   LIGER_FUZZ_TARGETS   targets to run (default: "expr_fuzz python_source_fuzz profile_fuzz")
#   LIGER_FUZZ_RUNS      stop a target after this many executions instead (-runs=N; time still bounds it)
#   LIGER_FUZZ_FORK      run N fuzzing processes per target (libFuzzer -fork=N) on a machine with cores to spare
#   LIGER_FUZZ_MAX_LEN   longest input (-max_len, default 8192); `merge` truncates found inputs to it
#   LIGER_SKIP_APT=1     never call apt-get (fail with the list of missing packages instead)
#   ASAN_OPTIONS         default malloc_context_size=0 while fuzzing (see below); set it to override
# New inputs the fuzzer finds go to $LIGER_FUZZ_DIR/corpus/<target>/, never into fuzz/corpus/
# (only `merge` writes there, keeping the smallest set of inputs with the same coverage).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode="${1:-60}"
work="${LIGER_FUZZ_DIR:-$repo_root/build-fuzz}"
targets=(${LIGER_FUZZ_TARGETS:-expr_fuzz python_source_fuzz profile_fuzz})
max_len="${LIGER_FUZZ_MAX_LEN:-8192}"

log() { printf '[fuzz] %s\n' "$*" >&2; }

case "$mode" in
  smoke) seconds=30 ;;
  merge) seconds=0 ;;
  ''|*[!0-9]*)
    log "usage: scripts/fuzz.sh [seconds-per-target | smoke | merge] (got '$mode')"
    exit 2 ;;
  *) seconds="$mode" ;;
esac

# The build's own packages plus clang and its libFuzzer/sanitizer runtimes (setup.sh's optional
# fuzzing list), installed when missing; nothing else of setup.sh runs.
LIGER_SETUP_PACKAGES_ONLY=fuzz bash "$repo_root/scripts/setup.sh"

cc="$(command -v clang-14 || command -v clang)"
cxx="$(command -v clang++-14 || command -v clang++)"
if [ ! -f "$work/build.ninja" ]; then
  log "configuring in $work"
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CC="$cc" CXX="$cxx" cmake -S "$repo_root" -B "$work" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLIGER_BUILD_KERNELS=OFF -DLIGER_BUILD_TESTS=OFF -DLIGER_BUILD_BENCHMARKS=OFF -DLIGER_BUILD_FUZZERS=ON \
    "${launcher[@]}" >&2
fi
cmake --build "$work" -j "$(nproc)" --target "${targets[@]}" >&2

corpus_size() { printf '%s files, %s bytes' "$(find "$1" -type f | wc -l)" "$(find "$1" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}')"; }

if [ "$mode" = merge ]; then
  for target in "${targets[@]}"; do
    name="${target%_fuzz}"
    seeds="$repo_root/fuzz/corpus/$name"
    merged="$work/merged/$name"
    rm -rf "$merged" && mkdir -p "$merged" "$work/corpus/$name"
    # Named inputs (hand-written seeds, regression inputs) are kept as they are; of the rest
    # (40-hex names, from earlier merges) and the found inputs, -merge=1 keeps only those that add
    # coverage. The committed directory is replaced only once the merge has succeeded.
    find "$seeds" -maxdepth 1 -type f ! -regex '.*/[0-9a-f]\{40\}' -exec cp {} "$merged/" \;
    "$work/fuzz/$target" -merge=1 -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" "$merged" "$seeds" "$work/corpus/$name" \
      >"$work/$target.merge.log" 2>&1 || { log "$target: merge failed, see $work/$target.merge.log"; exit 1; }
    log "$target: $(corpus_size "$seeds") -> $(corpus_size "$merged")"
    rm -rf "$seeds" && cp -r "$merged" "$seeds"
  done
  exit 0
fi

# Recording an allocation stack for every malloc and free (ASan's default, 30 frames) is 10-20 %
# of each execution here (the parsers allocate small nodes and strings all the time), and it only
# adds the allocation/free stacks to a report: every error is still detected without it. So the
# fuzzing runs go without, and a reproducer is replayed once with full stacks (replay_log below).
export ASAN_OPTIONS="${ASAN_OPTIONS:-malloc_context_size=0}"

# Runs the newest reproducer in $2 once more with ASan's full allocation/free stacks, into $3.
replay_log() {
  local binary="$1" artifacts="$2" out="$3" input
  input="$(ls -t "$artifacts" 2>/dev/null | head -1)"
  [ -n "$input" ] || return 0
  ASAN_OPTIONS=malloc_context_size=30 timeout 120 "$binary" -timeout=10 -rss_limit_mb=2048 "$artifacts/$input" >"$out" 2>&1 || true
  log "$input replayed with full allocation stacks: $out"
}

failed=()
for target in "${targets[@]}"; do
  name="${target%_fuzz}"
  seeds="$repo_root/fuzz/corpus/$name"
  corpus="$work/corpus/$name"
  artifacts="$work/artifacts/$name"
  mkdir -p "$corpus" "$artifacts"
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" -print_final_stats=1
        -artifact_prefix="$artifacts/")
  [ -n "${LIGER_FUZZ_RUNS:-}" ] && args+=(-runs="$LIGER_FUZZ_RUNS")
  # One process: nothing else writes to the corpus, so it is not re-listed every second.
  if [ -n "${LIGER_FUZZ_FORK:-}" ]; then args+=(-fork="$LIGER_FUZZ_FORK"); else args+=(-reload=0); fi
  log "$target: ${seconds}s on $(ls "$seeds" | wc -l) seeds"
  # The first corpus directory receives new inputs; the committed seeds are only read.
  rc=0
  start=$(date +%s)
  "$work/fuzz/$target" "${args[@]}" "$corpus" "$seeds" >"$work/$target.log" 2>&1 || rc=$?
  wall=$(( $(date +%s) - start ))
  grep -E '^(==[0-9]+==ERROR|SUMMARY|stat::number_of_executed_units|stat::average_exec_per_sec)' "$work/$target.log" >&2 || true
  if [ "$rc" -eq 0 ]; then
    log "$target: no crash; ${wall}s wall; found corpus $(corpus_size "$corpus")"
  else
    log "$target: FAILED (exit $rc), see $work/$target.log and the reproducer in $artifacts/"
    replay_log "$work/fuzz/$target" "$artifacts" "$work/$target.replay.log"
    failed+=("$target")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  log "crashes or timeouts in: ${failed[*]}"
  exit 1
fi
