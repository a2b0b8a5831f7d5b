// Run management that needs no workflow: finding, listing, approving and rejecting runs.
#include <algorithm>
#include <ctime>
#include <optional>
#include <sstream>

#include "engine/apply.h"
#include "engine/approval.h"
#include "engine/diff.h"
#include "engine/checkpoint.h"
#include "engine/run_state.h"
#include "engine/report.h"
#include "liger/engine.h"
#include "liger/error.h"
#include "liger/util.h"

namespace liger::engine {

namespace {

// `running` in state.json with no process driving the run: the process was killed (SIGKILL, a
// crash, a power cut). Shown as `killed`, so `runs` and `show` do not claim work is going on.
std::string shown_status(const fs::path& run_dir, const std::string& status) {
  return status == "running" && !run_is_driven(run_dir) ? "killed" : status;
}


bool is_run_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "state.json", ec);
}

RunOutcome outcome_of(const fs::path& run_dir, const RunState& state, std::string message, int exit_code) {
  RunOutcome outcome;
  outcome.run_dir = run_dir;
  outcome.name = state.name;
  outcome.workflow = state.workflow;
  outcome.status = state.status;
  outcome.pending_checkpoint = state.pending_checkpoint();
  outcome.undecided = state.undecided;
  outcome.message = std::move(message);
  outcome.exit_code = exit_code;
  return outcome;
}

}  // namespace

fs::path find_run(const fs::path& run_root, const std::string& spec) {
  if (spec.empty()) throw Error(ErrorKind::Usage, "no run given", "name a run; `liger-agent runs` lists them");
  if (is_run_dir(spec)) return fs::path(spec);
  if (is_run_dir(run_root / spec)) return run_root / spec;
  // Named exactly but without a readable state: returned, so RunState::load says what is wrong
  // and `reject` can still undo what the run applied.
  if (spec.find('/') == std::string::npos && spec != "." && spec != ".." && looks_like_run_dir(run_root / spec))
    return run_root / spec;
  if (looks_like_run_dir(spec) && fs::exists(fs::path(spec) / "logs")) return fs::path(spec);
  if (std::error_code ec; fs::exists(run_root, ec) && !fs::is_directory(run_root, ec)) {
    throw Error(ErrorKind::Usage,
                "the run directory root '" + run_root.string() + "' (--run-dir, config key run_dir) is not a directory",
                "point --run-dir (or the config key run_dir) at the directory the runs were created in");
  }

  std::vector<fs::path> matches;
  std::error_code ec;
  if (fs::is_directory(run_root, ec)) {
    for (const auto& entry : fs::directory_iterator(run_root)) {
      if (entry.path().filename().string().starts_with(spec) && is_run_dir(entry.path())) matches.push_back(entry.path());
    }
  }
  if (matches.size() == 1) return matches.front();
  if (matches.empty()) {
    throw Error(ErrorKind::Usage, "no run matches '" + spec + "' under " + run_root.string(),
                "`liger-agent runs` lists runs; pass a run directory path, its name or a unique prefix "
                "(and --run-dir if the runs live elsewhere)");
  }
  std::sort(matches.begin(), matches.end());
  std::string names;
  for (const auto& match : matches) names += "\n  " + match.filename().string();
  throw Error(ErrorKind::Usage, "'" + spec + "' matches " + std::to_string(matches.size()) + " runs:" + names,
              "give a longer prefix or the full name");
}

std::vector<RunSummary> list_runs(const fs::path& run_root) {
  std::vector<RunSummary> runs;
  std::error_code ec;
  if (!fs::is_directory(run_root, ec)) return runs;
  const long long now = static_cast<long long>(std::time(nullptr));
  for (const auto& entry : fs::directory_iterator(run_root, ec)) {
    // A run that lost its state.json is listed too: it may hold files in the tree, and
    // `reject` is how they go back.
    if (!looks_like_run_dir(entry.path())) continue;
    RunSummary summary;
    summary.run_dir = entry.path();
    summary.name = entry.path().filename().string();
    try {
      const RunState state = RunState::load(entry.path());
      summary.workflow = state.workflow;
      summary.status = shown_status(entry.path(), state.status);
      summary.pending_checkpoint = state.pending_checkpoint();
      summary.created_at = state.created_at;
      const long long created = util::parse_iso8601(state.created_at);
      summary.age_seconds = created < 0 ? -1 : now - created;
    } catch (const Error&) {
      summary.status = is_run_dir(entry.path()) ? "unreadable" : "no-state";
    }
    runs.push_back(std::move(summary));
  }
  std::sort(runs.begin(), runs.end(), [](const RunSummary& a, const RunSummary& b) { return a.name > b.name; });
  return runs;
}

nlohmann::json read_run_state(const fs::path& run_dir) {
  nlohmann::json state = RunState::load(run_dir).to_json();
  state["status"] = shown_status(run_dir, state["status"].get<std::string>());
  return state;
}

namespace {

// `approve` after `resume` refused a file changed since its approval: approves the change. An
// edited profile sends the run back to Act (the staged files came from the old profile); edited
// staged files become the diff that Apply applies.
RunOutcome approve_drift(const fs::path& run_dir, RunState& state, const ApprovalDrift& drift,
                         const std::string& approved_by) {
  const std::string what = describe_drift(drift, state.name);
  if (state.phase == Phase::Verify) {
    throw Error(ErrorKind::Usage,
                what + ", and its files are already applied: the change cannot be approved into this run",
                "restore " + (run_dir / drift.file).string() + ", or `liger-agent reject " + state.name +
                    "` and start a new run");
  }
  std::string message;
  if (drift.file == "profile.yaml") {
    const auto schema = profile::Schema::load_file(state.schema_path);
    state.undecided = validate_profile_file(run_dir / "profile.yaml", schema);
    if (!state.undecided.empty()) {
      state.save(run_dir);
      throw Error(ErrorKind::Usage, "run '" + state.name + "': the edited profile has undecided fields",
                  "edit " + (run_dir / "profile.yaml").string() + " to decide them, then approve again");
    }
    CheckpointRecord record{"approved", approved_by, util::now_iso8601(), "re-approved after an edit"};
    record_approved_digests(record, "profile", run_dir);
    state.checkpoints["profile"] = record;
    if (state.phase == Phase::DiffCheckpoint || state.phase == Phase::Apply) {
      state.phase = Phase::Act;
      state.checkpoints["diff"] = CheckpointRecord{};
      state.staged_files.clear();
      message = "; Act regenerates the staged files from it and the diff checkpoint asks again";
    }
  } else {
    Staging staging(run_dir / "staging");
    state.staged_files = staging.files();
    util::write_file_atomic(run_dir / "staged.diff",
                            diff_staged_against_tree(staging.dir(), state.tree_root, state.staged_files));
    CheckpointRecord record{"approved", approved_by, util::now_iso8601(), "re-approved after an edit"};
    record_approved_digests(record, "diff", run_dir);
    state.checkpoints["diff"] = record;
  }
  state.status = "approved";
  state.save(run_dir);
  write_reports(run_dir, state);
  return outcome_of(run_dir, state,
                    "approved the edited " + (drift.file == "profile.yaml" ? std::string("profile") : "staged files") +
                        " of run '" + state.name + "'" + message + "; continue with `liger-agent resume " +
                        state.name + "`",
                    0);
}

}  // namespace

RunOutcome approve_run(const fs::path& run_dir, const std::string& approved_by) {
  RunState state = RunState::load(run_dir);
  if (auto drift = approval_drift(state, run_dir)) return approve_drift(run_dir, state, *drift, approved_by);
  const std::string checkpoint = state.pending_checkpoint();
  if (checkpoint.empty()) {
    throw Error(ErrorKind::Usage,
                "run '" + state.name + "' has no checkpoint waiting for approval (status: " + state.status + ")",
                state.status == "approved" ? "continue it with `liger-agent resume " + state.name + "`"
                                           : "`liger-agent show " + state.name + "` prints where it stands");
  }
  if (checkpoint == "profile") {
    // The maintainer may have edited profile.yaml by hand: approve only what is valid and decided.
    const auto schema = profile::Schema::load_file(state.schema_path);
    state.undecided = validate_profile_file(run_dir / "profile.yaml", schema);
    if (!state.undecided.empty()) {
      std::string list;
      for (const auto& line : group_undecided(state.undecided)) list += "\n  - " + line;
      state.save(run_dir);
      throw Error(ErrorKind::Usage, "run '" + state.name + "': the profile still has undecided fields:" + list,
                  "edit " + (run_dir / "profile.yaml").string() +
                      " to replace each {undecided: ...} with a value, then approve again");
    }
  }
  state.checkpoints[checkpoint] = CheckpointRecord{"approved", approved_by, util::now_iso8601(), ""};
  record_approved_digests(state.checkpoints[checkpoint], checkpoint, run_dir);
  state.status = "approved";
  state.save(run_dir);
  write_reports(run_dir, state);
  return outcome_of(run_dir, state,
                    "approved the " + checkpoint + " checkpoint of run '" + state.name +
                        "'; continue with `liger-agent resume " + state.name + "`",
                    0);
}

namespace {

// The tree a run works on, from its profile's header ("# tree: <path>"), for a run whose
// state.json is gone or unreadable.
std::optional<fs::path> tree_from_profile_header(const fs::path& run_dir) {
  for (const char* file : {"profile.yaml", "profile.understood.yaml"}) {
    std::error_code ec;
    if (!fs::is_regular_file(run_dir / file, ec) || fs::file_size(run_dir / file, ec) > (1u << 20)) continue;
    std::istringstream in(util::read_file(run_dir / file));
    for (std::string line; std::getline(in, line) && line.starts_with("#");) {
      if (line.starts_with("# tree: ")) return fs::path(line.substr(8));
    }
  }
  return std::nullopt;
}

// reject for a run whose state is lost: restores the tree from backup/ and releases the claim,
// which is all a rejection must guarantee; the run directory is left for the user to delete.
RunOutcome reject_stateless_run(const fs::path& run_dir, const Error& why) {
  const std::string name = run_dir.filename().string();
  const fs::path backup_dir = run_dir / "backup";
  RunDirectoryLock run_lock(run_dir);
  std::optional<fs::path> tree;
  if (tree_holds_run_files(backup_dir)) {
    tree = tree_from_profile_header(run_dir);
    // The header is text anyone can edit: only a tree whose apply lock names this very run
    // directory is restored into.
    std::error_code ec;
    const auto claim = tree ? read_apply_lock(*tree, name) : std::nullopt;
    if (!claim || !fs::equivalent(claim->run_dir, run_dir, ec)) tree.reset();
  }
  RunState state;
  state.name = name;
  state.status = "rejected";
  if (tree_holds_run_files(backup_dir)) {
    if (!tree) {
      throw Error(ErrorKind::Failure,
                  "cannot reject run '" + name + "': " + why.what() +
                      ", and no tree's apply lock names this run directory, so the tree to restore is unknown",
                  "put the files listed in " + (backup_dir / "manifest.json").string() + " back by hand from " +
                      (backup_dir / "files").string() + ", then delete " + run_dir.string());
    }
    remove_orphan_run_temps(run_dir);
    const RestoreReport restored = restore_backups(backup_dir, *tree);
    if (!restored.tree_unchanged()) {
      throw Error(ErrorKind::Failure, "cannot finish rejecting run '" + name + "': " + restored.summary(),
                  "fix those paths (the originals are under " + (backup_dir / "files").string() + "), then `liger-agent reject " +
                      name + "` again");
    }
    release_apply_lock(*tree, name);
    return outcome_of(run_dir, state,
                      "rejected run '" + name + "' (its state was lost: " + why.what() + "); " + restored.summary() +
                          "; delete " + run_dir.string() + " when you no longer need its files",
                      0);
  }
  if (auto header_tree = tree_from_profile_header(run_dir)) release_apply_lock(*header_tree, name);
  return outcome_of(run_dir, state,
                    "rejected run '" + name + "' (its state was lost: " + why.what() +
                        "); it had not changed the tree; delete " + run_dir.string(),
                    0);
}

}  // namespace

RunOutcome reject_run(const fs::path& run_dir, const std::string& reason) {
  RunState state;
  try {
    state = RunState::load(run_dir);
  } catch (const Error& e) {
    if (!looks_like_run_dir(run_dir)) throw;
    return reject_stateless_run(run_dir, e);
  }
  if (state.status == "completed" || state.status == "rejected") {
    throw Error(ErrorKind::Usage, "run '" + state.name + "' has already finished (" + state.status + ")",
                "nothing to reject");
  }
  RunDirectoryLock run_lock(run_dir);  // never restore under a process that is driving the run
  state = RunState::load(run_dir);
  const fs::path backup_dir = run_dir / "backup";
  std::vector<std::string> files = state.staged_files;
  files.insert(files.end(), state.applied_files.begin(), state.applied_files.end());
  if (auto claim = read_apply_lock(state.tree_root, state.name))
    files.insert(files.end(), claim->files.begin(), claim->files.end());
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  // Leftovers of a killed process of this run go first; the restore below writes with this
  // process's pid in the claim so nobody else mistakes its temp files for leftovers.
  remove_orphan_run_temps(run_dir);
  remove_temp_files(state.tree_root, state.name, files);
  if (tree_holds_run_files(backup_dir)) acquire_apply_lock(state.tree_root, state.name, run_dir, files);
  const RestoreReport restored = restore_backups(backup_dir, state.tree_root);
  if (!restored.tree_unchanged()) {
    throw Error(ErrorKind::Failure, "cannot finish rejecting run '" + state.name + "': " + restored.summary(),
                "fix those paths (the originals are under " + (backup_dir / "files").string() +
                    "), then `liger-agent reject " + state.name + "` again; the run keeps its apply lock until then");
  }
  release_apply_lock(state.tree_root, state.name);
  const std::string checkpoint = state.pending_checkpoint();
  state.applied_files.clear();
  if (!checkpoint.empty())
    state.checkpoints[checkpoint] = CheckpointRecord{"rejected", "reject command", util::now_iso8601(), reason};
  state.status = "rejected";
  state.save(run_dir);
  write_reports(run_dir, state);
  return outcome_of(run_dir, state,
                    "rejected run '" + state.name + "'; " + restored.summary() + "; its staged files stay in " +
                        (run_dir / "staging").string(),
                    0);
}

}  // namespace liger::engine
