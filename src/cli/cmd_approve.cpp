#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/run_support.h"

namespace liger::cli {

void register_approve_command(CLI::App& app, GlobalOptions& options) {
  auto run = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "approve", "Approve the checkpoint a run is waiting at (the profile is re-validated first); then `resume` it.");
  cmd->add_option("run", *run, "Run directory, run name, or a unique prefix of one")->required();
  cmd->footer(examples_footer({"liger-agent approve <run>                # <run>: a name from `liger-agent runs`, or a unique prefix",
                               "liger-agent approve <run> && liger-agent resume <run>"}));
  cmd->callback([run, &options] {
    options.exit_code = print_outcome(options, engine::approve_run(engine::find_run(run_root(options), *run)));
  });
}

}  // namespace liger::cli
