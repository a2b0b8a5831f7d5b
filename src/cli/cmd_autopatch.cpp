#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include <regex>

#include "cli/run_support.h"
#include "cli/tree.h"
#include "liger/error.h"
#include "liger/input_check.h"
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
  cmd->add_option("--tree", args->tree, "Checkout to add the patch to (default: the one holding the current directory)");
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
    // The model is a modeling file or a model type; anything else is refused before a run exists.
    const input::Argument given =
        input::classify_argument(args->model, "the autopatch model", 255,
                                 "pass a modeling_<model>.py file or a model type such as qwen3");
    static const std::regex model_type_pattern("^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$");
    if (!given.is_file && !std::regex_match(given.text, model_type_pattern)) {
      const bool looks_like_path = given.text.find('/') != std::string::npos || given.text.ends_with(".py");
      throw Error(ErrorKind::Usage,
                  "the autopatch model '" + given.text.substr(0, 80) + "' " +
                      (looks_like_path ? "names no file (no such file)" : "is neither an existing file nor a model type"),
                  "pass the path of an existing modeling_<model>.py file, or a transformers model type (letters, "
                  "digits, _ . -) such as qwen3");
    }
    if (given.is_file) util::check_autopatch_input(given.file.string());  // size limit, before a run exists
    engine::RunRequest request;
    request.workflow = "autopatch";
    request.label = std::filesystem::path(args->model).stem().string();
    if (request.label.rfind("modeling_", 0) == 0) request.label = request.label.substr(9);
    request.tree_root = resolve_tree(args->tree, "autopatch");
    request.arguments = {{"model", given.is_file ? std::filesystem::absolute(given.file).string() : given.text},
                         {"modify", args->modify}};
    if (!args->module.empty()) request.arguments["module"] = args->module;
    if (!args->model_type.empty()) request.arguments["model_type"] = args->model_type;
    if (!args->kernels.empty()) request.arguments["kernels"] = args->kernels;
    if (!args->python.empty()) request.arguments["python"] = args->python;
    if (!args->module.empty()) request.label = args->module;
    if (given.is_file) request.input_files.push_back(given.file);
    else request.input_text = given.text;
    engine::Engine engine(workflow_registry(), engine_options(options));
    options.exit_code = print_outcome(options, engine.start(request));
  });
}

}  // namespace liger::cli
