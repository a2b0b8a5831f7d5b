// state.json: the single source of truth about a run. Every transition is saved atomically
// before the next step starts, so whatever a crash leaves behind is a consistent state.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "liger/workflow.h"

namespace liger::engine {

// The steps of the stage machine, in order. Checkpoints are steps too so that a run parked at
// one resumes exactly there.
enum class Phase { Understand, ProfileCheckpoint, Act, DiffCheckpoint, Apply, Verify, Report, Done };
const char* to_string(Phase phase);
Phase phase_from_string(const std::string& text);

struct StageRecord {
  std::string status = "pending";  // pending | running | done | failed | interrupted
  int runs = 0;
  std::string started_at;
  std::string finished_at;
};

struct CheckpointRecord {
  CheckpointRecord() = default;
  CheckpointRecord(std::string status_, std::string decided_by_, std::string decided_at_, std::string note_)
      : status(std::move(status_)),
        decided_by(std::move(decided_by_)),
        decided_at(std::move(decided_at_)),
        note(std::move(note_)) {}

  std::string status = "pending";  // pending | awaiting_approval | approved | rejected
  std::string decided_by;          // "--yes", "terminal", "approve command"
  std::string decided_at;
  std::string note;
  // What was approved (issue 15): the SHA-256 of profile.yaml, and at the diff checkpoint of
  // every staged file. `resume` refuses to go on when the files differ from these.
  std::string profile_sha256;
  std::map<std::string, std::string> staging_sha256;
};

struct ErrorRecord {
  std::string kind;
  std::string message;
  std::string hint;
};

// A directory the engine made for a run (state.json, or what a run writes first), so a run
// whose state.json was lost is still found by name and can be rejected.
bool looks_like_run_dir(const std::filesystem::path& dir);

struct RunState {
  int format_version = 1;
  std::string name;
  std::string workflow;
  std::string status = "running";  // running | awaiting_approval | approved | completed | failed |
                                   // verification_failed | rejected | interrupted
  Phase phase = Phase::Understand;
  std::string created_at;
  std::string updated_at;
  std::filesystem::path tree_root;
  std::filesystem::path schema_path;
  nlohmann::json input = nlohmann::json::object();
  int attempt = 1;
  int max_attempts = 3;
  std::map<std::string, StageRecord> stages;            // understand, act, apply, verify
  std::map<std::string, CheckpointRecord> checkpoints;  // profile, diff
  std::vector<AttemptRecord> attempts;
  std::vector<Finding> warnings;  // soft findings of Understand and Act
  std::vector<std::string> staged_files;
  std::vector<std::string> applied_files;
  std::vector<std::string> undecided;
  std::optional<ErrorRecord> error;
  std::string diagnosis;
  // LLM usage of every invocation of the run (llm::UsageLedger::to_json()); null until the
  // engine first records it, written as an empty ledger then.
  nlohmann::json usage;

  nlohmann::json to_json() const;
  static RunState from_json(const nlohmann::json& json);

  static RunState load(const std::filesystem::path& run_dir);  // Io/Usage errors name the file
  void save(const std::filesystem::path& run_dir);              // atomic; stamps updated_at

  std::string pending_checkpoint() const;  // "profile" / "diff" when parked at one, else ""
};

// Undecided entries ("field: reason") with one line per distinct reason ("a, b: reason"): an
// analyser reason often covers many fields and a message should say it once.
std::vector<std::string> group_undecided(const std::vector<std::string>& undecided);

nlohmann::json to_json(const Finding& finding);
Finding finding_from_json(const nlohmann::json& json);

}  // namespace liger::engine
