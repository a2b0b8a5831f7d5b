// `help [command]` and `completion bash|zsh`: both read the registered app, so they list every
// command and flag without a second copy of the command line's shape.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/cli_conventions.h"
#include "cli/commands.h"
#include "cli/run_support.h"

namespace liger::cli {

void register_help_command(CLI::App& app, GlobalOptions& options) {
  auto words = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("help", "Print the help of liger-agent or of one command.");
  cmd->add_option("command", *words, "The command (and subcommand) to describe, e.g. `kernel-dev` or `llm check`");
  cmd->footer(examples_footer({"liger-agent help", "liger-agent help kernel-dev", "liger-agent help llm check"}));
  // main() answers `help ...` before parsing (see help_request); this runs only for forms it
  // does not recognise, and then prints the top-level help.
  cmd->callback([&app, &options] {
    std::cout << app.help();
    options.exit_code = 0;
  });
}

void register_completion_command(CLI::App& app, GlobalOptions& options) {
  auto shell = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("completion", "Print a shell completion script for liger-agent's commands and flags.");
  cmd->add_option("shell", *shell, "bash or zsh")->required();
  cmd->footer(examples_footer({
      "source <(liger-agent completion bash)   # in ~/.bashrc",
      "liger-agent completion zsh > _liger-agent   # then move it into a directory of $fpath",
  }));
  cmd->callback([&app, shell, &options] {
    std::cout << completion_script(app, *shell);
    options.exit_code = 0;
  });
}

}  // namespace liger::cli
