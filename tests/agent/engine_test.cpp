// The engine driven in-process with workflows defined here, each test in a fresh temp dir.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "agent_test_support.h"
#include "engine/apply.h"
#include "engine/run_state.h"
#include "liger/engine.h"
#include "liger/error.h"

namespace liger::engine {
namespace {

using testing::snapshot_tree;
using testing::TempDir;

// Counts stage executions in a file, so runs in forked children are counted too.
int count_of(const fs::path& file) {
  std::ifstream in(file);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}
void bump(const fs::path& file) { std::ofstream(file, std::ios::app) << "x\n"; }

struct Fixture {
  TempDir dir;
  fs::path tree = dir.path() / "repo";
  fs::path runs = dir.path() / "runs";
  fs::path counts = dir.path() / "counts";
  Config config = Config::defaults();
  WorkflowRegistry registry;
  Workflow workflow;

  Fixture() {
    fs::create_directories(tree);
    fs::create_directories(counts);
    util::write_file_atomic(tree / "out" / "result.txt", "original contents\n");
    util::write_file_atomic(dir.path() / "schema.yaml",
                            "type: map\nfields:\n  value: {type: string, required: true}\n"
                            "  mode: {type: string, enum: [fast, slow]}\n");
    workflow.name = "testflow";
    workflow.profile_schema = dir.path() / "schema.yaml";
    workflow.understand = [this](StageContext& ctx) {
      bump(counts / "understand");
      ctx.profile["value"] = ctx.input.value("value", "hello");
      ctx.profile["mode"] = "fast";
      return StageResult{};
    };
    workflow.act = [this](StageContext& ctx) {
      bump(counts / "act");
      ctx.staging->write("out/result.txt", ctx.profile["value"].as<std::string>() + " attempt " +
                                               std::to_string(ctx.attempt) + "\n");
      ctx.staging->write("out/new/extra.txt", "new file\n");
      StageResult result;
      if (!ctx.previous_failures.empty()) result.note("addressed: " + ctx.previous_failures.front().summary);
      return result;
    };
    workflow.verify = [this](StageContext& ctx) {
      bump(counts / "verify");
      StageResult result;
      if (!fs::exists(ctx.tree_root / "out/result.txt")) result.fail("result missing");
      return result;
    };
  }

  EngineOptions options(CheckpointPolicy policy) {
    EngineOptions o;
    o.run_root = runs;
    o.checkpoints = policy;
    o.config = &config;
    o.quiet = true;
    return o;
  }
  RunRequest request() {
    RunRequest r;
    r.workflow = "testflow";
    r.label = "case";
    r.tree_root = tree;
    r.arguments = {{"value", "hello"}};
    return r;
  }
  void register_workflow() { registry.add(workflow); }
};

TEST(Engine, AutonomousRunCompletesAndAppliesStagedFiles) {
  Fixture f;
  f.register_workflow();
  Engine engine(f.registry, f.options(CheckpointPolicy::AutoApprove));
  const RunOutcome outcome = engine.start(f.request());
  EXPECT_EQ(outcome.exit_code, 0) << outcome.message;
  EXPECT_EQ(outcome.status, "completed");
  EXPECT_EQ(util::read_file(f.tree / "out/result.txt"), "hello attempt 1\n");
  for (const char* file : {"state.json", "profile.yaml", "report.md", "report.json", "logs/run.log",
                           "input/arguments.json", "staging/out/result.txt", "staged.diff"})
    EXPECT_TRUE(fs::exists(outcome.run_dir / file)) << file;
  EXPECT_NE(util::read_file(outcome.run_dir / "staged.diff").find("-original contents"), std::string::npos);
  EXPECT_FALSE(fs::exists(f.tree / ".liger-agent/locks/" / (outcome.name + ".lock"))) << "lock released";
}

TEST(Engine, UnregisteredWorkflowFailsClearlyWithoutCreatingARun) {
  Fixture f;
  Engine engine(f.registry, f.options(CheckpointPolicy::AutoApprove));
  try {
    engine.start(f.request());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stages are not registered"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(f.runs));
}

TEST(Engine, RunKilledMidStageResumesFromTheLastCompletedStage) {
  Fixture f;
  const fs::path kill_marker = f.dir.path() / "kill-in-act";
  util::write_file_atomic(kill_marker, "");
  auto act = f.workflow.act;
  f.workflow.act = [act, kill_marker](StageContext& ctx) {
    if (fs::exists(kill_marker)) {
      ctx.staging->write("out/half.txt", "partial");
      ::raise(SIGKILL);  // a crash in the middle of Act: no cleanup runs
    }
    return act(ctx);
  };
  f.register_workflow();

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Engine engine(f.registry, f.options(CheckpointPolicy::AutoApprove));
    engine.start(f.request());
    _exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child should have died in Act";

  const auto runs = list_runs(f.runs);
  ASSERT_EQ(runs.size(), 1u);
  const RunState killed = RunState::load(runs[0].run_dir);
  EXPECT_EQ(killed.stages.at("understand").status, "done");
  EXPECT_EQ(killed.stages.at("act").status, "running");
  EXPECT_EQ(util::read_file(f.tree / "out/result.txt"), "original contents\n") << "tree untouched by the crash";

  fs::remove(kill_marker);
  Engine engine(f.registry, f.options(CheckpointPolicy::AutoApprove));
  const RunOutcome outcome = engine.resume(runs[0].run_dir);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.message;
  EXPECT_EQ(count_of(f.counts / "understand"), 1) << "understand must not run again";
  EXPECT_EQ(count_of(f.counts / "act"), 1) << "act re-runs (its first run died before counting)";
  EXPECT_EQ(util::read_file(f.tree / "out/result.txt"), "hello attempt 1\n");
  EXPECT_FALSE(fs::exists(f.tree / "out/half.txt")) << "the dead attempt's staging was discarded";
  EXPECT_EQ(RunState::load(runs[0].run_dir).stages.at("act").runs, 2);
}

TEST(Engine, InterruptLeavesTheRunResumableWithExit130) {
  Fixture f;
  auto act = f.workflow.act;
  bool interrupt = true;
  // The real handler: SIGINT only sets the flag, the engine notices after the stage returns.
  signals::install_handlers();
  f.workflow.act = [act, &interrupt](StageContext& ctx) {
    if (interrupt) ::raise(SIGINT);
    return act(ctx);
  };
  f.register_workflow();
  Engine engine(f.registry, f.options(CheckpointPolicy::AutoApprove));
  const RunOutcome first = engine.start(f.request());
  signals::reset_for_testing();
  EXPECT_EQ(first.exit_code, 130);
  EXPECT_EQ(first.status, "interrupted");
  EXPECT_EQ(RunState::load(first.run_dir).stages.at("act").status, "interrupted");
  EXPECT_EQ(util::read_file(f.tree / "out/result.txt"), "original contents\n");

  interrupt = false;
  const RunOutcome second = engine.resume(first.run_dir);
  EXPECT_EQ(second.exit_code, 0) << second.message;
  EXPECT_EQ(count_of(f.counts / "understand"), 1);
  EXPECT_EQ(count_of(f.counts / "act"), 2);
}

// A signal stops a stage's tools, and the stage then trips over their missing output: the run
// must read as interrupted (exit 130, resumable), never as a failure or an internal error.
TEST(Engine, StageThatThrowsAfterASignalIsInterruptedNotFailed) {
  for (const bool liger_error : {false, true}) {
    SCOPED_TRACE(liger_error ? "liger::Error" : "std::out_of_range");
    Fixture f;
    auto verify = f.workflow.verify;
    bool interrupt = true;
    signals::install_handlers();
    f.workflow.verify = [verify, &interrupt, liger_error](StageContext& ctx) {
      if (interrupt) {
        ::raise(SIGTERM);
        if (liger_error) throw Error(ErrorKind::Toolchain, "the build tool printed nothing");
        (void)std::string().substr(1);  // what an empty tool output did to Verify's excerpt
      }
      return verify(ctx);
    };
    f.register_workflow();
    Engine engine(f.registry, f.options(CheckpointPolicy::AutoApprove));
    const RunOutcome first = engine.start(f.request());
    signals::reset_for_testing();
    EXPECT_EQ(first.exit_code, 130) << first.message;
    EXPECT_EQ(first.status, "interrupted");
    const RunState state = RunState::load(first.run_dir);
    EXPECT_EQ(state.stages.at("verify").status, "interrupted");
    EXPECT_FALSE(state.error.has_value()) << state.error->message;
    EXPECT_NE(first.message.find("liger-agent resume"), std::string::npos) << first.message;
    EXPECT_NE(first.message.find("liger-agent reject"), std::string::npos) << "the applied files stay: " << first.message;

    interrupt = false;
    const RunOutcome second = engine.resume(first.run_dir);
    EXPECT_EQ(second.exit_code, 0) << second.message;
    EXPECT_EQ(count_of(f.counts / "understand"), 1);
    EXPECT_EQ(RunState::load(first.run_dir).stages.at("verify").runs, 2) << "resume re-runs the interrupted stage";
  }
}

// A run whose Verify stage is interrupted by SIGTERM (as a user's Ctrl-C or a killed job would).
void interrupt_in_verify(Fixture& f) {
  signals::install_handlers();
  f.workflow.verify = [](StageContext&) -> StageResult {
    ::raise(SIGTERM);
    return StageResult{};
  };
  f.register_workflow();
}

// A run killed after apply whose state.json is then lost (deleted, or garbage): its claim must
// keep protecting the applied files, every command must say what happened, and `reject` must
// still put the tree back and release the claim.
TEST(Engine, RunThatLostItsStateAfterApplyCanStillBeRejected) {
  for (const bool garbage : {false, true}) {
    SCOPED_TRACE(garbage ? "state.json garbage" : "state.json deleted");
    Fixture f;
    interrupt_in_verify(f);
    const auto before = snapshot_tree(f.tree);
    Engine engine(f.registry, f.options(CheckpointPolicy::AutoApprove));
    const RunOutcome first = engine.start(f.request());
    signals::reset_for_testing();
    ASSERT_EQ(first.exit_code, 130) << first.message;
    ASSERT_EQ(util::read_file(f.tree / "out/result.txt"), "hello attempt 1\n");
    if (garbage) util::write_file_atomic(first.run_dir / "state.json", "{\"format_version\": 1, \"name\": [");
    else fs::remove(first.run_dir / "state.json");
    const std::string name = first.run_dir.filename().string();

    EXPECT_EQ(find_run(f.runs, name), first.run_dir);
    try {
      (void)RunState::load(first.run_dir);
      FAIL() << "loading a run without a readable state must fail";
    } catch (const Error& e) {
      EXPECT_NE(e.hint().find("liger-agent reject " + name), std::string::npos) << e.what() << "\n" << e.hint();
      if (!garbage) EXPECT_NE(std::string(e.what()).find("has no state.json"), std::string::npos) << e.what();
    }
    const auto listed = list_runs(f.runs);
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].status, garbage ? "unreadable" : "no-state");

    // Another run's sweep keeps the claim: the applied files still need their owner to restore them.
    std::vector<std::string> notes;
    sweep_apply_locks(f.tree, &notes);
    EXPECT_TRUE(read_apply_lock(f.tree, name).has_value()) << (notes.empty() ? "" : notes.front());

    const RunOutcome rejected = reject_run(first.run_dir);
    EXPECT_EQ(rejected.exit_code, 0) << rejected.message;
    EXPECT_EQ(snapshot_tree(f.tree), before) << rejected.message;
    EXPECT_FALSE(read_apply_lock(f.tree, name).has_value());
  }
}

// The tree a lost-state run names in its profile header is only trusted when that tree's apply
// lock points back at the run: a hand-edited header cannot make `reject` write elsewhere.
TEST(Engine, RejectOfALostStateRunRefusesATreeWhoseLockIsNotItsOwn) {
  Fixture f;
  interrupt_in_verify(f);
  Engine engine(f.registry, f.options(CheckpointPolicy::AutoApprove));
  const RunOutcome first = engine.start(f.request());
  signals::reset_for_testing();
  ASSERT_EQ(first.exit_code, 130) << first.message;
  fs::remove(first.run_dir / "state.json");
  const fs::path elsewhere = f.dir.path() / "elsewhere";
  fs::create_directories(elsewhere);
  std::string profile = util::read_file(first.run_dir / "profile.yaml");
  const std::size_t at = profile.find("# tree: ");
  ASSERT_NE(at, std::string::npos) << profile;
  profile.replace(at, profile.find('\n', at) - at, "# tree: " + elsewhere.string());
  util::write_file_atomic(first.run_dir / "profile.yaml", profile);
  try {
    reject_run(first.run_dir);
    FAIL() << "reject restored into a tree the run never claimed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tree to restore is unknown"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(elsewhere));
  EXPECT_EQ(util::read_file(f.tree / "out/result.txt"), "hello attempt 1\n");
}

// Values in a damaged state.json that would become a size, a lock file name or a path outside
// the tree are refused when the state is read, naming the field: never an allocation failure
// ("vector::_M_default_append" from attempt = -1) or a write outside the run.
TEST(Engine, DamagedStateValuesAreNamedWhenTheStateIsRead) {
  Fixture f;
  f.register_workflow();
  Engine engine(f.registry, f.options(CheckpointPolicy::Park));
  const RunOutcome parked = engine.start(f.request());
  ASSERT_EQ(parked.exit_code, 3) << parked.message;
  const nlohmann::json good = nlohmann::json::parse(util::read_file(parked.run_dir / "state.json"));
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"attempt", -1},
      {"attempt", nlohmann::json::parse("1180591620717411303424")},
      {"attempt", "2"},
      {"max_attempts", 0},
      {"name", "../../elsewhere"},
      {"name", ""},
      {"workflow", ""},
      {"workflow", std::string(5000, 'a')},
      {"tree_root", "relative/tree"},
      {"staged_files", nlohmann::json::array({"../outside.txt"})},
      {"applied_files", nlohmann::json::array({"/etc/passwd"})},
      {"input", "x"},
      {"usage", nlohmann::json::parse(R"({"by_model": [{"provider": "x", "model": "y", "cost_usd": "free"}]})")},
  };
  for (const auto& [field, value] : cases) {
    SCOPED_TRACE(field + " = " + value.dump());
    nlohmann::json damaged = good;
    damaged[field] = value;
    util::write_file_atomic(parked.run_dir / "state.json", damaged.dump());
    try {
      (void)RunState::load(parked.run_dir);
      ADD_FAILURE() << "a damaged state was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + field + "'"), std::string::npos) << e.what();
      EXPECT_NE(e.hint().find("liger-agent reject"), std::string::npos) << e.hint();
    }
    EXPECT_THROW(engine.resume(parked.run_dir), Error);
  }
}

// A directory where the run log should be is the user's filesystem, named as such (an Io error
// with the fix), not spdlog's exception reported as a bug.
TEST(Engine, RunLogThatCannotBeOpenedIsAnIoErrorNamingIt) {
  Fixture f;
  f.register_workflow();
  Engine engine(f.registry, f.options(CheckpointPolicy::Park));
  const RunOutcome parked = engine.start(f.request());
  ASSERT_EQ(parked.exit_code, 3) << parked.message;
  fs::remove(parked.run_dir / "logs/run.log");
  fs::create_directories(parked.run_dir / "logs/run.log");
  Engine yes(f.registry, f.options(CheckpointPolicy::AutoApprove));
  try {
    yes.resume(parked.run_dir);
    FAIL() << "resume wrote no log and said nothing";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io) << e.what();
    EXPECT_NE(std::string(e.what()).find("logs/run.log"), std::string::npos) << e.what();
    EXPECT_FALSE(e.hint().empty());
  }
}

// state.json names a schema, but the run is checked against its workflow's: a schema_path
// pointed at a permissive file does not let an invalid profile through to Act.
TEST(Engine, ResumeChecksTheProfileAgainstTheWorkflowSchemaNotTheOneStateNames) {
  Fixture f;
  f.register_workflow();
  Engine engine(f.registry, f.options(CheckpointPolicy::Park));
  const RunOutcome parked = engine.start(f.request());
  ASSERT_EQ(parked.exit_code, 3) << parked.message;
  util::write_file_atomic(f.dir.path() / "anything.yaml", "type: any\n");
  nlohmann::json state = nlohmann::json::parse(util::read_file(parked.run_dir / "state.json"));
  state["schema_path"] = (f.dir.path() / "anything.yaml").string();
  util::write_file_atomic(parked.run_dir / "state.json", state.dump());
  std::string profile = util::read_file(parked.run_dir / "profile.yaml");
  profile.replace(profile.find("mode: fast"), 10, "mode: bogus");
  util::write_file_atomic(parked.run_dir / "profile.yaml", profile);
  ASSERT_EQ(approve_run(parked.run_dir).exit_code, 0);
  Engine yes(f.registry, f.options(CheckpointPolicy::AutoApprove));
  try {
    const RunOutcome outcome = yes.resume(parked.run_dir);
    FAIL() << "resumed past an invalid profile: " << outcome.message;
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), ExitCode::Usage) << e.what();
    EXPECT_NE(std::string(e.what()).find("mode"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count_of(f.counts / "act"), 0);
}

// A stage reading a recorded input value of the wrong type (state.json's `input` edited by hand)
// ends with an Io error naming state.json and the fix, not an internal error.
TEST(Engine, RecordedInputOfTheWrongTypeIsNamedNotAnInternalError) {
  Fixture f;
  auto act = f.workflow.act;
  f.workflow.act = [act](StageContext& ctx) {
    if (ctx.input.value("fast", false)) return act(ctx);  // throws json::type_error on a string
    return act(ctx);
  };
  f.register_workflow();
  Engine engine(f.registry, f.options(CheckpointPolicy::Park));
  const RunOutcome parked = engine.start(f.request());
  ASSERT_EQ(parked.exit_code, 3) << parked.message;
  nlohmann::json state = nlohmann::json::parse(util::read_file(parked.run_dir / "state.json"));
  state["input"]["fast"] = "yes";
  util::write_file_atomic(parked.run_dir / "state.json", state.dump());
  Engine yes(f.registry, f.options(CheckpointPolicy::AutoApprove));
  try {
    yes.resume(parked.run_dir);
    FAIL() << "resumed with a recorded value of the wrong type";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io) << e.what();
    EXPECT_NE(std::string(e.what()).find("state.json"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("liger-agent reject"), std::string::npos) << e.hint();
  }
}

// A run SIGKILLed mid-stage keeps `running` in its state; `runs` and `show` must not claim it is
// still going: nobody holds its run lock, so it is shown `killed`, and `running` only while a
// process holds the lock.
TEST(Engine, RunningRunWithoutAProcessIsShownKilled) {
  Fixture f;
  f.register_workflow();
  Engine engine(f.registry, f.options(CheckpointPolicy::Park));
  const RunOutcome parked = engine.start(f.request());
  ASSERT_EQ(parked.exit_code, 3) << parked.message;
  RunState state = RunState::load(parked.run_dir);
  state.status = "running";  // what a SIGKILL mid-stage leaves
  state.save(parked.run_dir);
  EXPECT_EQ(list_runs(f.runs).at(0).status, "killed");
  EXPECT_EQ(read_run_state(parked.run_dir)["status"], "killed");
  {
    RunDirectoryLock driving(parked.run_dir);
    EXPECT_EQ(list_runs(f.runs).at(0).status, "running");
    EXPECT_EQ(read_run_state(parked.run_dir)["status"], "running");
  }
}

TEST(Engine, ParkedCheckpointsNeedApproveThenResume) {
  Fixture f;
  f.register_workflow();
  Engine engine(f.registry, f.options(CheckpointPolicy::Park));
  RunOutcome outcome = engine.start(f.request());
  EXPECT_EQ(outcome.exit_code, 3);
  EXPECT_EQ(outcome.pending_checkpoint, "profile");
  EXPECT_NE(outcome.message.find("liger-agent approve"), std::string::npos);

  try {
    engine.resume(outcome.run_dir);
    FAIL() << "resume must refuse while the checkpoint is pending";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), ExitCode::AwaitingApproval);
  }
  approve_run(outcome.run_dir);
  outcome = engine.resume(outcome.run_dir);
  EXPECT_EQ(outcome.exit_code, 3);
  EXPECT_EQ(outcome.pending_checkpoint, "diff");
  EXPECT_EQ(util::read_file(f.tree / "out/result.txt"), "original contents\n") << "nothing applied before approval";
  approve_run(outcome.run_dir);
  outcome = engine.resume(outcome.run_dir);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.message;
  EXPECT_EQ(util::read_file(f.tree / "out/result.txt"), "hello attempt 1\n");
  EXPECT_EQ(count_of(f.counts / "understand"), 1);
}

TEST(Engine, ApproveRefusesUndecidedAndInvalidProfiles) {
  Fixture f;
  f.register_workflow();
  Engine engine(f.registry, f.options(CheckpointPolicy::Park));
  const RunOutcome outcome = engine.start(f.request());
  ASSERT_EQ(outcome.exit_code, 3);
  const fs::path profile = outcome.run_dir / "profile.yaml";

  util::write_file_atomic(profile, "value: {undecided: \"which value?\"}\nmode: fast\n");
  try {
    approve_run(outcome.run_dir);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("value: which value?"), std::string::npos) << e.what();
  }
  util::write_file_atomic(profile, "value: ok\nmode: medium\n");
  try {
    approve_run(outcome.run_dir);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":2:7: mode: value not allowed; found \"medium\"; allowed: one of: fast, slow"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(e.exit_code(), ExitCode::Usage);
  }
  util::write_file_atomic(profile, "value: edited by hand\nmode: slow\n");
  approve_run(outcome.run_dir);
  Engine autonomous(f.registry, f.options(CheckpointPolicy::AutoApprove));
  EXPECT_EQ(autonomous.resume(outcome.run_dir).exit_code, 0);
  EXPECT_EQ(util::read_file(f.tree / "out/result.txt"), "edited by hand attempt 1\n");
}

TEST(Engine, AutonomousModeStillStopsOnUndecidedFields) {
  Fixture f;
  f.workflow.understand = [](StageContext& ctx) {
    ctx.profile["value"]["undecided"] = "the builtin provider cannot tell";
    return StageResult{};
  };
  f.register_workflow();
  Engine engine(f.registry, f.options(CheckpointPolicy::AutoApprove));
  const RunOutcome outcome = engine.start(f.request());
  EXPECT_EQ(outcome.exit_code, 3);
  ASSERT_EQ(outcome.undecided.size(), 1u);
  EXPECT_EQ(outcome.undecided[0], "value: the builtin provider cannot tell");
}

// A profile the loader would refuse (over util::kMaxProfileBytes) is refused before it is written,
// naming the input as the cause; before, the engine wrote it and then failed to read it back.
TEST(Engine, ProfileOverTheDocumentLimitIsRefusedBeforeItIsWritten) {
  Fixture f;
  f.workflow.understand = [](StageContext& ctx) {
    ctx.profile["value"] = std::string(1100 * 1024, 'x');
    ctx.profile["mode"] = "fast";
    return StageResult{};
  };
  f.register_workflow();
  Engine engine(f.registry, f.options(CheckpointPolicy::AutoApprove));
  try {
    engine.start(f.request());
    FAIL() << "a 1.1 MiB profile was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too large once written out as a profile"), std::string::npos) << e.what();
  }
  for (const auto& run : fs::directory_iterator(f.runs)) EXPECT_FALSE(fs::exists(run.path() / "profile.yaml"));
}

TEST(Engine, RejectedRunLeavesTheTreeByteForByteUntouched) {
  Fixture f;
  f.register_workflow();
  const auto before = snapshot_tree(f.tree);
  Engine engine(f.registry, f.options(CheckpointPolicy::Park));
  RunOutcome outcome = engine.start(f.request());
  approve_run(outcome.run_dir);
  outcome = engine.resume(outcome.run_dir);
  ASSERT_EQ(outcome.pending_checkpoint, "diff");
  outcome = reject_run(outcome.run_dir, "not what I wanted");
  EXPECT_EQ(outcome.status, "rejected");
  EXPECT_EQ(snapshot_tree(f.tree), before);
  EXPECT_TRUE(fs::exists(outcome.run_dir / "staging/out/result.txt")) << "staged files kept for inspection";
  EXPECT_THROW(engine.resume(outcome.run_dir), Error);
}

TEST(Engine, InteractiveRejectAtTheTerminal) {
  Fixture f;
  f.register_workflow();
  const auto before = snapshot_tree(f.tree);
  std::istringstream answers("x\na\nr\n");  // nonsense, approve profile, reject diff
  std::ostringstream shown;
  auto options = f.options(CheckpointPolicy::Interactive);
  options.prompt_in = &answers;
  options.prompt_out = &shown;
  Engine engine(f.registry, options);
  const RunOutcome outcome = engine.start(f.request());
  EXPECT_EQ(outcome.exit_code, 5);
  EXPECT_NE(shown.str().find("value: hello"), std::string::npos) << "the profile is shown";
  EXPECT_NE(shown.str().find("+hello attempt 1"), std::string::npos) << "the diff is shown";
  EXPECT_NE(shown.str().find("please answer"), std::string::npos);
  EXPECT_EQ(snapshot_tree(f.tree), before);
}

TEST(Engine, InteractiveEditRevalidatesUntilTheProfileIsValid) {
  Fixture f;
  f.register_workflow();
  // First edit makes the profile invalid (rejected, profile unchanged), second one is valid.
  const fs::path script = f.dir.path() / "editor.sh";
  const fs::path edits = f.dir.path() / "edit-count";
  util::write_file_atomic(script,
                          "#!/bin/sh\nn=$(cat " + edits.string() + " 2>/dev/null || echo 0)\necho $((n+1)) > " +
                              edits.string() + "\nif [ $n = 0 ]; then printf 'value: x\\nmode: turbo\\n' > \"$1\"; "
                              "else printf 'value: from editor\\nmode: slow\\n' > \"$1\"; fi\n");
  fs::permissions(script, fs::perms::owner_all);
  ConfigInputs inputs;
  inputs.flags["editor"] = script.string();
  f.config = Config::load(inputs);
  std::istringstream answers("e\ne\na\na\n");  // edit (invalid) -> edit again (valid) -> approve x2
  std::ostringstream shown;
  auto options = f.options(CheckpointPolicy::Interactive);
  options.prompt_in = &answers;
  options.prompt_out = &shown;
  Engine engine(f.registry, options);
  const RunOutcome outcome = engine.start(f.request());
  EXPECT_EQ(outcome.exit_code, 0) << shown.str();
  EXPECT_NE(shown.str().find("mode: value not allowed; found \"turbo\""), std::string::npos) << shown.str();
  EXPECT_EQ(util::read_file(f.tree / "out/result.txt"), "from editor attempt 1\n");
}

TEST(Engine, VerifyFailingHardStopsAfterThreeAttemptsWithExit4) {
  Fixture f;
  f.workflow.verify = [&f](StageContext& ctx) {
    bump(f.counts / "verify");
    // Verify sees the applied files in the tree.
    EXPECT_EQ(util::read_file(ctx.tree_root / "out/result.txt"), "hello attempt " + std::to_string(ctx.attempt) + "\n");
    StageResult result;
    result.fail("kernel produces NaN", "max abs error: nan");
    result.warn("tolerance loose");
    return result;
  };
  f.register_workflow();
  const auto before = snapshot_tree(f.tree);
  Engine engine(f.registry, f.options(CheckpointPolicy::AutoApprove));
  const RunOutcome outcome = engine.start(f.request());
  EXPECT_EQ(outcome.exit_code, 4);
  EXPECT_EQ(outcome.status, "verification_failed");
  EXPECT_EQ(count_of(f.counts / "act"), 3);
  EXPECT_EQ(count_of(f.counts / "verify"), 3);
  EXPECT_EQ(snapshot_tree(f.tree), before) << "a failed run restores the tree";
  const RunState state = RunState::load(outcome.run_dir);
  ASSERT_EQ(state.attempts.size(), 3u);
  EXPECT_EQ(state.attempts[1].fixes.at(0), "addressed: kernel produces NaN") << "diagnostics reach Act";
  const std::string report = util::read_file(outcome.run_dir / "report.md");
  EXPECT_NE(report.find("## Diagnosis"), std::string::npos);
  EXPECT_NE(report.find("persisted through all 3 attempts"), std::string::npos) << report;
  EXPECT_NE(report.find("Fixes tried"), std::string::npos);
  EXPECT_NE(report.find("max abs error: nan"), std::string::npos);
}

TEST(Engine, AttemptLimitIsConfigurableAndASecondAttemptCanSucceed) {
  Fixture f;
  f.workflow.verify = [](StageContext& ctx) {
    StageResult result;
    if (ctx.attempt == 1) result.fail("first attempt wrong");
    return result;
  };
  f.register_workflow();
  ConfigInputs inputs;
  inputs.flags["max_attempts"] = "2";
  f.config = Config::load(inputs);
  Engine engine(f.registry, f.options(CheckpointPolicy::AutoApprove));
  const RunOutcome outcome = engine.start(f.request());
  EXPECT_EQ(outcome.exit_code, 0) << outcome.message;
  EXPECT_EQ(RunState::load(outcome.run_dir).max_attempts, 2);
  EXPECT_EQ(util::read_file(f.tree / "out/result.txt"), "hello attempt 2\n");
}

TEST(Apply, IsAllOrNothing) {
  TempDir dir;
  const fs::path tree = dir.path() / "tree", staging = dir.path() / "staging", backup = dir.path() / "backup";
  util::write_file_atomic(tree / "a.txt", "original a\n");
  util::write_file_atomic(tree / "blocker", "a file where the second target needs a directory\n");
  util::write_file_atomic(staging / "a.txt", "new a\n");
  util::write_file_atomic(staging / "new/b.txt", "new b\n");
  util::write_file_atomic(staging / "blocker/c.txt", "cannot be written\n");
  const auto before = snapshot_tree(tree);
  EXPECT_THROW(apply_staged_files(staging, tree, {"a.txt", "new/b.txt", "blocker/c.txt"}, backup, "run-x"), Error);
  EXPECT_EQ(snapshot_tree(tree), before);
  EXPECT_FALSE(fs::exists(tree / "new")) << "directories created by the failed apply are removed";

  apply_staged_files(staging, tree, {"a.txt", "new/b.txt"}, backup, "run-x");
  EXPECT_EQ(util::read_file(tree / "a.txt"), "new a\n");
  EXPECT_TRUE(restore_backups(backup, tree).tree_unchanged());
  EXPECT_EQ(snapshot_tree(tree), before);
}

TEST(Lock, OverlappingRunsConflictStaleLocksAreRemoved) {
  TempDir dir;
  // A run directory with an unfinished state holds its claim whatever happens to its process.
  const fs::path run_a = dir.path() / "runs" / "run-a";
  RunState state;
  state.name = "run-a";
  state.status = "interrupted";
  state.save(run_a);
  acquire_apply_lock(dir.path(), "run-a", run_a, {"kernels/x.cu", "docs/x.md"});
  try {
    acquire_apply_lock(dir.path(), "run-b", dir.path() / "runs/run-b", {"docs/x.md"});
    FAIL() << "overlapping files must conflict";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run-a"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("docs/x.md"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(acquire_apply_lock(dir.path(), "run-c", dir.path() / "runs/run-c", {"other.md"}));
  release_apply_lock(dir.path(), "run-a");
  EXPECT_NO_THROW(acquire_apply_lock(dir.path(), "run-b", dir.path() / "runs/run-b", {"docs/x.md"}));

  // A claim of an older version (no run directory) left by a process that is gone blocks nobody.
  pid_t child = ::fork();
  if (child == 0) _exit(0);
  ::waitpid(child, nullptr, 0);
  util::write_file_atomic(dir.path() / ".liger-agent/locks/dead.lock",
                          nlohmann::json{{"run", "dead"}, {"pid", child}, {"files", {"docs/y.md"}}}.dump());
  std::vector<std::string> notes;
  EXPECT_NO_THROW(acquire_apply_lock(dir.path(), "run-d", dir.path() / "runs/run-d", {"docs/y.md"}, &notes));
  EXPECT_FALSE(fs::exists(dir.path() / ".liger-agent/locks/dead.lock"));
  ASSERT_EQ(notes.size(), 2u) << "run-b's claim names a run directory that does not exist either";
}

TEST(Engine, ApplyRefusedWhileAnotherUnfinishedRunHoldsTheFiles) {
  Fixture f;
  f.register_workflow();
  const fs::path other_dir = f.dir.path() / "elsewhere" / "other-run";
  RunState other;
  other.name = "other-run";
  other.status = "failed";
  other.save(other_dir);
  acquire_apply_lock(f.tree, "other-run", other_dir, {"out/result.txt"});
  Engine engine(f.registry, f.options(CheckpointPolicy::AutoApprove));
  try {
    engine.start(f.request());
    FAIL() << "the claim of an unfinished run must block";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("other-run"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("liger-agent reject other-run"), std::string::npos) << e.hint();
  }
  EXPECT_EQ(util::read_file(f.tree / "out/result.txt"), "original contents\n");
  release_apply_lock(f.tree, "other-run");
  const auto runs = list_runs(f.runs);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, "failed");
  EXPECT_FALSE(read_apply_lock(f.tree, runs[0].name)) << "a run refused before applying holds no claim";
  EXPECT_EQ(engine.resume(runs[0].run_dir).exit_code, 0) << "a failed apply can be resumed once the lock is free";
}

TEST(Runs, FoundByPathNameOrUniquePrefix) {
  Fixture f;
  f.register_workflow();
  Engine engine(f.registry, f.options(CheckpointPolicy::Park));
  auto request = f.request();
  const RunOutcome first = engine.start(request);
  request.label = "other";
  const RunOutcome second = engine.start(request);
  EXPECT_EQ(find_run(f.runs, first.run_dir.string()), first.run_dir);
  EXPECT_EQ(find_run(f.runs, second.name), f.runs / second.name);
  EXPECT_EQ(find_run(f.runs, second.name.substr(0, second.name.size() - 2)), f.runs / second.name);
  try {
    find_run(f.runs, first.name.substr(0, 8));  // the date: both runs share it
    FAIL() << "an ambiguous prefix must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(first.name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(second.name), std::string::npos) << e.what();
  }
  EXPECT_THROW(find_run(f.runs, "nothing-like-this"), Error);
  const auto runs = list_runs(f.runs);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, "awaiting_approval");
  EXPECT_EQ(runs[0].pending_checkpoint, "profile");
}

TEST(StateFile, NeverPartiallyWrittenWhenTheWriterIsKilled) {
  TempDir dir;
  const fs::path file = dir.path() / "state.json";
  const std::string a = nlohmann::json{{"fill", std::string(2 << 20, 'a')}}.dump();
  const std::string b = nlohmann::json{{"fill", std::string(3 << 20, 'b')}}.dump();
  util::write_file_atomic(file, a);
  for (int round = 0; round < 5; ++round) {
    pid_t child = ::fork();
    if (child == 0) {
      for (int i = 0;; ++i) util::write_file_atomic(file, i % 2 ? a : b);
    }
    ::usleep(30'000 + round * 7'000);
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    const std::string content = util::read_file(file);
    EXPECT_TRUE(content == a || content == b) << "round " << round << ": " << content.size() << " bytes";
    // A named result: GCC's warn_unused_result (nlohmann's parse) ignores a (void) cast.
    EXPECT_NO_THROW({
      const nlohmann::json parsed = nlohmann::json::parse(content);
      EXPECT_FALSE(parsed.is_discarded());
    });
  }
}

}  // namespace
}  // namespace liger::engine
