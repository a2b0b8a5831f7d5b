#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "cli/run_support.h"
#include "liger/util.h"

namespace liger::cli {

void register_runs_command(CLI::App& app, GlobalOptions& options) {
  auto* cmd = app.add_subcommand("runs", "List runs under the run directory, newest first: status, workflow, age.");
  cmd->footer(examples_footer({"liger-agent runs", "liger-agent runs --json", "liger-agent --run-dir /tmp/runs runs"}));
  cmd->callback([&options] {
    const auto runs = engine::list_runs(run_root(options));
    if (options.json) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& run : runs) {
        list.push_back({{"run", run.name},
                        {"workflow", run.workflow},
                        {"status", run.status},
                        {"pending_checkpoint", run.pending_checkpoint},
                        {"created_at", run.created_at},
                        {"age_seconds", run.age_seconds},
                        {"run_dir", run.run_dir.string()}});
      }
      print_json({{"run_root", run_root(options).string()}, {"runs", list}});
    } else if (runs.empty()) {
      std::cout << "no runs under " << run_root(options).string() << "\n";
    } else {
      std::cout << fmt::format("{:<22} {:<12} {:>5}  {}\n", "STATUS", "WORKFLOW", "AGE", "RUN");
      for (const auto& run : runs) {
        std::string status = run.status + (run.pending_checkpoint.empty() ? "" : "(" + run.pending_checkpoint + ")");
        std::cout << fmt::format("{:<22} {:<12} {:>5}  {}\n", status, run.workflow, util::format_age(run.age_seconds),
                                 run.name);
      }
    }
    options.exit_code = 0;
  });
}

}  // namespace liger::cli
