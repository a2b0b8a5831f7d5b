// The run engine: one run directory per invocation, driven through
//   Understand -> checkpoint(profile) -> Act -> checkpoint(diff) -> apply -> Verify -> report
// with state saved atomically after every transition, so a killed or interrupted run resumes
// where it stopped. See docs/engine.md.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "liger/config.h"
#include "liger/workflow.h"

namespace liger::engine {

// What a user asked for. The workflow's stages read `arguments` back from the run directory,
// so a resumed run sees exactly what the first invocation saw.
struct RunRequest {
  std::string workflow;
  std::string label;                   // human part of the run name ("rmsnorm", "llama")
  fs::path tree_root;                  // repository the generated files are applied to
  nlohmann::json arguments = nlohmann::json::object();
  std::vector<fs::path> input_files;   // copied into <run>/input/
  std::string input_text;              // written to <run>/input/input.txt when not empty
};

enum class CheckpointPolicy {
  AutoApprove,  // --yes / --autonomous
  Interactive,  // a terminal: ask approve / edit / reject
  Park,         // no terminal: stop with exit 3 until `approve` + `resume`
};

struct EngineOptions {
  fs::path run_root = ".liger-agent/runs";
  CheckpointPolicy checkpoints = CheckpointPolicy::Park;
  const Config* config = nullptr;  // required
  bool quiet = false;              // -q: no progress lines
  int verbosity = 0;               // -v count: stderr log level
  std::istream* prompt_in = nullptr;   // defaults to std::cin
  std::ostream* prompt_out = nullptr;  // defaults to std::cerr
};

// Terminal status of one engine invocation, also what `runs`/`show` display.
struct RunOutcome {
  fs::path run_dir;
  std::string name;
  std::string workflow;
  std::string status;              // completed | awaiting_approval | rejected | verification_failed | interrupted
  std::string pending_checkpoint;  // "profile" | "diff" | ""
  std::vector<std::string> undecided;  // profile fields still undecided
  std::string message;             // one line for humans
  int exit_code = 0;

  nlohmann::json to_json() const;
};

class Engine {
 public:
  Engine(const WorkflowRegistry& registry, EngineOptions options);

  // Creates the run directory and drives it as far as the policy allows. Failures are thrown as
  // liger::Error after the state records them; an unregistered workflow fails before any
  // directory is created.
  RunOutcome start(const RunRequest& request);
  // Continues a run from its last completed step (a step recorded as running is re-run).
  RunOutcome resume(const fs::path& run_dir);

 private:
  RunOutcome drive(const fs::path& run_dir);
  const WorkflowRegistry& registry_;
  EngineOptions options_;
};

// ---- run management, independent of any workflow ----

// `spec` is a run directory path, a run name under `run_root`, or a unique prefix of one.
// Throws Usage naming the candidates when nothing or more than one run matches.
fs::path find_run(const fs::path& run_root, const std::string& spec);

struct RunSummary {
  std::string name;
  std::string workflow;
  std::string status;
  std::string pending_checkpoint;
  std::string created_at;
  long long age_seconds = -1;
  fs::path run_dir;
};
std::vector<RunSummary> list_runs(const fs::path& run_root);  // newest first

// Deletes finished run directories under `run_root`: those whose status is in `statuses`
// ("failed" also covers "verification_failed"; empty = completed, failed and rejected) and that
// are at least `min_age_seconds` old. A run in progress (its run lock held) or holding an apply
// lock on its tree is never touched, nor is a run parked at or approved past a checkpoint.
struct PruneResult {
  std::vector<RunSummary> removed;                            // or, with dry_run, would be removed
  std::vector<std::pair<RunSummary, std::string>> kept_busy;  // matched but in use: the reason
};
PruneResult prune_runs(const fs::path& run_root, const std::vector<std::string>& statuses, long long min_age_seconds,
                       bool dry_run);
// "7d", "12h", "30m", "45s", "2w" -> seconds; throws Usage on anything else.
long long parse_duration(const std::string& text);

// state.json as stored (for `show`).
nlohmann::json read_run_state(const fs::path& run_dir);

// Marks the pending checkpoint approved after re-validating profile.yaml against the schema
// (errors -> Usage naming field and line; undecided fields -> Usage listing them).
RunOutcome approve_run(const fs::path& run_dir, const std::string& approved_by = "approve command");
// Marks the run rejected; files already applied to the tree are restored from their backups.
RunOutcome reject_run(const fs::path& run_dir, const std::string& reason = {});

}  // namespace liger::engine
