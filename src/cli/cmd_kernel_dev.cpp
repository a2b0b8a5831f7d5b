#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/run_support.h"
#include "liger/workflows.h"

namespace liger::cli {

void register_kernel_dev_command(CLI::App& app, GlobalOptions& options) {
  struct Args {
    std::string description;
    std::string name;
    std::string tree;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "kernel-dev",
      "Create a new CUDA kernel (forward + backward) in the bundled library from a description, a math "
      "expression or a PyTorch snippet/file, with tests, benchmark, bindings and docs.");
  cmd->add_option("input", args->description, "Description, expression, or path to a PyTorch file")->required();
  cmd->add_option("--name", args->name, "Op name (default: derived from the input)");
  cmd->add_option("--tree", args->tree, "Repository to add the kernel to (default: the bundled source tree)");
  cmd->footer(examples_footer({
      "liger-agent kernel-dev \"ReLU squared activation\"",
      "liger-agent kernel-dev \"y = x * sigmoid(1.702 * x)\" --name quick_gelu --yes",
      "liger-agent kernel-dev my_op.py --json",
  }));
  cmd->callback([args, &options] {
    engine::RunRequest request;
    request.workflow = "kernel-dev";
    request.label = args->name.empty() ? args->description : args->name;
    request.tree_root = args->tree.empty() ? workflows::data_dir() : std::filesystem::path(args->tree);
    request.arguments = {{"input", args->description}, {"name", args->name}};
    if (std::filesystem::is_regular_file(args->description)) request.input_files.push_back(args->description);
    else request.input_text = args->description;
    engine::Engine engine(workflow_registry(), engine_options(options));
    options.exit_code = print_outcome(options, engine.start(request));
  });
}

}  // namespace liger::cli
