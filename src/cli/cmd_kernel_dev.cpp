#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "liger/error.h"
#include "cli/run_support.h"
#include "liger/workflows.h"
#include "util/input_limits.h"

namespace liger::cli {

void register_kernel_dev_command(CLI::App& app, GlobalOptions& options) {
  struct Args {
    std::string description;
    std::string name;
    std::string modify;
    std::string tree;
    bool skip_bench = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "kernel-dev",
      "Create a new CUDA kernel (forward + backward) in the bundled library from a description, a math "
      "expression or a PyTorch snippet/file, with tests, benchmark, bindings and docs.");
  cmd->add_option("input", args->description, "Description, expression, or path to a PyTorch file")->required();
  cmd->add_option("--name", args->name, "Op name (default: derived from the input)");
  cmd->add_option("--modify", args->modify,
                  "Update the existing op <op> (e.g. to add an option); without it a request for an op the library "
                  "already has is refused when the regenerated files differ");
  cmd->add_option("--tree", args->tree, "Repository to add the kernel to (default: the bundled source tree)");
  cmd->add_flag("--skip-bench", args->skip_bench, "Verify without the benchmarks (build and tests only)");
  cmd->footer(examples_footer({
      "liger-agent kernel-dev \"ReLU squared activation function\" --yes",
      "liger-agent kernel-dev \"y = x * sigmoid(1.702 * x)\" --name quick_gelu --yes",
      "liger-agent kernel-dev my_op.py --skip-bench --json",
      "liger-agent kernel-dev \"leaky ReLU with negative slope 0.2\" --modify leaky_relu --yes",
      "liger-agent kernel-dev \"softmax\" --llm openai     # Tier 2: needs an LLM or a human for the formulas",
      "LIGER_BUILD_DIR=build-gpu liger-agent kernel-dev \"ReLU squared activation function\" --yes",
  }));
  cmd->callback([args, &options] {
    // An empty request is a usage error caught before a run directory exists.
    if (args->description.find_first_not_of(" \t\r\n") == std::string::npos)
      throw Error(ErrorKind::Usage, "kernel-dev needs a request: words, an expression or PyTorch code",
                  "e.g. liger-agent kernel-dev \"ReLU squared activation function\" or \"y = x * sigmoid(1.702 * x)\"");
    util::check_kernel_dev_input(args->description);
    engine::RunRequest request;
    request.workflow = "kernel-dev";
    request.label = !args->name.empty() ? args->name : !args->modify.empty() ? args->modify : args->description;
    request.tree_root = args->tree.empty() ? workflows::data_dir() : std::filesystem::absolute(args->tree);
    request.arguments = {{"input", args->description},
                         {"name", args->name},
                         {"modify", args->modify},
                         {"skip_bench", args->skip_bench}};
    if (std::filesystem::is_regular_file(args->description)) request.input_files.push_back(args->description);
    else request.input_text = args->description;
    engine::Engine engine(workflow_registry(), engine_options(options));
    options.exit_code = print_outcome(options, engine.start(request));
  });
}

}  // namespace liger::cli
