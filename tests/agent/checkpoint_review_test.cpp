// Reviewing a checkpoint in a minute: the first screen is the workflow's summary (the diff
// checkpoint adds a diffstat), the whole profile or diff is one key away, a wrong key asks again
// without reprinting, read-only fields cannot be edited, and floats print as they were written.
#include <gtest/gtest.h>

#include <sstream>

#include "agent_test_support.h"
#include "engine/checkpoint.h"
#include "engine/diff.h"
#include "liger/error.h"
#include "liger/review.h"

namespace liger {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

const char* kSchema = R"yaml(
type: map
fields:
  op: {type: string, required: true, readonly: true, reason: "the run's subject; start a new run"}
  threads: {type: int, required: true}
  tolerance: {type: number}
)yaml";

struct Review {
  TempDir dir;
  profile::Schema schema = profile::Schema::parse(kSchema, "test-schema.yaml");
  fs::path profile = dir.path() / "profile.yaml";
  engine::CheckpointView view;
  Review() {
    util::write_file_atomic(profile, "op: relu\nthreads: 256\ntolerance: 0.95\n");
    util::write_file_atomic(engine::understood_profile_path(profile), util::read_file(profile));
    view.kind = "profile";
    view.run_name = "run-1";
    view.profile_path = profile;
    view.schema = &schema;
    view.summarize = [](const YAML::Node& p) { return "SUMMARY op=" + p["op"].as<std::string>() + "\n"; };
  }
  std::pair<engine::Decision, std::string> ask(const std::string& keys) {
    std::istringstream in(keys);
    std::ostringstream out;
    const auto decision = engine::ask_at_terminal(view, Config::load({}), in, out);
    return {decision, out.str()};
  }
};

TEST(CheckpointReview, TheFirstScreenIsTheSummaryAndAWrongKeyDoesNotReprintIt) {
  Review r;
  auto [decision, shown] = r.ask("x\nq\nv\na\n");
  EXPECT_EQ(decision, engine::Decision::Approved);
  EXPECT_EQ(count(shown, "SUMMARY op=relu"), 1u) << shown;
  EXPECT_EQ(count(shown, "please answer"), 2u) << shown;
  // the whole profile only on [v]iew, after the summary
  EXPECT_GT(shown.find("threads: 256"), shown.find("SUMMARY")) << shown;
  EXPECT_EQ(count(shown, "threads: 256"), 1u) << shown;
}

TEST(CheckpointReview, WithoutASummaryTheProfileIsShown) {
  Review r;
  r.view.summarize = nullptr;
  auto [decision, shown] = r.ask("r\n");
  EXPECT_EQ(decision, engine::Decision::Rejected);
  EXPECT_NE(shown.find("threads: 256"), std::string::npos) << shown;
}

TEST(CheckpointReview, AnEditToAReadOnlyFieldIsRefusedWithTheReason) {
  Review r;
  util::write_file_atomic(r.profile, "op: gelu\nthreads: 256\ntolerance: 0.95\n");  // a hand edit before approve
  try {
    engine::validate_profile_file(r.profile, r.schema);
    FAIL() << "the edit was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("op: read-only field was edited: the run's subject; start a new run"),
              std::string::npos)
        << e.what();
  }
  util::write_file_atomic(r.profile, "op: relu\nthreads: 128\ntolerance: 0.95\n");  // an editable field
  EXPECT_NO_THROW(engine::validate_profile_file(r.profile, r.schema));
}

TEST(CheckpointReview, TheDiffCheckpointLeadsWithADiffstat) {
  Review r;
  r.view.kind = "diff";
  r.view.diff_text = engine::unified_diff("a\nb\nc\n", "a\nB\nc\nd\n", "a/x.txt", "b/x.txt") +
                     engine::unified_diff("", "new\n", "/dev/null", "b/dir/y.txt");
  auto [decision, shown] = r.ask("a\n");
  EXPECT_EQ(decision, engine::Decision::Approved);
  const auto stat = shown.find(" x.txt     | 3 ++-");
  EXPECT_NE(stat, std::string::npos) << shown;
  EXPECT_NE(shown.find(" dir/y.txt | 1 +"), std::string::npos) << shown;
  EXPECT_NE(shown.find("2 files changed, 3 insertions(+), 1 deletion(-)"), std::string::npos) << shown;
  EXPECT_LT(stat, shown.find("+B")) << "the diffstat comes before the diff";
  EXPECT_EQ(shown.find("\033["), std::string::npos) << "no colours off a terminal";
}

TEST(CheckpointReview, DiffstatAndColours) {
  const std::string diff = engine::unified_diff(std::string(100, '\n'), std::string(50, '\n') + "x\n" + std::string(49, '\n'),
                                                "a/big.txt", "b/big.txt");
  EXPECT_NE(engine::diffstat(diff, 40).find("big.txt | 2 +-"), std::string::npos) << engine::diffstat(diff, 40);
  EXPECT_EQ(engine::diffstat(""), "");
  const std::string coloured = engine::colorize_diff("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-old\n+new\n same\n");
  EXPECT_NE(coloured.find("\033[31m-old\033[0m"), std::string::npos);
  EXPECT_NE(coloured.find("\033[32m+new\033[0m"), std::string::npos);
  EXPECT_NE(coloured.find("\033[36m@@ -1 +1 @@\033[0m"), std::string::npos);
  EXPECT_NE(coloured.find("\n same\n"), std::string::npos);
}

TEST(CheckpointReview, FloatsPrintInShortestRoundTripForm) {
  YAML::Node node;
  node["tolerance"] = 0.95;
  node["atol"] = 1e-5;
  node["ratio"] = 1.0 / 3.0;
  node["count"] = 12345678;
  const std::string text = profile::to_yaml(node);
  EXPECT_NE(text.find("tolerance: 0.95\n"), std::string::npos) << text;
  EXPECT_NE(text.find("atol: 1e-05\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ratio: 0.3333333333333333\n"), std::string::npos) << text;
  EXPECT_NE(text.find("count: 12345678\n"), std::string::npos) << text;
  // Every shortened value reads back as the same double.
  const YAML::Node back = YAML::Load(text);
  EXPECT_EQ(back["tolerance"].as<double>(), 0.95);
  EXPECT_EQ(back["ratio"].as<double>(), 1.0 / 3.0);
}

TEST(CheckpointReview, ReviewTables) {
  const std::string table = review::table({"#", "decision", "value"}, {{"1", "norm_type", "rms"}, {"12", "norm_names", "[a, b]"}});
  EXPECT_EQ(table,
            "#  | decision   | value\n"
            "---+------------+-------\n"
            "1  | norm_type  | rms\n"
            "12 | norm_names | [a, b]\n");
  EXPECT_EQ(review::inline_text(YAML::Load("{undecided: \"why\"}")), "UNDECIDED (why)");
  EXPECT_EQ(review::inline_text(YAML::Load("{a: 1, b: [x, y]}")), "{a: 1, b: [x, y]}");
  EXPECT_EQ(review::inline_text(YAML::Load("\"a very long value\""), 10), "a very ...");
}

}  // namespace
}  // namespace liger
