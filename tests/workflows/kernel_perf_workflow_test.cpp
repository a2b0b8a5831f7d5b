// kernel-perf: input parsing, notebooks and comparison.md, and the stages driven through a fake
// tool runner that replays recorded outputs (a real nvcc -Xptxas -v log; no GPU).
#include <gtest/gtest.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <unistd.h>

#include "liger/error.h"
#include "liger/profile.h"
#include "liger/util.h"
#include "workflows/kernel_perf/kernel_perf.h"

namespace fs = std::filesystem;
using namespace liger::kernel_perf;

namespace {

fs::path repo() { return fs::path(LIGER_SOURCE_DIR); }
fs::path fixtures() { return repo() / "tests/workflows/fixtures/kernel_perf"; }
fs::path templates() { return repo() / "templates/kernel_perf"; }

class FakeRunner : public Runner {
 public:
  std::set<std::string> tools;
  std::map<std::string, std::string> outputs;  // argv[0] -> output
  std::map<std::string, std::string> by_file;  // an argument's file name -> output (wins over argv[0])
  std::vector<std::vector<std::string>> calls;
  liger::toolchain::ProcessResult run(const std::vector<std::string>& argv, const fs::path&, std::chrono::seconds) override {
    calls.push_back(argv);
    liger::toolchain::ProcessResult r;
    for (const auto& a : argv)
      if (auto f = by_file.find(fs::path(a).filename().string()); f != by_file.end()) {
        r.exit_code = 0;
        r.output = f->second;
        return r;
      }
    auto it = outputs.find(argv[0]);
    r.exit_code = it == outputs.end() ? 127 : 0;
    r.output = it == outputs.end() ? "not found" : it->second;
    return r;
  }
  bool has_tool(const std::string& name) override { return tools.count(name) > 0; }
};

struct RunDir {
  fs::path dir;
  RunDir() {
    dir = fs::temp_directory_path() / ("kperf-test-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    fs::remove_all(dir);
    fs::create_directories(dir / "input");
  }
  ~RunDir() { fs::remove_all(dir); }
};

liger::engine::StageContext make_ctx(const RunDir& run, nlohmann::json input, liger::engine::Staging* staging) {
  liger::engine::StageContext ctx;
  ctx.run_dir = run.dir;
  ctx.input_dir = run.dir / "input";
  ctx.tree_root = repo();
  ctx.input = std::move(input);
  ctx.staging = staging;
  ctx.log = std::make_shared<spdlog::logger>("kperf-test");
  ctx.quiet = true;
  return ctx;
}

}  // namespace

// ---------------------------------------------------------------- input

TEST(KernelPerfInput, DefaultsAndCliAliases) {
  KernelPerfInput in = parse_kernel_perf_input({{"op", "swiglu"}});
  EXPECT_EQ(in.goal, "balanced");
  EXPECT_EQ(in.max_variants, 8);
  EXPECT_FALSE(in.profile_only);
  EXPECT_TRUE(in.start_tunables.empty());
  EXPECT_TRUE(in.goal_spec().target_modes.empty());
  // The CLI's current keys: kernel, target, variants.
  in = parse_kernel_perf_input({{"kernel", "rms_norm"}, {"goal", "speed"}, {"target", "1.3x"}, {"variants", 3}});
  EXPECT_EQ(in.op, "rms_norm");
  EXPECT_EQ(in.target_metric, "1.3x");
  EXPECT_EQ(in.max_variants, 3);
  in = parse_kernel_perf_input({{"op", "swiglu"},
                                {"mode", "forward"},
                                {"target_gpu", "hopper"},
                                {"profile_only", true},
                                {"start_tunables", "threads_per_block=64,vector_bytes=4"}});
  EXPECT_EQ(in.goal_spec().target_modes, (std::set<std::string>{"forward"}));
  EXPECT_TRUE(in.profile_only);
  EXPECT_EQ(candidate_text(in.start_tunables), "threads_per_block=64 vector_bytes=4");
  EXPECT_EQ(parse_kernel_perf_input(in.to_json()).start_tunables, in.start_tunables);
  in = parse_kernel_perf_input({{"op", "swiglu"}, {"start_tunables", {{"threads_per_block", 32}}}});
  EXPECT_EQ(in.start_tunables.at("threads_per_block"), 32);
}

TEST(KernelPerfInput, BadValuesAreUsageErrors) {
  auto usage = [](const nlohmann::json& j) {
    try {
      parse_kernel_perf_input(j);
    } catch (const liger::Error& e) {
      return e.kind() == liger::ErrorKind::Usage;
    }
    return false;
  };
  EXPECT_TRUE(usage(nlohmann::json::object()));
  EXPECT_TRUE(usage({{"op", "swiglu"}, {"goal", "fastest"}}));
  EXPECT_TRUE(usage({{"op", "swiglu"}, {"mode", "sideways"}}));
  EXPECT_TRUE(usage({{"op", "swiglu"}, {"target_gpu", "voodoo"}}));
  EXPECT_TRUE(usage({{"op", "swiglu"}, {"target_metric", "quick"}}));
  EXPECT_TRUE(usage({{"op", "swiglu"}, {"max_variants", 0}}));
  EXPECT_TRUE(usage({{"op", "swiglu"}, {"start_tunables", "warps=4"}}));
}

// ---------------------------------------------------------------- notebooks and comparison

TEST(KernelPerfNotebook, PlannedAndMeasuredNotebooksHaveEverySection) {
  Notebook nb;
  nb.op = "swiglu";
  nb.variant = "v2";
  nb.title = "per-size-class table entries";
  nb.status = "planned";
  nb.hypothesis = "small sizes prefer 128 threads";
  nb.change = "new row (size <= 16777216) <- threads_per_block=128 vector_bytes=16";
  nb.change_detail = "--- a/x\n+++ b/x\n";
  nb.expected = "the small size improves";
  nb.prior = {{"v1 ACCEPTED", "threads_per_block=256 vector_bytes=16 wins the big class"}};
  const std::string planned = render_notebook(templates(), nb);
  for (const char* section : {"# swiglu v2", "## Prior notebooks read", "## Hypothesis", "## Change", "## Expected outcome",
                              "## Smoke test", "## Results per size", "## Guardrails", "## Verdict", "## Learnings"})
    EXPECT_NE(planned.find(section), std::string::npos) << section;
  EXPECT_NE(planned.find("- v1 (ACCEPTED): threads_per_block=256"), std::string::npos) << planned;
  EXPECT_NE(planned.find("(pending: not run yet)"), std::string::npos);
  EXPECT_NE(planned.find("size <= 16777216"), std::string::npos);  // not HTML-escaped
  EXPECT_TRUE(notebook_learnings(planned).empty());

  nb.status = "measured";
  nb.smoke = "passed (12 tests)";
  nb.verdict = judge(parse_bench_json(liger::util::read_file(fixtures() / "bench_swiglu_v0.json")),
                     parse_bench_json(liger::util::read_file(fixtures() / "bench_swiglu_tuned.json")), Goal{"speed", {}});
  nb.learnings = {"128 threads wins below 16M elements", "new best: v2"};
  const std::string measured = render_notebook(templates(), nb);
  EXPECT_NE(measured.find("| forward 16384x14336 bf16 | 900.00 | 480.00 | -46.67 |"), std::string::npos) << measured;
  EXPECT_NE(measured.find("| memory (non-target) not > 5% worse |"), std::string::npos);
  EXPECT_EQ(notebook_verdict(measured), "ACCEPTED");
  EXPECT_EQ(notebook_learnings(measured), nb.learnings);
}

TEST(KernelPerfComparison, ListsEveryVariantRejectedOnesToo) {
  ComparisonInfo info;
  info.op = "swiglu";
  info.goal = "speed";
  info.modes = "forward, backward, full";
  info.device = "NVIDIA H100";
  info.sm = 90;
  info.start = "threads_per_block=64 vector_bytes=4";
  info.winner = "v1";
  info.stop_reason = "two variants in a row improved < 1%";
  info.variants = {{"v1", "launch-parameter search", "row 3 <- threads_per_block=256", "passed", "ACCEPTED", "4 better", 1.9, 0},
                   {"v2", "per-size-class table entries", "new row", "FAILED (1 FAILED)", "REJECTED", "discarded",
                    std::numeric_limits<double>::quiet_NaN(), 0},
                   {"v3", "finer neighbour search", "row 3 <- threads_per_block=224", "passed", "MIXED", "1 worse", 1.905, 0}};
  const std::string md = render_comparison(templates(), info);
  EXPECT_NE(md.find("| v1 | launch-parameter search |"), std::string::npos);
  // Never benchmarked: no speed-up is invented for it.
  EXPECT_NE(md.find("| v2 | per-size-class table entries | new row | FAILED (1 FAILED) | REJECTED | n/a |"), std::string::npos) << md;
  EXPECT_NE(md.find("| v3 |"), std::string::npos);
  EXPECT_NE(md.find("1.900x"), std::string::npos);
  EXPECT_NE(md.find("Winner: v1"), std::string::npos);
  EXPECT_NE(md.find("Stopped because: two variants"), std::string::npos);
}

TEST(KernelPerfNotebook, AFinerSearchThatKeepsTheBestTableIsNoChange) {
  Notebook nb;
  nb.op = "swiglu";
  nb.variant = "v2";
  nb.title = "finer neighbour search";
  nb.status = "confirmed the current best";
  nb.hypothesis = "a finer step finds a small further gain";
  nb.change = "row 3 <- threads_per_block=256 vector_bytes=16; (same table as the current best)";
  nb.smoke = "not needed (same table as v1)";
  nb.learnings = {"every untried neighbour was measured in the search and none beat v1's launch shapes"};
  const std::string md = render_notebook(templates(), nb);
  EXPECT_NE(md.find("NO CHANGE: not needed (same table as v1)"), std::string::npos) << md;
  EXPECT_EQ(md.find("(pending)\n\n## Learnings"), std::string::npos) << "the verdict is not left pending";
}

// ---------------------------------------------------------------- stages with recorded tools

TEST(KernelPerfStages, ProfileOnlyWithoutGpuProducesTheCompilerReport) {
  auto fake = std::make_shared<FakeRunner>();
  fake->tools = {"nvcc"};
  fake->outputs["nvcc"] = liger::util::read_file(fixtures() / "ptxas_rms_norm_sm90.log");
  fake->by_file["variant.cu"] =
      "ptxas info    : Compiling entry function "
      "'_ZN5liger7kernels4norm27norm_backward_staged_kernelILNS1_4KindE0E13__nv_bfloat16S4_Li8ELi4ENS1_10BwdVariantILi0ELi0ELi0EEEEEvNS1_9BwdParamsE' for 'sm_90'\n"
      "ptxas info    : Function properties for x\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 128 registers, used 1 barriers\n";
  set_runner_for_testing(fake);
  RunDir run;
  liger::engine::Staging staging(run.dir / "staging");
  auto ctx = make_ctx(run, {{"op", "rms_norm"}, {"profile_only", true}, {"target_gpu", "hopper"}}, &staging);
  const auto wf = make_workflow();
  ASSERT_TRUE(wf.has_all_stages());
  EXPECT_EQ(wf.name, "kernel-perf");
  auto r = wf.understand(ctx);
  ASSERT_TRUE(r.ok()) << (r.hard.empty() ? "" : r.hard[0].summary + r.hard[0].detail);
  // nvcc ran on the op's source for sm_90 with -Xptxas -v, then once per code variant setting.
  ASSERT_GE(fake->calls.size(), 2u);
  const auto& argv = fake->calls[0];
  EXPECT_NE(std::find(argv.begin(), argv.end(), "-arch=sm_90"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "-v"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), (repo() / "kernels/src/rms_norm/rms_norm.cu").string()), argv.end());
  const YAML::Node& p = ctx.profile;
  EXPECT_EQ(p["architecture"]["sm"].as<int>(), 90);
  EXPECT_EQ(p["architecture"]["family"].as<std::string>(), "hopper");
  EXPECT_EQ(p["compiler_resources"]["kernels"].size(), 48u);
  EXPECT_EQ(p["compiler_resources"]["max_registers"].as<int>(), 128);
  // The fixture's log has no spills in the variant instantiation: no compile-time diagnosis.
  EXPECT_EQ(p["bottleneck"]["class"].as<std::string>(), "unknown");
  // The code variants are reported with the compiler's numbers (the fixture's first kernel).
  ASSERT_GE(p["code_variants"].size(), 3u);
  EXPECT_EQ(p["code_variants"][0]["variant"].as<std::string>(), "current");
  EXPECT_EQ(p["code_variants"][0]["line"].as<std::string>(), "using BwdVariant = norm::BwdVariant<0, 0, 0>;");
  EXPECT_TRUE(p["code_variants"][0]["compiled"].as<bool>());
  EXPECT_EQ(fake->calls.size(), 1 + p["code_variants"].size());
  const auto& variant_argv = fake->calls[1];
  EXPECT_NE(std::find(variant_argv.begin(), variant_argv.end(), "-gencode=arch=compute_90,code=sm_90"), variant_argv.end());
  EXPECT_EQ(p["strategy_order"][0]["kind"].as<std::string>(), "tunable_search");
  // The snapshot holds the kernel's sources.
  EXPECT_TRUE(fs::exists(run.dir / "input/snapshot/kernels/src/rms_norm/rms_norm.cu"));
  EXPECT_TRUE(fs::exists(run.dir / "input/snapshot/kernels/src/rms_norm/tuning.h"));
  // The profile validates against the workflow's schema.
  const auto schema = liger::profile::Schema::load_file(wf.profile_schema);
  const auto report = schema.validate(liger::profile::parse_yaml(liger::profile::to_yaml(p), "profile.yaml"));
  EXPECT_TRUE(report.ok()) << report.format_errors("profile.yaml");

  // Act and Verify of a profile-only run: no variants, a report with the compiler table.
  EXPECT_TRUE(wf.act(ctx).ok());
  EXPECT_TRUE(staging.files().empty());
  EXPECT_TRUE(wf.verify(ctx).ok());
  const std::string md = liger::util::read_file(run.dir / "optimization/final/report.md");
  EXPECT_NE(md.find("liger::kernels::norm::norm_backward_kernel"), std::string::npos);
  EXPECT_NE(md.find("| 128 |"), std::string::npos);
  EXPECT_NE(md.find("| current | dw_first=0 cache_fp32=0 min_blocks=0 |"), std::string::npos) << md;
  set_runner_for_testing(nullptr);
}

TEST(KernelPerfStages, ProfileOnlyDiagnosesASpillingVariantAsRegisterBound) {
  auto fake = std::make_shared<FakeRunner>();
  fake->tools = {"nvcc"};
  fake->outputs["nvcc"] =
      "ptxas info    : Compiling entry function "
      "'_ZN5liger7kernels4norm27norm_backward_staged_kernelILNS1_4KindE0E13__nv_bfloat16S4_Li8ELi4ENS1_10BwdVariantILi0ELi1ELi0EEEEEvNS1_9BwdParamsE' for 'sm_90'\n"
      "ptxas info    : Function properties for x\n"
      "    352 bytes stack frame, 360 bytes spill stores, 352 bytes spill loads\n"
      "ptxas info    : Used 128 registers, used 1 barriers, 352 bytes cumulative stack size\n";
  set_runner_for_testing(fake);
  RunDir run;
  liger::engine::Staging staging(run.dir / "staging");
  auto ctx = make_ctx(run, {{"op", "rms_norm"}, {"profile_only", true}, {"target_gpu", "hopper"}}, &staging);
  auto r = make_workflow().understand(ctx);
  ASSERT_TRUE(r.ok());
  const YAML::Node& p = ctx.profile;
  EXPECT_EQ(p["bottleneck"]["class"].as<std::string>(), "register-bound");
  const std::string evidence = p["bottleneck"]["evidence"].as<std::string>();
  EXPECT_NE(evidence.find("128 registers"), std::string::npos) << evidence;
  EXPECT_NE(evidence.find("712 bytes"), std::string::npos) << evidence;
  bool code_variant = false;
  for (const auto& s : p["strategy_order"]) code_variant |= s["kind"].as<std::string>() == "code_variant";
  EXPECT_TRUE(code_variant) << "a register-bound profile lists code variants";
  set_runner_for_testing(nullptr);
}

TEST(KernelPerfStages, ProfileOnlyListsRopesHeadsPerThreadVariants) {
  // `kernel-perf rope --profile-only`: the shipped line and each catalogue setting of RoPE's
  // knobs compiled once, heads_per_thread among them, and the report's compiler table lists them.
  auto fake = std::make_shared<FakeRunner>();
  fake->tools = {"nvcc"};
  const std::string log =
      "ptxas info    : Compiling entry function "
      "'_ZN5liger7kernels4rope43_GLOBAL__N__f7e4fe69_10_variant_cu_039b9b8611rope_kernelI13__nv_bfloat16Li8ELi2ENS1_11RopeVariantILi1ELi0ELi1EEEEEvNS2_6ParamsE' for 'sm_90'\n"
      "ptxas info    : Function properties for x\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 88 registers, used 0 barriers\n";
  fake->outputs["nvcc"] = log;
  fake->by_file["variant.cu"] = log;
  set_runner_for_testing(fake);
  RunDir run;
  liger::engine::Staging staging(run.dir / "staging");
  auto ctx = make_ctx(run, {{"op", "rope"}, {"profile_only", true}, {"target_gpu", "hopper"}}, &staging);
  ASSERT_TRUE(make_workflow().understand(ctx).ok());
  const YAML::Node& p = ctx.profile;
  std::map<std::string, std::string> lines, knobs;
  for (const auto& v : p["code_variants"]) {
    lines[v["variant"].as<std::string>()] = v["line"].as<std::string>();
    knobs[v["variant"].as<std::string>()] = v["knobs"].as<std::string>();
  }
  EXPECT_EQ(lines["current"], "using Variant = RopeVariant<1, 0, 1>;");
  EXPECT_EQ(knobs["current"], "loads_first=1 min_blocks=0 heads_per_thread=1");
  EXPECT_EQ(lines["two_heads_per_thread"], "using Variant = RopeVariant<1, 0, 2>;");
  EXPECT_EQ(lines["four_heads_per_thread"], "using Variant = RopeVariant<1, 0, 4>;");
  // Each setting's unit compiled its own rendered header.
  const fs::path four = run.dir / "optimization/profile/variants/four_heads_per_thread/rope/tuning.h";
  ASSERT_TRUE(fs::exists(four)) << four;
  EXPECT_NE(liger::util::read_file(four).find("using Variant = RopeVariant<1, 0, 4>;"), std::string::npos);
  EXPECT_TRUE(make_workflow().act(ctx).ok());
  EXPECT_TRUE(make_workflow().verify(ctx).ok());
  const std::string md = liger::util::read_file(run.dir / "optimization/final/report.md");
  EXPECT_NE(md.find("| four_heads_per_thread | loads_first=1 min_blocks=0 heads_per_thread=4 |"), std::string::npos) << md;
  set_runner_for_testing(nullptr);
}

TEST(KernelPerfStages, NoGpuWithoutProfileOnlyIsAClearError) {
  auto fake = std::make_shared<FakeRunner>();
  fake->tools = {"nvcc", "nvidia-smi"};
  fake->outputs["nvidia-smi"] = "";  // nvidia-smi present but lists no GPU
  set_runner_for_testing(fake);
  RunDir run;
  liger::engine::Staging staging(run.dir / "staging");
  auto ctx = make_ctx(run, {{"op", "swiglu"}}, &staging);
  try {
    make_workflow().understand(ctx);
    ADD_FAILURE() << "expected an error";
  } catch (const liger::Error& e) {
    EXPECT_EQ(e.kind(), liger::ErrorKind::Toolchain);
    EXPECT_NE(std::string(e.hint()).find("--profile-only"), std::string::npos);
  }
  // An op the library does not have.
  auto bad = make_ctx(run, {{"op", "flash_attention"}}, &staging);
  EXPECT_THROW(make_workflow().understand(bad), liger::Error);
  set_runner_for_testing(nullptr);
}

TEST(KernelPerfStages, ProfileOnlyIgnoresAFewSpilledBytes) {
  // cross-entropy's shipped row kernel keeps 16 bytes in a stack slot: not register-bound.
  auto fake = std::make_shared<FakeRunner>();
  fake->tools = {"nvcc"};
  fake->outputs["nvcc"] =
      "ptxas info    : Compiling entry function "
      "'_ZN5liger7kernels2ce14ce_rows_kernelI13__nv_bfloat16Li8ELi2ENS1_9CeVariantILi0ELi0EEEEEvNS1_7RowArgsE' for 'sm_90'\n"
      "ptxas info    : Function properties for x\n"
      "    8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 64 registers, used 1 barriers, 8 bytes cumulative stack size\n";
  set_runner_for_testing(fake);
  RunDir run;
  liger::engine::Staging staging(run.dir / "staging");
  auto ctx = make_ctx(run, {{"op", "cross_entropy"}, {"profile_only", true}, {"target_gpu", "hopper"}}, &staging);
  ASSERT_TRUE(make_workflow().understand(ctx).ok());
  EXPECT_EQ(ctx.profile["code_variants"][0]["spill_bytes"].as<int>(), 16);
  EXPECT_EQ(ctx.profile["bottleneck"]["class"].as<std::string>(), "unknown");
  set_runner_for_testing(nullptr);
}
