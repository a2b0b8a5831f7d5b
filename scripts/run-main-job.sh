#!/usr/bin/env bash
# Sets up a fresh machine (missing Debian packages, configure, build) and runs the main job end
# to end with the built-in, offline LLM provider and no checkpoint prompts (--yes).
#
# The job: kernel-dev on "ReLU squared activation function" once its stages are registered
# (liger-agent kernel-dev); until then the survey workflow over the bundled kernel library.
# Arguments replace the default job's arguments, e.g.:
#   ./scripts/run-main-job.sh kernel-dev "y = x * sigmoid(1.702 * x)"
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo_root/scripts/setup.sh"
agent="$LIGER_BUILD_DIR/src/liger-agent"
cd "$repo_root"
if [ $# -gt 0 ]; then
  exec "$agent" --yes --llm builtin "$@"
fi
exec "$agent" --yes --llm builtin survey
