// kernel-perf stages: Profile (understand), Optimize (act), Finalize (verify).
//
// Run directory layout (<run>/optimization/):
//   profile/ptxas.log, profile/ncu.csv     compiler report and Nsight Compute output
//   work/                                  a copy of the tree's CMake project (kernels, benchmarks,
//   work/build/                            tests) and its build: every variant is a drop-in
//                                          replacement built here (only the changed op recompiles);
//                                          --work-dir shares one across runs (only what differs
//                                          from the last run's tree is copied and rebuilt)
//   v0/bench.json                          the baseline
//   vN/notebook.md, vN/tuning.h,           each variant: lab notebook, the files it replaces,
//   vN/bench.json, vN/smoke.log            its smoke test and benchmark
//   search/*.json                          every measured candidate of the launch-parameter search
//   comparison.md, act.json                all variants; the winner
//   final/                                 Finalize: test log, original vs optimized, plot, report.md
//
// Profile: profile.cpp; Optimize: optimize.cpp; Finalize: finalize.cpp; what they share: stages.cpp.
#include <string>
#include <vector>

#include "liger/input_check.h"
#include "liger/workflows.h"
#include "workflows/kernel_perf/kernel_perf.h"
#include "workflows/kernel_perf/stages.h"
#include "workflows/summaries.h"

namespace liger::kernel_perf {

namespace {

using namespace stages;

std::string diagnose(const std::vector<engine::AttemptRecord>& attempts) {
  std::string out = "kernel-perf: every applied winner failed the op's test suite; the tree is unchanged.";
  for (const auto& a : attempts)
    for (const auto& h : a.hard) out += "\n- attempt " + std::to_string(a.attempt) + ": " + h.summary;
  return out;
}

}  // namespace

engine::Workflow make_workflow() {
  engine::Workflow w;
  w.name = "kernel-perf";
  w.description = "make an existing library kernel faster: profile, variants with lab notebooks, guarded winner";
  w.profile_schema = skills_dir() / "profile.schema.yaml";
  w.understand = understand;
  w.act = act;
  w.verify = verify;
  w.diagnose = diagnose;
  w.summarize = workflows::kernel_perf_summary;
  // The kernel's sources are read from and its tuning applied to the tree.
  w.check_request = [](const nlohmann::json&, const std::string&, const fs::path& tree, const Config&) {
    input::require_checkout(tree, {"kernels/ops.yaml", "kernels/src"}, "--tree");
  };
  return w;
}

}  // namespace liger::kernel_perf
