#include <CLI/CLI.hpp>

#include <filesystem>

#include "cli/commands.h"
#include "cli/run_support.h"
#include "cli/tree.h"
#include "liger/workflows.h"

namespace liger::cli {

void register_kernel_perf_command(CLI::App& app, GlobalOptions& options) {
  struct Args {
    std::string kernel;
    std::string goal = "balanced";
    std::string target;
    int variants = 8;
    std::string tree;
    std::string mode = "full";
    std::string target_gpu;
    std::string start_tunables;
    std::string dtype = "bf16";
    bool profile_only = false;
    int search_min_time_ms = 0;
    int bench_min_time_ms = 0;
    std::string work_dir;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "kernel-perf",
      "Make an existing kernel faster: profile it, try variants with a lab notebook each, keep the winner "
      "only if its tests pass, and report before/after.");
  cmd->add_option("kernel", args->kernel, "Name of a kernel in the library (see `liger-agent kernels`)")->required();
  cmd->add_option("--goal", args->goal, "What to optimise")
      ->check(CLI::IsMember({"speed", "memory", "balanced"}))
      ->capture_default_str();
  cmd->add_option("--target", args->target, "Stop when reached, e.g. \"1.3x\" or \"900GB/s\"");
  cmd->add_option("--max-variants,--variants", args->variants, "Variant budget (v1..vN)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--mode", args->mode, "Pass to optimise")
      ->check(CLI::IsMember({"forward", "backward", "full"}))
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Data type benchmarked")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--target-gpu", args->target_gpu,
                  "Architecture to optimise for (ampere, hopper, blackwell or sm_XX); default: the GPU present");
  cmd->add_option("--start-tunables", args->start_tunables,
                  "Launch parameters of the v0 baseline, e.g. threads_per_block=64,vector_bytes=4 "
                  "(reproduces a de-tuned start)");
  cmd->add_flag("--profile-only", args->profile_only,
                "Stop after Profile: compiler resource report (works without a GPU), no variants");
  cmd->add_option("--search-min-time-ms", args->search_min_time_ms,
                  "Timed GPU time per candidate of the tunable search (default: the workflow's)");
  cmd->add_option("--bench-min-time-ms", args->bench_min_time_ms,
                  "Timed GPU time per case of each variant's full benchmark (default: the workflow's)");
  cmd->add_option("--work-dir", args->work_dir,
                  "Work tree (kernel library build) to reuse across runs: only what changed recompiles; one run at "
                  "a time (default: a fresh one under the run directory)");
  cmd->add_option("--tree", args->tree, "Checkout holding the kernel (default: the one holding the current directory)");
  cmd->footer(examples_footer({
      "liger-agent kernel-perf rms_norm --goal speed",
      "liger-agent kernel-perf cross_entropy --goal memory --max-variants 4 --yes",
      "liger-agent kernel-perf swiglu --goal speed --start-tunables threads_per_block=64,vector_bytes=4 --autonomous",
      "liger-agent kernel-perf rms_norm --profile-only --target-gpu hopper",
  }));
  cmd->callback([args, &options] {
    engine::RunRequest request;
    request.workflow = "kernel-perf";
    request.label = args->kernel;
    request.tree_root = resolve_tree(args->tree, "kernel-perf");
    request.arguments = {
        {"kernel", args->kernel},         {"goal", args->goal},
        {"target", args->target},         {"variants", args->variants},
        {"mode", args->mode},             {"dtype", args->dtype},
        {"target_gpu", args->target_gpu}, {"start_tunables", args->start_tunables},
        {"profile_only", args->profile_only}};
    if (args->search_min_time_ms > 0) request.arguments["search_min_time_ms"] = args->search_min_time_ms;
    if (args->bench_min_time_ms > 0) request.arguments["bench_min_time_ms"] = args->bench_min_time_ms;
    if (!args->work_dir.empty()) request.arguments["work_dir"] = std::filesystem::absolute(args->work_dir).string();
    engine::Engine engine(workflow_registry(), engine_options(options));
    options.exit_code = print_outcome(options, engine.start(request));
  });
}

}  // namespace liger::cli
