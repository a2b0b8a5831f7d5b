#!/usr/bin/env bash
# The kernel-perf demonstration on a GPU machine: a de-tuned copy of the library's SwiGLU (its
# sm_90 rows get 64 threads per block and 2-byte accesses, i.e. one bf16 element per load), an
# autonomous kernel-perf run on that copy, and the tuned library's own benchmark in the same call,
# so recovery = tuned time / recovered time per case can be read off one device.
#
#   scripts/kernel-perf-demo.sh            # writes $OUT/kernel-perf-demo/ (or ./kernel-perf-demo-out/)
#
# Environment: LIGER_AGENT (default build-gpu/src/liger-agent, built if missing), DEMO_OP (swiglu),
# DEMO_VARIANTS (max variants, default 4), DEMO_KEEP=1 (keep the de-tuned copy in /tmp). The run
# directory is copied without its work tree.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$repo/kernel-perf-demo-out}/kernel-perf-demo"
op="${DEMO_OP:-swiglu}"
mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
agent="${LIGER_AGENT:-$repo/build-gpu/src/liger-agent}"
if [ ! -x "$agent" ]; then
  cmake -S "$repo" -B "$repo/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/configure.log" 2>&1 &&
    cmake --build "$repo/build-gpu" -j "$(nproc)" --target liger-agent liger-bench >"$out/build.log" 2>&1 ||
    { echo "building liger-agent failed ($out/build.log)"; exit 1; }
fi
bench="$(dirname "$(dirname "$agent")")/benchmarks/liger-bench"

detuned="$(mktemp -d /tmp/liger-detuned.XXXXXX)"
# The de-tuned copy (with its builds) is removed on exit once the run is packed into $out;
# DEMO_KEEP=1 keeps it for inspection.
[ "${DEMO_KEEP:-0}" = 1 ] || trap 'rm -rf "$detuned"' EXIT
(cd "$repo" && tar --exclude='./build*' --exclude='./.liger-agent' --exclude='./.git' -cf - .) | tar -xf - -C "$detuned"
tuning="$detuned/kernels/src/$op/tuning.h"
sed -i -E 's/\{90, (INT64_MAX|int64_t\{1\} << 20), \{[0-9]+, [0-9]+, ([0-9]+)\}\}/{90, \1, {64, 2, \2}}/' "$tuning"
diff -u "$repo/kernels/src/$op/tuning.h" "$tuning" >"$out/detune.diff"
[ -s "$out/detune.diff" ] || { echo "the de-tuning sed changed nothing in $tuning"; exit 1; }
echo "de-tuned $tuning:"; cat "$out/detune.diff"

# The tuned library, for the recovery ratio (same device, same call).
[ -x "$bench" ] && "$bench" --op "$op" --dtype bf16 --json "$out/tuned-library.json" >"$out/tuned-library.log" 2>&1

start=$SECONDS
(cd "$detuned" && "$agent" --autonomous kernel-perf "$op" --goal speed --tree "$detuned" \
  --max-variants "${DEMO_VARIANTS:-4}" --search-min-time-ms 30 --bench-min-time-ms 100) 2>&1 | tee "$out/kernel-perf.log"
rc=${PIPESTATUS[0]}
echo "kernel-perf exit $rc in $((SECONDS - start)) s" | tee -a "$out/kernel-perf.log"
run="$(ls -td "$detuned"/.liger-agent/runs/*kernel-perf-"$op"* 2>/dev/null | head -1)"
if [ -n "$run" ]; then
  (cd "$run" && find . -path ./optimization/work -prune -o -name '*.o' -prune -o -type f -print | tar -czf "$out/run.tar.gz" -T -)
  cp "$run/optimization/final/report.md" "$out/" 2>/dev/null
  cp "$run/optimization/comparison.md" "$out/" 2>/dev/null
  cp "$detuned/kernels/src/$op/tuning.h" "$out/tuning.after-run.h"
fi
# Recovery per case: the tuned library's time over the time of the table the run ended with.
final_json="$run/optimization/final/optimized.json"
[ -n "$run" ] && [ -f "$final_json" ] && python3 - "$out/tuned-library.json" "$final_json" <<'PY' | tee "$out/recovery.md"
import json, sys
def cases(path):
    return {(r["mode"], r["shape"]): r["median_us"] for r in json.load(open(path))["results"] if r.get("ok")}
tuned, final = cases(sys.argv[1]), cases(sys.argv[2])
print("| case | tuned library us | after kernel-perf us | recovery |\n|---|---:|---:|---:|")
worst = None
for key in sorted(tuned):
    if key in final:
        rec = tuned[key] / final[key]
        worst = rec if worst is None else min(worst, rec)
        print(f"| {key[0]} {key[1]} | {tuned[key]:.2f} | {final[key]:.2f} | {rec * 100:.1f}% |")
print(f"\nworst-case recovery: {worst * 100:.1f}% (bar: >= 90%)" if worst else "\nno common cases")
PY
exit $rc
