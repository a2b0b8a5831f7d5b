#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/run_support.h"
#include "liger/workflows.h"
#include "util/input_limits.h"

namespace liger::cli {

void register_autopatch_command(CLI::App& app, GlobalOptions& options) {
  struct Args {
    std::string model;
    std::string tree;
    std::string module;
    std::string model_type;
    std::string kernels;
    bool modify = false;
    std::string python;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "autopatch",
      "Generate the code that swaps a HuggingFace model's RMSNorm/LayerNorm, MLP, RoPE and loss for the "
      "bundled kernels, with a patch test and a convergence test.");
  cmd->add_option("model", args->model, "Path to modeling_<model>.py, or a model type in an installed transformers")
      ->required();
  cmd->add_option("--tree", args->tree, "Repository to add the patch to (default: the bundled source tree)");
  cmd->add_option("--module", args->module,
                  "Python module name of the generated integration (default: the model type); needed beside a "
                  "hand-written integration, e.g. --module llama_autopatch");
  cmd->add_option("--model-type", args->model_type, "Model type to register (default: from the modeling file's name)");
  cmd->add_option("--kernels", args->kernels,
                  "Only these kernels, comma-separated (rms_norm,layer_norm,rope,swiglu,geglu,fused_linear_cross_entropy,"
                  "cross_entropy); the others are declined with the reason 'left out by --kernels'");
  cmd->add_flag("--modify", args->modify,
                "Update an existing generated integration: Understand adds a change-impact analysis against its "
                "recorded profile and Act regenerates only what changed");
  cmd->add_option("--python", args->python, "Python interpreter for resolution and verification (default python3)");
  cmd->footer(examples_footer({
      "liger-agent autopatch qwen3",
      "liger-agent autopatch gemma2 --yes",
      "liger-agent autopatch llama --module llama_autopatch --yes   # beside the hand-written llama.py",
      "liger-agent autopatch path/to/modeling_mistral.py --kernels rms_norm,swiglu --yes",
      "liger-agent autopatch qwen3 --modify --yes   # after a transformers upgrade",
  }));
  cmd->callback([args, &options] {
    util::check_autopatch_input(args->model);
    engine::RunRequest request;
    request.workflow = "autopatch";
    request.label = std::filesystem::path(args->model).stem().string();
    if (request.label.rfind("modeling_", 0) == 0) request.label = request.label.substr(9);
    request.tree_root = args->tree.empty() ? workflows::data_dir() : std::filesystem::path(args->tree);
    request.arguments = {{"model", std::filesystem::exists(args->model) ? std::filesystem::absolute(args->model).string() : args->model},
                         {"modify", args->modify}};
    if (!args->module.empty()) request.arguments["module"] = args->module;
    if (!args->model_type.empty()) request.arguments["model_type"] = args->model_type;
    if (!args->kernels.empty()) request.arguments["kernels"] = args->kernels;
    if (!args->python.empty()) request.arguments["python"] = args->python;
    if (!args->module.empty()) request.label = args->module;
    if (std::filesystem::is_regular_file(args->model)) request.input_files.push_back(args->model);
    else request.input_text = args->model;
    engine::Engine engine(workflow_registry(), engine_options(options));
    options.exit_code = print_outcome(options, engine.start(request));
  });
}

}  // namespace liger::cli
