// Shared by the autopatch tests: compares a ModelProfile against an expectation table written as
// data (tests/workflows/fixtures/autopatch/expected_*.yaml).
//
// An entry maps decision keys to the expected value:
//   scalar           -> the decision's value (bool/int compared as text)
//   list             -> for a scalar decision: any one of the listed values
//   undecided        -> the decision must be undecided
//   map              -> each listed key compared against the decision's value map (lists compare
//                       as ordered lists), e.g. norm_names: {decoder: [...], final: norm}
// plus optional keys: apply / declined (kernels that must be in the plan's lists),
// not_apply (kernels that must not be applied), reference (reference integration),
// details: {decision: {key: value}} (compared against the decision's details map, dotted keys
// walk into maps).
#pragma once

#include <yaml-cpp/yaml.h>

#include <sstream>
#include <string>
#include <vector>

#include "workflows/autopatch/model_analysis.h"

namespace autopatch_test {

using liger::autopatch::Decision;
using liger::autopatch::ModelProfile;

inline std::string dump(const YAML::Node& n) {
  if (!n || n.IsNull()) return "null";
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

inline bool same(const YAML::Node& want, const YAML::Node& got) {
  if (!want || want.IsNull()) return !got || got.IsNull();
  if (!got) return false;
  if (want.IsScalar()) return got.IsScalar() && want.as<std::string>() == got.as<std::string>();
  if (want.IsSequence()) {
    if (!got.IsSequence() || got.size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i)
      if (!same(want[i], got[i])) return false;
    return true;
  }
  if (want.IsMap()) {
    if (!got.IsMap()) return false;
    for (auto it = want.begin(); it != want.end(); ++it)
      if (!same(it->second, got[it->first.as<std::string>()])) return false;
    return true;
  }
  return false;
}

inline YAML::Node walk(YAML::Node n, const std::string& dotted) {
  std::stringstream ss(dotted);
  std::string part;
  YAML::Node cur = YAML::Clone(n);
  while (std::getline(ss, part, '.')) {
    if (!cur || !cur.IsMap()) return YAML::Node();
    YAML::Node next = cur[part];
    if (!next) return YAML::Node();
    cur = next;
  }
  return cur;
}

// Every mismatch as one line; empty when the profile matches.
inline std::vector<std::string> check(const ModelProfile& p, const YAML::Node& expected) {
  std::vector<std::string> out;
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    std::string key = it->first.as<std::string>();
    const YAML::Node& want = it->second;
    if (key == "apply" || key == "declined" || key == "not_apply") {
      for (const auto& k : want) {
        std::string kernel = k.as<std::string>();
        bool has = key == "declined" ? p.declined_item(kernel) != nullptr : p.applied(kernel) != nullptr;
        if (key == "not_apply" ? has : !has)
          out.push_back(key + ": kernel '" + kernel + "' " + (key == "not_apply" ? "is applied" : "missing"));
      }
      continue;
    }
    if (key == "reference") {
      if (p.reference_integration != want.as<std::string>())
        out.push_back("reference: want " + want.as<std::string>() + ", got " + p.reference_integration);
      continue;
    }
    if (key == "details") {
      for (auto dt = want.begin(); dt != want.end(); ++dt) {
        const Decision& d = p.decision(dt->first.as<std::string>());
        for (auto kv = dt->second.begin(); kv != dt->second.end(); ++kv) {
          YAML::Node got = walk(d.details, kv->first.as<std::string>());
          if (!same(kv->second, got))
            out.push_back("details." + d.key + "." + kv->first.as<std::string>() + ": want " +
                          dump(kv->second) + ", got " + dump(got));
        }
      }
      continue;
    }
    const Decision* d = nullptr;
    for (const auto& x : p.decisions)
      if (x.key == key) d = &x;
    if (!d) {
      out.push_back("unknown key in expectations: " + key);
      continue;
    }
    if (want.IsScalar() && want.as<std::string>() == "undecided") {
      if (d->decided()) out.push_back(key + ": want undecided, got " + dump(d->value));
      continue;
    }
    if (!d->decided()) {
      out.push_back(key + ": want " + dump(want) + ", got undecided (" + d->undecided + ")");
      continue;
    }
    if (want.IsSequence() && d->value.IsScalar()) {  // one of several acceptable values
      bool any = false;
      for (const auto& w : want) any |= same(w, d->value);
      if (!any) out.push_back(key + ": want one of " + dump(want) + ", got " + dump(d->value));
      continue;
    }
    if (!same(want, d->value)) out.push_back(key + ": want " + dump(want) + ", got " + dump(d->value));
  }
  return out;
}

inline std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "  " + x + "\n";
  return s;
}

}  // namespace autopatch_test
