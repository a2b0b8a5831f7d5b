#!/usr/bin/env bash
# Fuzzing volume on a many-core machine that has no clang (e.g. the GPU machine): `pack` bundles
# the libFuzzer binaries that scripts/fuzz.sh built here, with the shared libraries they need
# that another distribution may lack; `run` runs W independent workers per target there, each
# with its own seed and output corpus, and sums the executions from libFuzzer's final stats.
#
#   scripts/fuzz-fleet.sh pack DIR
#   scripts/fuzz-fleet.sh run DIR SECONDS OUT "expr_fuzz:W:RUNS[:MAXLEN] python_source_fuzz:W:RUNS ..."
#
# RUNS is the executions wanted for that target in all (each worker stops at RUNS/W, or at
# SECONDS); MAXLEN is libFuzzer's -max_len (default 8192, as scripts/fuzz.sh). OUT receives summary.txt (one line per target: executions, workers, reproducers) and
# fuzz-fleet.tar.gz: per target the final stats, any reproducer with its worker's log, and the
# inputs the workers found (found-*/, to merge with `scripts/fuzz.sh merge`). Exit 1 on any crash,
# sanitizer report, leak or timeout.
#
# The binaries read the skills (schemas, catalogue) from the source path they were built in
# (LIGER_SOURCE_DIR); `run` links that path to this checkout when it does not exist there.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[fuzz-fleet] %s\n' "$*" >&2; }
usage() { log "usage: scripts/fuzz-fleet.sh pack DIR | run DIR SECONDS OUT 'target:workers:runs ...'"; exit 2; }

case "${1:-}" in
  pack)
    [ $# -eq 2 ] || usage
    dir="$2"
    work="${LIGER_FUZZ_DIR:-$repo_root/build-fuzz}"
    [ -x "$work/fuzz/expr_fuzz" ] || { log "no fuzz build in $work: run scripts/fuzz.sh smoke first"; exit 1; }
    rm -rf "$dir" && mkdir -p "$dir/lib"
    for t in expr_fuzz python_source_fuzz profile_fuzz; do
      # Debug info is dropped (symbols stay, so reports still name functions): 4x smaller.
      strip --strip-debug -o "$dir/$t" "$work/fuzz/$t"
      ldd "$work/fuzz/$t" | awk '/=> \//{print $3}' | grep -v -E '/(libc|libm|libgcc_s|libstdc\+\+|libpthread|libdl|librt)\.so' \
        | xargs -r -I{} cp -Ln {} "$dir/lib/"
    done
    # The define as ninja writes it: LIGER_SOURCE_DIR=\"/path\"
    grep -o 'LIGER_SOURCE_DIR=\\\?"[^"\\]*' "$work/build.ninja" | head -1 | sed 's/.*"//' > "$dir/source_dir" || true
    [ -s "$dir/source_dir" ] || echo "$repo_root" > "$dir/source_dir"
    log "packed into $dir ($(du -sh "$dir" | cut -f1)); built against $(cat "$dir/source_dir")" ;;
  run)
    [ $# -eq 5 ] || usage
    dir="$(cd "$2" && pwd)" seconds="$3" out="$4" plan="$5"
    case "$seconds" in ''|*[!0-9]*) usage ;; esac
    mkdir -p "$out"
    built_in="$(cat "$dir/source_dir")"
    if [ ! -e "$built_in/skills" ]; then
      mkdir -p "$(dirname "$built_in")" && ln -sfn "$repo_root" "$built_in"
    fi
    export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export ASAN_OPTIONS="${ASAN_OPTIONS:-malloc_context_size=0}"
    scratch="$(mktemp -d /tmp/fuzz-fleet.XXXXXX)"
    trap 'rm -rf "$scratch"' EXIT  # also when a step fails or the call is cut short
    log "$(nproc) cores; plan: $plan; ${seconds}s"
    pids=()
    for entry in $plan; do
      IFS=: read -r target workers runs max_len <<<"$entry"
      name="${target%_fuzz}"
      per_worker=$(( (runs + workers - 1) / workers ))
      mkdir -p "$scratch/$name/artifacts"
      for w in $(seq 1 "$workers"); do
        mkdir -p "$scratch/$name/found-$w"
        "$dir/$target" -seed="$((w * 7919 + ${#name}))" -runs="$per_worker" -max_total_time="$seconds" \
          -timeout=10 -rss_limit_mb=2048 -max_len="${max_len:-8192}" -print_final_stats=1 -reload=0 \
          -artifact_prefix="$scratch/$name/artifacts/w$w-" "$scratch/$name/found-$w" "$repo_root/fuzz/corpus/$name" \
          >"$scratch/$name/w$w.log" 2>&1 &
        pids+=($!)
      done
    done
    failed=0
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    : >"$out/summary.txt"
    for entry in $plan; do
      IFS=: read -r target workers runs max_len <<<"$entry"
      name="${target%_fuzz}"
      execs=$(cat "$scratch/$name"/w*.log | awk '/^stat::number_of_executed_units/{s+=$2} END{print s+0}')
      crashes=$(ls "$scratch/$name/artifacts" | wc -l)
      errors=$(cat "$scratch/$name"/w*.log | grep -c -E '^==[0-9]+==ERROR|^SUMMARY: ' || true)
      printf '%s executions=%s workers=%s max_len=%s reproducers=%s sanitizer_lines=%s\n' "$target" "$execs" "$workers" "${max_len:-8192}" "$crashes" "$errors" | tee -a "$out/summary.txt"
      grep -H -E '^stat::' "$scratch/$name"/w*.log >"$scratch/$name/stats.txt" || true
      # Worker logs are kept only where something was found.
      [ "$crashes" -gt 0 ] || [ "$errors" -gt 0 ] || rm -f "$scratch/$name"/w*.log
    done
    tar -C "$scratch" -czf "$out/fuzz-fleet.tar.gz" .
    rm -rf "$scratch"
    [ "$failed" -eq 0 ] || { log "a worker failed: see the summary and artifacts in $out"; exit 1; } ;;
  *) usage ;;
esac
