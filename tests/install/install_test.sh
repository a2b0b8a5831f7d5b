#!/usr/bin/env bash
# An installed liger-agent works on the checkout the user stands in, and only there:
#   1. `cmake --install` into a temporary prefix: the binary plus skills/ and templates/ under
#      share/liger-agent, which `version` reports as its data directory;
#   2. a second clone (the committed tree, in a temporary directory, with a CPU-only build
#      directory) gets `kernel-dev --yes` run from one of its subdirectories: the op lands in that
#      clone, the run directory too, Verify stops at its GPU part ("not run");
#   3. the source tree the binary was built from is byte-for-byte unchanged;
#   4. outside any checkout and without --tree, the command is a usage error (exit 2) naming --tree.
#
#   tests/install/install_test.sh <source tree> <build dir>
set -euo pipefail
src="$(cd "$1" && pwd)"
build="$(cd "$2" && pwd)"
work="$(mktemp -d /tmp/liger-install-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config"
unset LIGER_AGENT_DATA_DIR LIGER_BUILD_DIR
mkdir -p "$HOME"

# Every file of a tree with its checksum, minus what tests running beside this one may write
# (build directories, run directories, Python caches) and git's own files.
snapshot() {
  (cd "$1" && find . \( -name .git -o -type d -name 'build*' -o -name .liger-agent -o -name __pycache__ -o -name .pytest_cache \) -prune \
      -o -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum)
}

echo "== install into $work/prefix"
cmake --install "$build" --component agent --prefix "$work/prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; }
agent="$work/prefix/bin/liger-agent"
[ -x "$agent" ] || fail "no $agent after cmake --install"
for d in skills/kernel_dev templates/kernel_dev skills/autopatch templates/autopatch; do
  [ -d "$work/prefix/share/liger-agent/$d" ] || fail "share/liger-agent/$d not installed"
done
data_dir="$("$agent" --json version | python3 -c "import json,sys; print(json.load(sys.stdin)['data_dir'])")"
[ "$data_dir" = "$work/prefix/share/liger-agent" ] || fail "installed binary reads its data from $data_dir"

echo "== another clone"
clone="$work/clone"
mkdir -p "$clone"
if git -c safe.directory='*' -C "$src" rev-parse --verify HEAD >/dev/null 2>&1; then
  git -c safe.directory='*' -C "$src" archive --format=tar HEAD | tar -xf - -C "$clone"
else
  (cd "$src" && tar --exclude='./build*' --exclude='./.liger-agent' --exclude='./.git' -cf - .) | tar -xf - -C "$clone"
fi
rm -rf "$clone/kernels/src/relu_squared"  # an archive fallback may carry the main job's op
# CPU-only and agent-less: Verify then builds just the reference tests (seconds, not the CUDA library).
cmake -S "$clone" -B "$clone/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIGER_BUILD_AGENT=OFF \
  -DLIGER_BUILD_KERNELS=OFF -DLIGER_BUILD_BENCHMARKS=OFF >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "configuring the clone"; }

source_before="$(snapshot "$src")"
clone_before="$(snapshot "$clone")"

echo "== kernel-dev from $clone/kernels/src"
set +e
(cd "$clone/kernels/src" && "$agent" --yes kernel-dev "ReLU squared activation function") >"$work/run.out" 2>"$work/run.err"
rc=$?
set -e
cat "$work/run.err" | tail -30
[ $rc -eq 0 ] || { cat "$work/run.out"; fail "kernel-dev exited $rc"; }
grep -q "on tree $clone\$" "$work/run.err" || fail "the run did not say which tree it writes into ($clone)"

run_dir="$(ls -d "$clone"/.liger-agent/runs/*-kernel-dev-* 2>/dev/null | head -1)"
[ -n "$run_dir" ] || fail "no run directory under $clone/.liger-agent/runs"
grep -q "^# tree: $clone\$" "$run_dir/profile.yaml" || fail "profile.yaml's header does not name the tree"
grep -q "| GPU tests | not run" "$run_dir/kernel-dev/verify.md" || fail "Verify's GPU part was not reported 'not run'"

# The clone changed exactly by the op's files.
changed="$( (diff <(echo "$clone_before") <(snapshot "$clone") || true) | sed -n 's/^> [0-9a-f]*  \.\///p' | sort)"
expected="$(printf '%s\n' benchmarks/bench_relu_squared.cpp docs/kernels/README.md docs/kernels/relu_squared.md \
  kernels/include/liger_kernels/relu_squared.h kernels/ops.yaml kernels/python/liger_kernels/compile/generated/relu_squared.py \
  kernels/python/liger_kernels/functional.py \
  kernels/python/liger_kernels/ops/relu_squared.py kernels/reference/relu_squared_ref.cpp \
  kernels/reference/relu_squared_ref.h kernels/src/relu_squared/relu_squared.cu kernels/src/relu_squared/tuning.h \
  tests/kernels/gpu/test_relu_squared.cpp tests/kernels/reference/test_relu_squared_ref.cpp | sort)"
[ "$changed" = "$expected" ] || { diff <(echo "$expected") <(echo "$changed"); fail "the clone changed otherwise than by the op's files"; }

[ "$(snapshot "$src")" = "$source_before" ] || { diff <(echo "$source_before") <(snapshot "$src") | head; fail "the source tree changed"; }

echo "== outside any checkout"
mkdir -p "$work/elsewhere"
set +e
(cd "$work/elsewhere" && "$agent" --yes kernel-dev "ReLU squared activation function") >/dev/null 2>"$work/outside.err"
rc=$?
set -e
[ $rc -eq 2 ] || { cat "$work/outside.err"; fail "outside a checkout: exit $rc, expected 2"; }
grep -q -- "--tree" "$work/outside.err" || fail "the usage error does not mention --tree"
[ ! -e "$work/elsewhere/.liger-agent" ] || fail "a refused command left $work/elsewhere/.liger-agent"
echo "install test OK"
