#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "cli/run_support.h"

namespace liger::cli {

void register_config_command(CLI::App& app, GlobalOptions& options) {
  auto* cmd = app.add_subcommand(
      "config",
      "Show the effective configuration: each key, its value and where it came from (flag, LIGER_AGENT_* "
      "variable, ./.liger-agent.yaml, user config, default).");
  cmd->footer(examples_footer({"liger-agent config", "LIGER_AGENT_MAX_ATTEMPTS=5 liger-agent config --json",
                               "liger-agent --config ci.yaml config"}));
  cmd->callback([&options] {
    const auto entries = options.config().entries();
    if (options.json) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& entry : entries) {
        list.push_back({{"key", entry.key},
                        {"value", entry.value},
                        {"layer", to_string(entry.layer)},
                        {"source", entry.source},
                        {"env", config_env_name(entry.key)}});
      }
      print_json({{"config", list}});
    } else {
      for (const auto& entry : entries) {
        std::cout << fmt::format("{:<26} = {:<22} ({})\n", entry.key,
                                 entry.value.empty() ? "\"\"" : entry.value, entry.source);
      }
    }
    options.exit_code = 0;
  });
}

}  // namespace liger::cli
