// `runs prune`: only finished runs matching the filters are deleted; a run being driven (its run
// lock held) or applying files (a live apply lock) is kept whatever its status says.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <ctime>

#include "agent_test_support.h"
#include "engine/run_state.h"
#include "liger/engine.h"
#include "liger/error.h"

namespace liger::testing {
namespace {

std::string iso_ago(long long seconds) {
  const std::time_t t = std::time(nullptr) - static_cast<std::time_t>(seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

struct Runs {
  TempDir dir;
  fs::path root = dir.path() / "runs";
  fs::path tree = dir.path() / "tree";
  fs::path add(const std::string& name, const std::string& status, long long age_seconds) {
    engine::RunState state;
    state.name = name;
    state.workflow = "kernel-dev";
    state.status = status;
    state.created_at = iso_ago(age_seconds);
    state.tree_root = tree;
    const fs::path run = root / name;
    fs::create_directories(run);
    state.save(run);
    return run;
  }
};

std::vector<std::string> names(const std::vector<engine::RunSummary>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs) out.push_back(r.name);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RunsPrune, FiltersByStatusAndAgeAndNeverTouchesUnfinishedRuns) {
  Runs r;
  r.add("a-old-completed", "completed", 10 * 86400);
  r.add("b-new-completed", "completed", 60);
  r.add("c-old-failed", "failed", 9 * 86400);
  r.add("d-old-verification-failed", "verification_failed", 8 * 86400);
  r.add("e-old-rejected", "rejected", 30 * 86400);
  r.add("f-old-parked", "awaiting_approval", 30 * 86400);
  r.add("g-old-running", "running", 30 * 86400);

  // Dry run: lists, deletes nothing.
  auto dry = engine::prune_runs(r.root, {"failed"}, engine::parse_duration("7d"), true);
  EXPECT_EQ(names(dry.removed), (std::vector<std::string>{"c-old-failed", "d-old-verification-failed"}));
  EXPECT_TRUE(fs::exists(r.root / "c-old-failed"));

  auto done = engine::prune_runs(r.root, {}, engine::parse_duration("7d"), false);
  EXPECT_EQ(names(done.removed), (std::vector<std::string>{"a-old-completed", "c-old-failed",
                                                           "d-old-verification-failed", "e-old-rejected"}));
  for (const char* gone : {"a-old-completed", "c-old-failed", "e-old-rejected"}) EXPECT_FALSE(fs::exists(r.root / gone));
  for (const char* kept : {"b-new-completed", "f-old-parked", "g-old-running"}) EXPECT_TRUE(fs::exists(r.root / kept));
}

TEST(RunsPrune, KeepsARunBeingDrivenOrHoldingALiveApplyLock) {
  Runs r;
  const fs::path driven = r.add("driven", "completed", 86400);
  const fs::path applying = r.add("applying", "completed", 86400);
  const fs::path stale = r.add("stale-lock", "completed", 86400);
  // Another process drives `driven`: the engine's run lock is held (flock is per open file).
  const int fd = ::open((driven / ".run.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  // `applying` has a claim from a live process (this one); `stale-lock` one from a dead pid.
  fs::create_directories(r.tree / ".liger-agent/locks");
  util::write_file_atomic(r.tree / ".liger-agent/locks/applying.lock",
                          nlohmann::json{{"run", "applying"}, {"pid", static_cast<long>(::getpid())}}.dump());
  util::write_file_atomic(r.tree / ".liger-agent/locks/stale-lock.lock",
                          nlohmann::json{{"run", "stale-lock"}, {"pid", 999999999L}}.dump());

  const auto result = engine::prune_runs(r.root, {"completed"}, 0, false);
  ::close(fd);
  EXPECT_EQ(names(result.removed), std::vector<std::string>{"stale-lock"});
  ASSERT_EQ(result.kept_busy.size(), 2u);
  EXPECT_TRUE(fs::exists(driven));
  EXPECT_TRUE(fs::exists(applying));
  EXPECT_FALSE(fs::exists(stale));
}

TEST(RunsPrune, DurationsAndStatusesAreChecked) {
  EXPECT_EQ(engine::parse_duration("45s"), 45);
  EXPECT_EQ(engine::parse_duration("30m"), 1800);
  EXPECT_EQ(engine::parse_duration("12h"), 43200);
  EXPECT_EQ(engine::parse_duration("7d"), 604800);
  EXPECT_EQ(engine::parse_duration("2w"), 1209600);
  for (const char* bad : {"7", "d", "-1d", "7days", ""}) EXPECT_THROW(engine::parse_duration(bad), Error) << bad;
  TempDir dir;
  EXPECT_THROW(engine::prune_runs(dir.path(), {"awaiting_approval"}, 0, false), Error);
}

TEST(RunsPrune, CommandLine) {
  Runs r;
  r.add("old-failed", "failed", 10 * 86400);
  r.add("new-failed", "failed", 10);
  auto dry = run_cli(r.dir.path(), {"--json", "--run-dir", r.root.string(), "runs", "prune", "--older-than", "7d",
                                    "--status", "failed", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  ASSERT_EQ(dry.json()["removed"].size(), 1u) << dry.out;
  EXPECT_EQ(dry.json()["removed"][0]["run"], "old-failed");
  EXPECT_TRUE(fs::exists(r.root / "old-failed"));
  auto real = run_cli(r.dir.path(), {"--run-dir", r.root.string(), "runs", "prune", "--older-than", "7d"});
  ASSERT_EQ(real.exit_code, 0) << real.err;
  EXPECT_NE(real.out.find("deleted old-failed"), std::string::npos) << real.out;
  EXPECT_EQ(real.out.find("STATUS"), std::string::npos) << "prune must not also print the run list";
  EXPECT_FALSE(fs::exists(r.root / "old-failed"));
  EXPECT_TRUE(fs::exists(r.root / "new-failed"));
  EXPECT_EQ(run_cli(r.dir.path(), {"--run-dir", r.root.string(), "runs", "prune", "--older-than", "soon"}).exit_code, 2);
  EXPECT_EQ(run_cli(r.dir.path(), {"--run-dir", r.root.string(), "runs", "prune", "--status", "running"}).exit_code, 2);
}

}  // namespace
}  // namespace liger::testing
