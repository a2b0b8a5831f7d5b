// kernel-perf's launch search decisions (search.h): per-class pruning of idle-thread points, the
// halving with an early cut, the incumbent rule and liger-bench's candidate arguments; and the
// stages' phase timings.
#include <gtest/gtest.h>

#include <set>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>

#include "liger/util.h"
#include "workflows/kernel_perf/kernel_perf.h"
#include "workflows/kernel_perf/search.h"
#include "workflows/kernel_perf/stages.h"

namespace fs = std::filesystem;
using namespace liger::kernel_perf;

namespace {

fs::path repo() { return fs::path(LIGER_SOURCE_DIR); }

const OpSpec& op(const std::string& name) {
  static std::map<std::string, OpSpec> cache;
  if (!cache.count(name)) cache[name] = load_op_spec(repo() / "skills/kernel_perf/search_spaces.yaml", name);
  return cache[name];
}

BenchCaseResult result(const std::string& mode, const std::string& shape, double us, double spread) {
  BenchCaseResult r;
  r.mode = mode;
  r.shape = shape;
  r.dtype = "bf16";
  r.ok = true;
  r.median_us = us;
  r.spread_pct = spread;
  return r;
}

}  // namespace

TEST(KernelPerfSearch, IdleThreadsPerRowArePrunedPerClass) {
  const SearchSpace& space = op("rms_norm").space;
  ASSERT_EQ(space.row_vector_bytes, 16);
  // A 1024-column bf16 row is 128 16-byte vectors: 512 threads on one row leave 384 idle.
  std::string why;
  EXPECT_TRUE(idle_threads_per_row(space, {{"threads_per_block", 512}, {"rows_per_block", 1}}, 1024, 2, &why));
  EXPECT_NE(why.find("512 threads per row for 128 vectors"), std::string::npos) << why;
  EXPECT_FALSE(idle_threads_per_row(space, {{"threads_per_block", 512}, {"rows_per_block", 4}}, 1024, 2, nullptr));
  EXPECT_FALSE(idle_threads_per_row(space, {{"threads_per_block", 128}, {"rows_per_block", 1}}, 1024, 2, nullptr));
  // fp32 rows have twice the vectors; a 4096-column row has 512.
  EXPECT_FALSE(idle_threads_per_row(space, {{"threads_per_block", 256}, {"rows_per_block", 1}}, 1024, 4, nullptr));
  EXPECT_FALSE(idle_threads_per_row(space, {{"threads_per_block", 512}, {"rows_per_block", 1}}, 4096, 2, nullptr));
  // The incumbent (no tunables), an unknown row length and an op without the rule are never pruned.
  EXPECT_FALSE(idle_threads_per_row(space, {}, 1024, 2, nullptr));
  EXPECT_FALSE(idle_threads_per_row(space, {{"threads_per_block", 512}}, 0, 2, nullptr));
  EXPECT_FALSE(idle_threads_per_row(op("swiglu").space, {{"threads_per_block", 1024}}, 64, 2, nullptr));

  // The coarse grid per class: the short-row class loses the idle points, the long-row class none.
  const auto grid = coarse_grid(space);
  std::vector<std::string> pruned;
  const auto short_rows = class_candidates(space, grid, SearchClass{0, {"backward 16384x1024 bf16"}, 1024}, 2, &pruned);
  EXPECT_LT(short_rows.size(), grid.size());
  EXPECT_EQ(short_rows.size() + pruned.size(), grid.size());
  for (const auto& c : short_rows) EXPECT_LE(c.at("threads_per_block") / c.at("rows_per_block"), 128) << candidate_text(c);
  pruned.clear();
  EXPECT_EQ(class_candidates(space, grid, SearchClass{1, {"backward 16384x4096 bf16"}, 4096}, 2, &pruned).size(), grid.size());
  EXPECT_TRUE(pruned.empty());
  // A class where every point idles keeps them all (nothing measured would decide nothing).
  const std::vector<Candidate> wide = {{{"threads_per_block", 512}, {"rows_per_block", 1}}};
  EXPECT_EQ(class_candidates(space, wide, SearchClass{0, {}, 256}, 2, nullptr).size(), 1u);
}

TEST(KernelPerfSearch, HalvingKeepsTheBestHalfMinusTheEarlyCut) {
  SearchMeasure m;  // early cut 10%
  std::vector<std::pair<double, std::string>> ranked = {
      {130, "f"}, {100, "a"}, {104, "b"}, {109, "c"}, {112, "d"}, {125, "e"}, {INFINITY, "x"}, {200, "g"}};
  // Half of 8 is 4 (a b c d), but d is 12% behind the best: cut. The failed one never survives.
  EXPECT_EQ(class_survivors(ranked, 1.0, m, 2), (std::vector<std::string>{"a", "b", "c"}));
  // A noisy class widens the cut to three times the best's spread (5% -> 15%): d stays.
  EXPECT_EQ(class_survivors(ranked, 5.0, m, 2), (std::vector<std::string>{"a", "b", "c", "d"}));
  // The cut never leaves fewer than `keep`.
  std::vector<std::pair<double, std::string>> far = {{100, "a"}, {150, "b"}, {160, "c"}, {170, "d"}};
  EXPECT_EQ(class_survivors(far, 1.0, m, 2), (std::vector<std::string>{"a", "b"}));
  // Everything failed: nothing survives.
  EXPECT_TRUE(class_survivors({{INFINITY, "a"}, {INFINITY, "b"}}, 0, m, 2).empty());
}

TEST(KernelPerfSearch, AChallengerMustBeatTheIncumbentOutsideTheSpread) {
  const std::vector<std::string> keys = {"backward 4096x1024 bf16", "backward 4096x4096 bf16"};
  BenchRun incumbent, close, clear, noisy;
  incumbent.results = {result("backward", "4096x1024", 20.0, 1.0), result("backward", "4096x4096", 100.0, 1.0)};
  close.results = {result("backward", "4096x1024", 19.9, 1.0), result("backward", "4096x4096", 99.5, 1.0)};
  clear.results = {result("backward", "4096x1024", 18.0, 1.0), result("backward", "4096x4096", 90.0, 1.0)};
  noisy.results = {result("backward", "4096x1024", 18.0, 12.0), result("backward", "4096x4096", 90.0, 1.0)};
  EXPECT_FALSE(beats_outside_spread(close, incumbent, keys)) << "0.4% inside a 1% spread";
  EXPECT_TRUE(beats_outside_spread(clear, incumbent, keys));
  EXPECT_FALSE(beats_outside_spread(noisy, incumbent, keys)) << "10% inside a 12% spread";
  EXPECT_FALSE(beats_outside_spread(incumbent, clear, keys));
  EXPECT_DOUBLE_EQ(class_spread(noisy, keys), 12.0);
  // A class case the challenger lacks: it cannot win that class.
  BenchRun partial;
  partial.results = {result("backward", "4096x1024", 1.0, 0.1)};
  EXPECT_FALSE(beats_outside_spread(partial, incumbent, keys));
  // restrict_run keeps what a candidate still stands for.
  EXPECT_EQ(restrict_run(clear, {"backward 4096x4096 bf16"}).results.size(), 1u);
}

TEST(KernelPerfSearch, CandidateArgumentsNameTheirCases) {
  EXPECT_EQ(case_label("backward 16384x4096_w32 bf16"), "backward/16384x4096_w32/bf16");
  EXPECT_EQ(candidate_arg({{"threads_per_block", 256}, {"rows_per_block", 2}},
                          {"forward 4096x1024 bf16", "backward 4096x1024 bf16"}),
            "rows_per_block=2,threads_per_block=256@forward/4096x1024/bf16+backward/4096x1024/bf16");
  EXPECT_EQ(candidate_arg({{"threads_per_block", 256}}, {}), "threads_per_block=256");
  // The incumbent: the op's own defaults on its cases.
  EXPECT_EQ(candidate_arg({}, {"full 8x8 fp32"}), "@full/8x8/fp32");
}

TEST(KernelPerfSearch, PhaseTimingsAccumulateAcrossStagesIntoOneTable) {
  const fs::path dir = fs::temp_directory_path() / ("kperf-timings-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  liger::engine::StageContext ctx;
  ctx.run_dir = dir;
  EXPECT_EQ(stages::timings_markdown(ctx), "") << "nothing recorded yet";
  stages::record_phase(ctx, "profile", "baseline v0 benchmark", 4.25, "15 case(s) at 200 ms");
  stages::record_phase(ctx, "optimize", "v1 search: coarse grid", 7.5, "3 liger-bench process(es)");
  stages::record_phase(ctx, "optimize", "v1 build", 20.0);
  const std::string md = stages::timings_markdown(ctx);
  EXPECT_NE(md.find("| profile | baseline v0 benchmark | 4.2 | 15 case(s) at 200 ms |"), std::string::npos) << md;
  EXPECT_NE(md.find("| optimize | v1 build | 20.0 |  |"), std::string::npos) << md;
  EXPECT_NE(md.find("Totals: profile 4.2 s, optimize 27.5 s"), std::string::npos) << md;
  const auto json = nlohmann::json::parse(liger::util::read_file(dir / "optimization/timings.json"));
  EXPECT_EQ(json.size(), 3u);
  // A damaged record loses the earlier timings, not the run.
  liger::util::write_file_atomic(dir / "optimization/timings.json", "{not json");
  EXPECT_EQ(stages::timings_markdown(ctx), "");
  stages::record_phase(ctx, "finalize", "A/B interleaved re-measurement", 30);
  EXPECT_NE(stages::timings_markdown(ctx).find("Totals: finalize 30.0 s"), std::string::npos);
  fs::remove_all(dir);
}

TEST(KernelPerfSearch, EveryTunedOpHasItsLibraryEntryAndExistingFiles) {
  // kernel_perf_all.sh runs every op of kernel-perf's catalogue (search_spaces.yaml): each must be
  // an op of kernels/ops.yaml, and the files the Profile checks must exist in the tree. The
  // direction matters: ops.yaml also lists what kernel-dev adds to a checkout (CI's main job adds
  // relu_squared before the tests run), and those have no search space until one is written.
  const YAML::Node catalogue = YAML::LoadFile((repo() / "skills/kernel_perf/search_spaces.yaml").string())["ops"];
  const YAML::Node library = YAML::LoadFile((repo() / "kernels/ops.yaml").string())["ops"];
  std::set<std::string> library_ops;
  for (const auto& o : library) library_ops.insert(o["name"].as<std::string>());
  ASSERT_GE(catalogue.size(), 8u);
  for (const auto& entry : catalogue) {
    const std::string name = entry.first.as<std::string>();
    EXPECT_TRUE(library_ops.count(name)) << name << " is tuned by kernel-perf but not in kernels/ops.yaml";
    const OpSpec& spec = op(name);
    for (const auto& rel : {spec.header, spec.kernel_source, spec.tuning, spec.test_file})
      EXPECT_TRUE(fs::exists(repo() / rel)) << name << ": " << rel;
    const std::string suite = spec.test_filter.substr(0, spec.test_filter.find('.'));
    EXPECT_NE(liger::util::read_file(repo() / spec.test_file).find(suite), std::string::npos) << name << ": " << suite;
  }
  EXPECT_FALSE(op("fused_linear_cross_entropy").table.present) << "its launch search would have nowhere to write";
}
