#include "liger/workflows.h"
#include "workflows/kernel_perf/kernel_perf.h"

namespace liger::workflows {

void register_kernel_perf_workflow(engine::WorkflowRegistry& registry) { registry.add(kernel_perf::make_workflow()); }

}  // namespace liger::workflows
