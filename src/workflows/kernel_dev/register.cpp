#include "liger/workflows.h"
#include "workflows/kernel_dev/workflow.h"

namespace liger::workflows {

void register_kernel_dev_workflow(engine::WorkflowRegistry& registry) { registry.add(kernel_dev::make_workflow()); }

}  // namespace liger::workflows
