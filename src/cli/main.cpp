// liger-agent entry point: wires the subcommands, and is the one place errors become output
// and exit codes.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/cli_conventions.h"
#include "cli/commands.h"
#include "liger/error.h"
#include "liger/llm/redact.h"
#include "liger/util.h"

namespace {

int report_error(const liger::cli::GlobalOptions& options, const std::string& kind, const std::string& message,
                 const std::string& hint, int exit_code) {
  if (options.json) {
    nlohmann::json error = {{"ok", false},
                            {"exit_code", exit_code},
                            {"error", {{"kind", kind}, {"message", message}, {"hint", hint}}}};
    std::cout << error.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  } else {
    std::cerr << "error: " << message << "\n";
    if (!hint.empty()) std::cerr << "hint: " << hint << "\n";
  }
  return exit_code;
}

// The process-wide logger (the LLM layer's retries and redirects, anything without a run):
// stderr, so --json keeps stdout to one document, and every message scrubbed of API keys. Run
// logs (console and <run>/logs/run.log) are scrubbed by the engine's own redacting sinks.
std::shared_ptr<spdlog::sinks::sink> install_default_logger() {
  auto sink = liger::llm::make_redacting_sink(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  auto logger = std::make_shared<spdlog::logger>("liger-agent", sink);
  spdlog::set_default_logger(logger);
  return sink;
}

}  // namespace

int main(int argc, char** argv) {
  liger::signals::install_handlers();
  // Everything printed, by any path, passes redact(): an API key echoed by an LLM answer or an
  // error message never reaches the terminal (files are scrubbed by util::write_file_atomic).
  liger::llm::register_environment_keys({});
  liger::llm::redact_standard_streams();
  liger::cli::GlobalOptions options;

  CLI::App app{
      "liger-agent: GPU kernel engineering for LLM training, as staged workflows\n"
      "(Understand -> checkpoint -> Act -> checkpoint -> Verify) with resumable runs."};
  app.name("liger-agent");
  app.require_subcommand(1);
  app.fallthrough();  // global flags may follow the subcommand
  app.set_version_flag("--version", std::string("liger-agent ") + LIGER_AGENT_VERSION,
                       "Print the version and exit (`liger-agent version` also shows the build and GPUs)");
  liger::cli::add_global_options(app, options);
  auto log_sink = install_default_logger();
  // Runs after the flags are parsed and before any subcommand's callback.
  app.parse_complete_callback([&options, &log_sink] {
    const auto level = options.quiet            ? spdlog::level::err
                       : options.verbosity >= 2 ? spdlog::level::debug
                       : options.verbosity == 1 ? spdlog::level::info
                                                : spdlog::level::warn;
    log_sink->set_level(level);
    spdlog::set_level(level);
  });

  using namespace liger::cli;
  register_survey_command(app, options);
  register_kernel_dev_command(app, options);
  register_autopatch_command(app, options);
  register_kernel_perf_command(app, options);
  register_runs_command(app, options);
  register_show_command(app, options);
  register_approve_command(app, options);
  register_reject_command(app, options);
  register_resume_command(app, options);
  register_kernels_command(app, options);
  register_config_command(app, options);
  register_version_command(app, options);
  register_llm_command(app, options);
  register_help_command(app, options);
  register_completion_command(app, options);
  // Set after the subcommands exist: CLI11 copies a parent's footer into subcommands created
  // later, which gave `llm --help` the top-level examples.
  app.footer(liger::cli::examples_footer({
      "liger-agent kernel-dev \"ReLU squared activation function\"   # stops at each checkpoint for review",
      "liger-agent autopatch path/to/modeling_mymodel.py",
      "liger-agent kernel-perf rms_norm --goal speed --yes",
      "liger-agent runs                         # list runs",
      "liger-agent approve <run> && liger-agent resume <run>",
      "liger-agent help kernel-dev              # one command's options and examples",
      "Exit codes: 0 ok, 1 failure, 2 usage, 3 awaiting approval, 4 verification failed, 5 rejected, "
      "130 interrupted",
  }));
  liger::cli::document_global_flags_in_examples(app);

  const std::vector<std::string> args(argv + 1, argv + argc);

  try {
    if (auto help = liger::cli::help_request(app, args)) {
      std::cout << *help;
      return 0;
    }
    app.parse(argc, argv);
    return options.exit_code;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // The parser names the word it could not place; a typo deserves the word it was meant to be.
    const std::string unknown = liger::cli::diagnose_unknown_words(app, args);
    return report_error(options, "usage", unknown.empty() ? e.what() : unknown,
                        "run `liger-agent help` or `liger-agent help <command>`",
                        static_cast<int>(liger::ExitCode::Usage));
  } catch (const liger::Error& e) {
    return report_error(options, liger::to_string(e.kind()), e.what(), e.hint(), static_cast<int>(e.exit_code()));
  } catch (const std::exception& e) {
    return report_error(options, "internal", e.what(), "this is a bug in liger-agent; please report it",
                        static_cast<int>(liger::ExitCode::Failure));
  }
}
