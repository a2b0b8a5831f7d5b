// Pieces of autopatch's stages shared by workflow.cpp (Understand, Act), render.cpp (the text of
// the generated integration, test, registry line and README row) and verify.cpp (Verify).
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <mustache.hpp>
#include <string>
#include <vector>

#include "liger/workflow.h"

namespace liger::autopatch::wf {

namespace fs = std::filesystem;
using engine::StageContext;
using engine::StageResult;
using kainjow::mustache::data;

inline constexpr const char* kPkg = "kernels/python/liger_kernels/transformers";
inline constexpr const char* kRegistryBegin = "# BEGIN autopatch registry";
inline constexpr const char* kRegistryEnd = "# END autopatch registry";
inline constexpr const char* kDocsBegin = "<!-- BEGIN autopatch models -->";
inline constexpr const char* kDocsEnd = "<!-- END autopatch models -->";

fs::path skills_dir();
fs::path templates_dir();

// Text helpers (workflow_text.cpp).
std::string emit(const YAML::Node& n);  // one-line flow text of a node, whatever style it was loaded with
std::string py_str(const std::string& s);
std::string py_list(const std::vector<std::string>& items);
std::string render(const std::string& name, const data& view);  // a templates/autopatch file
std::string title_of(const std::string& module);                // llama_autopatch -> "Llama Autopatch"
std::string tail(const std::string& text, size_t n = 4000);
std::string read_or_empty(const fs::path& p);
std::vector<std::string> split_csv(const std::string& s);

// What Act renders, read from the approved profile (render.cpp).
struct Plan {
  std::string model_type, module, modeling, causal_lm, base_attr = "model", lm_head = "lm_head", softcap_attr, reference;
  // The scalar factors on the logits the fused loss folds into the hidden state (decision 10's
  // details.logits_scale): (op, path from the head or literal), applied in order.
  std::vector<std::pair<std::string, std::string>> logits_scale;
  bool moe = false, vision = false;
  YAML::Node apply, declined;  // sequences of items after the --kernels filter
};

Plan plan_of(const YAML::Node& doc);
bool applies(const Plan& pl, const std::string& kernel);
std::string module_text(const YAML::Node& doc, const Plan& pl, const std::string& sidecar);
std::string test_text(const YAML::Node& doc, const Plan& pl, bool registered);
// Inserts `line` into the sorted block between begin/end markers (idempotent).
std::string insert_sorted(const std::string& text, const std::string& begin, const std::string& end,
                          const std::string& line, const std::string& key_prefix);
std::string registry_line(const std::string& model_type, const std::string& module);
std::string docs_row(const YAML::Node& doc, const Plan& pl);

// Verify (verify.cpp).
StageResult verify(StageContext& ctx);
// tolerance | hard, from a failed convergence test's message (and the log around it).
std::string classify_failure(const std::string& message, const std::string& log);

}  // namespace liger::autopatch::wf
