#include "engine/run_state.h"

#include <algorithm>
#include <regex>

#include "liger/error.h"
#include "liger/llm/usage.h"
#include "liger/util.h"

namespace liger::engine {

namespace {
constexpr const char* kPhaseNames[] = {"understand", "profile_checkpoint", "act", "diff_checkpoint",
                                       "apply",      "verify",             "report", "done"};

nlohmann::json findings_json(const std::vector<Finding>& findings) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& f : findings) list.push_back(to_json(f));
  return list;
}

std::vector<Finding> findings_from(const nlohmann::json& json) {
  std::vector<Finding> list;
  if (json.is_array())
    for (const auto& item : json) list.push_back(finding_from_json(item));
  return list;
}
}  // namespace

const char* to_string(Phase phase) { return kPhaseNames[static_cast<int>(phase)]; }

Phase phase_from_string(const std::string& text) {
  for (int i = 0; i <= static_cast<int>(Phase::Done); ++i)
    if (text == kPhaseNames[i]) return static_cast<Phase>(i);
  throw Error(ErrorKind::Usage, "state.json names an unknown phase '" + text + "'",
              "the run directory was written by an incompatible version; start a new run");
}

nlohmann::json to_json(const Finding& finding) {
  return {{"summary", finding.summary}, {"detail", finding.detail}};
}

Finding finding_from_json(const nlohmann::json& json) {
  return Finding{json.value("summary", ""), json.value("detail", "")};
}

nlohmann::json RunState::to_json() const {
  nlohmann::json json;
  json["format_version"] = format_version;
  json["name"] = name;
  json["workflow"] = workflow;
  json["status"] = status;
  json["phase"] = to_string(phase);
  json["pending_checkpoint"] = pending_checkpoint();
  json["created_at"] = created_at;
  json["updated_at"] = updated_at;
  json["tree_root"] = tree_root.string();
  json["schema_path"] = schema_path.string();
  json["input"] = input;
  json["attempt"] = attempt;
  json["max_attempts"] = max_attempts;
  for (const auto& [stage, record] : stages) {
    json["stages"][stage] = {{"status", record.status},
                             {"runs", record.runs},
                             {"started_at", record.started_at},
                             {"finished_at", record.finished_at}};
  }
  for (const auto& [checkpoint, record] : checkpoints) {
    json["checkpoints"][checkpoint] = {{"status", record.status},
                                       {"decided_by", record.decided_by},
                                       {"decided_at", record.decided_at},
                                       {"note", record.note}};
    if (!record.profile_sha256.empty()) json["checkpoints"][checkpoint]["profile_sha256"] = record.profile_sha256;
    if (!record.staging_sha256.empty()) json["checkpoints"][checkpoint]["staging_sha256"] = record.staging_sha256;
  }
  json["attempts"] = nlohmann::json::array();
  for (const auto& attempt_record : attempts) {
    json["attempts"].push_back({{"attempt", attempt_record.attempt},
                                {"hard", findings_json(attempt_record.hard)},
                                {"soft", findings_json(attempt_record.soft)},
                                {"fixes", attempt_record.fixes}});
  }
  json["warnings"] = findings_json(warnings);
  json["staged_files"] = staged_files;
  json["applied_files"] = applied_files;
  json["undecided"] = undecided;
  json["error"] = error ? nlohmann::json{{"kind", error->kind}, {"message", error->message}, {"hint", error->hint}}
                        : nlohmann::json(nullptr);
  json["diagnosis"] = diagnosis;
  json["usage"] = usage.is_object() ? usage : llm::UsageLedger{}.to_json();
  return json;
}

namespace {

// state.json is the engine's own file, but a crash of another tool, a bad merge or a hand edit
// can put anything in it. Every value that becomes a size, a path or a lock name is checked
// here, so a bad one is named as such instead of surfacing later as an allocation failure or a
// file written outside the run.
[[noreturn]] void bad_field(const std::string& field, const std::string& why) {
  throw Error(ErrorKind::Io, "state.json: '" + field + "' " + why);
}

int bounded_int(const nlohmann::json& json, const char* key, int fallback, int low, int high) {
  if (!json.contains(key)) return fallback;
  const auto& value = json.at(key);
  if (!value.is_number_integer()) bad_field(key, "is not an integer");
  const auto number = value.get<long long>();
  if (number < low || number > high)
    bad_field(key, "is " + value.dump() + ", outside " + std::to_string(low) + ".." + std::to_string(high));
  return static_cast<int>(number);
}

// A run name becomes a lock file name and appears in commands the user is told to type.
void check_run_name(const std::string& name) {
  if (name.empty() || name.size() > 255 || name == "." || name == ".." ||
      name.find_first_of(std::string("/\0", 2)) != std::string::npos)
    bad_field("name", "is not a run directory name");
}

void check_relative_paths(const char* key, const std::vector<std::string>& files) {
  for (const auto& file : files) {
    const std::filesystem::path path(file);
    bool escapes = file.empty() || path.is_absolute() || file.find('\0') != std::string::npos;
    for (const auto& part : path) escapes = escapes || part == "..";
    if (escapes) bad_field(key, "lists '" + file.substr(0, 80) + "', which is not a path inside the tree");
  }
}

}  // namespace

RunState RunState::from_json(const nlohmann::json& json) {
  if (!json.is_object()) bad_field("(document)", "is not a JSON object");
  RunState state;
  state.format_version = json.at("format_version").get<int>();
  state.name = json.at("name").get<std::string>();
  state.workflow = json.at("workflow").get<std::string>();
  state.status = json.at("status").get<std::string>();
  state.phase = phase_from_string(json.at("phase").get<std::string>());
  state.created_at = json.value("created_at", "");
  state.updated_at = json.value("updated_at", "");
  state.tree_root = json.value("tree_root", "");
  state.schema_path = json.value("schema_path", "");
  state.input = json.value("input", nlohmann::json::object());
  // The attempt limit is a small configured number (default 3); anything else is not ours.
  state.max_attempts = bounded_int(json, "max_attempts", 3, 1, 1000000);
  state.attempt = bounded_int(json, "attempt", 1, 1, state.max_attempts);
  if (json.contains("stages")) {
    for (const auto& [stage, record] : json["stages"].items()) {
      state.stages[stage] = StageRecord{record.value("status", "pending"), record.value("runs", 0),
                                        record.value("started_at", ""), record.value("finished_at", "")};
    }
  }
  if (json.contains("checkpoints")) {
    for (const auto& [checkpoint, record] : json["checkpoints"].items()) {
      CheckpointRecord& loaded = state.checkpoints[checkpoint];
      loaded.status = record.value("status", "pending");
      loaded.decided_by = record.value("decided_by", "");
      loaded.decided_at = record.value("decided_at", "");
      loaded.note = record.value("note", "");
      loaded.profile_sha256 = record.value("profile_sha256", "");
      loaded.staging_sha256 = record.value("staging_sha256", std::map<std::string, std::string>{});
    }
  }
  for (const auto& item : json.value("attempts", nlohmann::json::array())) {
    AttemptRecord record;
    record.attempt = item.value("attempt", 0);
    record.hard = findings_from(item.value("hard", nlohmann::json::array()));
    record.soft = findings_from(item.value("soft", nlohmann::json::array()));
    record.fixes = item.value("fixes", std::vector<std::string>{});
    state.attempts.push_back(std::move(record));
  }
  state.warnings = findings_from(json.value("warnings", nlohmann::json::array()));
  state.staged_files = json.value("staged_files", std::vector<std::string>{});
  state.applied_files = json.value("applied_files", std::vector<std::string>{});
  state.undecided = json.value("undecided", std::vector<std::string>{});
  if (json.contains("error") && json["error"].is_object()) {
    state.error = ErrorRecord{json["error"].value("kind", ""), json["error"].value("message", ""),
                              json["error"].value("hint", "")};
  }
  state.diagnosis = json.value("diagnosis", "");
  if (!state.input.is_object()) bad_field("input", "is not a JSON object");
  check_run_name(state.name);
  // A workflow name is a registry key and a folder name in the run (kernel-dev/, ...).
  static const std::regex workflow_name("^[a-z][a-z0-9_-]{0,63}$");
  if (!std::regex_match(state.workflow, workflow_name)) bad_field("workflow", "is not a workflow name");
  if (!state.tree_root.is_absolute()) bad_field("tree_root", "is not an absolute path");
  check_relative_paths("staged_files", state.staged_files);
  check_relative_paths("applied_files", state.applied_files);
  for (const auto& [stage, record] : state.stages)
    if (record.runs < 0) bad_field("stages." + stage + ".runs", "is negative");
  if (json.contains("usage") && json["usage"].is_object()) {
    state.usage = json["usage"];
    // Read the way a resumed run reads it, so a damaged ledger is named here with the file.
    try {
      llm::UsageLedger probe;
      probe.add_json(state.usage);
    } catch (const nlohmann::json::exception& e) {
      bad_field("usage", std::string("cannot be read: ") + e.what());
    }
  }
  return state;
}

bool looks_like_run_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return false;
  for (const char* marker : {"state.json", "profile.yaml", "input", "logs", "backup"})
    if (std::filesystem::exists(dir / marker, ec)) return true;
  return false;
}

RunState RunState::load(const std::filesystem::path& run_dir) {
  const auto path = run_dir / "state.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (looks_like_run_dir(run_dir)) {
      const std::string name = run_dir.filename().string();
      throw Error(ErrorKind::Failure,
                  "run directory '" + run_dir.string() + "' has no state.json (it was deleted, or the process was "
                  "killed while creating the run), so the run cannot be shown or resumed",
                  "`liger-agent reject " + name + "` puts back any files it applied (from its backup/) and releases "
                  "its apply lock; then delete the directory and start a new run");
    }
    throw Error(ErrorKind::Usage, "'" + run_dir.string() + "' is not a run directory (no state.json)",
                "list runs with `liger-agent runs`");
  }
  try {
    return from_json(nlohmann::json::parse(util::read_file(path)));
  } catch (const std::exception& e) {
    // nlohmann's type and parse errors, and the checks of from_json above.
    throw Error(ErrorKind::Io, "cannot read run state '" + path.string() + "': " + e.what(),
                "state.json is written atomically, so this file was edited by hand or by another "
                "tool; restore it, or `liger-agent reject " + run_dir.filename().string() +
                    "` puts back any files the run applied and releases its apply lock");
  }
}

void RunState::save(const std::filesystem::path& run_dir) {
  updated_at = util::now_iso8601();
  // replace: one stray non-UTF-8 byte in an error message must not make the state unsavable.
  util::write_file_atomic(run_dir / "state.json", to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::string RunState::pending_checkpoint() const {
  if (status != "awaiting_approval") return "";
  if (phase == Phase::ProfileCheckpoint) return "profile";
  if (phase == Phase::DiffCheckpoint) return "diff";
  return "";
}

// "a: why", "b: why", "c: other" -> "a, b: why", "c: other": one analyser reason often
// covers many fields, and the message should say it once.
std::vector<std::string> group_undecided(const std::vector<std::string>& undecided) {
  std::vector<std::pair<std::string, std::string>> groups;  // reason -> fields, first-seen order
  for (const auto& entry : undecided) {
    const std::size_t colon = entry.find(": ");
    const std::string field = colon == std::string::npos ? entry : entry.substr(0, colon);
    const std::string reason = colon == std::string::npos ? "" : entry.substr(colon + 2);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == reason; });
    if (it == groups.end()) groups.emplace_back(reason, field);
    else it->second += ", " + field;
  }
  std::vector<std::string> lines;
  for (const auto& [reason, fields] : groups) lines.push_back(reason.empty() ? fields : fields + ": " + reason);
  return lines;
}

}  // namespace liger::engine
