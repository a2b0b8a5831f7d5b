#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/run_support.h"

namespace liger::cli {

void register_reject_command(CLI::App& app, GlobalOptions& options) {
  auto run = std::make_shared<std::string>();
  auto reason = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "reject", "Reject a run: the tree stays (or is restored) as it was; staged files are kept for inspection.");
  cmd->add_option("run", *run, "Run directory, run name, or a unique prefix of one")->required();
  cmd->add_option("--reason", *reason, "Why, recorded in the report");
  cmd->footer(examples_footer({"liger-agent reject <run> --reason \"wrong tier\"   # <run>: a name from `liger-agent runs`, or a unique prefix"}));
  cmd->callback([run, reason, &options] {
    options.exit_code =
        print_outcome(options, engine::reject_run(engine::find_run(run_root(options), *run), *reason));
  });
}

}  // namespace liger::cli
