#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/run_support.h"
#include "liger/process.h"
#include "liger/util.h"
#include "liger/workflows.h"

namespace liger::cli {

// The short commit of the source tree this binary was built from; "" when git cannot say.
std::string git_commit() {
  if (!toolchain::find_executable("git")) return "";
  toolchain::ProcessOptions options;
  options.argv = {"git", "-C", LIGER_SOURCE_DIR, "rev-parse", "--short", "HEAD"};
  options.timeout = std::chrono::seconds(5);
  auto result = toolchain::run_process(options);
  return result.ok() ? util::trim(result.output) : "";
}

namespace {

const char* build_type() {
#if defined(NDEBUG) && defined(__OPTIMIZE__)
  return "release";
#elif defined(__OPTIMIZE__)
  return "optimized with assertions";
#else
  return "debug";
#endif
}

}  // namespace

void register_version_command(CLI::App& app, GlobalOptions& options) {
  auto* cmd = app.add_subcommand("version", "Print the version, git commit, build type and CUDA availability.");
  cmd->footer(examples_footer({"liger-agent version", "liger-agent version --json"}));
  cmd->callback([&options] {
    const auto gpu = toolchain::detect_gpu();
    const std::string commit = git_commit();
    if (options.json) {
      print_json({{"version", LIGER_AGENT_VERSION},
                  {"git_commit", commit},
                  {"build_type", build_type()},
                  {"source_dir", LIGER_SOURCE_DIR},
                  {"data_dir", workflows::data_dir().string()},
                  {"cuda", {{"nvcc", gpu.nvcc_found}, {"nvcc_version", gpu.nvcc_version}, {"gpus", gpu.gpus}}}});
    } else {
      std::cout << "liger-agent " << LIGER_AGENT_VERSION << (commit.empty() ? "" : " (" + commit + ")") << "\n"
                << "build:  " << build_type() << "\n"
                << "data:   " << workflows::data_dir().string() << "\n"
                << "nvcc:   " << (gpu.nvcc_found ? "found " + gpu.nvcc_version : std::string("not found")) << "\n"
                << "GPUs:   " << (gpu.gpus.empty() ? std::string("none detected") : std::to_string(gpu.gpus.size()))
                << "\n";
      for (const auto& line : gpu.gpus) std::cout << "  " << line << "\n";
    }
    options.exit_code = 0;
  });
}

}  // namespace liger::cli
