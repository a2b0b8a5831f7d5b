// kernel-perf's stages share these: run directory layout, the logged tool runner, the work
// tree's build, liger-bench and the op's GPU tests (profile.cpp: Profile, optimize.cpp:
// Optimize, finalize.cpp: Finalize).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "liger/workflow.h"
#include "workflows/kernel_perf/kernel_perf.h"
#include "workflows/kernel_perf/search.h"

namespace liger::kernel_perf::stages {

namespace fs = std::filesystem;
using engine::StageContext;
using engine::StageResult;

fs::path skills_dir();
fs::path templates_dir();
fs::path opt_dir(const StageContext& ctx);
fs::path work_dir(const StageContext& ctx);
fs::path build_dir(const StageContext& ctx);
std::string tail(const std::string& text, std::size_t n = 3000);
std::string fmt(const char* f, double v);
void write(const fs::path& path, const std::string& text);
std::string read_or_empty(const fs::path& p);
toolchain::ProcessResult run_logged(const StageContext& ctx, const std::vector<std::string>& argv, const fs::path& cwd,
                                    int timeout_s, const fs::path& log);
void copy_project(const fs::path& tree, const fs::path& work);
// Configures (once) and builds liger-bench + kernel_tests in the work tree; "" or the error.
std::string build_work(const StageContext& ctx, const KernelPerfInput& in, int sm, const fs::path& log);
fs::path bench_exe(const StageContext& ctx);
fs::path tests_exe(const StageContext& ctx);
// Runs liger-bench on the op (the work build's, or a snapshot's); the parsed run, or throws
// Toolchain with the output.
BenchRun bench(const StageContext& ctx, const KernelPerfInput& in, const Candidate& tunables, int min_time_ms,
               const fs::path& json_path, bool fast_copy = false, const fs::path& snapshot = {});
// A copy of the work build's liger-bench and kernel library in `to`, run with LD_LIBRARY_PATH=to:
// a build kept while the work tree is rebuilt (Optimize's v0, Finalize's A/B sides); "" or why not.
std::string snapshot_bench(const StageContext& ctx, const fs::path& to);
// Whether the snapshot's liger-bench loads the snapshot's library (ldd under LD_LIBRARY_PATH: a
// RUNPATH yields to it, an old-style RPATH would not); false with why.
bool loads_own_library(const fs::path& snap, std::string* why_not);
// Candidates measured in ONE liger-bench process, each on its own cases (none: every case);
// the runs by candidate text. The search's measurement settings (short warm-up, stop once the
// spread is small) apply; throws Toolchain when the process fails outright.
struct BatchEntry {
  Candidate candidate;
  std::vector<std::string> keys;
};
std::map<std::string, BenchRun> bench_batch(const StageContext& ctx, const KernelPerfInput& in,
                                            const std::vector<BatchEntry>& list, int min_time_ms,
                                            const SearchMeasure& measure, const fs::path& dir);
bool run_tests(const StageContext& ctx, const OpSpec& spec, const fs::path& log, std::string* summary);

// Where the run's time goes: every stage records its phases (wall-clock seconds) in
// optimization/timings.json, so a GPU run's report shows what to cut next.
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start);
void record_phase(const StageContext& ctx, const std::string& stage, const std::string& phase, double seconds,
                  const std::string& detail = "");
// The recorded phases as a Markdown table with a total per stage ("" when none were recorded).
std::string timings_markdown(const StageContext& ctx);

// Profile (profile.cpp) and Optimize (optimize.cpp).
StageResult understand(StageContext& ctx);
StageResult act(StageContext& ctx);

// Finalize (finalize.cpp).
StageResult verify(StageContext& ctx);
std::string render_report(const StageContext& ctx, const KernelPerfInput& in, const OpSpec& spec, const BenchRun* orig,
                          const BenchRun* opt, const std::string& tests, const std::string& diff,
                          const std::string& plot, const std::string& torch_status, const std::string& winner,
                          const std::string& stop);

}  // namespace liger::kernel_perf::stages
