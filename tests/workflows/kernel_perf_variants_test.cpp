// kernel-perf code variants: knob lines in the library's real tuning headers, rendering, the
// settings the profile compiles, the register-bound diagnosis from ptxas / Nsight Compute numbers,
// and stall reasons. No GPU, no nvcc (kernel_perf_variants_compile_test.cpp compiles them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <vector>

#include <unistd.h>

#include "liger/error.h"
#include "liger/util.h"
#include "workflows/kernel_perf/kernel_perf.h"
#include "workflows/kernel_perf/stages.h"

namespace fs = std::filesystem;
using namespace liger::kernel_perf;

namespace {

fs::path repo() { return fs::path(LIGER_SOURCE_DIR); }
fs::path skills() { return repo() / "skills/kernel_perf"; }

OpSpec spec_of(const std::string& op) { return load_op_spec(skills() / "search_spaces.yaml", op); }

std::vector<Strategy> catalogue() { return parse_strategies(YAML::LoadFile((skills() / "strategies.yaml").string())); }

}  // namespace

TEST(KernelPerfCodeKnobs, EveryOpWithKnobsShipsTheLineAtItsFirstListedDefault) {
  const YAML::Node doc = YAML::LoadFile((skills() / "search_spaces.yaml").string());
  int with_knobs = 0;
  for (const auto& it : doc["ops"]) {
    const OpSpec s = spec_of(it.first.as<std::string>());
    if (!s.code.present) continue;
    ++with_knobs;
    const std::string text = liger::util::read_file(repo() / s.tuning);
    const auto knobs = read_knobs(s.code, text);
    ASSERT_TRUE(knobs.has_value()) << s.name << ": no `using " << s.code.alias << "` line in " << s.tuning;
    EXPECT_EQ(knobs->size(), s.code.knobs.size()) << s.name;
    // Every shipped value is one the knob lists, and every knob is a trait strategies can require.
    for (const auto& k : s.code.knobs) {
      EXPECT_NE(std::find(k.values.begin(), k.values.end(), knobs->at(k.name)), k.values.end()) << s.name << " " << k.name;
      EXPECT_TRUE(s.traits.count("knob:" + k.name)) << s.name;
    }
    // The kernel the compile check instantiates names the alias (or a helper that uses it), so
    // it follows the rendered line.
    if (s.code.address_of.empty()) EXPECT_NE(s.code.kernel.find(s.code.alias), std::string::npos) << s.name;
  }
  EXPECT_GE(with_knobs, 3) << "the norm family (rms_norm, fused_add_rms_norm, layer_norm) has code knobs";
}

TEST(KernelPerfCodeKnobs, RenderChangesOnlyTheAliasLine) {
  const OpSpec s = spec_of("rms_norm");
  const std::string text = liger::util::read_file(repo() / s.tuning);
  const std::string out = render_knobs(s.code, text, {{"cache_fp32", 1}, {"min_blocks", 2}});
  EXPECT_NE(out.find("using BwdVariant = norm::BwdVariant<0, 1, 2>;"), std::string::npos) << out;
  EXPECT_EQ(read_knobs(s.code, out), (KnobSetting{{"dw_first", 0}, {"cache_fp32", 1}, {"min_blocks", 2}}));
  // Everything else is byte-identical: removing the line gives the same text on both sides.
  auto without = [](std::string t) {
    const auto a = t.find("using BwdVariant");
    return t.erase(a, t.find('\n', a) - a);
  };
  EXPECT_EQ(without(out), without(text));
  // Rendering back restores the original exactly.
  EXPECT_EQ(render_knobs(s.code, out, {{"cache_fp32", 0}, {"min_blocks", 0}}), text);
  EXPECT_EQ(knob_text(s.code, *read_knobs(s.code, out)), "dw_first=0 cache_fp32=1 min_blocks=2");
}

TEST(KernelPerfCodeKnobs, BadKnobsAndMissingLinesAreNamedErrors) {
  const OpSpec s = spec_of("layer_norm");
  const std::string text = liger::util::read_file(repo() / s.tuning);
  try {
    render_knobs(s.code, text, {{"unroll", 4}});
    ADD_FAILURE() << "unknown knob accepted";
  } catch (const liger::Error& e) {
    EXPECT_EQ(e.kind(), liger::ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("unroll"), std::string::npos);
  }
  EXPECT_THROW(render_knobs(s.code, text, {{"min_blocks", 7}}), liger::Error);
  EXPECT_FALSE(read_knobs(s.code, "namespace x {}\n").has_value());
  EXPECT_FALSE(read_knobs(s.code, "using BwdVariant = norm::BwdVariant<0, 1>;\n").has_value()) << "one argument short";
  EXPECT_FALSE(read_knobs(s.code, "using BwdVariant = norm::BwdVariant<0, x, 1>;\n").has_value());
  try {
    render_knobs(s.code, "// no line\n", {{"dw_first", 1}});
    ADD_FAILURE() << "missing line accepted";
  } catch (const liger::Error& e) {
    EXPECT_NE(std::string(e.hint()).find("tuning.h"), std::string::npos);
  }
  YAML::Node no_inst = YAML::Load("{alias: A, template: t::A, knobs: [{name: k, values: [0, 1]}]}");
  EXPECT_THROW(parse_code_knobs(no_inst), liger::Error);
}

TEST(KernelPerfCodeKnobs, InstantiationUnitIncludesTheRenderedHeaderFirst) {
  const OpSpec s = spec_of("fused_add_rms_norm");
  const fs::path dir = fs::temp_directory_path() / ("kperf-variant-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string rendered = render_knobs(s.code, liger::util::read_file(repo() / s.tuning), {{"dw_first", 1}});
  const fs::path cu = write_variant_unit(s.code, s.tuning, rendered, dir);
  EXPECT_EQ(liger::util::read_file(dir / "fused_add_rms_norm/tuning.h"), rendered);
  const std::string src = liger::util::read_file(cu);
  EXPECT_NE(src.find("#include \"fused_add_rms_norm/tuning.h\""), std::string::npos);
  EXPECT_NE(src.find("template __global__ void " + s.code.kernel + "(" + s.code.params + ");"), std::string::npos) << src;
  const auto argv = variant_compile_argv(repo(), dir, cu, dir / "v.o", 90);
  const auto first_include = std::find(argv.begin(), argv.end(), "-I");
  ASSERT_NE(first_include, argv.end());
  EXPECT_EQ(*(first_include + 1), dir.string()) << "the rendered header must shadow the tree's";
  EXPECT_NE(std::find(argv.begin(), argv.end(), "-gencode=arch=compute_90,code=sm_90"), argv.end());
  fs::remove_all(dir);
}

TEST(KernelPerfCodeKnobs, SettingsSkipNoOpsAndKnobsTheOpLacks) {
  const OpSpec s = spec_of("rms_norm");
  const KnobSetting shipped = {{"dw_first", 0}, {"cache_fp32", 0}, {"min_blocks", 0}};
  const auto settings = variant_settings(s.code, shipped, catalogue());
  ASSERT_FALSE(settings.empty());
  EXPECT_EQ(settings[0].first, "current");
  std::set<std::string> labels;
  for (const auto& [label, setting] : settings) {
    labels.insert(label);
    if (label != "current") EXPECT_NE(setting, shipped) << label << " changes nothing";
  }
  EXPECT_FALSE(labels.count("recompute_not_cache")) << "the shipped kernel already recomputes";
  EXPECT_TRUE(labels.count("cache_in_fp32"));
  EXPECT_TRUE(labels.count("register_cap_two_blocks"));
  // From the naive start, recomputing is the first thing to compile.
  const auto from_naive = variant_settings(s.code, {{"dw_first", 0}, {"cache_fp32", 1}, {"min_blocks", 0}}, catalogue());
  EXPECT_EQ(from_naive[1].first, "recompute_not_cache");
  // A strategy whose knob the op lacks is not offered.
  Strategy foreign;
  foreign.id = "glu_unroll";
  foreign.kind = "code_variant";
  foreign.knobs = {{"fwd_unroll", 8}};
  EXPECT_EQ(variant_settings(s.code, shipped, {foreign}).size(), 1u);
}

// RoPE's heads-per-thread knob: the shipped line holds 1 (the kernels as before the knob), a
// rendered variant changes only that argument, the compiled instantiation names both kernels,
// and the catalogue answers a memory-bound (under the roofline) or latency-bound RoPE with it.
TEST(KernelPerfCodeKnobs, RopeHeadsPerThreadRendersAndIsWhatMemoryAndLatencyBoundRopeTries) {
  const OpSpec s = spec_of("rope");
  ASSERT_TRUE(s.code.present);
  const auto knob = std::find_if(s.code.knobs.begin(), s.code.knobs.end(),
                                 [](const CodeKnob& k) { return k.name == "heads_per_thread"; });
  ASSERT_NE(knob, s.code.knobs.end()) << "rope lists no heads_per_thread knob";
  EXPECT_EQ(knob->values, (std::vector<int>{1, 2, 4}));
  EXPECT_TRUE(s.traits.count("knob:heads_per_thread"));
  const std::string text = liger::util::read_file(repo() / s.tuning);
  const KnobSetting shipped = {{"loads_first", 1}, {"min_blocks", 0}, {"heads_per_thread", 1}};
  EXPECT_EQ(read_knobs(s.code, text), shipped);
  const std::string four = render_knobs(s.code, text, {{"heads_per_thread", 4}});
  EXPECT_NE(four.find("using Variant = RopeVariant<1, 0, 4>;"), std::string::npos);
  EXPECT_EQ(render_knobs(s.code, four, {{"heads_per_thread", 1}}), text);
  EXPECT_EQ(knob_text(s.code, *read_knobs(s.code, four)), "loads_first=1 min_blocks=0 heads_per_thread=4");
  EXPECT_THROW(render_knobs(s.code, text, {{"heads_per_thread", 3}}), liger::Error) << "3 is not a value the kernel takes";
  EXPECT_NE(instantiation_source(s.code).find("variant_unit_kernels<"), std::string::npos);

  for (const std::string cls : {"memory-bound", "latency-bound"}) {
    std::vector<std::string> ids;
    for (const auto& st : strategy_order(catalogue(), cls, s.traits)) ids.push_back(st.id);
    EXPECT_NE(std::find(ids.begin(), ids.end(), "two_heads_per_thread"), ids.end()) << cls;
    EXPECT_NE(std::find(ids.begin(), ids.end(), "four_heads_per_thread"), ids.end()) << cls;
  }
  // Not an answer to spills, and never offered to an op without the knob.
  for (const auto& st : strategy_order(catalogue(), "register-bound", s.traits))
    EXPECT_EQ(st.id.find("heads_per_thread"), std::string::npos) << st.id;
  for (const auto& st : strategy_order(catalogue(), "memory-bound", spec_of("swiglu").traits))
    EXPECT_EQ(st.id.find("heads_per_thread"), std::string::npos) << st.id;
  for (const auto& st : catalogue())
    if (st.id == "two_heads_per_thread" || st.id == "four_heads_per_thread") {
      EXPECT_EQ(st.kind, "code_variant");
      EXPECT_FALSE(st.changes.empty());
      // Measured (H100, rejected): the catalogue says where and what came out, so the lab
      // notebook's prediction is not read as untested.
      EXPECT_NE(st.expected.find("Measured on the H100"), std::string::npos) << st.id << ": cites its measurement";
      EXPECT_NE(st.expected.find("rejected"), std::string::npos) << st.id << ": says it lost";
    }

  // The profile compiles the shipped line and both heads-per-thread settings.
  std::map<std::string, KnobSetting> settings;
  for (const auto& [label, setting] : variant_settings(s.code, shipped, catalogue())) settings[label] = setting;
  ASSERT_TRUE(settings.count("two_heads_per_thread"));
  ASSERT_TRUE(settings.count("four_heads_per_thread"));
  EXPECT_EQ(settings["two_heads_per_thread"].at("heads_per_thread"), 2);
  EXPECT_EQ(settings["four_heads_per_thread"].at("heads_per_thread"), 4);
  EXPECT_EQ(settings["four_heads_per_thread"].at("loads_first"), 1) << "other knobs stay as they are";
}

TEST(KernelPerfDiagnosis, RegisterBoundFromSpillsAndNcuCitesTheNumbers) {
  const YAML::Node doc = YAML::LoadFile((skills() / "strategies.yaml").string());
  const auto rules = parse_class_rules(doc["classification"]);
  // ptxas: a spilling pass under the copy bandwidth.
  Classification c = classify(rules, {{"copy_fraction", 0.35}, {"median_us", 400}, {"spill_bytes", 712}, {"registers", 128}});
  EXPECT_EQ(c.bottleneck, "register-bound");
  EXPECT_NE(c.rule.find("spill_bytes = 712 >= 128"), std::string::npos) << c.rule;
  // A few bytes of spill in a scalar fallback do not make a kernel register-bound.
  EXPECT_NE(classify(rules, {{"copy_fraction", 0.35}, {"median_us", 400}, {"spill_bytes", 24}}).bottleneck, "register-bound");
  // Saturated DRAM wins over spills.
  EXPECT_EQ(classify(rules, {{"copy_fraction", 0.8}, {"median_us", 400}, {"spill_bytes", 712}}).bottleneck, "memory-bound");
  // Nsight Compute: an occupancy cliff.
  c = classify(rules, {{"copy_fraction", 0.45}, {"median_us", 400}, {"ncu_registers", 168}, {"achieved_occupancy_pct", 12.5}});
  EXPECT_EQ(c.bottleneck, "register-bound");
  EXPECT_NE(c.rule.find("achieved_occupancy_pct = 12.5 < 30"), std::string::npos) << c.rule;
  EXPECT_EQ(overall_class({"register-bound", "memory-bound"}), "register-bound") << "ties go to the actionable class";
  // The catalogue answers a register-bound profile with code variants after the launch search.
  const auto order = strategy_order(catalogue(), "register-bound", spec_of("rms_norm").traits);
  ASSERT_GE(order.size(), 3u);
  EXPECT_EQ(order[0].kind, "tunable_search");
  bool recompute = false;
  for (const auto& s : order) recompute |= s.id == "recompute_not_cache";
  EXPECT_TRUE(recompute);
  // Ops without the knob (no code_knobs) never get the code variant.
  for (const auto& s : strategy_order(catalogue(), "register-bound", spec_of("rope").traits))
    EXPECT_NE(s.id, "recompute_not_cache");
}

TEST(KernelPerfDiagnosis, NcuSpillShareAndTopStalls) {
  NcuMetrics m;
  m.kernels = 1;
  m.mean["smsp__sass_inst_executed_op_local_ld.sum"] = 300;
  m.mean["smsp__sass_inst_executed_op_local_st.sum"] = 100;
  m.mean["smsp__inst_executed.sum"] = 20000;
  m.mean["launch__registers_per_thread"] = 128;
  m.mean["smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"] = 4.5;
  m.mean["smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"] = 1.25;
  m.mean["smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio"] = 2.0;
  m.mean["smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"] = 0.5;
  const auto r = m.rule_metrics();
  EXPECT_NEAR(r.at("ncu_spill_pct"), 2.0, 1e-12);
  EXPECT_EQ(r.at("ncu_registers"), 128);
  const auto top = top_stalls(m, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, "long_scoreboard");
  EXPECT_EQ(top[1].first, "lg_throttle");
  EXPECT_EQ(top[2].first, "barrier");
  // Every stall metric asked for is one top_stalls reads.
  for (const auto& reason : stall_reasons()) EXPECT_NE(stall_metrics_csv().find("_" + reason + "_"), std::string::npos);
}

namespace {

BenchRun run_of(const std::vector<std::pair<std::string, double>>& cases) {
  BenchRun r;
  for (const auto& [key, us] : cases) {
    BenchCaseResult c;
    std::istringstream in(key);
    in >> c.mode >> c.shape >> c.dtype;
    c.op = "rms_norm";
    c.ok = us > 0;
    c.median_us = us;
    r.results.push_back(c);
  }
  return r;
}

}  // namespace

TEST(KernelPerfSearchSpeed, HalvingKeepsTheBestHalfOfEveryClass) {
  // Two size classes; "b" is best only in the large class, "a" only in the small one.
  const std::vector<std::vector<std::string>> classes = {{"backward 4096x1024 bf16"}, {"backward 4096x16384 bf16"}};
  std::map<std::string, BenchRun> round;
  round["a"] = run_of({{"backward 4096x1024 bf16", 10}, {"backward 4096x16384 bf16", 90}});
  round["b"] = run_of({{"backward 4096x1024 bf16", 30}, {"backward 4096x16384 bf16", 50}});
  round["c"] = run_of({{"backward 4096x1024 bf16", 20}, {"backward 4096x16384 bf16", 80}});
  round["d"] = run_of({{"backward 4096x1024 bf16", 40}, {"backward 4096x16384 bf16", 60}});
  round["e"] = run_of({{"backward 4096x1024 bf16", 50}, {"backward 4096x16384 bf16", 70}});
  round["f"] = run_of({{"backward 4096x1024 bf16", -1}, {"backward 4096x16384 bf16", 40}});  // failed small case
  // Best half (3 of 6) per class: small a, c, b (f failed there: infinite); large f, b, d.
  EXPECT_EQ(halving_survivors(round, classes, 2), (std::set<std::string>{"a", "b", "c", "d", "f"}));
  // Half rounded up per class (keep is only a floor).
  EXPECT_EQ(halving_survivors(round, {{"backward 4096x1024 bf16"}}, 1), (std::set<std::string>{"a", "c", "b"}));
  // Never more survivors than candidates; a lone candidate survives.
  std::map<std::string, BenchRun> one = {{"a", round["a"]}};
  EXPECT_EQ(halving_survivors(one, classes, 2), (std::set<std::string>{"a"}));
}

TEST(KernelPerfWinsThatHold, InterleavedRoundsCountOnlyOutsideTheSpread) {
  Goal speed;
  speed.goal = "speed";
  std::vector<BenchRun> a, b;
  // Case 1: B always faster (ranges disjoint); case 2: B faster on the median but the ranges
  // overlap (noise); case 3 is forward, outside the target modes below.
  const double a1[] = {100, 102, 101, 99, 100}, b1[] = {80, 82, 81, 79, 80};
  const double a2[] = {50, 55, 52, 51, 53}, b2[] = {48, 54, 49, 50, 47};
  for (int r = 0; r < 5; ++r) {
    a.push_back(run_of({{"backward 4096x16384 bf16", a1[r]}, {"backward 4096x1024 bf16", a2[r]}, {"forward 4096x1024 bf16", 10}}));
    b.push_back(run_of({{"backward 4096x16384 bf16", b1[r]}, {"backward 4096x1024 bf16", b2[r]}, {"forward 4096x1024 bf16", 30}}));
  }
  Goal backward = speed;
  backward.target_modes = {"backward"};
  Interleaved v = judge_interleaved(a, b, backward);
  EXPECT_EQ(v.rounds, 5);
  ASSERT_EQ(v.cases.size(), 3u);
  EXPECT_EQ(v.cases[0].outcome, "faster");
  EXPECT_NEAR(v.cases[0].change_pct, -20.0, 1e-9);
  EXPECT_EQ(v.cases[1].outcome, "same") << "inside the spread: not counted";
  EXPECT_TRUE(v.holds);
  EXPECT_NEAR(v.geomean_speedup, std::sqrt(100.0 / 80.0 * 1.0), 1e-9);
  EXPECT_NE(v.summary.find("5 rounds"), std::string::npos) << v.summary;
  // With every mode a target, the forward case is slower outside the spread: the win does not hold.
  v = judge_interleaved(a, b, speed);
  EXPECT_EQ(v.cases[2].outcome, "slower");
  EXPECT_FALSE(v.holds);
  // A failed round makes the case failed, never faster.
  b[3] = run_of({{"backward 4096x16384 bf16", -1}, {"backward 4096x1024 bf16", 47}, {"forward 4096x1024 bf16", 30}});
  v = judge_interleaved(a, b, backward);
  EXPECT_EQ(v.cases[0].outcome, "failed");
  EXPECT_FALSE(v.holds);
  EXPECT_EQ(judge_interleaved({}, {}, speed).rounds, 0);
}

TEST(KernelPerfSearchSpeed, WorkDirInputRoundTrips) {
  KernelPerfInput in = parse_kernel_perf_input({{"op", "rms_norm"}, {"work_dir", "/tmp/shared-work"}});
  EXPECT_EQ(in.work_dir, "/tmp/shared-work");
  EXPECT_EQ(parse_kernel_perf_input(in.to_json()).work_dir, "/tmp/shared-work");
  EXPECT_TRUE(parse_kernel_perf_input({{"op", "rms_norm"}}).work_dir.empty());
}

TEST(KernelPerfSearchSpeed, ASharedWorkTreeRecopiesOnlyWhatChanged) {
  const fs::path root = fs::temp_directory_path() / ("kperf-work-" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path tree = root / "tree", work = root / "work";
  liger::util::write_file_atomic(tree / "kernels/src/a/tuning.h", "using V = X<0>;\n");
  liger::util::write_file_atomic(tree / "kernels/src/b/b.cu", "// b\n");
  liger::util::write_file_atomic(tree / "CMakeLists.txt", "project(x)\n");
  liger::kernel_perf::stages::copy_project(tree, work);
  EXPECT_EQ(liger::util::read_file(work / "kernels/src/b/b.cu"), "// b\n");
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(24);
  for (const char* f : {"kernels/src/a/tuning.h", "kernels/src/b/b.cu", "CMakeLists.txt"}) fs::last_write_time(work / f, old);
  liger::util::write_file_atomic(tree / "kernels/src/a/tuning.h", "using V = X<1>;\n");
  liger::kernel_perf::stages::copy_project(tree, work);
  EXPECT_EQ(liger::util::read_file(work / "kernels/src/a/tuning.h"), "using V = X<1>;\n");
  EXPECT_GT(fs::last_write_time(work / "kernels/src/a/tuning.h"), old) << "the changed file is copied";
  EXPECT_EQ(fs::last_write_time(work / "kernels/src/b/b.cu"), old) << "an unchanged file keeps its time (no rebuild)";
  EXPECT_EQ(fs::last_write_time(work / "CMakeLists.txt"), old);
  fs::remove_all(root);
}
