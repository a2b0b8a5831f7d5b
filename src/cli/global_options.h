// Flags every subcommand sees, and the conventions subcommands follow:
//  * a subcommand's callback parses nothing itself beyond its own options, calls into the
//    workflows/engine layers, prints, and stores its exit status in `exit_code`;
//  * failures are thrown as liger::Error; main() prints them (text or --json) and exits;
//  * with --json, stdout carries exactly one JSON document; everything else goes to stderr.
#pragma once

#include <optional>
#include <string>

#include "liger/config.h"

namespace CLI {
class App;
}

namespace liger::cli {

struct GlobalOptions {
  bool json = false;
  int verbosity = 0;  // -v count
  bool quiet = false;
  bool yes = false;         // --yes and --autonomous both set this
  std::string llm;          // --llm, empty when not given
  std::string run_dir;      // --run-dir, empty when not given
  std::string config_file;  // --config, empty when not given

  int exit_code = 0;  // set by the subcommand that ran

  // Effective configuration, loaded on first use so `--help` works with a broken config file.
  const Config& config();

 private:
  std::optional<Config> config_;
};

// Adds the global flags to the top-level app (they are accepted before or after a subcommand).
void add_global_options(CLI::App& app, GlobalOptions& options);

// Standard help footer: an "Examples:" block, one example per line.
std::string examples_footer(std::initializer_list<const char*> examples);

}  // namespace liger::cli
