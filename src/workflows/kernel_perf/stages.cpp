// kernel-perf: what the stages share (stages.h): run directory layout, logged tools, the work
// tree's build, liger-bench runs and the op's GPU tests.
#include "workflows/kernel_perf/stages.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <thread>

#include "liger/error.h"
#include "liger/util.h"
#include "liger/workflows.h"

namespace liger::kernel_perf::stages {

using engine::StageContext;
using engine::StageResult;
using std::chrono::seconds;

fs::path skills_dir() { return workflows::data_dir() / "skills" / "kernel_perf"; }
fs::path templates_dir() { return workflows::data_dir() / "templates" / "kernel_perf"; }
fs::path opt_dir(const StageContext& ctx) { return ctx.run_dir / "optimization"; }
// The run's own work tree, or the shared one of --work-dir (builds reused across runs: only
// what differs from the last run's tree is copied, so only that recompiles).
fs::path work_dir(const StageContext& ctx) {
  if (ctx.input.is_object() && ctx.input.contains("work_dir") && ctx.input["work_dir"].is_string() &&
      !ctx.input["work_dir"].get<std::string>().empty())
    return fs::absolute(ctx.input["work_dir"].get<std::string>());
  return opt_dir(ctx) / "work";
}
fs::path build_dir(const StageContext& ctx) { return work_dir(ctx) / "build"; }

std::string tail(const std::string& text, std::size_t n) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

void write(const fs::path& path, const std::string& text) {
  // An identical file keeps its timestamp: a rewritten source would recompile for nothing.
  std::error_code ec;
  if (fs::is_regular_file(path, ec) && fs::file_size(path, ec) == text.size() && util::read_file(path) == text) return;
  fs::create_directories(path.parent_path());
  util::write_file_atomic(path, text);
}

std::string read_or_empty(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec) ? util::read_file(p) : std::string();
}

toolchain::ProcessResult run_logged(const StageContext& ctx, const std::vector<std::string>& argv, const fs::path& cwd,
                                    int timeout_s, const fs::path& log) {
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  if (ctx.log) ctx.log->info("kernel-perf: {}", cmd);
  auto r = current_runner()->run(argv, cwd, seconds(timeout_s));
  if (!log.empty()) write(log, "$ " + cmd + "\n" + r.output + "\n# exit " + std::to_string(r.exit_code) + "\n");
  return r;
}

// ---------------------------------------------------------------- the work tree

namespace {
// Copies `from` over `to` unless `to` already has the same bytes (its timestamp then stays).
void sync_file(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (fs::is_regular_file(to, ec) && fs::file_size(to, ec) == fs::file_size(from, ec) &&
      util::read_file(to) == util::read_file(from))
    return;
  fs::create_directories(to.parent_path(), ec);
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) throw Error(ErrorKind::Io, "kernel-perf: cannot copy " + from.string() + ": " + ec.message());
}
}  // namespace

void copy_project(const fs::path& tree, const fs::path& work) {
  fs::create_directories(work);
  for (const char* item : {"CMakeLists.txt", "CMakePresets.json", "cmake", "kernels", "benchmarks", "tests"}) {
    std::error_code ec;
    const fs::path from = tree / item;
    if (!fs::exists(from, ec)) continue;
    if (!fs::is_directory(from)) {
      sync_file(from, work / item);
      continue;
    }
    for (auto it = fs::recursive_directory_iterator(from, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_regular_file() && !it->is_symlink()) sync_file(it->path(), work / item / fs::relative(it->path(), from));
    if (ec) throw Error(ErrorKind::Io, "kernel-perf: cannot copy " + from.string() + ": " + ec.message());
  }
}

int jobs_of(const KernelPerfInput& in) {
  if (in.jobs > 0) return in.jobs;
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 4 : static_cast<int>(n);
}

// Configures (once) and builds liger-bench + kernel_tests in the work tree; "" or the error.
std::string build_work(const StageContext& ctx, const KernelPerfInput& in, int sm, const fs::path& log) {
  auto runner = current_runner();
  if (!fs::exists(build_dir(ctx) / "CMakeCache.txt")) {
    std::vector<std::string> argv = {"cmake", "-S", work_dir(ctx).string(), "-B", build_dir(ctx).string(),
                                     "-DCMAKE_BUILD_TYPE=Release", "-DLIGER_BUILD_AGENT=OFF",
                                     "-DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(sm)};
    if (runner->has_tool("ninja")) argv.insert(argv.begin() + 1, {"-G", "Ninja"});
    auto r = run_logged(ctx, argv, {}, 900, log.string() + ".configure");
    if (!r.ok()) return "cmake configure failed:\n" + tail(r.output);
  }
  auto r = run_logged(ctx,
                      {"cmake", "--build", build_dir(ctx).string(), "-j", std::to_string(jobs_of(in)), "--target",
                       "liger-bench", "kernel_tests"},
                      {}, 1800, log);
  if (!r.ok()) return "build failed:\n" + tail(r.output);
  return "";
}

fs::path bench_exe(const StageContext& ctx) { return build_dir(ctx) / "benchmarks" / "liger-bench"; }
fs::path tests_exe(const StageContext& ctx) { return build_dir(ctx) / "tests" / "kernels" / "kernel_tests"; }

// Runs liger-bench on the op; the parsed run, or throws Toolchain with the output.
BenchRun bench(const StageContext& ctx, const KernelPerfInput& in, const Candidate& tunables, int min_time_ms,
               const fs::path& json_path, bool fast_copy, const fs::path& snapshot) {
  std::vector<std::string> argv = {bench_exe(ctx).string(), "--op", in.op, "--json", json_path.string(),
                                   "--min-time-ms", std::to_string(min_time_ms)};
  if (!snapshot.empty()) {
    argv[0] = (snapshot / "liger-bench").string();
    argv.insert(argv.begin(), {"env", "LD_LIBRARY_PATH=" + snapshot.string()});
  }
  if (!in.dtype.empty()) argv.insert(argv.end(), {"--dtype", in.dtype});
  if (fast_copy) argv.insert(argv.end(), {"--copy-mib", "256"});
  for (const auto& [k, v] : tunables) argv.insert(argv.end(), {"--tunable", k + "=" + std::to_string(v)});
  fs::create_directories(json_path.parent_path());
  auto r = run_logged(ctx, argv, {}, 900, json_path.string() + ".log");
  if (r.exit_code == 2)
    throw Error(ErrorKind::Toolchain, "liger-bench found no usable GPU", "run kernel-perf on a machine with an NVIDIA GPU");
  if (r.exit_code != 0 && r.exit_code != 1) throw Error(ErrorKind::Toolchain, "liger-bench failed:\n" + tail(r.output));
  return parse_bench_json(util::read_file(json_path));
}

// Every candidate of `list` measured in ONE liger-bench process (--candidate, case by case, so
// drift hits them alike; one CUDA context and copy probe instead of one per candidate); the runs
// by candidate text. Throws Toolchain when the process fails outright.
std::map<std::string, BenchRun> bench_batch(const StageContext& ctx, const KernelPerfInput& in,
                                            const std::vector<BatchEntry>& list, int min_time_ms,
                                            const SearchMeasure& measure, const fs::path& dir) {
  std::vector<std::string> argv = {bench_exe(ctx).string(), "--op", in.op, "--json-dir", dir.string(),
                                   "--min-time-ms", std::to_string(min_time_ms), "--warmup-ms",
                                   std::to_string(measure.warmup_ms), "--min-runs", std::to_string(measure.min_runs),
                                   "--copy-mib", "256"};
  if (measure.stop_spread_pct > 0) argv.insert(argv.end(), {"--stop-spread-pct", fmt("%g", measure.stop_spread_pct)});
  if (!in.dtype.empty()) argv.insert(argv.end(), {"--dtype", in.dtype});
  for (const auto& e : list) argv.insert(argv.end(), {"--candidate", candidate_arg(e.candidate, e.keys)});
  fs::create_directories(dir);
  auto r = run_logged(ctx, argv, {}, 1800, dir / "bench.log");
  if (r.exit_code == 2)
    throw Error(ErrorKind::Toolchain, "liger-bench found no usable GPU", "run kernel-perf on a machine with an NVIDIA GPU");
  if (r.exit_code != 0 && r.exit_code != 1) throw Error(ErrorKind::Toolchain, "liger-bench failed:\n" + tail(r.output));
  std::map<std::string, BenchRun> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const fs::path json = dir / (std::to_string(i) + ".json");
    if (fs::exists(json)) out[candidate_text(list[i].candidate)] = parse_bench_json(util::read_file(json));
  }
  return out;
}

// ---------------------------------------------------------------- phase timings

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

namespace {
fs::path timings_path(const StageContext& ctx) { return opt_dir(ctx) / "timings.json"; }
}  // namespace

void record_phase(const StageContext& ctx, const std::string& stage, const std::string& phase, double seconds,
                  const std::string& detail) {
  nlohmann::json all = nlohmann::json::array();
  const std::string text = read_or_empty(timings_path(ctx));
  if (!text.empty()) {
    try {
      all = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
      all = nlohmann::json::array();  // a damaged record only loses the earlier timings
    }
  }
  all.push_back({{"stage", stage}, {"phase", phase}, {"seconds", std::round(seconds * 100) / 100}, {"detail", detail}});
  write(timings_path(ctx), all.dump(2));
}

std::string timings_markdown(const StageContext& ctx) {
  const std::string text = read_or_empty(timings_path(ctx));
  if (text.empty()) return "";
  nlohmann::json all;
  try {
    all = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return "";
  }
  std::string md = "| stage | phase | seconds | detail |\n|---|---|---:|---|\n";
  std::vector<std::pair<std::string, double>> totals;
  for (const auto& e : all) {
    const std::string stage = e.value("stage", "");
    const double s = e.value("seconds", 0.0);
    md += "| " + stage + " | " + e.value("phase", "") + " | " + fmt("%.1f", s) + " | " + e.value("detail", "") + " |\n";
    auto it = std::find_if(totals.begin(), totals.end(), [&](const auto& t) { return t.first == stage; });
    if (it == totals.end()) totals.push_back({stage, s});
    else it->second += s;
  }
  md += "\nTotals: ";
  for (std::size_t i = 0; i < totals.size(); ++i)
    md += (i ? ", " : "") + totals[i].first + " " + fmt("%.1f", totals[i].second) + " s";
  return md + " (phases not listed, such as writing notebooks, are not counted).\n";
}

// A copy of the work tree's liger-bench and its kernel library, so the original and the optimized
// build can run in alternating fresh processes; "" or why not.
std::string snapshot_bench(const StageContext& ctx, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to, ec);
  fs::copy_file(bench_exe(ctx), to / "liger-bench", fs::copy_options::overwrite_existing, ec);
  if (ec) return "cannot copy liger-bench: " + ec.message();
  bool lib = false;
  for (const auto& e : fs::directory_iterator(build_dir(ctx) / "kernels", ec))
    if (e.path().filename().string().rfind("libliger_kernels.so", 0) == 0) {
      fs::copy(e.path(), to / e.path().filename(), fs::copy_options::overwrite_existing | fs::copy_options::copy_symlinks, ec);
      lib = !ec;
    }
  return lib ? "" : "no libliger_kernels.so in the work build";
}

bool loads_own_library(const fs::path& snap, std::string* why_not) {
  auto r = current_runner()->run({"env", "LD_LIBRARY_PATH=" + snap.string(), "ldd", (snap / "liger-bench").string()}, {},
                                 seconds(60));
  const auto at = r.output.find("libliger_kernels.so");  // also a versioned soname
  const auto arrow = at == std::string::npos ? at : r.output.find("=> ", at);
  if (r.ok() && arrow != std::string::npos && r.output.compare(arrow + 3, snap.string().size(), snap.string()) == 0) return true;
  *why_not = "the snapshot " + snap.string() + " does not load its own kernel library (ldd: " +
             util::trim(r.output.substr(0, 300)) + ")";
  return false;
}

// The op's GPU tests on the current work-tree build.
bool run_tests(const StageContext& ctx, const OpSpec& spec, const fs::path& log, std::string* summary) {
  auto r = run_logged(ctx, {tests_exe(ctx).string(), "--gtest_filter=" + spec.test_filter}, {}, 1800, log);
  static const std::regex passed_re(R"(\[  PASSED  \] (\d+) test)");
  static const std::regex failed_re(R"(\[  FAILED  \] (\d+) test)");
  static const std::regex skipped_re(R"(\[  SKIPPED \] (\d+) test)");
  std::smatch m;
  std::string s;
  if (std::regex_search(r.output, m, passed_re)) s += std::string(m[1]) + " passed";
  if (std::regex_search(r.output, m, failed_re)) s += (s.empty() ? "" : ", ") + std::string(m[1]) + " FAILED";
  if (std::regex_search(r.output, m, skipped_re)) s += (s.empty() ? "" : ", ") + std::string(m[1]) + " skipped";
  const bool skipped_all = r.output.find("[  PASSED  ] 0 tests") != std::string::npos;
  if (summary) *summary = s.empty() ? "no gtest summary (exit " + std::to_string(r.exit_code) + ")" : s;
  return r.ok() && !skipped_all;
}

}  // namespace liger::kernel_perf::stages
