#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/run_support.h"
#include "cli/tree.h"
#include "liger/workflows.h"

namespace liger::cli {

void register_survey_command(CLI::App& app, GlobalOptions& options) {
  struct Args {
    std::string kernels_dir;
    std::string tree;
    std::string output = "docs/kernel-api.md";
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "survey",
      "Document the C API of a kernel library: scan kernels/include/liger_kernels/*.h (Understand), render "
      "a markdown table of every op's forward/backward entry points (Act), check the table against the "
      "headers (Verify).");
  cmd->add_option("kernels_dir", args->kernels_dir, "The kernels/ directory to survey (default: the one of the checkout holding the current directory)");
  cmd->add_option("--tree", args->tree, "Repository the table is written into (default: the parent of kernels_dir)");
  cmd->add_option("--output", args->output, "Repository-relative path of the generated table")->capture_default_str();
  cmd->footer(examples_footer({
      "liger-agent survey --yes",
      "liger-agent survey path/to/repo/kernels --output docs/kernel-api.md",
      "liger-agent --json survey   # stops at the profile checkpoint (exit 3) without a terminal",
  }));
  cmd->callback([args, &options] {
    std::filesystem::path kernels = args->kernels_dir.empty() ? resolve_tree(args->tree, "survey") / "kernels"
                                                              : std::filesystem::path(args->kernels_dir);
    kernels = std::filesystem::absolute(kernels).lexically_normal();
    if (!kernels.has_filename()) kernels = kernels.parent_path();
    engine::RunRequest request;
    request.workflow = "survey";
    request.label = kernels.parent_path().filename().string() + "-kernels";
    request.tree_root = args->tree.empty() ? kernels.parent_path() : std::filesystem::path(args->tree);
    request.arguments = {{"kernels_dir", kernels.string()}, {"output", args->output}};
    engine::Engine engine(workflow_registry(), engine_options(options));
    options.exit_code = print_outcome(options, engine.start(request));
  });
}

}  // namespace liger::cli
