// kernel-perf from a naive norm backward (all row vectors live in fp32: BwdVariant<0, 1, 0>)
// through Profile, Optimize and Finalize with a scripted tool runner standing in for nvcc,
// cmake, liger-bench, kernel_tests and ldd. The scripted "GPU" makes the naive backward 3x slower
// and spilling, exactly as the compiler reports it for the naive header; the run must diagnose it
// as register-bound from those numbers, recover it with a code variant (not a launch parameter),
// measure the launch search in batched liger-bench processes, and re-measure the winner A/B.
#include <gtest/gtest.h>

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "liger/util.h"
#include "workflows/kernel_perf/kernel_perf.h"

namespace fs = std::filesystem;
using namespace liger::kernel_perf;

namespace {

fs::path repo() { return fs::path(LIGER_SOURCE_DIR); }

// The largest size class's sm_90 row with a poor launch shape (128 threads instead of 512).
constexpr const char* kTunedRow = "{1 << 30, 2, 512, 1, 2, 4, 3}";
constexpr const char* kDetunedRow = "{1 << 30, 2, 128, 1, 2, 4, 3}";

const OpSpec& rms() {
  static const OpSpec s = load_op_spec(repo() / "skills/kernel_perf/search_spaces.yaml", "rms_norm");
  return s;
}

KnobSetting knobs_in(const fs::path& tuning) { return *read_knobs(rms().code, liger::util::read_file(tuning)); }

std::string args_of(const KnobSetting& k) {
  return "ILi" + std::to_string(k.at("dw_first")) + "ELi" + std::to_string(k.at("cache_fp32")) + "ELi" +
         std::to_string(k.at("min_blocks")) + "E";
}

// ptxas output for a naive (cache_fp32) or streaming backward, as nvcc 13 reports them for sm_90.
std::string ptxas_log(const KnobSetting& k, bool forward_too) {
  const bool naive = k.at("cache_fp32") == 1;
  const bool capped = k.at("min_blocks") == 2;
  const long long spill = naive ? 360 : capped ? 460 : 0;
  std::string log;
  if (forward_too)
    log += "ptxas info    : Compiling entry function '_ZN5liger7kernels4norm19norm_forward_kernelILNS1_4KindE0E13__nv_"
           "bfloat16S4_Li8ELi1EEEvNS1_9FwdParamsE' for 'sm_90'\nptxas info    : Function properties for f\n    0 bytes "
           "stack frame, 0 bytes spill stores, 0 bytes spill loads\nptxas info    : Used 40 registers\n";
  log += "ptxas info    : Compiling entry function '_ZN5liger7kernels4norm27norm_backward_staged_kernelILNS1_4KindE0E13__"
         "nv_bfloat16S4_Li8ELi4ENS1_10BwdVariant" +
         args_of(k) + "EEEEvNS1_9BwdParamsE' for 'sm_90'\nptxas info    : Function properties for b\n    " +
         std::to_string(spill) + " bytes stack frame, " + std::to_string(spill) + " bytes spill stores, " +
         std::to_string(spill) + " bytes spill loads\nptxas info    : Used " + (capped ? "64" : "128") +
         " registers, used 1 barriers\n";
  return log;
}

class ScriptedGpu : public Runner {
 public:
  fs::path tree;
  int batch_processes = 0, batch_candidates = 0, single_runs = 0, abab_runs = 0, ncu_runs = 0, builds = 0;
  std::vector<std::string> candidate_args;  // every --candidate argument, as passed
  std::vector<std::vector<std::string>> batch_argvs;
  bool old_rpath = false;  // ldd resolves the build's library whatever LD_LIBRARY_PATH says
  // After v1's benchmark, every batched measurement is noisy (50% spread): no candidate can beat
  // the incumbent outside the spread, as on a busy GPU.
  bool noisy_after_v1 = false;
  std::set<std::string> tools = {"nvcc", "nvidia-smi", "cmake", "ldd", "env", "ncu"};

  liger::toolchain::ProcessResult run(const std::vector<std::string>& full, const fs::path&, std::chrono::seconds) override {
    liger::toolchain::ProcessResult r;
    r.exit_code = 0;
    std::vector<std::string> argv = full;
    std::string ld_path;
    if (argv[0] == "env") {  // env VAR=... cmd ...
      argv.erase(argv.begin());
      while (!argv.empty() && argv[0].find('=') != std::string::npos) {
        if (argv[0].rfind("LD_LIBRARY_PATH=", 0) == 0) ld_path = argv[0].substr(16);
        argv.erase(argv.begin());
      }
    }
    auto has = [&](const std::string& a) { return std::find(argv.begin(), argv.end(), a) != argv.end(); };
    auto after = [&](const std::string& a) { return *(std::find(argv.begin(), argv.end(), a) + 1); };
    const std::string tool = fs::path(argv[0]).filename().string();
    if (tool == "ncu") {
      // An older Nsight Compute without the stall metrics refuses the whole list.
      ++ncu_runs;
      const std::string metrics = after("--metrics");
      if (metrics.find("stalled") != std::string::npos && ncu_runs == 1) {
        r.exit_code = 1;
        r.output = "==ERROR== Failed to find metric smsp__average_warps_issue_stalled_drain_per_issue_active.ratio\n";
        return r;
      }
      r.output = "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n";
      auto row = [&](const char* name, const char* value) {
        r.output += std::string("\"0\",\"norm_backward_staged_kernel\",\"") + name + "\",\"\",\"" + value + "\"\n";
      };
      row("dram__throughput.avg.pct_of_peak_sustained_elapsed", "24.5");
      row("sm__throughput.avg.pct_of_peak_sustained_elapsed", "31.0");
      row("sm__warps_active.avg.pct_of_peak_sustained_active", "12.4");
      row("gpu__time_duration.sum", "300000");
      if (metrics.find("registers") != std::string::npos) row("launch__registers_per_thread", "128");
      return r;
    }
    if (tool == "nvidia-smi") {
      r.output = "9.0, NVIDIA H100 80GB HBM3\n";
    } else if (tool == "nvcc") {
      const bool variant = std::any_of(argv.begin(), argv.end(), [](const std::string& a) { return a.ends_with("variant.cu"); });
      r.output = variant ? ptxas_log(knobs_in(fs::path(after("-I")) / "rms_norm/tuning.h"), false)
                         : ptxas_log(knobs_in(tree / rms().tuning), true);
    } else if (tool == "cmake") {
      if (has("--build")) {  // the "build": liger-bench remembers the work tree's knobs
        ++builds;
        const fs::path build = after("--build");
        const fs::path tuning = build.parent_path() / rms().tuning;
        const KnobSetting k = knobs_in(tuning);
        fs::create_directories(build / "benchmarks");
        fs::create_directories(build / "kernels");
        // A build of the de-tuned table (DetunedTree) runs its own launch shape slowly.
        const bool detuned = liger::util::read_file(tuning).find(kDetunedRow) != std::string::npos;
        std::ofstream(build / "benchmarks/liger-bench") << knob_text(rms().code, k) << (detuned ? " detuned" : "");
        std::ofstream(build / "kernels/libliger_kernels.so") << "lib";
      }
    } else if (tool == "ldd") {
      r.output = "\tlibliger_kernels.so => " + (old_rpath ? std::string("/elsewhere/build/kernels") : ld_path) +
                 "/libliger_kernels.so (0x00007f)\n";
    } else if (tool == "kernel_tests") {
      r.output = "[==========] 12 tests ran.\n[  PASSED  ] 12 tests.\n";
    } else if (tool == "liger-bench") {
      if (has("--list")) {
        r.output = "rms_norm backward 4096x16384 bf16\n";
        return r;
      }
      const std::string built = liger::util::read_file(argv[0]);
      const bool naive = built.find("cache_fp32=1") != std::string::npos;
      const bool dw_first = built.find("dw_first=1") != std::string::npos;
      const bool detuned = built.find("detuned") != std::string::npos;
      const bool noisy = noisy_after_v1 && single_runs >= 2 && has("--json-dir");
      auto json_for = [&](const Candidate& c) {
        // The launch shape matters a little; the naive code three times as much.
        double shape = c.empty() && detuned ? 1.25 : 1.0;
        if (c.count("threads_per_block")) shape *= c.at("threads_per_block") == 512 ? 1.0 : 1.08;
        if (c.count("stages")) shape *= c.at("stages") == 1 ? 1.1 : 1.0;
        // One grid point times 0.5% faster than the table's own shape (the empty candidate):
        // inside the 1% spread, so it must not replace a row.
        if (c.count("threads_per_block") && c.at("threads_per_block") == 512 && c.count("stages") && c.at("stages") == 2 &&
            c.count("rows_per_block") && c.at("rows_per_block") == 1)
          shape *= 0.995;
        nlohmann::json j = {{"device", "NVIDIA H100 80GB HBM3"}, {"sm_arch", 90}, {"sm_count", 132},
                            {"copy_gbps", 3000.0}, {"tunables", c.empty() ? "default" : candidate_text(c)}};
        j["results"] = nlohmann::json::array();
        for (const char* shape_label : {"4096x1024", "4096x16384"}) {
          const double base = std::string(shape_label) == "4096x1024" ? 20.0 : 100.0;
          const double bwd = base * (naive ? 3.0 : 1.0) * (dw_first ? 0.998 : 1.0) * shape;
          j["results"].push_back({{"op", "rms_norm"}, {"mode", "backward"}, {"shape", shape_label}, {"dtype", "bf16"},
                                  {"ok", true}, {"runs", 50}, {"median_us", bwd}, {"spread_pct", noisy ? 50.0 : 1.0},
                                  {"copy_fraction", naive ? 0.25 : 0.75}, {"extra_mib", 0.0}, {"min_bytes", base * 1e6}});
          j["results"].push_back({{"op", "rms_norm"}, {"mode", "forward"}, {"shape", shape_label}, {"dtype", "bf16"},
                                  {"ok", true}, {"runs", 50}, {"median_us", base / 2}, {"spread_pct", 1.0},
                                  {"copy_fraction", 0.8}, {"extra_mib", 0.0}});
        }
        return j.dump();
      };
      if (has("--json-dir")) {
        ++batch_processes;
        batch_argvs.push_back(argv);
        int i = 0;
        for (std::size_t a = 0; a + 1 < argv.size(); ++a)
          if (argv[a] == "--candidate") {
            ++batch_candidates;
            candidate_args.push_back(argv[a + 1]);
            const std::string tunables = argv[a + 1].substr(0, argv[a + 1].find('@'));
            std::ofstream(fs::path(after("--json-dir")) / (std::to_string(i++) + ".json")) << json_for(*parse_candidate(tunables));
          }
      } else {
        (ld_path.empty() ? single_runs : abab_runs)++;
        Candidate c;
        for (std::size_t a = 0; a + 1 < argv.size(); ++a)
          if (argv[a] == "--tunable") c.merge(*parse_candidate(argv[a + 1]));
        std::ofstream(after("--json")) << json_for(c);
      }
    } else {
      r.exit_code = 127;
      r.output = "not scripted: " + tool;
    }
    return r;
  }
  bool has_tool(const std::string& name) override { return tools.count(name) > 0; }
};

struct Tree {
  fs::path dir;
  explicit Tree(bool naive = true) {
    dir = fs::temp_directory_path() / ("kperf-naive-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const char* item : {"kernels", "cmake", "CMakeLists.txt"})
      fs::copy(repo() / item, dir / item, fs::copy_options::recursive);
    fs::create_directories(dir / "tests/kernels/gpu");
    fs::copy(repo() / rms().test_file, dir / rms().test_file);
    // The naive start: every row vector kept live in fp32 across the reduction.
    const fs::path tuning = dir / rms().tuning;
    if (naive)
      liger::util::write_file_atomic(tuning, render_knobs(rms().code, liger::util::read_file(tuning), {{"cache_fp32", 1}}));
  }
  ~Tree() { fs::remove_all(dir); }
};

// One kernel-perf run on `tree` through the scripted GPU: the run folder, its staging and the
// stage context the workflow's stages take. The scripted runner is installed for the run's life.
struct ScriptedRun {
  fs::path run;
  liger::engine::Staging staging;
  liger::engine::StageContext ctx;
  ScriptedRun(const fs::path& tree, const std::shared_ptr<ScriptedGpu>& gpu, nlohmann::json input, const char* logger)
      : run(tree / "run"), staging((fs::create_directories(tree / "run" / "input"), tree / "run" / "staging")) {
    gpu->tree = tree;
    set_runner_for_testing(gpu);
    ctx.run_dir = run;
    ctx.input_dir = run / "input";
    ctx.tree_root = tree;
    ctx.input = std::move(input);
    ctx.staging = &staging;
    ctx.log = std::make_shared<spdlog::logger>(logger);
    ctx.quiet = true;
  }
  ~ScriptedRun() { set_runner_for_testing(nullptr); }
};

}  // namespace

TEST(KernelPerfNaiveStart, CodeVariantsRecoverARegisterBoundBackward) {
  Tree tree;
  auto gpu = std::make_shared<ScriptedGpu>();
  ScriptedRun scripted(tree.dir, gpu,
                       {{"op", "rms_norm"}, {"goal", "speed"}, {"mode", "backward"}, {"max_variants", 3}, {"dtype", "bf16"}},
                       "kperf-naive");
  const fs::path& run = scripted.run;
  auto& staging = scripted.staging;
  auto& ctx = scripted.ctx;
  const auto wf = make_workflow();

  // Profile: register-bound, with the compiler's numbers as evidence.
  auto u = wf.understand(ctx);
  ASSERT_TRUE(u.ok()) << (u.hard.empty() ? "" : u.hard[0].summary + u.hard[0].detail);
  const YAML::Node& p = ctx.profile;
  EXPECT_EQ(p["bottleneck"]["class"].as<std::string>(), "register-bound") << p["bottleneck"];
  const std::string case_evidence = p["baseline"]["cases"][0]["evidence"].as<std::string>();
  EXPECT_NE(case_evidence.find("spill_bytes = 720 >= 128"), std::string::npos) << case_evidence;
  EXPECT_EQ(p["code_variants"][0]["spill_bytes"].as<int>(), 720);
  const std::string evidence = p["bottleneck"]["evidence"].as<std::string>();
  // Nsight Compute ran (the extended list refused, the throughput metrics retried) and is cited.
  EXPECT_EQ(gpu->ncu_runs, 2);
  EXPECT_NE(evidence.find("Nsight Compute on backward 4096x16384 bf16: achieved_occupancy_pct = 12.4, dram_pct = 24.5"),
            std::string::npos) << evidence;
  EXPECT_NE(evidence.find("backward 4096x16384 bf16: spill_bytes = 720 >= 128, copy_fraction = 0.25 < 0.8"),
            std::string::npos) << evidence;

  // Optimize.
  auto a = wf.act(ctx);
  ASSERT_TRUE(a.ok()) << (a.hard.empty() ? "" : a.hard[0].summary + a.hard[0].detail);
  const fs::path od = run / "optimization";
  // The launch search ran in batched processes, not one process per candidate, each candidate on
  // the cases of its size classes only, with the search's adaptive measurement.
  EXPECT_GT(gpu->batch_candidates, 3 * gpu->batch_processes) << gpu->batch_processes << " processes";
  for (const auto& arg : gpu->candidate_args) EXPECT_NE(arg.find("@backward/"), std::string::npos) << arg;
  for (const auto& argv : gpu->batch_argvs) {
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--stop-spread-pct"), argv.end());
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--warmup-ms"), argv.end());
  }
  // --mode backward: no forward case is measured in the search.
  for (const auto& arg : gpu->candidate_args) EXPECT_EQ(arg.find("forward/"), std::string::npos) << arg;
  // The table's own launch shape (the incumbent) was measured beside the grid.
  EXPECT_NE(std::find_if(gpu->candidate_args.begin(), gpu->candidate_args.end(),
                         [](const std::string& a) { return a.rfind("@", 0) == 0; }),
            gpu->candidate_args.end());
  // v1 is the launch search (no code change); the code variant that recomputes wins.
  const auto state = nlohmann::json::parse(liger::util::read_file(od / "act.json"));
  std::string winner = state["winner"];
  ASSERT_FALSE(winner.empty()) << state.dump(2);
  const std::string nb = liger::util::read_file(od / winner / "notebook.md");
  EXPECT_NE(nb.find("recompute"), std::string::npos) << nb;
  EXPECT_NE(nb.find("register-bound"), std::string::npos) << "the hypothesis cites the diagnosis";
  EXPECT_NE(nb.find("Prediction (ptxas"), std::string::npos) << nb;
  EXPECT_NE(nb.find("720 bytes spilled"), std::string::npos) << nb;
  EXPECT_NE(nb.find("-using BwdVariant = norm::BwdVariant<0, 1, 0>;"), std::string::npos) << "the source diff";
  EXPECT_NE(nb.find("+using BwdVariant = norm::BwdVariant<0, 0, 0>;"), std::string::npos) << nb;
  ASSERT_EQ(staging.files(), std::vector<std::string>{rms().tuning});
  const std::string staged = liger::util::read_file(staging.path_of(rms().tuning));
  EXPECT_EQ(read_knobs(rms().code, staged)->at("cache_fp32"), 0);

  // Apply (the engine's job) and Finalize: the A/B interleaved rounds confirm the win.
  liger::util::write_file_atomic(tree.dir / rms().tuning, staged);
  auto v = wf.verify(ctx);
  ASSERT_TRUE(v.ok()) << (v.hard.empty() ? "" : v.hard[0].summary + v.hard[0].detail);
  EXPECT_EQ(gpu->abab_runs, 11) << "5 rounds of A and B, and the original's benchmark, from snapshots";
  EXPECT_FALSE(fs::exists(od / "final/build-original.log")) << "the original comes from Optimize's v0 snapshot";
  EXPECT_TRUE(fs::exists(od / "v0-build/liger-bench"));
  const std::string held = liger::util::read_file(od / "final/interleaved.md");
  EXPECT_NE(held.find("5 rounds A/B interleaved: 2 target case(s) faster and 0 slower"), std::string::npos) << held;
  EXPECT_NE(liger::util::read_file(od / "final/report.md").find("Wins that hold"), std::string::npos);
  // Where the time went: every stage's phases, in the report and in the variants' notebooks.
  const std::string report = liger::util::read_file(od / "final/report.md");
  for (const char* phase : {"## Where the time went", "| profile | baseline v0 benchmark |", "| optimize | v1 search: coarse grid |",
                            "| finalize | A/B interleaved re-measurement |", "Totals: profile"})
    EXPECT_NE(report.find(phase), std::string::npos) << phase;
  EXPECT_TRUE(fs::exists(od / "timings.md"));
  EXPECT_NE(liger::util::read_file(od / "v1/notebook.md").find("time: v1 search: coarse grid"), std::string::npos);
  EXPECT_NE(liger::util::read_file(od / winner / "notebook.md").find("time: build"), std::string::npos);
  // The A/B re-measured the target pass only.
  EXPECT_NE(liger::util::read_file(od / "final/abab/A0.json.log").find("--mode backward"), std::string::npos);
}

TEST(KernelPerfNaiveStart, FromTunedDefaultsASearchThatBeatsNoRowBuildsNothing) {
  // The scripted GPU times the table's own launch shape as fast as the best grid point: no row may
  // change (nothing is faster outside the spread), so v1 is NO CHANGE without a build or benchmark.
  Tree tree(false);
  auto gpu = std::make_shared<ScriptedGpu>();
  ScriptedRun scripted(tree.dir, gpu,
                       {{"op", "rms_norm"}, {"goal", "speed"}, {"max_variants", 1}, {"dtype", "bf16"}},
                       "kperf-tuned");
  const fs::path& run = scripted.run;
  auto& staging = scripted.staging;
  auto& ctx = scripted.ctx;
  const auto wf = make_workflow();
  ASSERT_TRUE(wf.understand(ctx).ok());
  const int builds_before = gpu->builds;
  ASSERT_TRUE(wf.act(ctx).ok());
  const fs::path od = run / "optimization";
  const auto state = nlohmann::json::parse(liger::util::read_file(od / "act.json"));
  EXPECT_EQ(state["winner"], "");
  EXPECT_EQ(state["variants"][0]["verdict"], "NO CHANGE") << state.dump(2);
  EXPECT_EQ(gpu->builds, builds_before + 1) << "only the work tree's return to v0 (a no-op build)";
  EXPECT_FALSE(fs::exists(od / "v1/bench.json"));
  const std::string nb = liger::util::read_file(od / "v1/notebook.md");
  EXPECT_NE(nb.find("kept (nothing beat the current best's launch shape outside the spread)"), std::string::npos) << nb;
  EXPECT_TRUE(staging.files().empty());
}

TEST(KernelPerfNaiveStart, WithoutUsableSnapshotsTheOriginalIsRebuiltAndTheRoundsSaySo) {
  Tree tree;
  auto gpu = std::make_shared<ScriptedGpu>();
  gpu->old_rpath = true;
  ScriptedRun scripted(tree.dir, gpu,
                       {{"op", "rms_norm"}, {"goal", "speed"}, {"mode", "backward"}, {"max_variants", 2}, {"dtype", "bf16"}},
                       "kperf-naive-rpath");
  const fs::path& run = scripted.run;
  auto& staging = scripted.staging;
  auto& ctx = scripted.ctx;
  const auto wf = make_workflow();
  ASSERT_TRUE(wf.understand(ctx).ok());
  ASSERT_TRUE(wf.act(ctx).ok());
  ASSERT_EQ(staging.files().size(), 1u);
  liger::util::write_file_atomic(tree.dir / rms().tuning, liger::util::read_file(staging.path_of(rms().tuning)));
  ASSERT_TRUE(wf.verify(ctx).ok());
  const fs::path fd = run / "optimization/final";
  EXPECT_TRUE(fs::exists(fd / "build-original.log")) << "no usable v0 snapshot: the original is rebuilt";
  EXPECT_EQ(gpu->abab_runs, 0);
  const std::string report = liger::util::read_file(fd / "report.md");
  EXPECT_NE(report.find("not run: the snapshot"), std::string::npos) << report.substr(report.find("Wins that hold"));
  EXPECT_NE(report.find("does not load its own kernel library"), std::string::npos);
  // The work tree ends with what was applied, not the rebuilt original.
  EXPECT_EQ(read_knobs(rms().code, liger::util::read_file(run / "optimization/work" / rms().tuning))->at("cache_fp32"), 0);
}

TEST(KernelPerfNaiveStart, TheNeighbourSearchRefinesTheAcceptedRowsNotTheStartTable) {
  // A de-tuned start: v1's launch search wins; then every measurement is noisy, so the finer
  // search's points cannot beat the incumbent outside the spread. v2 must keep v1's accepted rows
  // (the same table as the current best: nothing to build), never rebuild the de-tuned row.
  Tree tree(false);
  const fs::path tuning = tree.dir / rms().tuning;
  std::string text = liger::util::read_file(tuning);
  ASSERT_NE(text.find(kTunedRow), std::string::npos) << "the test's row is gone from " << rms().tuning;
  text.replace(text.find(kTunedRow), std::string(kTunedRow).size(), kDetunedRow);
  liger::util::write_file_atomic(tuning, text);
  auto gpu = std::make_shared<ScriptedGpu>();
  gpu->noisy_after_v1 = true;
  ScriptedRun scripted(tree.dir, gpu,
                       {{"op", "rms_norm"}, {"goal", "speed"}, {"mode", "backward"}, {"max_variants", 2}, {"dtype", "bf16"}},
                       "kperf-neighbour");
  const fs::path& run = scripted.run;
  auto& staging = scripted.staging;
  auto& ctx = scripted.ctx;
  const auto wf = make_workflow();
  ASSERT_TRUE(wf.understand(ctx).ok());
  ASSERT_TRUE(wf.act(ctx).ok());
  const auto state = nlohmann::json::parse(liger::util::read_file(run / "optimization/act.json"));
  ASSERT_GE(state["variants"].size(), 2u) << state.dump(2);
  EXPECT_EQ(state["variants"][0]["verdict"], "ACCEPTED") << state.dump(2);
  EXPECT_EQ(state["winner"], "v1") << state.dump(2);
  const std::string comparison = liger::util::read_file(run / "optimization/comparison.md");
  EXPECT_NE(comparison.find("(same table as the current best)"), std::string::npos) << comparison;
  EXPECT_EQ(state["variants"][1]["verdict"], "NO CHANGE") << state.dump(2);
  ASSERT_EQ(staging.files(), std::vector<std::string>{rms().tuning});
  EXPECT_EQ(liger::util::read_file(staging.path_of(rms().tuning)).find(kDetunedRow), std::string::npos)
      << "the staged table still holds the de-tuned row";
}
