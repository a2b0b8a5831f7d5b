// autopatch's stages (Understand / Act / Verify) and the pieces tests exercise directly.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "liger/workflow.h"

namespace liger::autopatch {

engine::Workflow make_workflow();

// Which decisions, patch-plan items and mini-model settings differ between the profile an
// integration was generated from (its <m>.autopatch.yaml) and a new analysis; `regenerate` lists
// the artefacts to re-render (integration, test).
YAML::Node compute_change_impact(const YAML::Node& old_doc, const YAML::Node& now);
// __init__.py with `_register_module("<type>", "<module>")` in the sorted autopatch block.
std::string insert_registry_line(const std::string& init_text, const std::string& model_type, const std::string& module);
// "tolerance" (a pure tolerance miss: soft) or "hard" for a failed convergence test's message.
std::string classify_pytest_failure(const std::string& message);
// The "MINI-CONFIG-FIX <field>=<json>" lines of a generated test's CPU build check, as a map
// field -> JSON value, and the profile with those values set in mini_model.attributes (dotted
// fields walk into text_config / vision_config) and recorded in mini_model.derivations.
YAML::Node parse_mini_config_fixes(const std::string& pytest_output);
YAML::Node apply_mini_config_fixes(const YAML::Node& profile, const YAML::Node& fixes);

// Decision edits (plan_edits.cpp). decision_values: each decision's value, as Understand records
// them in patch_plan.derived_from. apply_decision_edits: the profile with the patch plan
// re-derived for every decision whose value differs from derived_from (the keys in `edited`);
// throws liger::Error(Usage) naming the field when the plan cannot follow an edit.
YAML::Node decision_values(const YAML::Node& decisions);
YAML::Node apply_decision_edits(const YAML::Node& profile, std::vector<std::string>* edited = nullptr);

}  // namespace liger::autopatch
