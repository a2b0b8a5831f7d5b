#include "engine/report.h"

#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "liger/util.h"

namespace liger::engine {

namespace fs = std::filesystem;

std::string default_diagnosis(const std::vector<AttemptRecord>& attempts) {
  if (attempts.empty()) return "";
  std::map<std::string, int> seen;
  for (const auto& attempt : attempts) {
    std::set<std::string> unique;
    for (const auto& finding : attempt.hard) unique.insert(finding.summary);
    for (const auto& summary : unique) ++seen[summary];
  }
  std::ostringstream text;
  std::vector<std::string> persistent, changing;
  for (const auto& [summary, count] : seen)
    (count == static_cast<int>(attempts.size()) ? persistent : changing).push_back(summary);
  if (!persistent.empty()) {
    text << "These hard failures persisted through all " << attempts.size()
         << " attempts, so the fixes tried did not reach their cause:";
    for (const auto& s : persistent) text << "\n- " << s;
  }
  if (!changing.empty()) {
    if (!persistent.empty()) text << "\n";
    text << "These hard failures came and went between attempts (a fix moved the problem):";
    for (const auto& s : changing) text << "\n- " << s;
  }
  text << "\nNext step: read the logs under logs/ for the first failing attempt, correct the profile "
          "(or the input) and start a new run.";
  return text.str();
}

namespace {

// "3 request(s) (1 replayed) to openai/gpt-4o; 1200 input + 300 output tokens; $0.0060"
std::string usage_line(const nlohmann::json& usage) {
  const nlohmann::json total = usage.is_object() ? usage.value("total", nlohmann::json::object())
                                                 : nlohmann::json::object();
  const int requests = total.value("requests", 0);
  if (requests == 0) return "no requests";
  std::ostringstream line;
  line << requests << " request(s)";
  if (int replayed = total.value("replayed", 0); replayed > 0) line << " (" << replayed << " replayed)";
  std::string models;
  for (const auto& entry : usage.value("by_model", nlohmann::json::array())) {
    models += (models.empty() ? "" : ", ") + entry.value("provider", std::string()) + "/" +
              entry.value("model", std::string());
  }
  if (!models.empty()) line << " to " << models;
  line << "; " << total.value("input_tokens", std::int64_t{0}) << " input + "
       << total.value("output_tokens", std::int64_t{0}) << " output tokens"
       << (total.value("estimated", false) ? " (estimated)" : "");
  char cost[32];
  std::snprintf(cost, sizeof cost, "$%.4f", total.value("cost_usd", 0.0));
  line << "; " << cost;
  return line.str();
}

}  // namespace

void write_reports(const fs::path& run_dir, const RunState& state) {
  nlohmann::json json = state.to_json();
  json["run_dir"] = fs::absolute(run_dir).string();
  json["profile"] = (run_dir / "profile.yaml").string();
  if (const fs::path verify_json = run_dir / state.workflow / "verify.json"; fs::is_regular_file(verify_json)) {
    auto parsed = nlohmann::json::parse(util::read_file(verify_json), nullptr, false);
    if (!parsed.is_discarded()) json["verify"] = parsed;
  }
  util::write_file_atomic(run_dir / "report.json", json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");

  std::ostringstream md;
  md << "# Run " << state.name << "\n\n";
  md << "| | |\n|---|---|\n";
  md << "| workflow | " << state.workflow << " |\n";
  md << "| status | " << state.status << " |\n";
  md << "| created | " << state.created_at << " |\n";
  md << "| updated | " << state.updated_at << " |\n";
  md << "| repository | " << state.tree_root.string() << " |\n";
  md << "| attempts | " << state.attempts.size() << " of at most " << state.max_attempts << " |\n";
  md << "| LLM | " << usage_line(state.usage) << " |\n\n";

  md << "## Stages\n\n| stage | status | runs | started | finished |\n|---|---|---|---|---|\n";
  for (const char* stage : {"understand", "act", "apply", "verify"}) {
    auto it = state.stages.find(stage);
    if (it == state.stages.end()) continue;
    md << "| " << stage << " | " << it->second.status << " | " << it->second.runs << " | "
       << it->second.started_at << " | " << it->second.finished_at << " |\n";
  }
  md << "\n## Checkpoints\n\n";
  for (const auto& [name, record] : state.checkpoints) {
    md << "- " << name << ": " << record.status;
    if (!record.decided_by.empty()) md << " (by " << record.decided_by << ", " << record.decided_at << ")";
    if (!record.note.empty()) md << " — " << record.note;
    md << "\n";
  }

  if (!state.staged_files.empty()) {
    md << "\n## Files\n\n";
    for (const auto& file : state.staged_files) {
      bool applied = std::find(state.applied_files.begin(), state.applied_files.end(), file) != state.applied_files.end();
      md << "- `" << file << "`" << (applied ? " (applied)" : " (staged only)") << "\n";
    }
  }

  if (!state.attempts.empty()) {
    md << "\n## Attempts\n";
    for (const auto& attempt : state.attempts) {
      md << "\n### Attempt " << attempt.attempt << "\n\n";
      if (!attempt.fixes.empty()) {
        md << "Fixes tried:\n";
        for (const auto& fix : attempt.fixes) md << "- " << fix << "\n";
      }
      md << (attempt.hard.empty() ? "No hard failures.\n" : "Hard failures:\n");
      for (const auto& f : attempt.hard) {
        md << "- " << f.summary << "\n";
        if (!f.detail.empty()) md << "\n```\n" << f.detail << "\n```\n";
      }
      if (!attempt.soft.empty()) md << "Warnings:\n";
      for (const auto& f : attempt.soft) md << "- " << f.summary << (f.detail.empty() ? "" : ": " + f.detail) << "\n";
    }
  }
  // A workflow's own Verify summary (<run>/<workflow>/verify.md: checks, measurements, verdict).
  if (const fs::path verify_md = run_dir / state.workflow / "verify.md"; fs::is_regular_file(verify_md))
    md << "\n## Verify\n\n" << util::read_file(verify_md);
  if (!state.warnings.empty()) {
    md << "\n## Warnings from Understand/Act\n\n";
    for (const auto& f : state.warnings) md << "- " << f.summary << (f.detail.empty() ? "" : ": " + f.detail) << "\n";
  }
  if (!state.diagnosis.empty()) md << "\n## Diagnosis\n\n" << state.diagnosis << "\n";
  if (state.error) {
    md << "\n## Error\n\n" << state.error->message << "\n";
    if (!state.error->hint.empty()) md << "\nHint: " << state.error->hint << "\n";
  }
  util::write_file_atomic(run_dir / "report.md", md.str());
}

}  // namespace liger::engine
