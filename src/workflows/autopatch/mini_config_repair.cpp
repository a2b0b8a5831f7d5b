// The mini-model repair of autopatch's attempt loop: the generated test's CPU build check prints
// one "MINI-CONFIG-FIX <field>=<json>" line per out-of-range field; Verify reports them and the next
// Act renders the test with those values (workflow.cpp: repaired_profile).
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "workflows/autopatch/workflow.h"

namespace liger::autopatch {

namespace {

// "MINI-CONFIG-FIX <field>=<json>" lines of the generated test's CPU build check: the field a
// failed build names and the value that brings it inside the mini model.
std::vector<std::pair<std::string, std::string>> fix_lines(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  static const std::regex re(R"(MINI-CONFIG-FIX ([\w.]+)=(\S+))");
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
    bool dup = false;
    for (const auto& f : out) dup |= f.first == (*it)[1].str();
    if (!dup) out.emplace_back((*it)[1].str(), (*it)[2].str());
  }
  return out;
}

YAML::Node apply_fixes(const YAML::Node& profile, const YAML::Node& fixes) {
  YAML::Node doc = YAML::Clone(profile);
  YAML::Node attrs = doc["mini_model"]["attributes"];
  for (const auto& kv : fixes) {
    const std::string field = kv.first.as<std::string>(), value = kv.second.as<std::string>();
    std::stringstream ss(field);
    std::vector<std::string> parts;
    for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
    YAML::Node cur = attrs;
    // reset(), not operator=: assigning a Node overwrites the node it refers to.
    for (size_t i = 0; i + 1 < parts.size(); ++i) cur.reset(cur[parts[i]]);
    cur[parts.back()] = YAML::Load(value);  // JSON is YAML
    doc["mini_model"]["derivations"].push_back(field + ": -> " + value + " (repaired from the CPU build diagnosis)");
  }
  return doc;
}

}  // namespace

YAML::Node parse_mini_config_fixes(const std::string& pytest_output) {
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& [field, value] : fix_lines(pytest_output)) out[field] = value;
  return out;
}

YAML::Node apply_mini_config_fixes(const YAML::Node& profile, const YAML::Node& fixes) { return apply_fixes(profile, fixes); }

}  // namespace liger::autopatch
