#include "cli/global_options.h"

#include <CLI/CLI.hpp>

#include "liger/llm/redact.h"

namespace liger::cli {

const Config& GlobalOptions::config() {
  if (!config_) {
    std::optional<std::filesystem::path> explicit_file;
    if (!config_file.empty()) explicit_file = config_file;
    ConfigInputs inputs = ConfigInputs::from_process(explicit_file);
    if (!run_dir.empty()) {
      inputs.flags["run_dir"] = run_dir;
      inputs.flag_names["run_dir"] = "--run-dir";
    }
    if (!llm.empty()) {
      inputs.flags["llm.provider"] = llm;
      inputs.flag_names["llm.provider"] = "--llm";
    }
    config_ = Config::load(inputs);
    // The key variable may be one the configuration names: scrub its value from all output.
    llm::register_environment_keys(config_->get_string("llm.api_key_env"));
  }
  return *config_;
}

void add_global_options(CLI::App& app, GlobalOptions& options) {
  app.add_flag("--json", options.json, "Machine-readable JSON on stdout; logs and progress go to stderr");
  app.add_flag("-v,--verbose", options.verbosity, "More log output on stderr (repeat for debug: -vv)");
  app.add_flag("-q,--quiet", options.quiet, "Only errors on stderr; no progress lines");
  app.add_flag("-y,--yes,--autonomous", options.yes,
               "Approve every checkpoint automatically and run end to end (undecided profile fields still stop)");
  app.add_option("--llm", options.llm, "LLM provider (overrides llm.provider)")
      ->check(CLI::IsMember({"builtin", "openai", "anthropic"}));
  app.add_option("--run-dir", options.run_dir, "Root of run directories (overrides run_dir; default .liger-agent/runs)");
  app.add_option("--config", options.config_file, "Project configuration file used instead of ./.liger-agent.yaml");
}

std::string examples_footer(std::initializer_list<const char*> examples) {
  std::string footer = "\nExamples:\n";
  for (const char* example : examples) footer += std::string("  ") + example + "\n";
  return footer;
}

}  // namespace liger::cli
