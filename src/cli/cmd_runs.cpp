#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "cli/run_support.h"
#include "liger/util.h"

namespace liger::cli {

namespace {

void register_runs_prune(CLI::App& runs, GlobalOptions& options) {
  struct Args {
    std::string older_than;
    std::vector<std::string> statuses;
    bool dry_run = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = runs.add_subcommand(
      "prune",
      "Delete finished run directories (completed, failed, rejected). Runs in progress, parked at a checkpoint, "
      "or holding an apply lock are never deleted.");
  cmd->add_option("--older-than", args->older_than, "Only runs at least this old: 45s, 30m, 12h, 7d, 2w");
  cmd->add_option("--status", args->statuses, "Only runs with this status (repeatable): completed, failed, rejected")
      ->check(CLI::IsMember({"completed", "failed", "rejected"}));
  cmd->add_flag("--dry-run", args->dry_run, "List what would be deleted, delete nothing");
  cmd->footer(examples_footer({"liger-agent runs prune --older-than 7d", "liger-agent runs prune --status failed --dry-run",
                               "liger-agent runs prune --status rejected --status completed --older-than 2w --json"}));
  cmd->callback([args, &options] {
    const long long min_age = args->older_than.empty() ? 0 : engine::parse_duration(args->older_than);
    const auto root = run_root(options);
    const auto result = engine::prune_runs(root, args->statuses, min_age, args->dry_run);
    if (options.json) {
      nlohmann::json removed = nlohmann::json::array(), kept = nlohmann::json::array();
      for (const auto& run : result.removed)
        removed.push_back({{"run", run.name}, {"status", run.status}, {"age_seconds", run.age_seconds}});
      for (const auto& [run, why] : result.kept_busy) kept.push_back({{"run", run.name}, {"reason", why}});
      print_json({{"run_root", root.string()}, {"dry_run", args->dry_run}, {"removed", removed}, {"kept", kept}});
    } else {
      const char* verb = args->dry_run ? "would delete" : "deleted";
      for (const auto& run : result.removed)
        std::cout << fmt::format("{} {} ({}, {} old)\n", verb, run.name, run.status, util::format_age(run.age_seconds));
      for (const auto& [run, why] : result.kept_busy) std::cout << "kept " << run.name << ": " << why << "\n";
      std::cout << fmt::format("{} {} run(s) under {}\n", verb, result.removed.size(), root.string());
    }
    options.exit_code = 0;
  });
}

}  // namespace

void register_runs_command(CLI::App& app, GlobalOptions& options) {
  auto* cmd = app.add_subcommand("runs", "List runs under the run directory, newest first: status, workflow, age.");
  cmd->footer(examples_footer({"liger-agent runs", "liger-agent runs --json", "liger-agent --run-dir /tmp/runs runs"}));
  register_runs_prune(*cmd, options);
  cmd->callback([cmd, &options] {
    if (cmd->got_subcommand("prune")) return;  // prune prints its own result
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
