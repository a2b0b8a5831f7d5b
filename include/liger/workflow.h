// What a workflow gives the engine: a name, a profile schema and three stage callables.
// The engine drives every workflow the same way and knows none by name; workflows are added to
// a WorkflowRegistry (see liger/workflows.h for the built-in list the CLI registers).
#pragma once

#include <nlohmann/json.hpp>
#include <spdlog/logger.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "liger/config.h"

namespace liger::llm {
class Provider;
class UsageLedger;
}  // namespace liger::llm

namespace liger::engine {

namespace fs = std::filesystem;

// One problem a stage found. `detail` carries evidence (a compiler line, a mismatch summary).
struct Finding {
  std::string summary;
  std::string detail;
};

// Hard findings block (a failed build, wrong numbers, a crash); soft findings are flagged in the
// report and never block (a tolerance that needs tuning, a small slowdown).
struct StageResult {
  std::vector<Finding> hard;
  std::vector<Finding> soft;
  std::vector<std::string> notes;  // what the stage did; Act's notes become "fixes tried"

  bool ok() const { return hard.empty(); }
  StageResult& fail(std::string summary, std::string detail = {});
  StageResult& warn(std::string summary, std::string detail = {});
  StageResult& note(std::string text);
};

// Files Act generates, kept under <run>/staging/ at their repository-relative paths until the
// Act checkpoint approves applying them to the tree.
class Staging {
 public:
  explicit Staging(fs::path staging_dir);
  // `repo_path` is relative to the tree root; absolute paths and ".." are refused (Internal),
  // so a workflow can never stage a write outside the repository.
  void write(const std::string& repo_path, std::string_view content);
  std::vector<std::string> files() const;  // sorted repository-relative paths
  fs::path path_of(const std::string& repo_path) const;
  void clear();
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
};

// A run's LLM: one provider per run, built on first use from the configuration
// (llm::run_provider_config), so a workflow that never asks needs no key or endpoint. Every
// exchange goes through the cassette <run>/llm/cassette.json (mode all, keys redacted) unless
// the user chose llm.record / llm.cassette_dir, and every response is added to the run's
// ledger, which the engine writes into report.json ("usage") and report.md.
class RunLlm {
 public:
  RunLlm(const Config& config, fs::path run_dir, std::shared_ptr<spdlog::logger> log = nullptr);
  ~RunLlm();
  RunLlm(const RunLlm&) = delete;
  RunLlm& operator=(const RunLlm&) = delete;

  // Thread-safe. Throws liger::Error(Config) when the provider cannot be built (missing key,
  // bad URL, unknown provider); the next call tries again.
  llm::Provider& provider();
  const std::shared_ptr<llm::UsageLedger>& ledger() const noexcept { return ledger_; }
  bool started() const;  // whether provider() has built the provider

 private:
  Config config_;
  fs::path run_dir_;
  std::shared_ptr<spdlog::logger> log_;
  std::shared_ptr<llm::UsageLedger> ledger_;
  mutable std::mutex mutex_;
  std::unique_ptr<llm::Provider> provider_;
};

struct StageContext {
  fs::path run_dir;
  fs::path input_dir;     // <run>/input: copies of input files, arguments.json
  fs::path tree_root;     // the repository the run's files are applied to
  nlohmann::json input;   // the arguments recorded when the run was created
  YAML::Node profile;     // Understand fills it in; Act and Verify get the approved version
  Staging* staging = nullptr;
  std::shared_ptr<spdlog::logger> log;
  const Config* config = nullptr;
  int attempt = 1;                        // Act/Verify attempt, 1-based
  std::vector<Finding> previous_failures; // Verify's hard findings of the previous attempt
  std::vector<Finding> previous_warnings;
  bool quiet = false;
  // The run's LLM, shared by every stage of the run; set by the engine.
  std::shared_ptr<RunLlm> run_llm;

  // The run's LLM provider: `ctx.llm().complete(request)` or
  // `llm::ask_structured(ctx.llm(), ...)` (include liger/llm/provider.h, liger/llm/structured.h).
  // Without an engine-made RunLlm (a stage called directly by a test) one is made on first use
  // from `config` (defaults when null) and `run_dir`.
  llm::Provider& llm();

  // A progress line on stderr for long stages (suppressed by -q); always written to the log.
  void progress(const std::string& message) const;
};

using StageFn = std::function<StageResult(StageContext&)>;

struct AttemptRecord {
  int attempt = 0;
  std::vector<Finding> hard;
  std::vector<Finding> soft;
  std::vector<std::string> fixes;  // Act's notes for this attempt
};

struct Workflow {
  std::string name;  // also the run-name component and the subcommand users type
  std::string description;
  fs::path profile_schema;  // skills/<name>/profile.schema.yaml
  StageFn understand;
  StageFn act;
  StageFn verify;
  // Optional: a diagnosis for the report when every attempt failed; the engine writes a
  // generic one (which failures persisted, which changed) when this is empty.
  std::function<std::string(const std::vector<AttemptRecord>&)> diagnose;
  // Optional: the first screen of a checkpoint and of `liger-agent show`, from the profile: what
  // a reviewer decides on (kernel-dev's tier and formulas, autopatch's decisions with evidence).
  // Must accept a partial profile (undecided fields). Empty: the checkpoint shows the profile.
  std::function<std::string(const YAML::Node& profile)> summarize;
  // Optional: checks the request (its arguments, the input text or file, the tree) before any
  // run directory exists and throws liger::Error (Usage) for input no human or LLM decision can
  // rescue: a malformed expression, an unknown op, a tree that is not a checkout. A run is
  // parked only when there is something to decide.
  std::function<void(const nlohmann::json& arguments, const std::string& input_text, const fs::path& tree_root,
                     const Config& config)>
      check_request;

  bool has_all_stages() const { return understand && act && verify; }
};

class WorkflowRegistry {
 public:
  void add(Workflow workflow);  // a duplicate name is a bug: throws Internal
  const Workflow* find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, Workflow> workflows_;
};

}  // namespace liger::engine
