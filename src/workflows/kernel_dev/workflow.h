// kernel-dev's three stages (Understand -> Act -> Verify) and the tool runner Verify uses, so
// tests can replace cmake / the test binaries / liger-bench / python3 with recorded answers.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "liger/process.h"
#include "liger/workflow.h"
#include "workflows/kernel_dev/render.h"

namespace liger::kernel_dev {

class ToolRunner {
 public:
  virtual ~ToolRunner() = default;
  virtual toolchain::ProcessResult run(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                                       std::chrono::seconds timeout,
                                       const std::map<std::string, std::string>& env = {}) = 0;
  virtual bool has_tool(const std::string& name) = 0;
  virtual bool has_gpu() = 0;  // nvidia-smi -L lists a device
};
std::shared_ptr<ToolRunner> make_system_tool_runner();
std::shared_ptr<ToolRunner> current_tool_runner();
void set_tool_runner_for_testing(std::shared_ptr<ToolRunner> runner);  // nullptr: the system one

engine::Workflow make_workflow();

// The kernel-dev "understand" analyser of the built-in LLM provider: request.input carries
// {text, kind, name, data_dir}; answers the profile as JSON.
nlohmann::json builtin_understand(const nlohmann::json& input);

// YAML <-> JSON for profiles (scalars: bool, int, double, else string).
nlohmann::json yaml_to_json(const YAML::Node& node);
YAML::Node json_to_yaml(const nlohmann::json& value);

// The ops.yaml block of a generated Tier-1 op, and its alphabetical insertion into ops.yaml
// (an entry of the same name is left as it is).
std::string ops_yaml_entry(const KernelProfile& profile);
std::string insert_ops_yaml_entry(const std::string& ops_yaml, const std::string& op_name, const std::string& entry);

// The PyTorch eager expression the benchmark compares against: the catalogue's `torch` form
// from the profile's notes, else the forward expression (evaluated with torch functions).
std::string eager_expression(const KernelProfile& profile);

// The build directory Verify uses: $LIGER_BUILD_DIR, else <tree>/build.
std::filesystem::path build_dir_for(const std::filesystem::path& tree_root);

// Why `build` cannot be this tree's build directory ("" when it can): a CMake cache configured
// for another source directory, where Verify would build and test that checkout instead of the
// files Act just wrote.
std::string foreign_build_dir_problem(const std::filesystem::path& tree_root, const std::filesystem::path& build);

}  // namespace liger::kernel_dev
