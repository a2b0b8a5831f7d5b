#!/usr/bin/env bash
# Sets up a fresh machine (missing Debian packages, configure, build) and runs the whole test
# suite through CTest. GPU tests and PyTorch tests report "Skipped" where the machine has no GPU
# or no PyTorch, and the reasons are listed after the run. Extra arguments go to ctest
# (e.g. -R rms_norm).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo_root/scripts/setup.sh"
cd "$LIGER_BUILD_DIR"
set +e
ctest --output-on-failure --timeout 1800 -j "$(nproc)" "$@" 2>&1 | tee ctest-summary.log
status=${PIPESTATUS[0]}
set -e
# CTest shows skipped tests without their output: say once why each kind was skipped.
if [ -f Testing/Temporary/LastTest.log ] && grep -q "Skipped" ctest-summary.log; then
  echo
  echo "Skipped tests, by reason:"
  # GoogleTest prints "file:line: Skipped" and the reason on the next line; the Python runner
  # and the no-nvcc placeholder print "[  SKIPPED ] <reason>".
  awk '/: Skipped$/ { getline; print; next } /\[  SKIPPED \] .*(not run|not built)/ { sub(/.*\[  SKIPPED \] /, ""); print }' \
    Testing/Temporary/LastTest.log | sed 's/[[:space:]]*$//' | sort | uniq -c | sort -rn | sed 's/^/  /'
  echo
  grep -E "tests passed|tests failed" ctest-summary.log | tail -1
fi
exit "$status"
