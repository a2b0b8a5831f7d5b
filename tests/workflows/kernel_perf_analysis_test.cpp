// kernel-perf analysers on recorded tool output: ptxas / cuobjdump / ncu / liger-bench parsing,
// occupancy arithmetic (hand-computed), classification rules, search space + pruning, guardrail
// verdicts, target metrics and stop rules.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "liger/error.h"
#include "liger/util.h"
#include "workflows/kernel_perf/analysis.h"

namespace fs = std::filesystem;
using namespace liger::kernel_perf;

namespace {

fs::path fixtures() { return fs::path(LIGER_SOURCE_DIR) / "tests/workflows/fixtures/kernel_perf"; }
fs::path skills() { return fs::path(LIGER_SOURCE_DIR) / "skills/kernel_perf"; }

const ArchLimits& h100() {
  static const auto archs = load_architectures(skills() / "architectures.yaml");
  return *find_arch(archs, 90);
}

}  // namespace

// ---------------------------------------------------------------- ptxas

TEST(KernelPerfPtxas, ParsesRealNvccLogOfRmsNorm) {
  const auto kernels = parse_ptxas_log(liger::util::read_file(fixtures() / "ptxas_rms_norm_sm90.log"));
  ASSERT_EQ(kernels.size(), 48u);  // 48 "Compiling entry function" blocks in the log
  const auto& first = kernels.front();
  EXPECT_EQ(first.arch, "sm_90");
  EXPECT_EQ(first.registers, 128);
  EXPECT_EQ(first.barriers, 1);
  EXPECT_EQ(first.spill_store_bytes, 0);
  EXPECT_EQ(first.stack_frame_bytes, 0);
  // Demangled: the template kernel's readable name.
  EXPECT_NE(first.name.find("liger::kernels::norm::norm_backward_kernel"), std::string::npos) << first.name;
  EXPECT_NE(first.name.find("__nv_bfloat16"), std::string::npos);
  int with_smem = 0;
  for (const auto& k : kernels) {
    EXPECT_GT(k.registers, 0) << k.name;
    if (k.smem_bytes == 2112) ++with_smem;
  }
  EXPECT_GT(with_smem, 0);  // "Used 26 registers, used 1 barriers, 2112 bytes smem"
}

TEST(KernelPerfPtxas, ParsesSpillsStackAndConstantBanks) {
  const std::string log =
      "ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_80'\n"
      "ptxas info    : Function properties for _Z3fooPf\n"
      "    24 bytes stack frame, 20 bytes spill stores, 16 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 0 barriers, 4096 bytes smem, 400 bytes cmem[0], 16 bytes cmem[2]\n"
      "ptxas info    : Compiling entry function '_Z3barv' for 'sm_80'\n"
      "ptxas info    : Function properties for _Z3barv\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 8 registers, 352 bytes cmem[0]\n";
  const auto k = parse_ptxas_log(log);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].name, "foo(float*)");
  EXPECT_EQ(k[0].stack_frame_bytes, 24);
  EXPECT_EQ(k[0].spill_store_bytes, 20);
  EXPECT_EQ(k[0].spill_load_bytes, 16);
  EXPECT_TRUE(k[0].spills());
  EXPECT_EQ(k[0].registers, 255);
  EXPECT_EQ(k[0].smem_bytes, 4096);
  EXPECT_EQ(k[0].cmem_bytes, 416);
  EXPECT_EQ(k[1].name, "bar()");
  EXPECT_EQ(k[1].registers, 8);
  EXPECT_FALSE(k[1].spills());
  EXPECT_EQ(k[1].cmem_bytes, 352);
}

TEST(KernelPerfPtxas, ParsesCuobjdumpResourceUsage) {
  const std::string text =
      "Resource usage:\n"
      " Common:\n  GLOBAL:0\n"
      " Function _Z3fooPf:\n"
      "  REG:40 STACK:8 SHARED:1024 LOCAL:8 CONSTANT[0]:368 TEXTURE:0 SURFACE:0 SAMPLER:0\n";
  const auto k = parse_cuobjdump_resource_usage(text);
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0].name, "foo(float*)");
  EXPECT_EQ(k[0].registers, 40);
  EXPECT_EQ(k[0].stack_frame_bytes, 8);
  EXPECT_EQ(k[0].smem_bytes, 1024);
  EXPECT_EQ(k[0].cmem_bytes, 368);
}

// ---------------------------------------------------------------- architectures and occupancy

TEST(KernelPerfArch, TargetGpuNamesAndComputeCap) {
  EXPECT_EQ(parse_target_gpu("hopper"), 90);
  EXPECT_EQ(parse_target_gpu("Ampere"), 80);
  EXPECT_EQ(parse_target_gpu("blackwell"), 100);
  EXPECT_EQ(parse_target_gpu("sm_90"), 90);
  EXPECT_EQ(parse_target_gpu("sm90a"), 90);
  EXPECT_EQ(parse_target_gpu("8.6"), 86);
  EXPECT_EQ(parse_target_gpu("H100"), 90);
  EXPECT_FALSE(parse_target_gpu("potato"));
  EXPECT_EQ(parse_compute_cap("9.0, NVIDIA H100 80GB HBM3\n"), 90);
  EXPECT_EQ(parse_compute_cap("\n8.0\n8.0\n"), 80);
  EXPECT_FALSE(parse_compute_cap("No devices were found"));
  const auto archs = load_architectures(skills() / "architectures.yaml");
  EXPECT_EQ(find_arch(archs, 90)->family, "hopper");
  EXPECT_EQ(find_arch(archs, 87)->sm, 86);  // closest lower of the same major
  EXPECT_EQ(find_arch(archs, 100)->family, "blackwell");
  EXPECT_EQ(find_arch(archs, 70), nullptr);
}

TEST(KernelPerfOccupancy, HandComputedHopperCases) {
  const ArchLimits& a = h100();
  // 128 regs x 32 = 4096 regs/warp -> 16 warps by registers; 8 warps per block -> 2 blocks = 16/64 warps.
  Occupancy o = estimate_occupancy(a, 128, 0, 256);
  EXPECT_EQ(o.blocks_by_registers, 2);
  EXPECT_EQ(o.blocks_per_sm, 2);
  EXPECT_EQ(o.active_warps, 16);
  EXPECT_DOUBLE_EQ(o.fraction, 0.25);
  EXPECT_EQ(o.limiter, "registers");
  // 32 regs -> 64 warps by registers; 2048/256 = 8 blocks by threads: full occupancy.
  o = estimate_occupancy(a, 32, 0, 256);
  EXPECT_EQ(o.blocks_per_sm, 8);
  EXPECT_DOUBLE_EQ(o.fraction, 1.0);
  EXPECT_EQ(o.limiter, "threads");
  // 26 regs round up to 1024 regs/warp; 2112 B smem -> 2176 + 1024 reserved = 3200 B -> 72 blocks.
  o = estimate_occupancy(a, 26, 2112, 128);
  EXPECT_EQ(o.blocks_by_smem, 72);
  EXPECT_EQ(o.blocks_by_registers, 16);
  EXPECT_EQ(o.blocks_per_sm, 16);
  EXPECT_DOUBLE_EQ(o.fraction, 1.0);
  // One-warp blocks: the 32-blocks-per-SM limit binds at 32 of 64 warps.
  o = estimate_occupancy(a, 32, 0, 32);
  EXPECT_EQ(o.blocks_per_sm, 32);
  EXPECT_DOUBLE_EQ(o.fraction, 0.5);
  EXPECT_EQ(o.limiter, "blocks");
  // 100000 B smem -> 100096 + 1024 = 101120 B per block -> 2 blocks of 8 warps.
  o = estimate_occupancy(a, 32, 100000, 256);
  EXPECT_EQ(o.blocks_by_smem, 2);
  EXPECT_DOUBLE_EQ(o.fraction, 0.25);
  EXPECT_EQ(o.limiter, "shared memory");
  // 255 regs -> 8192 regs/warp: 1024 threads need 262144 registers: cannot launch; 256 can.
  o = estimate_occupancy(a, 255, 0, 1024);
  EXPECT_FALSE(o.launchable);
  EXPECT_EQ(max_launchable_threads(a, 255, 0), 256);
  EXPECT_EQ(max_launchable_threads(a, 32, 0), 1024);
  EXPECT_FALSE(estimate_occupancy(a, 32, 0, 2048).launchable);
}

TEST(KernelPerfOccupancy, AmpereConsumerHasFewerWarps) {
  const auto archs = load_architectures(skills() / "architectures.yaml");
  const ArchLimits& a86 = *find_arch(archs, 86);
  // 48 warps max, 16 blocks max: 32 regs x 256 threads -> 1536/256 = 6 blocks = 48 warps = 100%.
  Occupancy o = estimate_occupancy(a86, 32, 0, 256);
  EXPECT_EQ(o.blocks_per_sm, 6);
  EXPECT_DOUBLE_EQ(o.fraction, 1.0);
  // 64-thread blocks: the 16-block limit -> 32 of 48 warps.
  o = estimate_occupancy(a86, 32, 0, 64);
  EXPECT_EQ(o.blocks_per_sm, 16);
  EXPECT_NEAR(o.fraction, 32.0 / 48.0, 1e-12);
}

// ---------------------------------------------------------------- ncu

TEST(KernelPerfNcu, ParsesCsvWithProfLinesAndThousandsSeparators) {
  const NcuMetrics m = parse_ncu_csv(liger::util::read_file(fixtures() / "ncu_swiglu.csv"));
  EXPECT_EQ(m.kernels, 2);
  EXPECT_TRUE(m.kernel_names.count("glu_forward_kernel"));
  EXPECT_NEAR(m.mean.at("dram__throughput.avg.pct_of_peak_sustained_elapsed"), 88.0, 1e-9);
  EXPECT_NEAR(m.mean.at("gpu__time_duration.sum"), 1011.5, 1e-9);
  EXPECT_NEAR(m.max.at("sm__warps_active.avg.pct_of_peak_sustained_active"), 73.0, 1e-9);
  const auto r = m.rule_metrics();
  EXPECT_NEAR(r.at("dram_pct"), 88.0, 1e-9);
  EXPECT_NEAR(r.at("sm_pct"), 31.5, 1e-9);
  EXPECT_NEAR(r.at("achieved_occupancy_pct"), 72.0, 1e-9);
  EXPECT_EQ(parse_ncu_csv("==ERROR== no kernels were profiled\n").kernels, 0);
}

// ---------------------------------------------------------------- liger-bench JSON

TEST(KernelPerfBench, ParsesLigerBenchJson) {
  const BenchRun r = parse_bench_json(liger::util::read_file(fixtures() / "bench_swiglu_v0.json"));
  EXPECT_EQ(r.device, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(r.sm_arch, 90);
  EXPECT_EQ(r.sm_count, 132);
  EXPECT_NEAR(r.copy_gbps, 2980.5, 1e-9);
  EXPECT_EQ(r.tunables, "threads_per_block=64 vector_bytes=4");
  ASSERT_EQ(r.results.size(), 4u);
  const auto* c = r.find("forward 16384x14336 bf16");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->ok);
  EXPECT_NEAR(c->median_us, 900.0, 1e-9);
  EXPECT_NEAR(c->spread_pct, 1.67, 1e-9);
  EXPECT_NEAR(c->copy_fraction, 0.5254, 1e-9);
  EXPECT_EQ(shape_rows("16384x14336_fused"), 16384);
  EXPECT_EQ(shape_cols("16384x14336_fused"), 14336);
  EXPECT_EQ(shape_cols("b2_h32"), 0);
  EXPECT_THROW(parse_bench_json("{\"device\": 1}"), liger::Error);
  EXPECT_THROW(parse_bench_json("not json"), liger::Error);
}

// ---------------------------------------------------------------- classification

TEST(KernelPerfClassify, RulesFromSkillsData) {
  const YAML::Node doc = YAML::LoadFile((skills() / "strategies.yaml").string());
  const auto rules = parse_class_rules(doc["classification"]);
  EXPECT_EQ(classify(rules, {{"copy_fraction", 0.85}, {"median_us", 500}}).bottleneck, "memory-bound");
  EXPECT_EQ(classify(rules, {{"copy_fraction", 0.45}, {"dram_pct", 75}, {"median_us", 500}}).bottleneck, "memory-bound");
  EXPECT_EQ(classify(rules, {{"copy_fraction", 0.3}, {"dram_pct", 20}, {"sm_pct", 70}, {"median_us", 500}}).bottleneck,
            "compute-bound");
  EXPECT_EQ(classify(rules, {{"copy_fraction", 0.2}, {"median_us", 8}}).bottleneck, "latency-bound");
  const Classification low_occ = classify(rules, {{"copy_fraction", 0.3}, {"occupancy", 0.25}, {"median_us", 500}});
  EXPECT_EQ(low_occ.bottleneck, "latency-bound");
  EXPECT_NE(low_occ.rule.find("occupancy = 0.25 < 0.5"), std::string::npos) << low_occ.rule;
  EXPECT_EQ(classify(rules, {{"copy_fraction", 0.5}, {"median_us", 500}}).bottleneck, "balanced");
  // A rule on a metric that was not measured does not fire.
  EXPECT_EQ(classify(rules, {{"copy_fraction", 0.5}, {"sm_pct", 90}, {"median_us", 500}}).bottleneck, "balanced");
  EXPECT_EQ(overall_class({"memory-bound", "latency-bound", "memory-bound"}), "memory-bound");
  EXPECT_EQ(overall_class({}), "balanced");
  YAML::Node bad = YAML::Load("- {class: x, when: ['copy_fraction ~ 3']}");
  EXPECT_THROW(parse_class_rules(bad), liger::Error);
}

TEST(KernelPerfStrategies, ParameterTuningFirstThenPreconditions) {
  const auto all = parse_strategies(YAML::LoadFile((skills() / "strategies.yaml").string()));
  const auto order = strategy_order(all, "memory-bound", {"tunables", "table", "source"});
  ASSERT_GE(order.size(), 3u);
  EXPECT_EQ(order[0].kind, "tunable_search");
  bool has_bytes = false, has_math = false;
  for (const auto& s : order) {
    has_bytes |= s.id == "more_bytes_in_flight";
    has_math |= s.id == "cheaper_math";
  }
  EXPECT_TRUE(has_bytes);
  EXPECT_FALSE(has_math);  // compute-bound / balanced only
  // Without a table, no per-size-class entries.
  for (const auto& s : strategy_order(all, "memory-bound", {"tunables", "source"})) EXPECT_NE(s.kind, "split_size_class");
}

// ---------------------------------------------------------------- search space

TEST(KernelPerfSearch, CoarseGridRefinementAndPruning) {
  const YAML::Node ops = YAML::LoadFile((skills() / "search_spaces.yaml").string())["ops"];
  const SearchSpace glu = parse_search_space("swiglu", ops["swiglu"]);
  const auto grid = coarse_grid(glu);
  EXPECT_EQ(grid.size(), 15u);  // 5 block sizes x 3 vector widths
  std::set<Candidate> tried(grid.begin(), grid.end());
  const auto refined = refine_around(glu, {{"threads_per_block", 256}, {"vector_bytes", 16}}, tried);
  // Geometric midpoints towards 128 and 512, rounded to 32: 181 -> 192, 362 -> 352; vector_bytes
  // is a power-of-two dimension and is not refined.
  ASSERT_EQ(refined.size(), 2u);
  EXPECT_EQ(refined[0].at("threads_per_block"), 192);
  EXPECT_EQ(refined[1].at("threads_per_block"), 352);
  EXPECT_EQ(refined[0].at("vector_bytes"), 16);
  tried.insert(refined.begin(), refined.end());
  EXPECT_TRUE(refine_around(glu, {{"threads_per_block", 256}, {"vector_bytes", 16}}, tried).empty());
  // Edge of the grid: only the inward neighbour.
  EXPECT_EQ(refine_around(glu, {{"threads_per_block", 64}, {"vector_bytes", 16}}, {}).size(), 1u);

  const ArchLimits& a = h100();
  std::string why;
  EXPECT_TRUE(candidate_feasible(glu, {{"threads_per_block", 1024}}, a, 32, 0, true, &why)) << why;
  EXPECT_FALSE(candidate_feasible(glu, {{"threads_per_block", 1024}}, a, 128, 0, true, &why));
  EXPECT_NE(why.find("registers"), std::string::npos) << why;
  EXPECT_FALSE(candidate_feasible(glu, {{"threads_per_block", 100}}, a, 32, 0, true, &why));

  const SearchSpace norm = parse_search_space("rms_norm", ops["rms_norm"]);
  EXPECT_EQ(norm.max_threads_backward, 512);
  EXPECT_TRUE(norm.rows_divide_threads);
  EXPECT_EQ(coarse_grid(norm).size(), 36u);  // 3 threads_per_block x 4 rows_per_block x 3 stages
  EXPECT_FALSE(candidate_feasible(norm, {{"threads_per_block", 1024}, {"rows_per_block", 1}}, a, 32, 0, true, &why));
  EXPECT_NE(why.find("backward"), std::string::npos);
  EXPECT_TRUE(candidate_feasible(norm, {{"threads_per_block", 1024}, {"rows_per_block", 1}}, a, 32, 0, false, &why));
  EXPECT_FALSE(candidate_feasible(norm, {{"threads_per_block", 384}, {"rows_per_block", 8}}, a, 32, 0, true, &why));
  EXPECT_NE(why.find("threads per row 48"), std::string::npos) << why;

  EXPECT_EQ(candidate_text({{"vector_bytes", 16}, {"threads_per_block", 256}}), "threads_per_block=256 vector_bytes=16");
  EXPECT_EQ(parse_candidate("threads_per_block=64,vector_bytes=4")->at("vector_bytes"), 4);
  EXPECT_FALSE(parse_candidate("warps=4"));
  EXPECT_FALSE(parse_candidate("threads_per_block=abc"));
}

// ---------------------------------------------------------------- verdicts

namespace {
BenchRun load(const char* name) { return parse_bench_json(liger::util::read_file(fixtures() / name)); }
BenchCaseResult& at(BenchRun& r, const std::string& key) {
  for (auto& c : r.results)
    if (c.key() == key) return c;
  throw std::runtime_error("no case " + key);
}
const GuardrailCheck* failed(const Verdict& v) {
  for (const auto& g : v.guardrails)
    if (!g.passed) return &g;
  return nullptr;
}
}  // namespace

TEST(KernelPerfVerdict, AcceptedWhenEverySizeImproves) {
  const Verdict v = judge(load("bench_swiglu_v0.json"), load("bench_swiglu_tuned.json"), Goal{"speed", {}});
  EXPECT_EQ(v.verdict, "ACCEPTED") << v.summary;
  EXPECT_NEAR(v.geomean_speedup, std::pow(900.0 / 480 * 80.0 / 40 * 1500.0 / 800 * 120.0 / 64, 0.25), 1e-9);
  for (const auto& c : v.cases) EXPECT_EQ(c.outcome, "faster");
  EXPECT_EQ(failed(v), nullptr);
}

TEST(KernelPerfVerdict, ChangeInsideTheSpreadIsNoImprovement) {
  BenchRun base = load("bench_swiglu_v0.json"), var = load("bench_swiglu_v0.json");
  for (auto& c : var.results) c.median_us *= 0.99;  // 1% faster, spreads are 1-2.5%
  const Verdict v = judge(base, var, Goal{"speed", {}});
  EXPECT_EQ(v.verdict, "REJECTED");
  EXPECT_NE(v.summary.find("spread"), std::string::npos);
}

TEST(KernelPerfVerdict, MixedWhenOneSizeRegressesWithinGuardrails) {
  BenchRun base = load("bench_swiglu_v0.json"), var = load("bench_swiglu_tuned.json");
  at(var, "forward 4096x4096 bf16").median_us = 80.0 * 1.04;  // 4% slower: beyond the 2.5% spread, under 5%
  at(var, "forward 4096x4096 bf16").spread_pct = 1.0;
  const Verdict v = judge(base, var, Goal{"speed", {}});
  EXPECT_EQ(v.verdict, "MIXED") << v.summary;
}

TEST(KernelPerfVerdict, RejectedWhenMemoryGrowsUnderSpeedGoal) {
  BenchRun base = load("bench_swiglu_v0.json"), var = load("bench_swiglu_tuned.json");
  at(var, "backward 16384x14336 bf16").extra_mib = 64;  // from 0: a new workspace
  const Verdict v = judge(base, var, Goal{"speed", {}});
  EXPECT_EQ(v.verdict, "REJECTED");
  ASSERT_NE(failed(v), nullptr);
  EXPECT_NE(failed(v)->rule.find("memory"), std::string::npos);
  // 2 MiB (one driver page) is measurement granularity, not a regression.
  at(var, "backward 16384x14336 bf16").extra_mib = 2;
  EXPECT_EQ(judge(base, var, Goal{"speed", {}}).verdict, "ACCEPTED");
}

TEST(KernelPerfVerdict, RejectedWhenOnePassPaysForTheOther) {
  BenchRun base = load("bench_swiglu_v0.json"), var = load("bench_swiglu_v0.json");
  at(var, "forward 16384x14336 bf16").median_us = 700;  // forward much faster
  at(var, "backward 16384x14336 bf16").median_us = 1500 * 1.15;  // backward 15% slower
  // Target: forward only -> backward is a non-target pass (> 5% worse) and the cross-pass rule fires.
  Verdict v = judge(base, var, Goal{"speed", {"forward"}});
  EXPECT_EQ(v.verdict, "REJECTED");
  bool cross = false;
  for (const auto& g : v.guardrails) cross |= !g.passed && g.rule.find("10%") != std::string::npos;
  EXPECT_TRUE(cross);
  // All passes targeted: still rejected by the cross-pass rule.
  v = judge(base, var, Goal{"speed", {}});
  EXPECT_EQ(v.verdict, "REJECTED");
}

TEST(KernelPerfVerdict, MemoryGoalRejectsSlowdownsAndFailedCases) {
  BenchRun base = load("bench_swiglu_v0.json"), var = load("bench_swiglu_v0.json");
  for (auto& c : base.results) c.extra_mib = 100;
  for (auto& c : var.results) c.extra_mib = 50;
  EXPECT_EQ(judge(base, var, Goal{"memory", {}}).verdict, "ACCEPTED");
  at(var, "forward 4096x4096 bf16").median_us = 80 * 1.2;
  EXPECT_EQ(judge(base, var, Goal{"memory", {}}).verdict, "REJECTED");
  BenchRun broken = load("bench_swiglu_tuned.json");
  at(broken, "forward 4096x4096 bf16").ok = false;
  const Verdict v = judge(load("bench_swiglu_v0.json"), broken, Goal{"speed", {}});
  EXPECT_EQ(v.verdict, "REJECTED");
  EXPECT_NE(v.summary.find("failed"), std::string::npos);
}

// ---------------------------------------------------------------- target metric and stop rules

TEST(KernelPerfTarget, ParsesAndEvaluates) {
  const BenchRun v0 = load("bench_swiglu_v0.json"), tuned = load("bench_swiglu_tuned.json");
  TargetMetric t = parse_target_metric("forward@4096x4096<50us");
  EXPECT_EQ(t.kind, "time_us");
  EXPECT_EQ(t.mode, "forward");
  EXPECT_EQ(t.shape, "4096x4096");
  EXPECT_DOUBLE_EQ(t.value, 50);
  EXPECT_FALSE(target_met(t, v0, Goal{}));
  EXPECT_TRUE(target_met(t, tuned, Goal{}));
  t = parse_target_metric("forward<0.5ms");
  EXPECT_DOUBLE_EQ(t.value, 500);
  EXPECT_TRUE(target_met(t, tuned, Goal{}));  // 480 and 40 us
  t = parse_target_metric("full>=85%copy");
  EXPECT_EQ(t.kind, "copy_fraction");
  EXPECT_DOUBLE_EQ(t.value, 0.85);
  t = parse_target_metric("1.5x");
  EXPECT_EQ(t.kind, "speedup");
  EXPECT_TRUE(target_met(t, tuned, Goal{}, &v0));
  EXPECT_FALSE(target_met(parse_target_metric("3x"), tuned, Goal{}, &v0));
  EXPECT_EQ(parse_target_metric("900GB/s").kind, "gbps");
  EXPECT_THROW(parse_target_metric("fast please"), liger::Error);
  EXPECT_THROW(parse_target_metric("sideways<3us"), liger::Error);
}

TEST(KernelPerfStop, BudgetPlateauAndTarget) {
  EXPECT_FALSE(stop_reason({0, 8, {}, false}));
  EXPECT_FALSE(stop_reason({2, 8, {45.0, 0.5}, false}));  // only one small step
  auto r = stop_reason({3, 8, {45.0, 0.5, 0.2}, false});
  ASSERT_TRUE(r);
  EXPECT_NE(r->find("< 1%"), std::string::npos);
  EXPECT_FALSE(stop_reason({3, 8, {0.5, 3.0, 0.2}, false}));  // not in a row
  r = stop_reason({8, 8, {45.0, 5.0}, false});
  ASSERT_TRUE(r);
  EXPECT_NE(r->find("budget"), std::string::npos);
  r = stop_reason({1, 8, {45.0}, true});
  ASSERT_TRUE(r);
  EXPECT_NE(r->find("target"), std::string::npos);
}
