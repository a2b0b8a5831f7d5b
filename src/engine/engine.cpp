#include "liger/engine.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "engine/apply.h"
#include "engine/approval.h"
#include "engine/checkpoint.h"
#include "engine/diff.h"
#include "engine/report.h"
#include "engine/run_state.h"
#include "liger/error.h"
#include "liger/llm/redact.h"
#include "liger/llm/usage.h"
#include "liger/process.h"
#include "liger/profile.h"
#include "liger/util.h"
#include "util/input_limits.h"

namespace liger::engine {

namespace {

constexpr const char* kStages[] = {"understand", "act", "apply", "verify"};

bool is_finished(const std::string& status) {
  return status == "completed" || status == "rejected" || status == "verification_failed";
}

const Workflow& require_workflow(const WorkflowRegistry& registry, const std::string& name) {
  const Workflow* workflow = registry.find(name);
  std::string available;
  for (const auto& known : registry.names()) available += (available.empty() ? "" : ", ") + known;
  if (!workflow || !workflow->has_all_stages()) {
    throw Error(ErrorKind::Failure,
                "the " + name + " workflow's stages are not registered yet: this build has no " + name +
                    " implementation to run",
                available.empty() ? "no workflow is registered in this build"
                                  : "workflows available in this build: " + available);
  }
  return *workflow;
}

// The folder runs are created in must be a writable directory; anything else is the user's
// --run-dir (or the config key run_dir) and is reported as such, before any run exists.
void prepare_run_root(const fs::path& root) {
  const std::string named = "the run directory root '" + root.string() + "' (--run-dir, config key run_dir)";
  const std::string fix = "point --run-dir (or the config key run_dir) at a directory you can write to";
  std::error_code ec;
  const fs::file_status status = fs::status(root, ec);
  if (!ec && fs::exists(status) && !fs::is_directory(status))
    throw Error(ErrorKind::Usage, named + " is not a directory", fix);
  fs::create_directories(root, ec);
  if (ec) throw Error(ErrorKind::Usage, named + " cannot be created: " + ec.message(), fix);
  if (::access(root.c_str(), W_OK | X_OK) != 0)
    throw Error(ErrorKind::Usage, named + " is not writable: " + std::strerror(errno), fix);
}

std::shared_ptr<spdlog::logger> make_run_logger(const fs::path& run_dir, const std::string& name, bool quiet,
                                                int verbosity) {
  // Both sinks scrub API keys (and anything shaped like one) before writing. The level is set
  // on the redacting wrapper: spdlog asks the sink the logger holds whether to log.
  std::shared_ptr<spdlog::sinks::sink> file_sink;
  const fs::path log_path = run_dir / "logs" / "run.log";
  try {
    fs::create_directories(run_dir / "logs");
    file_sink = llm::make_redacting_sink(std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_path.string()));
  } catch (const std::exception& e) {
    // spdlog and std::filesystem report this in their own exception types; it is the user's
    // filesystem (a directory in the log's place, a full disk), not a bug.
    throw Error(ErrorKind::Io, "cannot open the run log " + log_path.string() + ": " + e.what(),
                "make " + log_path.string() + " a writable file (remove what is in its place, free disk space), "
                "then run the command again");
  }
  file_sink->set_level(spdlog::level::debug);
  auto stderr_sink = llm::make_redacting_sink(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  stderr_sink->set_level(quiet ? spdlog::level::err
                               : verbosity >= 2 ? spdlog::level::debug
                               : verbosity == 1 ? spdlog::level::info
                                                : spdlog::level::warn);
  auto logger = std::make_shared<spdlog::logger>(name, spdlog::sinks_init_list{file_sink, stderr_sink});
  logger->set_level(spdlog::level::debug);
  logger->flush_on(spdlog::level::debug);
  return logger;
}

}  // namespace

nlohmann::json RunOutcome::to_json() const {
  return {{"run", name},
          {"run_dir", run_dir.string()},
          {"workflow", workflow},
          {"status", status},
          {"pending_checkpoint", pending_checkpoint},
          {"undecided", undecided},
          {"message", message},
          {"exit_code", exit_code},
          {"report", (run_dir / "report.json").string()}};
}

Engine::Engine(const WorkflowRegistry& registry, EngineOptions options)
    : registry_(registry), options_(std::move(options)) {
  // Stages hand run-directory paths to tools that run in other working directories (nvcc,
  // cmake, python): a relative run root would resolve against the wrong directory there.
  options_.run_root = fs::absolute(options_.run_root).lexically_normal();
  if (!options_.config) throw Error(ErrorKind::Internal, "Engine constructed without a configuration");
  // Configure, build, test and benchmark steps run for minutes: show them unless -q.
  toolchain::set_progress_reporting(!options_.quiet);
}

RunOutcome Engine::start(const RunRequest& request) {
  const Workflow& workflow = require_workflow(registry_, request.workflow);
  profile::Schema::load_file(workflow.profile_schema);  // a broken schema fails before any run exists
  const fs::path tree_root = fs::absolute(request.tree_root.empty() ? fs::current_path() : request.tree_root);
  // Bad input is a usage error before a run directory exists, not a run parked with nothing to decide.
  if (workflow.check_request) workflow.check_request(request.arguments, request.input_text, tree_root, *options_.config);
  prepare_run_root(options_.run_root);
  const std::string base = util::now_run_stamp() + "-" + workflow.name + "-" + util::slugify(request.label);
  fs::path run_dir;
  for (int suffix = 1;; ++suffix) {
    run_dir = options_.run_root / (suffix == 1 ? base : base + "-" + std::to_string(suffix));
    if (fs::create_directory(run_dir)) break;  // atomic: concurrent starts never share a directory
  }
  fs::create_directories(run_dir / "input");
  fs::create_directories(run_dir / "staging");
  for (const auto& file : request.input_files) {
    fs::copy(file, run_dir / "input" / file.filename(),
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }
  if (!request.input_text.empty()) util::write_file_atomic(run_dir / "input" / "input.txt", request.input_text);
  util::write_file_atomic(run_dir / "input" / "arguments.json", request.arguments.dump(2) + "\n");

  RunState state;
  state.name = run_dir.filename().string();
  state.workflow = workflow.name;
  state.created_at = util::now_iso8601();
  state.tree_root = tree_root;
  state.schema_path = fs::absolute(workflow.profile_schema);
  state.input = request.arguments;
  state.max_attempts = static_cast<int>(std::max<long long>(1, options_.config->get_int("max_attempts")));
  for (const char* stage : kStages) state.stages[stage] = StageRecord{};
  state.checkpoints["profile"] = CheckpointRecord{};
  state.checkpoints["diff"] = CheckpointRecord{};
  state.save(run_dir);
  try {
    return drive(run_dir);
  } catch (const Error& error) {
    // Input only Understand could judge (a modeling file it cannot read, an op it cannot place)
    // is still a usage error: the run it made is removed, as if it had been refused up front.
    if (error.kind() == ErrorKind::Usage) {
      bool in_understand = false;
      try {
        in_understand = RunState::load(run_dir).phase == Phase::Understand;
      } catch (const Error&) {
      }
      std::error_code ec;
      if (in_understand) fs::remove_all(run_dir, ec);
    }
    throw;
  }
}

RunOutcome Engine::resume(const fs::path& run_dir) {
  RunState state = RunState::load(run_dir);
  if (is_finished(state.status)) {
    throw Error(ErrorKind::Usage, "run '" + state.name + "' has already finished (" + state.status + ")",
                "start a new run; `liger-agent show " + state.name + "` prints its report");
  }
  if (state.status == "awaiting_approval" && options_.checkpoints == CheckpointPolicy::Park) {
    throw Error(ErrorKind::AwaitingApproval,
                "run '" + state.name + "' is still waiting for approval of its " + state.pending_checkpoint() +
                    " checkpoint",
                "review it (`liger-agent show " + state.name + "`), then `liger-agent approve " + state.name +
                    "` and `liger-agent resume " + state.name + "` (or resume with --yes)");
  }
  return drive(run_dir);
}

RunOutcome Engine::drive(const fs::path& given_run_dir) {
  const fs::path run_dir = fs::absolute(given_run_dir).lexically_normal();
  RunDirectoryLock run_lock(run_dir);
  RunState state = RunState::load(run_dir);
  const Workflow& workflow = require_workflow(registry_, state.workflow);
  // What the next phases read must be what was approved: a profile or staged file edited since
  // is refused (the run stays as it was) until `approve` has seen it.
  if (auto drift = approval_drift(state, run_dir)) {
    throw Error(ErrorKind::Usage, describe_drift(*drift, state.name) + "; the run does not go on with unapproved files",
                "review it and run `liger-agent approve " + state.name + "` again, then `liger-agent resume " +
                    state.name + "`");
  }
  // The workflow's schema, not the path state.json records: state.json is a file on disk, and
  // a path in it must not choose the rules the profile is checked against (the data directory
  // may also have moved since the run started).
  state.schema_path = fs::absolute(workflow.profile_schema);
  const profile::Schema schema = profile::Schema::load_file(state.schema_path);
  auto log = make_run_logger(run_dir, state.name, options_.quiet, options_.verbosity);
  // One LLM per run: every stage of this invocation shares the provider; the ledger starts
  // from the usage earlier invocations recorded, so report.json counts the whole run.
  auto run_llm = std::make_shared<RunLlm>(*options_.config, run_dir, log);
  run_llm->ledger()->add_json(state.usage);
  auto sync_usage = [&] { state.usage = run_llm->ledger()->to_json(); };
  sync_usage();
  Staging staging(run_dir / "staging");
  const fs::path profile_path = run_dir / "profile.yaml";
  const fs::path backup_dir = run_dir / "backup";
  std::istream& prompt_in = options_.prompt_in ? *options_.prompt_in : std::cin;
  std::ostream& prompt_out = options_.prompt_out ? *options_.prompt_out : std::cerr;

  auto outcome = [&](std::string message, int exit_code) {
    RunOutcome result;
    result.run_dir = run_dir;
    result.name = state.name;
    result.workflow = state.workflow;
    result.status = state.status;
    result.pending_checkpoint = state.pending_checkpoint();
    result.undecided = state.undecided;
    result.message = std::move(message);
    result.exit_code = exit_code;
    log->info("run stops: status {}, exit {}", state.status, exit_code);
    return result;
  };
  auto announce = [&](const std::string& line) {
    log->info("{}", line);
    if (!options_.quiet) std::cerr << "==> " << line << std::endl;
  };
  auto make_context = [&] {
    StageContext ctx;
    ctx.run_dir = run_dir;
    ctx.input_dir = run_dir / "input";
    ctx.tree_root = state.tree_root;
    ctx.input = state.input;
    ctx.staging = &staging;
    ctx.log = log;
    ctx.config = options_.config;
    ctx.attempt = state.attempt;
    ctx.quiet = options_.quiet;
    ctx.run_llm = run_llm;
    if (state.attempt > 1 && state.attempts.size() >= static_cast<std::size_t>(state.attempt - 1)) {
      ctx.previous_failures = state.attempts[state.attempt - 2].hard;
      ctx.previous_warnings = state.attempts[state.attempt - 2].soft;
    }
    return ctx;
  };
  // Marks the stage running (saved before the stage starts, so a crash is visible on resume),
  // runs it, and reports interruption distinctly from failure.
  auto run_stage = [&](const char* stage, const StageFn& fn, StageContext& ctx) -> std::optional<StageResult> {
    auto& record = state.stages[stage];
    record.status = "running";
    record.runs += 1;
    record.started_at = util::now_iso8601();
    record.finished_at.clear();
    state.save(run_dir);
    announce(std::string(stage) + (state.attempt > 1 && std::string(stage) != "understand"
                                       ? " (attempt " + std::to_string(state.attempt) + ")"
                                       : ""));
    StageResult result = fn(ctx);
    sync_usage();
    record.finished_at = util::now_iso8601();
    if (signals::interrupted()) {
      record.status = "interrupted";
      return std::nullopt;
    }
    record.status = result.ok() ? "done" : "failed";
    for (const auto& f : result.hard) log->error("{}: hard failure: {} {}", stage, f.summary, f.detail);
    for (const auto& f : result.soft) log->warn("{}: warning: {} {}", stage, f.summary, f.detail);
    return result;
  };
  auto interrupted_outcome = [&] {
    state.status = "interrupted";
    state.save(run_dir);
    write_reports(run_dir, state);
    std::string message = "run '" + state.name + "' interrupted; continue it with `liger-agent resume " + state.name + "`";
    // The apply lock outlives the process: say so, and how to end it either way.
    if (tree_holds_run_files(backup_dir)) {
      message += ". Its " + std::to_string(state.applied_files.empty() ? state.staged_files.size()
                                                                      : state.applied_files.size()) +
                 " applied file(s) stay in the tree, locked for this run; `liger-agent reject " + state.name +
                 "` restores the tree instead";
    }
    return outcome(message, static_cast<int>(ExitCode::Interrupted));
  };
  // A stage that threw while a signal was pending: the stage it was in is interrupted, not failed.
  auto interrupted_after_throw = [&] {
    for (auto& [name, record] : state.stages)
      if (record.status == "running") {
        record.status = "interrupted";
        record.finished_at = util::now_iso8601();
      }
    return interrupted_outcome();
  };
  auto print_notes = [&](const std::vector<std::string>& notes) {
    for (const auto& note : notes) {
      log->warn("{}", note);
      if (!options_.quiet) std::cerr << "note: " << note << std::endl;
    }
  };
  // Puts the tree back; an incomplete restore keeps the lock and fails the run, naming the paths.
  auto restore_tree = [&](const std::string& why) {
    const RestoreReport restored = restore_backups(backup_dir, state.tree_root);
    if (!restored.tree_unchanged()) {
      throw Error(ErrorKind::Failure, "run '" + state.name + "': " + why + ", and " + restored.summary(),
                  "fix those paths (the originals are under " + (backup_dir / "files").string() +
                      "), then `liger-agent resume " + state.name + "` or `liger-agent reject " + state.name +
                      "` restores again");
    }
    state.applied_files.clear();
    release_apply_lock(state.tree_root, state.name);
    return restored;
  };
  // The checkpoint decision: recorded approvals stand; otherwise the policy decides.
  auto decide = [&](const std::string& name, const CheckpointView& view) -> Decision {
    auto& record = state.checkpoints[name];
    if (record.status == "approved") return Decision::Approved;
    if (record.status == "rejected") return Decision::Rejected;
    state.undecided = name == "profile" ? validate_profile_file(profile_path, schema) : std::vector<std::string>{};
    Decision decision = Decision::Parked;
    std::string by;
    switch (options_.checkpoints) {
      case CheckpointPolicy::AutoApprove:
        decision = state.undecided.empty() ? Decision::Approved : Decision::Parked;
        by = "--yes";
        break;
      case CheckpointPolicy::Interactive:
        decision = ask_at_terminal(view, *options_.config, prompt_in, prompt_out);
        by = "terminal";
        if (name == "profile") state.undecided = validate_profile_file(profile_path, schema);
        break;
      case CheckpointPolicy::Park: decision = Decision::Parked; break;
    }
    if (decision == Decision::Approved) {
      record = CheckpointRecord{"approved", by, util::now_iso8601(), ""};
      record_approved_digests(record, name, run_dir);
      state.status = "running";
    } else if (decision == Decision::Rejected) {
      record = CheckpointRecord{"rejected", by, util::now_iso8601(), ""};
    } else {
      record.status = "awaiting_approval";
      state.status = "awaiting_approval";
    }
    state.save(run_dir);
    log->info("checkpoint {}: {}", name, record.status);
    return decision;
  };
  auto parked_outcome = [&](const std::string& checkpoint) {
    write_reports(run_dir, state);
    std::string message = "run '" + state.name + "' is waiting for approval of its " + checkpoint + " (" +
                          (checkpoint == "profile" ? profile_path.string() : (run_dir / "staged.diff").string()) +
                          ")";
    if (!state.undecided.empty()) {
      message += "; undecided fields must be decided first:";
      for (const auto& line : group_undecided(state.undecided)) message += "\n  - " + line;
    }
    message += "\nnext: `liger-agent approve " + state.name + "`, then `liger-agent resume " + state.name + "`";
    return outcome(message, static_cast<int>(ExitCode::AwaitingApproval));
  };
  auto rejected_outcome = [&](const std::string& checkpoint) {
    const RestoreReport restored = restore_tree("rejected at the " + checkpoint + " checkpoint");
    state.status = "rejected";
    state.save(run_dir);
    write_reports(run_dir, state);
    return outcome("run '" + state.name + "' rejected at the " + checkpoint + " checkpoint; " + restored.summary() +
                       ", staged files are kept in " + staging.dir().string(),
                   static_cast<int>(ExitCode::Rejected));
  };
  auto release_lock_if_tree_clean = [&] {
    try {
      if (!tree_holds_run_files(backup_dir)) release_apply_lock(state.tree_root, state.name);
    } catch (const std::exception&) {
      // An unreadable manifest: keep the lock, `reject` reports the problem.
    }
  };

  // A process killed mid-write leaves temp files behind; none survives into this invocation.
  remove_orphan_run_temps(run_dir);
  {
    std::vector<std::string> files = state.staged_files;
    files.insert(files.end(), state.applied_files.begin(), state.applied_files.end());
    if (auto claim = read_apply_lock(state.tree_root, state.name))
      files.insert(files.end(), claim->files.begin(), claim->files.end());
    remove_temp_files(state.tree_root, state.name, files);
    std::vector<std::string> notes;
    sweep_apply_locks(state.tree_root, &notes);
    print_notes(notes);
  }

  state.status = "running";
  state.error.reset();
  state.save(run_dir);
  log->info("driving run {} from phase {}", state.name, to_string(state.phase));
  // Said before anything else so a reviewer knows which checkout approval will write into.
  announce("run " + state.name + " on tree " + state.tree_root.string());

  try {
    while (state.phase != Phase::Done) {
      if (signals::interrupted()) return interrupted_outcome();
      switch (state.phase) {
        case Phase::Understand: {
          StageContext ctx = make_context();
          auto result = run_stage("understand", workflow.understand, ctx);
          if (!result) return interrupted_outcome();
          for (const auto& f : result->soft) state.warnings.push_back(f);
          if (!result->ok()) {
            std::string list;
            for (const auto& f : result->hard) list += "\n  - " + f.summary + (f.detail.empty() ? "" : ": " + f.detail);
            throw Error(ErrorKind::Failure, "understand failed for run '" + state.name + "':" + list,
                        "fix the input and start a new run; details in " + (run_dir / "logs/run.log").string());
          }
          if (!ctx.profile || !ctx.profile.IsMap()) {
            throw Error(ErrorKind::Internal, "the " + workflow.name + " workflow's understand stage produced no profile");
          }
          const std::string profile_text = profile::to_yaml(
              ctx.profile, workflow.name + " profile for run " + state.name + "\ntree: " + state.tree_root.string() +
                               "\nschema: " + state.schema_path.string());
          // The loader refuses documents over this size; say why here, where the cause is known,
          // instead of failing to read our own file back. Formulas are written out in full, so a
          // small input can still give a huge profile (a derivative where the product rule copies a
          // shared subexpression at every level).
          if (profile_text.size() > util::kMaxProfileBytes) {
            throw Error(ErrorKind::Failure,
                        "the profile Understand produced is " + util::format_size(profile_text.size()) +
                            ", more than the " + util::format_size(util::kMaxProfileBytes) +
                            " a profile may be: the input is too large once written out as a profile (kernel-dev writes every "
                            "formula and derivative in full)",
                        "start a new run with a smaller input (for an expression: fewer terms, or intermediate values "
                        "used fewer times)");
          }
          util::write_file_atomic(profile_path, profile_text);
          // What edits are compared with: read-only fields must keep these values.
          util::write_file_atomic(understood_profile_path(profile_path), profile_text);
          // Validated as written, so errors carry the file's line:column. The values may come
          // from an LLM answer or the user's arguments, so a violation is a failed run that
          // names the field and the rule, not a crash.
          const auto report = schema.validate(profile::load_yaml_file(profile_path));
          if (!report.ok()) {
            throw Error(ErrorKind::Failure,
                        "the profile Understand produced does not match its schema (" + state.schema_path.string() +
                            "):\n" + report.format_errors(profile_path.string()),
                        "nothing was applied; the fields named above came from the input, the analyser or the LLM "
                        "answer: start a new run with a corrected input (--name chooses the op name)");
          }
          state.phase = Phase::ProfileCheckpoint;
          state.save(run_dir);
          break;
        }
        case Phase::ProfileCheckpoint: {
          CheckpointView view{"profile", state.name, profile_path, &schema, "", {}, workflow.summarize};
          Decision decision = decide("profile", view);
          if (decision == Decision::Parked) return parked_outcome("profile");
          if (decision == Decision::Rejected) return rejected_outcome("profile");
          state.phase = Phase::Act;
          state.save(run_dir);
          break;
        }
        case Phase::Act: {
          StageContext ctx = make_context();
          validate_profile_file(profile_path, schema);  // a hand edit after approval must still be valid
          ctx.profile = profile::load_yaml_file(profile_path);
          staging.clear();
          auto result = run_stage("act", workflow.act, ctx);
          if (!result) return interrupted_outcome();
          for (const auto& f : result->soft) state.warnings.push_back(f);
          if (!result->ok()) {
            std::string list;
            for (const auto& f : result->hard) list += "\n  - " + f.summary + (f.detail.empty() ? "" : ": " + f.detail);
            throw Error(ErrorKind::Failure, "act failed for run '" + state.name + "':" + list,
                        "check the profile's values; details in " + (run_dir / "logs/run.log").string());
          }
          if (state.attempts.size() < static_cast<std::size_t>(state.attempt)) state.attempts.resize(state.attempt);
          state.attempts[state.attempt - 1].attempt = state.attempt;
          state.attempts[state.attempt - 1].fixes = result->notes;
          state.staged_files = staging.files();
          util::write_file_atomic(run_dir / "staged.diff",
                                  diff_staged_against_tree(staging.dir(), state.tree_root, state.staged_files));
          // What the diff was made against: apply refuses to write it over a tree that has changed since.
          util::write_file_atomic(run_dir / "staged.base.json",
                                  snapshot_targets(state.tree_root, state.staged_files).dump(2) + "\n");
          state.phase = Phase::DiffCheckpoint;
          state.save(run_dir);
          break;
        }
        case Phase::DiffCheckpoint: {
          CheckpointView view{"diff",           state.name,         profile_path,      &schema,
                              util::read_file(run_dir / "staged.diff"), state.staged_files, workflow.summarize};
          Decision decision = decide("diff", view);
          if (decision == Decision::Parked) return parked_outcome("diff");
          if (decision == Decision::Rejected) return rejected_outcome("diff");
          state.phase = Phase::Apply;
          state.save(run_dir);
          break;
        }
        case Phase::Apply: {
          // The claim is persistent: it is written before the first byte reaches the tree and
          // stays until the run completes, is rejected or its tree is restored.
          std::vector<std::string> notes;
          acquire_apply_lock(state.tree_root, state.name, run_dir, state.staged_files, &notes);
          print_notes(notes);
          // Files of an apply cut short come out first, so the tree is compared as it was.
          if (const RestoreReport undone = restore_backups(backup_dir, state.tree_root); !undone.tree_unchanged()) {
            throw Error(ErrorKind::Failure, "run '" + state.name + "': an earlier apply could not be undone: " +
                                                undone.summary(),
                        "fix those paths, then `liger-agent resume " + state.name + "`");
          }
          if (const fs::path base = run_dir / "staged.base.json"; fs::exists(base)) {
            // The approved diff was made against the tree as Act saw it; written over a tree that
            // changed since (another run applied, a hand edit), it would undo those changes.
            const auto changed = changed_targets(state.tree_root, nlohmann::json::parse(util::read_file(base)));
            if (!changed.empty()) {
              std::string list;
              for (const auto& file : changed) list += (list.empty() ? "" : ", ") + file;
              announce("the tree changed since Act staged this run's files (" + list +
                       "); Act runs again and the new diff is checked again");
              release_apply_lock(state.tree_root, state.name);
              state.checkpoints["diff"] = CheckpointRecord{};
              for (const char* stage : {"act", "apply"}) state.stages[stage].status = "pending";
              state.phase = Phase::Act;
              state.save(run_dir);
              break;
            }
          }
          auto& record = state.stages["apply"];
          record.status = "running";
          record.runs += 1;
          record.started_at = util::now_iso8601();
          state.save(run_dir);
          announce("apply " + std::to_string(state.staged_files.size()) + " file(s) to " + state.tree_root.string());
          apply_staged_files(staging.dir(), state.tree_root, state.staged_files, backup_dir, state.name);
          state.applied_files = state.staged_files;
          record.status = "done";
          record.finished_at = util::now_iso8601();
          state.phase = Phase::Verify;
          state.save(run_dir);
          break;
        }
        case Phase::Verify: {
          if (state.attempts.size() < static_cast<std::size_t>(state.attempt)) state.attempts.resize(state.attempt);
          auto& attempt = state.attempts[state.attempt - 1];
          // A failure recorded before a crash in the restore below: finish that, don't verify again.
          const bool concluded_failed = !attempt.hard.empty();
          if (!concluded_failed && backup_status(backup_dir) != BackupStatus::Applied) {
            announce("the tree does not hold this run's files (an apply or a restore was cut short); applying again");
            state.phase = Phase::Apply;
            state.save(run_dir);
            break;
          }
          std::vector<std::string> notes;
          acquire_apply_lock(state.tree_root, state.name, run_dir, state.applied_files, &notes);
          print_notes(notes);
          if (!concluded_failed) {
            StageContext ctx = make_context();
            ctx.profile = profile::load_yaml_file(profile_path);
            auto result = run_stage("verify", workflow.verify, ctx);
            if (!result) return interrupted_outcome();
            attempt.attempt = state.attempt;
            attempt.hard = result->hard;
            attempt.soft = result->soft;
            if (result->ok()) {
              state.phase = Phase::Report;
              state.save(run_dir);
              break;
            }
            state.save(run_dir);  // the failure is on disk before the tree is touched
          }
          // A failed attempt must not leave its files in the tree.
          const RestoreReport restored =
              restore_tree("attempt " + std::to_string(state.attempt) + " failed verification");
          if (state.attempt < state.max_attempts) {
            log->warn("attempt {} failed with {} hard failure(s); Act runs again with the diagnostics", state.attempt,
                      attempt.hard.size());
            if (!options_.quiet)
              std::cerr << "  attempt " << state.attempt << " of " << state.max_attempts << " failed ("
                        << attempt.hard.front().summary << "); retrying Act with the diagnostics" << std::endl;
            state.attempt += 1;
            state.checkpoints["diff"] = CheckpointRecord{};
            for (const char* stage : {"act", "apply", "verify"}) state.stages[stage].status = "pending";
            state.phase = Phase::Act;
            state.save(run_dir);
            break;
          }
          state.status = "verification_failed";
          state.diagnosis = workflow.diagnose ? workflow.diagnose(state.attempts) : default_diagnosis(state.attempts);
          state.save(run_dir);
          write_reports(run_dir, state);
          return outcome("run '" + state.name + "' failed verification after " + std::to_string(state.attempt) +
                             " attempt(s); " + restored.summary() + ". Report: " + (run_dir / "report.md").string(),
                         static_cast<int>(ExitCode::VerificationFailed));
        }
        case Phase::Report: {
          state.status = "completed";
          state.phase = Phase::Done;
          state.save(run_dir);
          write_reports(run_dir, state);
          release_apply_lock(state.tree_root, state.name);  // after the state says completed
          break;
        }
        case Phase::Done: break;
      }
    }
  } catch (const Error& error) {
    sync_usage();  // a stage that threw may have asked the LLM before it did
    // A signal stops the stage's child processes, and the stage may then trip over what they
    // left (an empty output, a missing file): that is the interruption, not a failure, and the
    // run stays resumable.
    if (error.kind() == ErrorKind::Interrupted || signals::interrupted()) return interrupted_after_throw();
    release_lock_if_tree_clean();
    for (auto& [name, record] : state.stages)
      if (record.status == "running") record.status = "failed";
    state.status = "failed";
    state.error = ErrorRecord{to_string(error.kind()), error.what(), error.hint()};
    state.save(run_dir);
    write_reports(run_dir, state);
    // main() prints the error to the user; the console sink would print it a second time.
    // The run log's file sink is the logger's first (make_run_logger).
    spdlog::logger file_only(log->name(), log->sinks().front());
    file_only.flush_on(spdlog::level::err);
    file_only.error("{}", error.what());
    throw;
  } catch (const std::exception& error) {
    sync_usage();
    if (signals::interrupted()) return interrupted_after_throw();
    release_lock_if_tree_clean();
    for (auto& [name, record] : state.stages)
      if (record.status == "running") record.status = "failed";
    state.status = "failed";
    // Stages read JSON only from what the run recorded (state.json's `input`) and from answers
    // that are validated before use: a JSON type error is a value edited into the run's files,
    // which the user can fix, not a defect of the agent.
    const bool recorded_value = dynamic_cast<const nlohmann::json::type_error*>(&error) != nullptr;
    state.error = ErrorRecord{recorded_value ? "io" : "internal", error.what(), ""};
    state.save(run_dir);
    write_reports(run_dir, state);
    if (recorded_value) {
      throw Error(ErrorKind::Io,
                  "run '" + state.name + "' failed: a value recorded in " + (run_dir / "state.json").string() +
                      " has the wrong type (" + error.what() + ")",
                  "state.json is written atomically, so it was edited by hand or by another tool: restore it, or "
                  "`liger-agent reject " + state.name + "` and start a new run");
    }
    throw Error(ErrorKind::Internal, std::string("run '") + state.name + "' failed: " + error.what(),
                "see " + (run_dir / "logs/run.log").string());
  }

  std::string message = "run '" + state.name + "' completed";
  bool has_warnings = !state.warnings.empty() || (!state.attempts.empty() && !state.attempts.back().soft.empty());
  if (has_warnings) message += " with warnings";
  message += ". Report: " + (run_dir / "report.md").string();
  return outcome(message, static_cast<int>(ExitCode::Success));
}

}  // namespace liger::engine
