#include "cli/run_support.h"

#include <iostream>

#include "liger/util.h"
#include "liger/workflows.h"

namespace liger::cli {

const engine::WorkflowRegistry& workflow_registry() {
  static const engine::WorkflowRegistry registry = [] {
    engine::WorkflowRegistry r;
    workflows::register_builtin_workflows(r);
    return r;
  }();
  return registry;
}

std::filesystem::path run_root(GlobalOptions& options) {
  const auto& value = options.config().get("run_dir");
  std::filesystem::path root = value.value;
  // The built-in default lives in the checkout the user stands in (beside its apply locks), so
  // runs started from any of its subdirectories are listed together; a configured value is taken
  // as written.
  if (value.layer == ConfigLayer::Default && root.is_relative()) {
    if (const auto tree = workflows::find_tree(std::filesystem::current_path()); !tree.empty()) root = tree / root;
  }
  return root;
}

engine::EngineOptions engine_options(GlobalOptions& options) {
  engine::EngineOptions engine;
  engine.run_root = run_root(options);
  engine.config = &options.config();
  engine.quiet = options.quiet;
  engine.verbosity = options.verbosity;
  if (options.yes) {
    engine.checkpoints = engine::CheckpointPolicy::AutoApprove;
  } else if (util::interactive_terminal() && !options.json) {
    engine.checkpoints = engine::CheckpointPolicy::Interactive;
  } else {
    engine.checkpoints = engine::CheckpointPolicy::Park;
  }
  return engine;
}

// Invalid UTF-8 (from a file name, a server) is printed as U+FFFD rather than aborting the output.
void print_json(const nlohmann::json& document) {
  std::cout << document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

int print_outcome(const GlobalOptions& options, const engine::RunOutcome& outcome) {
  if (options.json) {
    print_json(outcome.to_json());
  } else {
    std::cout << outcome.message << std::endl;
  }
  return outcome.exit_code;
}

}  // namespace liger::cli
