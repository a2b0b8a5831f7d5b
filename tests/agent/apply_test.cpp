// Apply against interruption: the persistent apply lock, SIGKILL at every step that leaves
// something on disk, SIGTERM during Verify, symlinks in the tree, and reports that tell the
// truth about the tree.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>

#include "agent_test_support.h"
#include "engine/apply.h"
#include "engine/run_state.h"
#include "liger/engine.h"
#include "liger/error.h"

namespace liger::engine {
namespace {

using testing::TempDir;

// Every entry under `root` except the agent's own .liger-agent/, symlinks as links (not
// followed), files with their permissions.
std::map<std::string, std::string> exact_tree(const fs::path& root) {
  std::map<std::string, std::string> entries;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (it->path().filename() == ".liger-agent") {
      it.disable_recursion_pending();
      continue;
    }
    const std::string rel = fs::relative(it->path(), root).string();
    const auto status = fs::symlink_status(it->path());
    if (status.type() == fs::file_type::symlink) {
      entries[rel] = "link -> " + fs::read_symlink(it->path()).string();
    } else if (status.type() == fs::file_type::directory) {
      entries[rel] = "dir";
    } else {
      entries[rel] = "file " + std::to_string(static_cast<int>(status.permissions())) + ": " + util::read_file(it->path());
    }
  }
  return entries;
}

// Temp files of any kind the engine writes: liger-agent's tree writer and util::write_file_atomic.
std::vector<std::string> temp_files(const fs::path& root) {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(".liger-agent-tmp") || name.starts_with(".tmp-")) found.push_back(it->path().string());
  }
  return found;
}

pid_t dead_pid() {
  pid_t child = ::fork();
  if (child == 0) _exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

// A repository with a shared list file (like ops.yaml: each run appends its op to what the tree
// holds at Act time), a file with unusual permissions, and a symlink the run overwrites.
struct Repo {
  TempDir dir;
  fs::path tree = dir.path() / "repo";
  fs::path runs = dir.path() / "runs";
  Config config = Config::defaults();
  WorkflowRegistry registry;
  Workflow workflow;
  // Verify fails the first attempt when set (so kill points cover the restore between attempts).
  bool fail_first_attempt = false;
  // Verify raises this signal when the op being verified is named here.
  std::string interrupt_op;

  Repo() {
    util::write_file_atomic(tree / "lists/ops.yaml", "ops:\n- base\n");
    util::write_file_atomic(tree / "out/result.txt", "original contents\n");
    fs::permissions(tree / "out/result.txt", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
    fs::create_symlink("result.txt", tree / "out/link.txt");
    util::write_file_atomic(dir.path() / "schema.yaml", "type: map\nfields:\n  op: {type: string, required: true}\n");
    workflow.name = "listflow";
    workflow.profile_schema = dir.path() / "schema.yaml";
    workflow.understand = [](StageContext& ctx) {
      ctx.profile["op"] = ctx.input.value("op", "alpha");
      return StageResult{};
    };
    workflow.act = [](StageContext& ctx) {
      const std::string op = ctx.profile["op"].as<std::string>();
      const std::string tag = op + " attempt " + std::to_string(ctx.attempt) + "\n";
      ctx.staging->write("lists/ops.yaml", util::read_file(ctx.tree_root / "lists/ops.yaml") + "- " + op + "\n");
      ctx.staging->write("kernels/" + op + "/kernel.cu", tag);
      ctx.staging->write("out/result.txt", tag);
      ctx.staging->write("out/link.txt", "replaces the link: " + tag);
      return StageResult{};
    };
    workflow.verify = [this](StageContext& ctx) {
      StageResult result;
      const std::string op = ctx.profile["op"].as<std::string>();
      if (op == interrupt_op) ::raise(SIGTERM);
      if (!fs::exists(ctx.tree_root / ("kernels/" + op + "/kernel.cu"))) result.fail("kernel missing");
      if (fail_first_attempt && ctx.attempt == 1) result.fail("first attempt is wrong");
      return result;
    };
  }
  void ready() {
    registry.add(workflow);
    ConfigInputs inputs;
    inputs.flags["max_attempts"] = "2";
    config = Config::load(inputs);
  }
  EngineOptions options(CheckpointPolicy policy = CheckpointPolicy::AutoApprove) {
    EngineOptions o;
    o.run_root = runs;
    o.checkpoints = policy;
    o.config = &config;
    o.quiet = true;
    return o;
  }
  RunRequest request(const std::string& op) {
    RunRequest r;
    r.workflow = "listflow";
    r.label = op;
    r.tree_root = tree;
    r.arguments = {{"op", op}};
    return r;
  }
  fs::path lock_of(const std::string& run) const { return tree / ".liger-agent/locks" / (run + ".lock"); }
};

// ---- SIGTERM during Verify ----

struct InterruptedRun {
  Repo repo;
  std::map<std::string, std::string> before;
  RunOutcome alpha;

  InterruptedRun() {
    repo.interrupt_op = "alpha";
    repo.ready();
    before = exact_tree(repo.tree);
    signals::install_handlers();
    Engine engine(repo.registry, repo.options());
    alpha = engine.start(repo.request("alpha"));
    signals::reset_for_testing();
    repo.interrupt_op.clear();
  }
};

TEST(ApplyLock, SigtermDuringVerifyKeepsTheLockAndASecondRunIsRefused) {
  InterruptedRun s;
  Repo& repo = s.repo;
  ASSERT_EQ(s.alpha.exit_code, 130) << s.alpha.message;
  EXPECT_NE(s.alpha.message.find("liger-agent reject " + s.alpha.name), std::string::npos) << s.alpha.message;
  EXPECT_TRUE(fs::exists(repo.tree / "kernels/alpha/kernel.cu")) << "the applied files stay until resume or reject";
  const auto claim = read_apply_lock(repo.tree, s.alpha.name);
  ASSERT_TRUE(claim) << "the lock outlives the process";
  EXPECT_EQ(claim->run_dir, s.alpha.run_dir);
  EXPECT_EQ(claim->files.size(), 4u);

  const auto alpha_tree = exact_tree(repo.tree);
  Engine engine(repo.registry, repo.options());
  try {
    engine.start(repo.request("beta"));
    FAIL() << "a second run writing the same list must be refused";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(s.alpha.name), std::string::npos) << what;
    EXPECT_NE(what.find("lists/ops.yaml"), std::string::npos) << what;
    EXPECT_NE(e.hint().find("liger-agent resume " + s.alpha.name), std::string::npos) << e.hint();
    EXPECT_NE(e.hint().find("liger-agent reject " + s.alpha.name), std::string::npos) << e.hint();
  }
  EXPECT_EQ(exact_tree(repo.tree), alpha_tree) << "the refused run wrote nothing";
  EXPECT_TRUE(fs::exists(repo.lock_of(s.alpha.name)));
}

TEST(ApplyLock, ResumeAfterSigtermFinishesTheRunAndReleasesTheLock) {
  InterruptedRun s;
  Repo& repo = s.repo;
  Engine engine(repo.registry, repo.options());
  EXPECT_THROW(engine.start(repo.request("beta")), Error);
  const RunOutcome resumed = engine.resume(s.alpha.run_dir);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.message;
  EXPECT_FALSE(fs::exists(repo.lock_of(s.alpha.name)));

  // The refused run continues now; its Act saw the list with alpha, which is still true.
  const auto beta_dir = list_runs(repo.runs)[0].run_dir;
  const RunOutcome beta = engine.resume(beta_dir);
  EXPECT_EQ(beta.exit_code, 0) << beta.message;
  EXPECT_EQ(util::read_file(repo.tree / "lists/ops.yaml"), "ops:\n- base\n- alpha\n- beta\n");
  EXPECT_TRUE(temp_files(repo.dir.path()).empty());
}

TEST(ApplyLock, RejectAfterSigtermRestoresTheSharedListsExactly) {
  InterruptedRun s;
  Repo& repo = s.repo;
  Engine engine(repo.registry, repo.options());
  EXPECT_THROW(engine.start(repo.request("beta")), Error);

  const RunOutcome rejected = reject_run(s.alpha.run_dir, "not now");
  EXPECT_EQ(rejected.status, "rejected");
  EXPECT_NE(rejected.message.find("the tree is unchanged"), std::string::npos) << rejected.message;
  EXPECT_EQ(exact_tree(repo.tree), s.before) << "lists, files and the symlink exactly as before the run";
  EXPECT_FALSE(fs::exists(repo.lock_of(s.alpha.name)));

  // The refused run staged its list against a tree holding alpha; that tree is gone, so its
  // diff is made again rather than writing alpha back into the list.
  const auto beta_dir = list_runs(repo.runs)[0].run_dir;
  const RunOutcome beta = engine.resume(beta_dir);
  EXPECT_EQ(beta.exit_code, 0) << beta.message;
  EXPECT_EQ(util::read_file(repo.tree / "lists/ops.yaml"), "ops:\n- base\n- beta\n");
  EXPECT_FALSE(fs::exists(repo.tree / "kernels/alpha"));
  EXPECT_EQ(RunState::load(beta_dir).stages.at("act").runs, 2);
}

TEST(ApplyLock, StaleLockOfARunThatNoLongerExistsIsCleanedWithAMessage) {
  InterruptedRun s;
  Repo& repo = s.repo;
  // The user deletes the interrupted run's directory; its files stay (nothing can restore
  // them), but its claim must not block the tree forever.
  const fs::path leftover = repo.tree / "kernels/alpha" / (".liger-agent-tmp." + s.alpha.name + ".1.0");
  util::write_file_atomic(leftover, "half");
  fs::remove_all(s.alpha.run_dir);
  Engine engine(repo.registry, repo.options());
  const RunOutcome beta = engine.start(repo.request("beta"));
  EXPECT_EQ(beta.exit_code, 0) << beta.message;
  EXPECT_FALSE(fs::exists(repo.lock_of(s.alpha.name)));
  EXPECT_FALSE(fs::exists(leftover)) << "the stale run's temp files go with its claim";
  const std::string log = util::read_file(beta.run_dir / "logs/run.log");
  EXPECT_NE(log.find("removed the stale apply lock of run '" + s.alpha.name + "' (its run directory"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("lists/ops.yaml"), std::string::npos) << "the note names the files it had claimed";
}

// ---- SIGKILL at every step of apply and restore ----

std::vector<std::string> read_lines(const fs::path& file) {
  std::vector<std::string> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Runs the engine in a child that records each apply step into `steps_file` and dies by
// SIGKILL at step `kill_at` (1-based; 0 = never). Returns whether it was killed.
bool run_killed_at(Repo& repo, int kill_at, const fs::path& steps_file) {
  pid_t child = ::fork();
  if (child == 0) {
    int count = 0;
    set_apply_step_hook([&](const std::string& step) {
      std::ofstream(steps_file, std::ios::app) << step << "\n";
      if (++count == kill_at) ::raise(SIGKILL);
    });
    Engine engine(repo.registry, repo.options());
    try {
      engine.start(repo.request("alpha"));
    } catch (...) {
      _exit(2);
    }
    _exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

std::vector<std::string> all_kill_points() {
  Repo repo;
  repo.fail_first_attempt = true;
  repo.ready();
  const fs::path steps = repo.dir.path() / "steps";
  EXPECT_FALSE(run_killed_at(repo, 0, steps));
  return read_lines(steps);
}

TEST(ApplyKill, KillPointsCoverApplyRestoreAndTheLock) {
  const auto steps = all_kill_points();
  std::string all;
  for (const auto& s : steps) all += s + "\n";
  for (const char* expected : {"claim", "backup", "manifest:applying", "temp:write:lists/ops.yaml",
                               "write:out/link.txt", "manifest:applied", "manifest:restoring",
                               "temp:restore:out/link.txt", "restore:out/result.txt", "remove:kernels/alpha/kernel.cu",
                               "manifest:restored"})
    EXPECT_NE(all.find(std::string(expected) + "\n"), std::string::npos) << expected << " missing from:\n" << all;
  EXPECT_GE(steps.size(), 30u) << all;
}

TEST(ApplyKill, EveryKillPointThenResumeCompletesWithNoTempFile) {
  const auto steps = all_kill_points();
  ASSERT_FALSE(steps.empty());
  for (std::size_t k = 1; k <= steps.size(); ++k) {
    SCOPED_TRACE("killed at step " + std::to_string(k) + ": " + steps[k - 1]);
    Repo repo;
    repo.fail_first_attempt = true;
    repo.ready();
    ASSERT_TRUE(run_killed_at(repo, static_cast<int>(k), repo.dir.path() / "steps"));
    const auto runs = list_runs(repo.runs);
    ASSERT_EQ(runs.size(), 1u);

    Engine engine(repo.registry, repo.options());
    const RunOutcome outcome = engine.resume(runs[0].run_dir);
    ASSERT_EQ(outcome.exit_code, 0) << outcome.message;
    EXPECT_EQ(temp_files(repo.dir.path()), std::vector<std::string>{});
    EXPECT_FALSE(fs::exists(repo.lock_of(outcome.name)));
    EXPECT_EQ(util::read_file(repo.tree / "lists/ops.yaml"), "ops:\n- base\n- alpha\n");
    EXPECT_EQ(util::read_file(repo.tree / "out/result.txt"), "alpha attempt 2\n");
    EXPECT_EQ(util::read_file(repo.tree / "kernels/alpha/kernel.cu"), "alpha attempt 2\n");
    const RunState state = RunState::load(runs[0].run_dir);
    EXPECT_EQ(state.status, "completed");
    EXPECT_EQ(state.applied_files, state.staged_files);
    EXPECT_EQ(backup_status(runs[0].run_dir / "backup"), BackupStatus::Applied);
  }
}

TEST(ApplyKill, EveryKillPointThenRejectRestoresTheTreeAndSaysSoTruthfully) {
  const auto steps = all_kill_points();
  ASSERT_FALSE(steps.empty());
  for (std::size_t k = 1; k <= steps.size(); ++k) {
    SCOPED_TRACE("killed at step " + std::to_string(k) + ": " + steps[k - 1]);
    Repo repo;
    repo.fail_first_attempt = true;
    repo.ready();
    const auto before = exact_tree(repo.tree);
    ASSERT_TRUE(run_killed_at(repo, static_cast<int>(k), repo.dir.path() / "steps"));
    const auto runs = list_runs(repo.runs);
    ASSERT_EQ(runs.size(), 1u);

    const RunOutcome outcome = reject_run(runs[0].run_dir);
    EXPECT_EQ(outcome.status, "rejected");
    EXPECT_NE(outcome.message.find("the tree is unchanged"), std::string::npos) << outcome.message;
    EXPECT_EQ(exact_tree(repo.tree), before);
    EXPECT_TRUE(fs::is_symlink(repo.tree / "out/link.txt"));
    EXPECT_EQ(temp_files(repo.dir.path()), std::vector<std::string>{});
    EXPECT_FALSE(fs::exists(repo.lock_of(runs[0].name)));
  }
}

TEST(ApplyKill, ResumeRemovesTempFilesOfDeadWritersOnly) {
  Repo repo;
  repo.ready();
  Engine engine(repo.registry, repo.options(CheckpointPolicy::Park));
  RunOutcome parked = engine.start(repo.request("alpha"));
  approve_run(parked.run_dir);
  parked = engine.resume(parked.run_dir);
  ASSERT_EQ(parked.pending_checkpoint, "diff");
  approve_run(parked.run_dir);
  const pid_t dead = dead_pid();
  const fs::path run_temp = parked.run_dir / (".tmp-state.json-" + std::to_string(dead) + "-42");
  const fs::path live_temp = parked.run_dir / (".tmp-report.md-" + std::to_string(::getpid()) + "-7");
  const fs::path tree_temp = repo.tree / "out" / (".liger-agent-tmp." + parked.name + "." + std::to_string(dead) + ".0");
  const fs::path foreign = repo.tree / "out" / ".liger-agent-tmp.another-run.1.0";
  for (const auto& file : {run_temp, live_temp, tree_temp, foreign}) util::write_file_atomic(file, "partial");
  const RunOutcome next = engine.resume(parked.run_dir);
  EXPECT_EQ(next.exit_code, 0) << next.message;
  EXPECT_FALSE(fs::exists(run_temp));
  EXPECT_TRUE(fs::exists(live_temp)) << "a live process may still rename it";
  EXPECT_FALSE(fs::exists(tree_temp));
  EXPECT_TRUE(fs::exists(foreign)) << "another run's temp file is not this run's to remove";
}

// ---- symlinks ----

TEST(ApplySymlink, ParentLinkLeavingTheTreeIsRefusedNamingPathAndLink) {
  TempDir dir;
  const fs::path tree = dir.path() / "tree", outside = dir.path() / "outside", staging = dir.path() / "staging";
  fs::create_directories(tree);
  fs::create_directories(outside);
  fs::create_symlink(outside, tree / "benchmarks");
  util::write_file_atomic(tree / "a.txt", "original\n");
  util::write_file_atomic(staging / "a.txt", "new\n");
  util::write_file_atomic(staging / "benchmarks/bench_x.py", "print('x')\n");
  const auto before = exact_tree(tree);
  try {
    apply_staged_files(staging, tree, {"a.txt", "benchmarks/bench_x.py"}, dir.path() / "backup", "run-x");
    FAIL() << "writing through benchmarks/ would leave the tree";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("benchmarks/bench_x.py"), std::string::npos) << what;
    EXPECT_NE(what.find("'benchmarks' is a symlink to '" + outside.string() + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("outside the repository"), std::string::npos) << what;
  }
  EXPECT_TRUE(fs::is_empty(outside));
  EXPECT_EQ(exact_tree(tree), before) << "checked before the first write";

  // A link that stays inside the tree is written through, like a directory.
  fs::create_directories(tree / "real");
  fs::remove(tree / "benchmarks");
  fs::create_symlink("real", tree / "benchmarks");
  apply_staged_files(staging, tree, {"a.txt", "benchmarks/bench_x.py"}, dir.path() / "backup", "run-x");
  EXPECT_EQ(util::read_file(tree / "real/bench_x.py"), "print('x')\n");
  EXPECT_TRUE(restore_backups(dir.path() / "backup", tree).tree_unchanged());
  EXPECT_FALSE(fs::exists(tree / "real/bench_x.py"));
}

TEST(ApplySymlink, EngineRunRefusesAndLeavesNothingOutsideTheTree) {
  Repo repo;
  repo.workflow.act = [](StageContext& ctx) {
    ctx.staging->write("out/result.txt", "new\n");
    ctx.staging->write("benchmarks/bench_alpha.py", "print('bench')\n");
    return StageResult{};
  };
  repo.ready();
  const fs::path outside = repo.dir.path() / "outside-benchmarks";
  fs::create_directories(outside);
  fs::create_symlink(outside, repo.tree / "benchmarks");
  const auto before = exact_tree(repo.tree);
  Engine engine(repo.registry, repo.options());
  try {
    engine.start(repo.request("alpha"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a symlink to"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(outside));
  EXPECT_EQ(exact_tree(repo.tree), before);
  EXPECT_FALSE(fs::exists(repo.lock_of(list_runs(repo.runs)[0].name))) << "nothing applied, nothing locked";
}

TEST(ApplySymlink, LinksAreBackedUpAsLinksAndRestoredAsLinks) {
  TempDir dir;
  const fs::path tree = dir.path() / "tree", staging = dir.path() / "staging", backup = dir.path() / "backup";
  const fs::path outside_file = dir.path() / "shared-notes.md";
  util::write_file_atomic(outside_file, "outside content\n");
  util::write_file_atomic(tree / "docs/real.md", "in-tree target\n");
  fs::create_symlink("real.md", tree / "docs/api.md");
  fs::create_symlink(outside_file, tree / "docs/notes.md");
  util::write_file_atomic(staging / "docs/api.md", "generated api\n");
  util::write_file_atomic(staging / "docs/notes.md", "generated notes\n");
  const auto before = exact_tree(tree);

  apply_staged_files(staging, tree, {"docs/api.md", "docs/notes.md"}, backup, "run-x");
  EXPECT_EQ(util::read_file(outside_file), "outside content\n") << "the link is replaced, never written through";
  EXPECT_EQ(util::read_file(tree / "docs/real.md"), "in-tree target\n");
  EXPECT_FALSE(fs::is_symlink(tree / "docs/api.md"));
  EXPECT_FALSE(fs::exists(backup / "files/docs/notes.md")) << "the backup is the link, not its target's content";

  const RestoreReport report = restore_backups(backup, tree);
  EXPECT_TRUE(report.tree_unchanged()) << report.summary();
  ASSERT_TRUE(fs::is_symlink(tree / "docs/api.md"));
  EXPECT_EQ(fs::read_symlink(tree / "docs/api.md"), fs::path("real.md"));
  ASSERT_TRUE(fs::is_symlink(tree / "docs/notes.md"));
  EXPECT_EQ(fs::read_symlink(tree / "docs/notes.md"), outside_file);
  EXPECT_EQ(exact_tree(tree), before);
  EXPECT_EQ(util::read_file(outside_file), "outside content\n");
}

// ---- reports tell the truth ----

TEST(Restore, AFileChangedAfterApplyIsRestoredAndItsContentKept) {
  TempDir dir;
  const fs::path tree = dir.path() / "tree", staging = dir.path() / "staging", backup = dir.path() / "backup";
  util::write_file_atomic(tree / "list.yaml", "- a\n");
  util::write_file_atomic(staging / "list.yaml", "- a\n- mine\n");
  apply_staged_files(staging, tree, {"list.yaml"}, backup, "run-x");
  util::write_file_atomic(tree / "list.yaml", "- a\n- mine\n- someone else's\n");
  const RestoreReport report = restore_backups(backup, tree);
  EXPECT_TRUE(report.tree_unchanged());
  EXPECT_EQ(util::read_file(tree / "list.yaml"), "- a\n");
  ASSERT_EQ(report.displaced, std::vector<std::string>{"list.yaml"});
  EXPECT_EQ(util::read_file(backup / "displaced/list.yaml"), "- a\n- mine\n- someone else's\n");
  EXPECT_NE(report.summary().find("list.yaml had been changed after apply"), std::string::npos) << report.summary();
  EXPECT_TRUE(restore_backups(backup, tree).already_restored) << "a finished restore is not repeated";
}

TEST(Restore, RejectThatCannotRestoreSaysSoAndKeepsTheLock) {
  Repo repo;
  repo.interrupt_op = "alpha";
  repo.ready();
  signals::install_handlers();
  Engine engine(repo.registry, repo.options());
  const RunOutcome alpha = engine.start(repo.request("alpha"));
  signals::reset_for_testing();
  ASSERT_EQ(alpha.exit_code, 130);
  // Something replaces a file the run created with a non-empty directory: restore cannot
  // remove it, and must not claim the tree is unchanged.
  fs::remove(repo.tree / "kernels/alpha/kernel.cu");
  util::write_file_atomic(repo.tree / "kernels/alpha/kernel.cu/inside.txt", "not ours\n");
  try {
    reject_run(alpha.run_dir);
    FAIL() << "an incomplete restore must not be reported as a rejection that left the tree unchanged";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("NOT as it was"), std::string::npos) << what;
    EXPECT_NE(what.find("kernels/alpha/kernel.cu"), std::string::npos) << what;
    EXPECT_EQ(what.find("the tree is unchanged"), std::string::npos) << what;
  }
  EXPECT_TRUE(fs::exists(repo.lock_of(alpha.name)));
  EXPECT_EQ(RunState::load(alpha.run_dir).status, "interrupted");
  EXPECT_EQ(util::read_file(repo.tree / "lists/ops.yaml"), "ops:\n- base\n") << "the rest was restored";

  fs::remove_all(repo.tree / "kernels/alpha/kernel.cu");
  const RunOutcome rejected = reject_run(alpha.run_dir);
  EXPECT_NE(rejected.message.find("the tree is unchanged"), std::string::npos) << rejected.message;
  EXPECT_FALSE(fs::exists(repo.tree / "kernels"));
  EXPECT_FALSE(fs::exists(repo.lock_of(alpha.name)));
}

TEST(Restore, ApplyOverATreeChangedSinceActStagesAgain) {
  Repo repo;
  repo.ready();
  Engine engine(repo.registry, repo.options(CheckpointPolicy::Park));
  RunOutcome outcome = engine.start(repo.request("alpha"));
  approve_run(outcome.run_dir);
  outcome = engine.resume(outcome.run_dir);
  ASSERT_EQ(outcome.pending_checkpoint, "diff");
  approve_run(outcome.run_dir);
  util::write_file_atomic(repo.tree / "lists/ops.yaml", "ops:\n- base\n- added by hand\n");
  outcome = engine.resume(outcome.run_dir);
  EXPECT_EQ(outcome.exit_code, 3) << "the new diff needs approval again: " << outcome.message;
  EXPECT_EQ(outcome.pending_checkpoint, "diff");
  EXPECT_EQ(util::read_file(repo.tree / "lists/ops.yaml"), "ops:\n- base\n- added by hand\n");
  EXPECT_NE(util::read_file(outcome.run_dir / "staged.diff").find("+- alpha"), std::string::npos);
  approve_run(outcome.run_dir);
  outcome = engine.resume(outcome.run_dir);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.message;
  EXPECT_EQ(util::read_file(repo.tree / "lists/ops.yaml"), "ops:\n- base\n- added by hand\n- alpha\n");
}

}  // namespace
}  // namespace liger::engine
