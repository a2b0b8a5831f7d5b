// kernel-perf: the tuned-defaults table editor on every kernels/src/*/tuning.h of the repository
// (round trip byte-identical; one edited row changes only that row) and the mapping of a measured
// launch shape into a table row.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "liger/error.h"
#include "liger/util.h"
#include "workflows/kernel_perf/kernel_perf.h"
#include "workflows/kernel_perf/tuning_table.h"

namespace fs = std::filesystem;
using namespace liger::kernel_perf;

namespace {

fs::path repo() { return fs::path(LIGER_SOURCE_DIR); }
// Copies of the tables at a known state (the live ones are tuned by other work at any time).
fs::path fixtures() { return repo() / "tests/workflows/fixtures/kernel_perf"; }

std::vector<fs::path> tuning_headers() {
  std::vector<fs::path> out;
  for (const auto& dir : fs::directory_iterator(repo() / "kernels/src"))
    for (const char* name : {"tuning.h", "norm_tuning.h"})
      if (fs::exists(dir.path() / name)) out.push_back(dir.path() / name);
  std::sort(out.begin(), out.end());
  return out;
}

OpSpec spec(const std::string& op) { return load_op_spec(repo() / "skills/kernel_perf/search_spaces.yaml", op); }

}  // namespace

TEST(KernelPerfTuningTable, EveryRepositoryTableRoundTrips) {
  const auto headers = tuning_headers();
  ASSERT_GE(headers.size(), 8u);
  int arrays = 0;
  for (const auto& h : headers) {
    const std::string text = liger::util::read_file(h);
    const TuningFile f = TuningFile::parse(text);
    EXPECT_EQ(f.emit(), text) << h;
    arrays += static_cast<int>(f.arrays().size());
    for (const auto& a : f.arrays())
      for (const auto& r : a.rows) EXPECT_FALSE(r.fields.empty()) << h << " " << a.name;
  }
  EXPECT_GE(arrays, 14);
}

TEST(KernelPerfTuningTable, ParsesNestedRowsAndExpressionFields) {
  const TuningFile f = TuningFile::parse(liger::util::read_file(fixtures() / "swiglu_tuning.h"));
  const TableArray* a = f.array("kTuning");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, "TuningRow");
  ASSERT_EQ(a->rows.size(), 4u);
  // {80, int64_t{1} << 20, {128, 16, 16}}: the expression's braces stay inside its field.
  EXPECT_EQ(a->rows[0].values(), (std::vector<std::string>{"80", "int64_t{1} << 20", "128", "16", "16"}));
  EXPECT_EQ(eval_field(a->rows[0].fields[1]), 1LL << 20);
  EXPECT_EQ(eval_field("INT64_MAX"), INT64_MAX);
  EXPECT_EQ(eval_field("1 << 30"), 1LL << 30);
  EXPECT_EQ(eval_field("4096"), 4096);
  EXPECT_FALSE(eval_field("kSm80"));
  const TuningFile ce = TuningFile::parse(liger::util::read_file(fixtures() / "cross_entropy_tuning.h"));
  ASSERT_NE(ce.array("kSm90Table"), nullptr);
  EXPECT_EQ(ce.array("kSm90Table")->rows.size(), 5u);
}

TEST(KernelPerfTuningTable, EditingOneRowChangesOnlyThatRow) {
  const std::string text = liger::util::read_file(fixtures() / "rms_norm_tuning.h");
  TuningFile f = TuningFile::parse(text);
  ASSERT_EQ(f.array("kSm90")->rows[1].values(), (std::vector<std::string>{"4096", "4", "512", "1"}));
  f.set_field("kSm90", 1, 2, "256");
  const std::string out = f.emit();
  // Exactly the kSm90 line's second row differs.
  const auto line_start = text.find("inline constexpr TuningRow kSm90[]");
  ASSERT_NE(line_start, std::string::npos);
  std::string expected = text;
  const auto row = expected.find("{4096, 4, 512, 1}", line_start);
  expected.replace(row, 17, "{4096, 4, 256, 1}");
  EXPECT_EQ(out, expected);
  // The kSm80 row with the same values is untouched.
  EXPECT_NE(out.find("kSm80[] = {{1024, 4, 256, 2}, {4096, 4, 512, 1}"), std::string::npos);
  EXPECT_EQ(TuningFile::parse(out).emit(), out);
}

TEST(KernelPerfTuningTable, InsertRowKeepsTheTableStyle) {
  const std::string text = liger::util::read_file(fixtures() / "swiglu_tuning.h");
  TuningFile f = TuningFile::parse(text);
  f.insert_row_after("kTuning", 2, {"90", "int64_t{1} << 24", "512", "16", "8"});
  const std::string out = f.emit();
  EXPECT_NE(out.find("    {90, int64_t{1} << 20, {128, 16, 16}},\n    {90, int64_t{1} << 24, {512, 16, 8}},\n    {90, INT64_MAX, {256, 16, 8}},"),
            std::string::npos)
      << out;
  EXPECT_EQ(TuningFile::parse(out).array("kTuning")->rows.size(), 5u);
  // Single-line tables get ", " between rows.
  TuningFile n = TuningFile::parse(liger::util::read_file(fixtures() / "rms_norm_tuning.h"));
  n.insert_row_after("kSm90", 0, {"2048", "4", "256", "1"});
  EXPECT_NE(n.emit().find("kSm90[] = {{1024, 4, 256, 2}, {2048, 4, 256, 1}, {4096, 4, 512, 1}"), std::string::npos);
}

TEST(KernelPerfTuningTable, SizeClassLookupAndCandidateMapping) {
  // swiglu: rows keyed by sm and rows*cols.
  const OpSpec glu = spec("swiglu");
  TuningFile f = TuningFile::parse(liger::util::read_file(fixtures() / "swiglu_tuning.h"));
  EXPECT_EQ(table_row_for(f, glu.table, 90, case_size(glu.table, "4096x4096")), 3u);
  EXPECT_EQ(table_row_for(f, glu.table, 90, case_size(glu.table, "1024x1024")), 2u);
  EXPECT_EQ(table_row_for(f, glu.table, 80, case_size(glu.table, "1024x1024")), 0u);
  EXPECT_EQ(table_row_for(f, glu.table, 86, case_size(glu.table, "16384x14336")), 1u);
  std::string why;
  ASSERT_TRUE(apply_candidate_to_row(f, glu.table, 90, 3, {{"threads_per_block", 512}, {"vector_bytes", 8}}, 4096, 2, &why)) << why;
  EXPECT_NE(f.emit().find("{90, INT64_MAX, {512, 8, 8}}"), std::string::npos);
  EXPECT_NE(f.emit().find("{80, INT64_MAX, {256, 16, 8}}"), std::string::npos);  // sm80 untouched

  // rms_norm: per-arch arrays keyed by cols; threads/rows -> vectors per thread + min_threads.
  const OpSpec norm = spec("rms_norm");
  TuningFile n = TuningFile::parse(liger::util::read_file(fixtures() / "rms_norm_tuning.h"));
  EXPECT_EQ(table_row_for(n, norm.table, 90, case_size(norm.table, "16384x4096")), 1u);
  EXPECT_EQ(table_row_for(n, norm.table, 90, case_size(norm.table, "16384x1000000")), 3u);
  ASSERT_TRUE(apply_candidate_to_row(n, norm.table, 90, 1, {{"threads_per_block", 256}, {"rows_per_block", 1}}, 4096, 2, &why)) << why;
  EXPECT_EQ(n.array("kSm90")->rows[1].values(), (std::vector<std::string>{"4096", "2", "256", "1"}));
  // 512 threads per row cannot come out of 128 vectors (1024 bf16 columns): refused, with the reason.
  EXPECT_FALSE(apply_candidate_to_row(n, norm.table, 90, 0, {{"threads_per_block", 512}, {"rows_per_block", 1}}, 1024, 2, &why));
  EXPECT_NE(why.find("not reachable"), std::string::npos) << why;

  // cross_entropy: per-arch arrays keyed by vocab.
  const OpSpec ce = spec("cross_entropy");
  TuningFile c = TuningFile::parse(liger::util::read_file(fixtures() / "cross_entropy_tuning.h"));
  EXPECT_EQ(table_row_for(c, ce.table, 90, case_size(ce.table, "8192x128256")), 4u);
  ASSERT_TRUE(apply_candidate_to_row(c, ce.table, 90, 4, {{"threads_per_block", 512}, {"vector_bytes", 16}}, 128256, 2, &why));
  EXPECT_NE(c.emit().find("{32768, 512, 16}, {INT64_MAX, 512, 16},\n"), std::string::npos) << c.emit();
}

TEST(KernelPerfTuningTable, EveryOpInTheDataPointsAtRealFiles) {
  const YAML::Node ops = YAML::LoadFile((repo() / "skills/kernel_perf/search_spaces.yaml").string())["ops"];
  int count = 0;
  for (const auto& it : ops) {
    const OpSpec s = spec(it.first.as<std::string>());
    EXPECT_TRUE(fs::exists(repo() / s.header)) << s.header;
    EXPECT_TRUE(fs::exists(repo() / s.kernel_source)) << s.kernel_source;
    EXPECT_TRUE(fs::exists(repo() / s.tuning)) << s.tuning;
    EXPECT_TRUE(fs::exists(repo() / s.test_file)) << s.test_file;
    for (const auto& f : s.snapshot) EXPECT_TRUE(fs::exists(repo() / f)) << f;
    if (s.table.present) {
      const TuningFile f = TuningFile::parse(liger::util::read_file(repo() / s.tuning));
      for (const auto& [sm, array] : s.table.arrays) EXPECT_NE(f.array(array), nullptr) << s.name << " " << array;
    }
    ++count;
  }
  EXPECT_GE(count, 7);
  EXPECT_THROW(spec("no_such_op"), liger::Error);
}
