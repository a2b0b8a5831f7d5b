// One registration function per subcommand, each defined in its own cmd_<name>.cpp.
// main.cpp calls them in order; adding a subcommand = a new cmd_<name>.cpp + one line here
// + one call in main.cpp.
#pragma once

#include "cli/global_options.h"

namespace CLI {
class App;
}

namespace liger::cli {

void register_kernel_dev_command(CLI::App& app, GlobalOptions& options);
void register_autopatch_command(CLI::App& app, GlobalOptions& options);
void register_kernel_perf_command(CLI::App& app, GlobalOptions& options);
void register_survey_command(CLI::App& app, GlobalOptions& options);
void register_runs_command(CLI::App& app, GlobalOptions& options);
void register_show_command(CLI::App& app, GlobalOptions& options);
void register_approve_command(CLI::App& app, GlobalOptions& options);
void register_reject_command(CLI::App& app, GlobalOptions& options);
void register_resume_command(CLI::App& app, GlobalOptions& options);
void register_kernels_command(CLI::App& app, GlobalOptions& options);
void register_config_command(CLI::App& app, GlobalOptions& options);
void register_version_command(CLI::App& app, GlobalOptions& options);
// `llm check`: defined in cmd_llm.cpp (LLM layer).
void register_llm_command(CLI::App& app, GlobalOptions& options);
// `help` and `completion`: defined in cmd_completion.cpp.
void register_help_command(CLI::App& app, GlobalOptions& options);
void register_completion_command(CLI::App& app, GlobalOptions& options);

}  // namespace liger::cli
