// The conventions every command shares, kept out of main() so tests and the completion
// command see the same app: `help [command]`, "did you mean", help footers that list the
// global flags their examples use, and completion scripts generated from the registered app.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace liger::cli {

// When argv asks for `help [command...]` (possibly after global flags), the help text to print;
// nullopt otherwise. An unknown command name is a usage error with a suggestion.
std::optional<std::string> help_request(const CLI::App& app, const std::vector<std::string>& args);

// After a parse failure: "unknown command 'kernl-dev' (did you mean 'kernel-dev'?)" or
// "unknown flag '--gaol' for 'kernel-perf' (did you mean '--goal'?)"; empty when argv holds
// no unknown command or flag (the parser's own message is then the better one).
std::string diagnose_unknown_words(const CLI::App& app, const std::vector<std::string>& args);

// Appends to each subcommand's footer the global flags its examples use, with their help text
// (a subcommand's --help otherwise lists only its own options).
void document_global_flags_in_examples(CLI::App& app);

// Completion scripts for every registered command and flag; `shell` is "bash" or "zsh".
std::string completion_script(const CLI::App& app, const std::string& shell);

}  // namespace liger::cli
