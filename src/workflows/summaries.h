// The review summaries of the built-in workflows (Workflow::summarize): the first screen of
// their checkpoints and of `liger-agent show`. Each reads the profile as YAML, so a partial
// profile (undecided fields) still summarises.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace liger::workflows {

// Op and tier, formulas (forward, gradients or the row program), tensors and parameters, tiling.
std::string kernel_dev_summary(const YAML::Node& profile);
// Model, the decisions as `# | decision | value | confidence | evidence file:line`, the patch plan.
std::string autopatch_summary(const YAML::Node& profile);
// Op and goal, architecture, bottleneck with its evidence, the strategy order.
std::string kernel_perf_summary(const YAML::Node& profile);

}  // namespace liger::workflows
