#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "liger/error.h"
#include "cli/run_support.h"
#include "cli/tree.h"
#include "liger/input_check.h"
#include "liger/workflows.h"
#include "util/input_limits.h"

namespace liger::cli {

namespace {
// Inline expressions and PyTorch snippets; a description in words has its own, smaller bound
// (kernel-dev's input check).
constexpr std::size_t kMaxInlineInputBytes = 64 * 1024;
}  // namespace

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
  cmd->add_option("--tree", args->tree, "Checkout to add the kernel to (default: the one holding the current directory)");
  cmd->add_flag("--skip-bench", args->skip_bench, "Verify without the benchmarks (build and tests only)");
  cmd->footer(examples_footer({
      "liger-agent kernel-dev \"ReLU squared activation function\" --yes",
      "liger-agent kernel-dev \"y = x * sigmoid(1.702 * x)\" --name quick_gelu --yes",
      "liger-agent kernel-dev my_op.py --skip-bench --json",
      "liger-agent kernel-dev \"leaky ReLU\" --yes && liger-agent kernel-dev \"leaky ReLU with negative slope 0.2\" "
      "--modify leaky_relu --yes   # --modify updates an op kernel-dev generated earlier",
      "liger-agent kernel-dev \"def f(x): return torch.softmax(x, dim=-1)\" --yes   # Tier 2 from PyTorch: derived offline",
      "liger-agent kernel-dev \"softmax\" --yes     # Tier 2 by name: derived offline from its PyTorch form",
      "liger-agent kernel-dev \"group norm\" --llm openai     # Tier 2 with no built-in form: the formulas come from an LLM or a human",
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
    request.tree_root = resolve_tree(args->tree, "kernel-dev");
    request.arguments = {{"input", args->description},
                         {"name", args->name},
                         {"modify", args->modify},
                         {"skip_bench", args->skip_bench}};
    // A directory, a FIFO, non-UTF-8 or oversized text is refused here, before a run exists.
    const input::Argument given = input::classify_argument(
        args->description, "the kernel-dev input", kMaxInlineInputBytes,
        "put longer PyTorch code in a file and pass its path (e.g. liger-agent kernel-dev my_op.py)");
    if (given.is_file) request.input_files.push_back(given.file);
    else request.input_text = given.text;
    engine::Engine engine(workflow_registry(), engine_options(options));
    options.exit_code = print_outcome(options, engine.start(request));
  });
}

}  // namespace liger::cli
