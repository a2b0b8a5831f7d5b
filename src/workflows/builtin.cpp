#include "liger/workflows.h"

namespace liger::workflows {

// One line per workflow; a subcommand whose workflow is not listed reports that its stages are
// not registered.
void register_builtin_workflows(engine::WorkflowRegistry& registry) {
  register_survey_workflow(registry);
  register_autopatch_workflow(registry);
  register_kernel_perf_workflow(registry);
  register_kernel_dev_workflow(registry);
}

}  // namespace liger::workflows
