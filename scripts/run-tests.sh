#!/usr/bin/env bash
# Sets up a fresh machine (missing Debian packages, configure, build) and runs the whole test
# suite through CTest. GPU tests and PyTorch tests report "Skipped" with the reason where the
# machine has no GPU or no PyTorch. Extra arguments go to ctest (e.g. -R rms_norm).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo_root/scripts/setup.sh"
cd "$LIGER_BUILD_DIR"
ctest --output-on-failure --timeout 1800 -j "$(nproc)" "$@"
