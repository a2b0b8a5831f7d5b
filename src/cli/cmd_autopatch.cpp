#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include <regex>

#include "cli/autopatch_all.h"

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
    bool all = false;
    AutopatchAllArgs zoo;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "autopatch",
      "Generate the code that swaps a HuggingFace model's RMSNorm/LayerNorm, MLP, RoPE and loss for the "
      "bundled kernels, with a patch test and a convergence test.");
  cmd->add_option("model", args->model,
                  "Path to modeling_<model>.py, or a model type in an installed transformers (or --all)");
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
  cmd->add_flag("--all", args->all,
                "Every model type of a transformers tree, one run each (Understand only unless --verify), then the "
                "coverage table models.md / models.json");
  auto* transformers = cmd->add_option("--transformers", args->zoo.transformers,
                                       "With --all: the transformers package directory or its models/ folder "
                                       "(default: the installed one)");
  auto* jobs = cmd->add_option("--jobs", args->zoo.jobs, "With --all: runs at a time (default 1)");
  auto* verify = cmd->add_flag("--verify", args->zoo.verify,
                               "With --all: run each model's full workflow (as `autopatch <model> --yes`) and record "
                               "its verdict");
  auto* out = cmd->add_option("--out", args->zoo.out,
                              "With --all: directory for models.md and models.json (default: the --all run directory)");
  cmd->footer(examples_footer({
      "liger-agent autopatch qwen3",
      "liger-agent autopatch gemma2 --yes",
      "liger-agent autopatch llama --module llama_autopatch --yes   # beside the hand-written llama.py",
      "liger-agent autopatch path/to/modeling_mistral.py --kernels rms_norm,swiglu --yes",
      "liger-agent autopatch qwen3 --modify --yes   # after a transformers upgrade",
      "liger-agent autopatch --all --jobs 4   # coverage table of the installed transformers: models.md, models.json",
  }));
  cmd->callback([args, &options, transformers, jobs, verify, out] {
    if (args->all) {
      if (!args->model.empty())
        throw Error(ErrorKind::Usage, "autopatch --all analyses every model type; it takes no model ('" +
                                          args->model.substr(0, 80) + "')",
                    "drop the model name, or drop --all: liger-agent autopatch " + args->model.substr(0, 80));
      for (const auto& [flag, given] : {std::pair<const char*, bool>{"--module", !args->module.empty()},
                                        {"--model-type", !args->model_type.empty()},
                                        {"--modify", args->modify}})
        if (given)
          throw Error(ErrorKind::Usage, std::string(flag) + " names one model's integration and cannot go with --all",
                      "run liger-agent autopatch <model> " + std::string(flag) + " ... for that model");
      args->zoo.tree = args->tree;
      args->zoo.python = args->python;
      args->zoo.kernels = args->kernels;
      options.exit_code = run_autopatch_all(options, args->zoo);
      return;
    }
    for (const auto* flag : {transformers, jobs, verify, out})
      if (flag->count() > 0)
        throw Error(ErrorKind::Usage, flag->get_name() + " goes with --all",
                    "add --all (liger-agent autopatch --all " + flag->get_name() + " ...), or drop it");
    if (args->model.empty())
      throw Error(ErrorKind::Usage, "autopatch needs a model, or --all",
                  "e.g. liger-agent autopatch qwen3, liger-agent autopatch path/to/modeling_qwen3.py, or "
                  "liger-agent autopatch --all");
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
