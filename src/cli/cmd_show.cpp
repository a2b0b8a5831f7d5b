#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/run_support.h"
#include "liger/profile.h"

namespace liger::cli {

void register_show_command(CLI::App& app, GlobalOptions& options) {
  auto run = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("show", "Print a run's state, the review summary of its profile (the same "
                                         "as its checkpoint's first screen) and where its profile, staged diff "
                                         "and reports are.");
  cmd->add_option("run", *run, "Run directory, run name, or a unique prefix of one")->required();
  cmd->footer(examples_footer({"liger-agent show <run>          # <run>: a name from `liger-agent runs`, or a unique prefix",
                               "liger-agent show <run> --json"}));
  cmd->callback([run, &options] {
    const auto dir = engine::find_run(run_root(options), *run);
    nlohmann::json state = engine::read_run_state(dir);
    nlohmann::json paths = {{"run_dir", std::filesystem::absolute(dir).string()},
                            {"profile", (dir / "profile.yaml").string()},
                            {"staged_diff", (dir / "staged.diff").string()},
                            {"staging", (dir / "staging").string()},
                            {"log", (dir / "logs" / "run.log").string()},
                            {"report_md", (dir / "report.md").string()},
                            {"report_json", (dir / "report.json").string()}};
    // The review summary a checkpoint shows first (autopatch's decisions, kernel-dev's formulas).
    std::string summary;
    const auto* workflow = workflow_registry().find(state.value("workflow", ""));
    if (workflow && workflow->summarize && std::filesystem::is_regular_file(dir / "profile.yaml")) {
      try {
        summary = workflow->summarize(profile::load_yaml_file(dir / "profile.yaml"));
      } catch (const std::exception& e) {
        summary = std::string("(no summary: ") + e.what() + ")\n";
      }
    }
    if (options.json) {
      print_json({{"state", state}, {"paths", paths}, {"summary", summary}});
    } else {
      std::cout << "run:       " << state["name"].get<std::string>() << "\n"
                << "workflow:  " << state["workflow"].get<std::string>() << "\n"
                << "status:    " << state["status"].get<std::string>() << "\n"
                << "phase:     " << state["phase"].get<std::string>() << "\n"
                << "attempt:   " << state["attempt"].get<int>() << " of " << state["max_attempts"].get<int>() << "\n"
                << "created:   " << state["created_at"].get<std::string>() << "\n"
                << "tree:      " << state["tree_root"].get<std::string>() << "\n";
      if (state["status"] == "killed") {
        const std::string name = state["name"].get<std::string>();
        std::cout << "note:      no process drives this run (it was killed mid-" << state["phase"].get<std::string>()
                  << "); `liger-agent resume " << name << "` continues it, `liger-agent reject " << name
                  << "` undoes what it applied\n";
      }
      if (!state["pending_checkpoint"].get<std::string>().empty()) {
        std::cout << "waiting:   " << state["pending_checkpoint"].get<std::string>()
                  << " checkpoint (approve, then resume)\n";
      }
      for (const auto& field : state["undecided"]) std::cout << "undecided: " << field.get<std::string>() << "\n";
      std::cout << "stages:\n";
      for (const char* stage : {"understand", "act", "apply", "verify"}) {
        if (state["stages"].contains(stage))
          std::cout << "  " << stage << ": " << state["stages"][stage]["status"].get<std::string>() << "\n";
      }
      if (state["error"].is_object()) std::cout << "error:     " << state["error"]["message"].get<std::string>() << "\n";
      if (!summary.empty()) std::cout << "\n" << summary << "\n";
      std::cout << "files:\n";
      for (const auto& [key, value] : paths.items()) std::cout << "  " << key << ": " << value.get<std::string>() << "\n";
    }
    options.exit_code = 0;
  });
}

}  // namespace liger::cli
