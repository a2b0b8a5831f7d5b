// The workflows that ship with liger-agent. The CLI calls this once; each workflow adds itself
// from its own directory under src/workflows/ (the engine never names one).
#pragma once

#include "liger/workflow.h"

namespace liger::workflows {

void register_builtin_workflows(engine::WorkflowRegistry& registry);

// Individual registrations, called by register_builtin_workflows().
void register_survey_workflow(engine::WorkflowRegistry& registry);
void register_kernel_perf_workflow(engine::WorkflowRegistry& registry);
void register_autopatch_workflow(engine::WorkflowRegistry& registry);
void register_kernel_dev_workflow(engine::WorkflowRegistry& registry);

// Directory holding skills/ and templates/: $LIGER_AGENT_DATA_DIR, else the installed data
// (<prefix>/share/liger-agent, found relative to the binary), else the source tree the binary was
// built from (a build tree works uninstalled).
std::filesystem::path data_dir();

// The checkout a workflow writes into: the nearest directory at or above `start` holding
// kernels/ops.yaml (as git finds .git); empty when there is none.
std::filesystem::path find_tree(const std::filesystem::path& start);

}  // namespace liger::workflows
