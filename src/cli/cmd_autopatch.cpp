#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/run_support.h"
#include "liger/workflows.h"

namespace liger::cli {

void register_autopatch_command(CLI::App& app, GlobalOptions& options) {
  struct Args {
    std::string model;
    std::string tree;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "autopatch",
      "Generate the code that swaps a HuggingFace model's RMSNorm/LayerNorm, MLP, RoPE and loss for the "
      "bundled kernels, with a patch test and a convergence test.");
  cmd->add_option("model", args->model, "Path to modeling_<model>.py, or a model type in an installed transformers")
      ->required();
  cmd->add_option("--tree", args->tree, "Repository to add the patch to (default: the bundled source tree)");
  cmd->footer(examples_footer({
      "liger-agent autopatch llama",
      "liger-agent autopatch path/to/modeling_mistral.py --yes",
  }));
  cmd->callback([args, &options] {
    engine::RunRequest request;
    request.workflow = "autopatch";
    request.label = std::filesystem::path(args->model).stem().string();
    request.tree_root = args->tree.empty() ? workflows::data_dir() : std::filesystem::path(args->tree);
    request.arguments = {{"model", args->model}};
    if (std::filesystem::is_regular_file(args->model)) request.input_files.push_back(args->model);
    else request.input_text = args->model;
    engine::Engine engine(workflow_registry(), engine_options(options));
    options.exit_code = print_outcome(options, engine.start(request));
  });
}

}  // namespace liger::cli
