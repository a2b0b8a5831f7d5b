#include "workflows/summaries.h"

#include <algorithm>
#include <map>
#include <vector>

#include "liger/profile.h"
#include "liger/review.h"

namespace liger::workflows {

namespace {

using review::field_line;
using review::inline_text;

std::string text_of(const YAML::Node& node, std::size_t max_chars = 100) { return inline_text(node, max_chars); }

// "x [rows, cols] (same as x)" per tensor, one per line.
std::string tensors(const YAML::Node& list) {
  if (!list || !list.IsSequence()) return text_of(list);
  std::string out;
  for (const auto& t : list) {
    if (!out.empty()) out += "\n";
    out += text_of(t["name"]) + " " + text_of(t["shape"]) + " " + text_of(t["dtype"]);
  }
  return out.empty() ? "(none)" : out;
}

std::string parameters(const YAML::Node& list, const char* value_key) {
  if (!list || !list.IsSequence()) return text_of(list);
  std::string out;
  for (const auto& p : list) {
    if (!out.empty()) out += "\n";
    out += text_of(p["name"]) + " (" + (p["shape"] ? text_of(p["shape"]) : std::string("scalar")) + ", " + value_key +
           " " + text_of(p[value_key]) + ")";
  }
  return out.empty() ? "(none)" : out;
}

std::string reductions(const YAML::Node& list) {
  std::string out;
  if (!list || !list.IsSequence()) return out;
  for (const auto& r : list)
    out += text_of(r["name"]) + " = " + text_of(r["op"]) + "(" + text_of(r["expression"]) + ") over the row\n";
  return out;
}

}  // namespace

std::string kernel_dev_summary(const YAML::Node& p) {
  std::string out;
  const YAML::Node id = p["identity"];
  out += field_line("op", text_of(id["op_name"]) + " (" + text_of(id["display_name"]) + ")");
  out += field_line("from", text_of(p["source"]["kind"]) + ": " + text_of(p["source"]["text"], 70));
  out += field_line("tier", text_of(p["tier"]["value"]) + " - " + text_of(p["tier"]["reason"], 90));
  out += field_line("follows", text_of(p["closest_kernel"]["name"]) + " - " + text_of(p["closest_kernel"]["reason"], 90));
  if (const YAML::Node row = p["row_program"]; row && row.IsMap()) {
    out += field_line("forward", reductions(row["forward"]["reductions"]) + "y = " + text_of(row["forward"]["output"]));
    out += field_line("backward", "uses " + text_of(row["backward"]["uses"]) + "\n" +
                                      reductions(row["backward"]["reductions"]) + "dx = " +
                                      text_of(row["backward"]["grad_input"]));
  } else {
    out += field_line("forward", text_of(p["forward"]["expression"]));
    std::string gradients;
    if (p["gradients"] && p["gradients"].IsSequence()) {
      for (const auto& g : p["gradients"])
        gradients += (gradients.empty() ? "" : "\n") + std::string("d/d") + text_of(g["wrt"]) + " = " +
                     text_of(g["derivative"]) + (g["reduction"] && g["reduction"].as<std::string>() == "true" ? "  (summed)" : "");
    } else {
      gradients = text_of(p["gradients"]);
    }
    out += field_line("gradients", gradients);
  }
  out += field_line("inputs", tensors(p["inputs"]));
  out += field_line("outputs", tensors(p["outputs"]));
  if (p["learnable_parameters"] && p["learnable_parameters"].size())
    out += field_line("learnable", parameters(p["learnable_parameters"], "init"));
  if (p["module_parameters"] && p["module_parameters"].size())
    out += field_line("options", parameters(p["module_parameters"], "default"));
  const YAML::Node t = p["tiling"];
  if (t && profile::is_undecided(t)) {
    out += field_line("tiling", text_of(t));
  } else if (t) {
    out += field_line("tiling", text_of(t["strategy"], 90) + "\n" + text_of(t["threads_per_block"]) +
                                    " threads/block, " + text_of(t["vector_bytes"]) + "-byte vectors; grid " +
                                    text_of(t["grid"], 70));
  }
  std::string tolerances;
  if (p["tolerances"] && p["tolerances"].IsSequence()) {
    for (const auto& tol : p["tolerances"])
      tolerances += (tolerances.empty() ? "" : "\n") + text_of(tol["dtype"]) + " " + text_of(tol["applies_to"]) +
                    ": atol " + text_of(tol["atol"]) + ", rtol " + text_of(tol["rtol"]);
    out += field_line("tolerances", tolerances);
  }
  return out;
}

std::string autopatch_summary(const YAML::Node& p) {
  std::string out;
  out += field_line("model", text_of(p["model_type"]) + " (" + text_of(p["source"]["modeling"], 80) + ")");
  if (p["reference_integration"])
    out += field_line("follows", text_of(p["reference_integration"]["name"]) + " - " +
                                     text_of(p["reference_integration"]["reason"], 80));
  out += "\n";
  std::vector<std::vector<std::string>> rows;
  const YAML::Node decisions = p["decisions"];
  if (decisions && decisions.IsMap()) {
    std::vector<std::pair<int, std::vector<std::string>>> numbered;
    for (const auto& entry : decisions) {
      const YAML::Node d = entry.second;
      const std::string name = entry.first.Scalar();
      if (profile::is_undecided(d)) {
        numbered.push_back({99, {"?", name, text_of(d, 50), "-", "-"}});
        continue;
      }
      std::string evidence;
      if (d["evidence"] && d["evidence"].IsSequence() && d["evidence"].size() > 0) {
        const YAML::Node first = d["evidence"][0];
        std::string file = text_of(first["file"]);
        if (auto slash = file.find_last_of('/'); slash != std::string::npos) file = file.substr(slash + 1);
        evidence = file + ":" + text_of(first["line"]);
        if (d["evidence"].size() > 1) evidence += " (+" + std::to_string(d["evidence"].size() - 1) + ")";
      } else {
        evidence = "-";
      }
      int number = 99;
      try {
        number = d["number"].as<int>();
      } catch (const std::exception&) {
      }
      numbered.push_back({number, {text_of(d["number"]), name, text_of(d["value"], 40), text_of(d["confidence"]), evidence}});
    }
    std::stable_sort(numbered.begin(), numbered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [number, row] : numbered) rows.push_back(row);
  }
  out += review::table({"#", "decision", "value", "confidence", "evidence file:line"}, rows);
  const YAML::Node plan = p["patch_plan"];
  if (plan && plan.IsMap()) {
    std::string apply, declined;
    for (const auto& item : plan["apply"]) apply += (apply.empty() ? "" : ", ") + text_of(item["kernel"]) + " -> " + text_of(item["target"]);
    for (const auto& item : plan["declined"])
      declined += (declined.empty() ? "" : "\n") + text_of(item["kernel"]) + ": " + text_of(item["reason"], 80);
    out += "\n" + field_line("patches", apply.empty() ? "(none)" : apply);
    if (!declined.empty()) out += field_line("declined", declined);
  }
  if (p["warnings"] && p["warnings"].IsSequence() && p["warnings"].size() > 0) {
    std::string warnings;
    for (const auto& w : p["warnings"]) warnings += (warnings.empty() ? "" : "\n") + text_of(w, 100);
    out += field_line("warnings", warnings);
  }
  return out;
}

std::string kernel_perf_summary(const YAML::Node& p) {
  std::string out;
  out += field_line("op", text_of(p["op"]) + ", goal " + text_of(p["goal"]) + ", modes " + text_of(p["target_modes"]) +
                              ", up to " + text_of(p["max_variants"]) + " variants");
  if (p["architecture"])
    out += field_line("gpu", "sm_" + text_of(p["architecture"]["sm"]) + " (" + text_of(p["architecture"]["family"]) +
                                 ", from " + text_of(p["architecture"]["source"]) + ")");
  out += field_line("bottleneck", text_of(p["bottleneck"]["class"]));
  out += field_line("evidence", text_of(p["bottleneck"]["evidence"], 200));
  std::vector<std::vector<std::string>> rows;
  int index = 1;
  if (p["strategy_order"] && p["strategy_order"].IsSequence()) {
    for (const auto& s : p["strategy_order"]) {
      const YAML::Node name = s["name"] ? s["name"] : s["id"];
      rows.push_back({std::to_string(index++), text_of(name, 40), text_of(s["kind"], 16), text_of(s["expected"], 60)});
    }
  }
  out += "\nstrategy order:\n" + review::table({"#", "strategy", "kind", "expected"}, rows);
  return out;
}

}  // namespace liger::workflows
