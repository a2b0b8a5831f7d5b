#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/run_support.h"

namespace liger::cli {

void register_resume_command(CLI::App& app, GlobalOptions& options) {
  auto run = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "resume", "Continue a run from its last completed step (after `approve`, an interruption or a crash).");
  cmd->add_option("run", *run, "Run directory, run name, or a unique prefix of one")->required();
  cmd->footer(examples_footer({"liger-agent resume <run>         # <run>: a name from `liger-agent runs`, or a unique prefix",
                               "liger-agent resume <run> --yes   # approve the remaining checkpoints too"}));
  cmd->callback([run, &options] {
    engine::Engine engine(workflow_registry(), engine_options(options));
    options.exit_code = print_outcome(options, engine.resume(engine::find_run(run_root(options), *run)));
  });
}

}  // namespace liger::cli
