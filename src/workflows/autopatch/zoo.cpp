#include "workflows/autopatch/zoo.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "liger/error.h"
#include "liger/util.h"

namespace liger::autopatch::zoo {

namespace {

std::string read_text(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) ? util::read_file(p) : std::string();
}

// The class names a file defines at the top level, in order. Auto-class factories
// (models/auto: `class AutoModelForCausalLM(_BaseAutoModelClass)`) are no models and are left out.
std::vector<std::string> top_level_classes(const std::string& text) {
  static const std::regex cls(R"(^class\s+([A-Za-z_]\w*)\s*(\(([^)]*))?)");
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, cls)) continue;
    if (m[3].str().find("_BaseAutoModelClass") != std::string::npos) continue;
    out.push_back(m[1]);
  }
  return out;
}

// A table cell: one line, no column separator.
std::string cell(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out;
}

std::string shorten(const std::string& text, std::size_t max) {
  return text.size() <= max ? text : text.substr(0, max) + "...";
}

// "rms_norm, swiglu, rope" with repeated kernels counted ("rms_norm x2"), in the plan's order.
std::string kernels_cell(const std::vector<PlanItem>& items) {
  std::vector<std::string> order;
  std::map<std::string, int> count;
  for (const auto& it : items)
    if (count[it.kernel]++ == 0) order.push_back(it.kernel);
  std::string out;
  for (const auto& k : order) out += (out.empty() ? "" : ", ") + k + (count[k] > 1 ? " x" + std::to_string(count[k]) : "");
  return out.empty() ? "-" : out;
}

}  // namespace

std::vector<std::string> head_classes(const std::string& modeling_text) {
  std::vector<std::string> out;
  for (const auto& name : top_level_classes(modeling_text)) {
    const bool head = (name.size() > 11 && name.ends_with("ForCausalLM")) ||
                      (name.size() > 24 && name.ends_with("ForConditionalGeneration"));
    if (head) out.push_back(name);
  }
  return out;
}

Inventory enumerate(const fs::path& given) {
  std::error_code ec;
  const fs::path path = fs::absolute(given).lexically_normal();
  Inventory inv;
  if (fs::is_directory(path / "models", ec)) {
    inv.package_dir = path;
    inv.models_dir = path / "models";
  } else if (fs::is_directory(path, ec) && path.filename() == "models") {
    inv.package_dir = path.parent_path();
    inv.models_dir = path;
  } else {
    throw Error(ErrorKind::Usage,
                "--transformers '" + given.string() + "' " +
                    (fs::exists(path, ec) ? "is neither a transformers package directory (no models/ folder in it) nor its models/ folder"
                                          : "does not exist"),
                "pass the transformers package directory, e.g. --transformers "
                "$(python3 -c 'import transformers, os; print(os.path.dirname(transformers.__file__))')");
  }
  static const std::regex version(R"(__version__\s*=\s*["']([^"']+)["'])");
  std::smatch m;
  const std::string init = read_text(inv.package_dir / "__init__.py");
  if (std::regex_search(init, m, version)) inv.transformers_version = m[1];

  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(inv.models_dir, ec))
    if (e.is_directory() && e.path().filename().string()[0] != '_' && e.path().filename().string()[0] != '.')
      folders.push_back(e.path());
  std::sort(folders.begin(), folders.end());
  for (const auto& folder : folders) {
    const std::string type = folder.filename().string();
    const fs::path modeling = folder / ("modeling_" + type + ".py");
    if (!fs::is_regular_file(modeling, ec)) {
      inv.no_modeling.push_back(type);
      continue;
    }
    const std::string text = read_text(modeling);
    ZooModel model{type, modeling, head_classes(text)};
    if (!model.heads.empty()) {
      inv.causal.push_back(std::move(model));
      continue;
    }
    // Say what it is instead: the head classes it has (ForMaskedLM, ForImageClassification...).
    std::set<std::string> kinds;
    static const std::regex head_kind(R"(For[A-Z]\w*$)");
    for (const auto& cls : top_level_classes(text)) {
      std::smatch k;
      if (std::regex_search(cls, k, head_kind)) kinds.insert(k[0]);
    }
    std::string reason = "no *ForCausalLM or *ForConditionalGeneration class";
    if (!kinds.empty()) {
      reason += " (heads: ";
      std::size_t n = 0;
      for (const auto& k : kinds) reason += (n++ ? ", " : "") + k;
      reason += ")";
    }
    inv.not_causal.push_back({type, reason});
  }
  return inv;
}

Row row_from_profile(const std::string& model, const YAML::Node& profile) {
  Row row;
  row.model = model;
  const YAML::Node decisions = profile["decisions"];
  if (decisions && decisions.IsMap()) {
    for (const auto& kv : decisions) {
      ++row.total;
      const YAML::Node value = kv.second["value"];
      const bool undecided = !value || value.IsNull() || (value.IsMap() && value["undecided"]);
      if (undecided) row.undecided.push_back(kv.first.as<std::string>());
      else ++row.decided;
    }
  }
  auto items = [](const YAML::Node& seq, std::vector<PlanItem>& out) {
    if (!seq || !seq.IsSequence()) return;
    for (const auto& it : seq)
      out.push_back({it["kernel"].as<std::string>(""), it["target"].as<std::string>(""), it["reason"].as<std::string>("")});
  };
  if (const YAML::Node plan = profile["patch_plan"]) {
    items(plan["apply"], row.patched);
    items(plan["declined"], row.declined);
  }
  const YAML::Node heads = profile["decisions"]["output_class"]["details"]["heads"];
  if (heads && heads.IsSequence())
    for (const auto& h : heads)
      if (h["class"]) row.heads.push_back(h["class"].as<std::string>());
  return row;
}

nlohmann::json Row::to_json() const {
  auto items = [](const std::vector<PlanItem>& v, bool with_reason) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& it : v) {
      nlohmann::json j = {{"kernel", it.kernel}, {"target", it.target}};
      if (with_reason) j["reason"] = it.reason;
      out.push_back(j);
    }
    return out;
  };
  nlohmann::json j = {{"model", model},
                      {"heads", heads},
                      {"decided", decided},
                      {"total", total},
                      {"undecided", undecided},
                      {"patched", items(patched, false)},
                      {"declined", items(declined, true)},
                      {"verified", verified},
                      {"run_dir", run_dir},
                      {"log", log}};
  j["error"] = error.empty() ? nlohmann::json() : nlohmann::json(error);
  return j;
}

std::string summary_line(const std::vector<Row>& rows, const Inventory& inv, bool verify) {
  int full = 0, partial = 0, errors = 0;
  std::map<std::string, int> verdicts;
  for (const auto& r : rows) {
    if (!r.error.empty()) ++errors;
    else if (r.undecided.empty()) ++full;
    else ++partial;
    if (verify) ++verdicts[r.verified.substr(0, r.verified.find(" ("))];
  }
  const std::size_t folders = inv.causal.size() + inv.not_causal.size() + inv.no_modeling.size();
  std::string out = std::to_string(folders) + " model folders: " + std::to_string(rows.size()) + " causal LMs (" +
                    std::to_string(full) + " fully decided, " + std::to_string(partial) +
                    " with undecided decisions, " + std::to_string(errors) + " analysis errors), " +
                    std::to_string(inv.not_causal.size()) + " not a causal LM, " +
                    std::to_string(inv.no_modeling.size()) + " without a modeling file";
  if (verify) {
    out += "; verification:";
    std::size_t n = 0;
    for (const auto& [v, c] : verdicts) out += std::string(n++ ? "," : "") + " " + std::to_string(c) + " " + v;
  } else {
    out += "; verification not run (--verify)";
  }
  return out;
}

std::string render_markdown(const std::vector<Row>& rows, const Inventory& inv, const TableMeta& meta) {
  std::string md = "# Model coverage: autopatch on every transformers model\n\n";
  md += "Generated by `liger-agent autopatch --all" + std::string(meta.verify ? " --verify" : "") + "` on " + meta.date +
        " from transformers " + (meta.transformers_version.empty() ? "(version unknown)" : meta.transformers_version) +
        " by liger-agent " + meta.agent_version + (meta.agent_commit.empty() ? "" : " (" + meta.agent_commit + ")") +
        ".\n\n";
  md += summary_line(rows, inv, meta.verify) + ".\n\n";
  md += "| model | decisions | patched | declined | undecided | verified |\n|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    if (!r.error.empty()) {
      md += "| " + cell(r.model) + " | error | - | - | - | " + cell(r.verified) + " |\n";
      continue;
    }
    std::string undecided;
    for (const auto& k : r.undecided) undecided += (undecided.empty() ? "" : ", ") + k;
    md += "| " + cell(r.model) + " | " + std::to_string(r.decided) + "/" + std::to_string(r.total) + " | " +
          cell(kernels_cell(r.patched)) + " | " + cell(kernels_cell(r.declined)) + " | " +
          cell(undecided.empty() ? "-" : undecided) + " | " + cell(r.verified) + " |\n";
  }
  bool any_error = false;
  for (const auto& r : rows) any_error = any_error || !r.error.empty();
  if (any_error) {
    md += "\n## Analysis errors\n\n";
    for (const auto& r : rows)
      if (!r.error.empty()) md += "- **" + r.model + "**: " + cell(shorten(r.error, 400)) + "\n";
  }
  md += "\n## Declined, with the reasons\n\n";
  bool any_declined = false;
  for (const auto& r : rows) {
    if (r.declined.empty()) continue;
    any_declined = true;
    md += "- **" + r.model + "**\n";
    for (const auto& it : r.declined)
      md += "  - " + it.kernel + " (" + cell(it.target) + "): " + cell(shorten(it.reason, 300)) + "\n";
  }
  if (!any_declined) md += "(none)\n";
  md += "\n## Not a causal LM\n\n";
  for (const auto& n : inv.not_causal) md += "- " + n.type + ": " + cell(n.reason) + "\n";
  if (inv.not_causal.empty()) md += "(none)\n";
  md += "\nFolders without a `modeling_<type>.py`: ";
  std::string names;
  for (const auto& t : inv.no_modeling) names += (names.empty() ? "" : ", ") + t;
  md += (names.empty() ? "(none)" : names) + ".\n";
  return md;
}

nlohmann::json render_json(const std::vector<Row>& rows, const Inventory& inv, const TableMeta& meta) {
  nlohmann::json models = nlohmann::json::array();
  for (const auto& r : rows) models.push_back(r.to_json());
  nlohmann::json not_causal = nlohmann::json::array();
  for (const auto& n : inv.not_causal) not_causal.push_back({{"model", n.type}, {"reason", n.reason}});
  return {{"generated", meta.date},
          {"transformers", {{"version", meta.transformers_version}, {"dir", meta.transformers_dir}}},
          {"agent", {{"version", meta.agent_version}, {"commit", meta.agent_commit}}},
          {"verify", meta.verify},
          {"summary", summary_line(rows, inv, meta.verify)},
          {"models", models},
          {"not_causal_lm", not_causal},
          {"no_modeling_file", inv.no_modeling}};
}

}  // namespace liger::autopatch::zoo
