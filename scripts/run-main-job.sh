#!/usr/bin/env bash
# Sets up a fresh machine (missing Debian packages, configure, build) and runs the main job end
# to end with the built-in, offline LLM provider and no checkpoint prompts (--yes).
#
# The job: kernel-dev on "ReLU squared activation function": Understand derives the kernel
# profile, Act renders the CUDA kernel, reference, tests, benchmark entry and binding into the
# library (kernels/src/relu_squared/, ...), Verify builds them and runs the reference tests (and,
# on a GPU machine, the GPU tests and the benchmark; elsewhere they are reported "not run").
# Running it again regenerates identical files and re-verifies. Arguments replace the job, e.g.:
#   ./scripts/run-main-job.sh kernel-dev "y = x * sigmoid(1.702 * x)"
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Only the binary: the workflow's Verify builds the kernel library and the tests it runs (and
# not the GPU tests or the benchmark on a machine without a GPU).
LIGER_BUILD_TARGETS="${LIGER_BUILD_TARGETS:-liger-agent}"
source "$repo_root/scripts/setup.sh"
agent="$LIGER_BUILD_DIR/src/liger-agent"
cd "$repo_root"
if [ $# -gt 0 ]; then
  exec "$agent" --yes --llm builtin "$@"
fi
exec "$agent" --yes --llm builtin kernel-dev "ReLU squared activation function"
