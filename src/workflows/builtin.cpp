#include "liger/workflows.h"

namespace liger::workflows {

// One line per workflow. kernel-dev, autopatch and kernel-perf add theirs when their stages
// exist; until then their subcommands report that the stages are not registered.
void register_builtin_workflows(engine::WorkflowRegistry& registry) {
  register_survey_workflow(registry);
  register_autopatch_workflow(registry);
}

}  // namespace liger::workflows
