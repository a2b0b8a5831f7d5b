#include "workflows/autopatch/model_analysis.h"

#include <algorithm>
#include <regex>
#include <set>

#include "liger/error.h"
#include "workflows/autopatch/analysis_internal.h"

namespace liger::autopatch {

namespace detail {

ModelProfile Analyzer::run() {
  p.model_type = model_type;
  const auto& keys = decision_keys();
  for (size_t i = 0; i < keys.size(); ++i) {
    Decision x;
    x.number = static_cast<int>(i) + 1;
    x.key = keys[i];
    x.undecided = "not analysed";
    p.decisions.push_back(x);
  }
  s.config_default = [this](const std::string& a) { return config_default_raw(a); };
  find_structure(s);
  for (const ClassDef* c : {s.decoder, s.base_model}) {
    const FunctionDef* init = c ? c->method("__init__") : nullptr;
    if (!init || !text_config_class.empty()) continue;
    std::string head;
    const int last = init->body.empty() ? init->line : init->body.front().line - 1;
    for (int l = init->line; l <= last && l < init->line + 8; ++l) head += m.line_text(l) + " ";
    static const std::regex annotated(R"(\bconfig\s*:\s*"?(\w+))");
    std::smatch mm;
    if (std::regex_search(head, mm, annotated) && cfg.find(mm[1].str())) text_config_class = mm[1];
  }
  // Decoder norms built only by a configuration other than the default one are not the model's
  // (Falcon: ln_attn / ln_mlp with new_decoder_architecture, default False).
  if (s.decoder && s.decoder->method("__init__")) {
    std::vector<std::string> why;
    auto off = inactive_branch_lines(*s.decoder->method("__init__"), [&](const std::string& a) { return config_default_raw(a); }, &why);
    std::vector<NormAttr> kept = norm_attrs(s, *s.decoder, &off);
    for (const auto& na : s.decoder_norms)
      if (std::none_of(kept.begin(), kept.end(), [&](const NormAttr& k) { return k.attr == na.attr; }))
        s.skipped_norms.push_back(na);
    if (!off.empty()) {
      s.decoder_norms = kept;
      s.skipped_why = why;
    }
  }
  // The only layer stack of a multimodal wrapper may be its vision tower's (InternVL's
  // InternVLVisionEncoder.layer, SmolVLM's SmolVLMEncoder.layers): a stack whose owner has no
  // embed_tokens is not the text model when the text model is built from the text config elsewhere.
  const bool vision_stack = s.decoder && s.base_model && s.base_model->init_assignments_to("embed_tokens").empty();
  if (!s.decoder || vision_stack) find_external_text();
  if (s.external_text && s.decoder) {
    // Forget the vision stack's roles; the norm classes found in the file stay (vision-tower records).
    s.base_model = s.decoder = s.attention = nullptr;
    s.attention_attr.clear();
    s.attention_line = 0;
    s.linear_mixers.clear();
    s.decoder_norms.clear();
    s.attention_norms.clear();
    s.final_norm.reset();
    s.mlp_candidates.clear();
    s.mlp_attr.clear();
    s.mlp_line = 0;
    s.skipped_norms.clear();
    s.skipped_why.clear();
  }
  if (s.external_text) follow_external_text();
  decide_norms();
  decide_in_place();
  decide_mlp_and_arch();
  decide_vision();
  decide_rope();
  decide_output();
  decide_norm_names();
  if (s.external_text) apply_external_text();
  plan();
  mini_config();
  if (!cfg_module) p.warnings.push_back("no configuration_" + model_type + ".py next to the modeling file: config defaults unknown");
  return std::move(p);
}

}  // namespace detail

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Profile
// ---------------------------------------------------------------------------------------------

const std::vector<std::string>& decision_keys() {
  static const std::vector<std::string> keys = {
      "norm_type", "rms_norm_casting", "rms_norm_offset", "in_place_backward",
      "mlp_activation", "architecture", "vision", "rope", "output_class",
      "last_hidden_state", "softcapping", "norm_names"};
  return keys;
}

std::string Decision::value_string() const {
  if (!decided() || !value.IsScalar()) return "";
  return value.as<std::string>();
}

const Decision& ModelProfile::decision(std::string_view key) const {
  for (const auto& x : decisions)
    if (x.key == key) return x;
  throw Error(ErrorKind::Internal, "autopatch: unknown decision '" + std::string(key) + "'");
}

std::vector<std::string> ModelProfile::undecided() const {
  std::vector<std::string> out;
  for (const auto& x : decisions)
    if (!x.decided()) out.push_back(x.key);
  return out;
}

const PatchItem* ModelProfile::applied(std::string_view kernel) const {
  for (const auto& it : apply)
    if (it.kernel == kernel) return &it;
  return nullptr;
}

const PatchItem* ModelProfile::declined_item(std::string_view kernel) const {
  for (const auto& it : declined)
    if (it.kernel == kernel) return &it;
  return nullptr;
}

namespace {
YAML::Node item_yaml(const PatchItem& it) {
  YAML::Node n;
  n["kernel"] = it.kernel;
  n["target"] = it.target;
  if (!it.attributes.empty()) {
    n["attributes"] = YAML::Node(YAML::NodeType::Sequence);
    for (const auto& a : it.attributes) n["attributes"].push_back(a);
  }
  if (it.params && it.params.size() > 0) n["params"] = YAML::Clone(it.params);
  if (!it.module.empty()) n["module"] = it.module;
  if (!it.source.empty()) n["source"] = it.source;
  if (!it.reason.empty()) n["reason"] = it.reason;
  return n;
}
}  // namespace

YAML::Node ModelProfile::to_yaml() const {
  YAML::Node doc;
  doc["model_type"] = model_type;
  YAML::Node src;
  src["modeling"] = source.modeling.string();
  src["configuration"] = source.configuration ? YAML::Node(source.configuration->string()) : YAML::Node();
  src["resolved_from"] = source.resolved_from;
  doc["source"] = src;
  YAML::Node ds;
  for (const auto& x : decisions) {
    YAML::Node n;
    n["number"] = x.number;
    if (x.decided()) {
      n["value"] = YAML::Clone(x.value);
    } else {
      n["value"]["undecided"] = x.undecided;
    }
    n["confidence"] = x.confidence;
    // Where the decision was read (its first evidence): for a text model followed into another
    // model's file (llava -> modeling_llama.py) that file's line, not this one's.
    if (!x.evidence.empty()) n["source"] = x.evidence.front().file + ":" + std::to_string(x.evidence.front().line);
    YAML::Node evs(YAML::NodeType::Sequence);
    std::set<std::pair<std::string, int>> seen;
    for (const auto& e : x.evidence) {
      if (!seen.insert({e.file, e.line}).second) continue;
      YAML::Node en;
      en["file"] = e.file;
      en["line"] = e.line;
      en["fragment"] = e.fragment;
      evs.push_back(en);
    }
    n["evidence"] = evs;
    if (x.details && x.details.size() > 0) n["details"] = YAML::Clone(x.details);
    if (!x.notes.empty()) {
      for (const auto& note : x.notes) n["notes"].push_back(note);
    }
    ds[x.key] = n;
  }
  doc["decisions"] = ds;
  YAML::Node plan;
  plan["apply"] = YAML::Node(YAML::NodeType::Sequence);
  plan["declined"] = YAML::Node(YAML::NodeType::Sequence);
  for (const auto& it : apply) plan["apply"].push_back(item_yaml(it));
  for (const auto& it : declined) plan["declined"].push_back(item_yaml(it));
  doc["patch_plan"] = plan;
  YAML::Node ref;
  ref["name"] = reference_integration;
  ref["reason"] = reference_reason;
  doc["reference_integration"] = ref;
  doc["mini_model"] = YAML::Clone(mini_config);
  doc["undecided"] = YAML::Node(YAML::NodeType::Sequence);
  for (const auto& k : undecided()) doc["undecided"].push_back(k);
  doc["warnings"] = YAML::Node(YAML::NodeType::Sequence);
  for (const auto& w : warnings) doc["warnings"].push_back(w);
  return doc;
}

ModelProfile analyse_modules(const PythonModule& modeling, const PythonModule* configuration,
                             const std::string& model_type) {
  Analyzer a(modeling, configuration, model_type);
  return a.run();
}

ModelProfile analyse_model(const ModelSource& source) {
  PythonModule modeling = parse_python_file(source.modeling);
  std::optional<PythonModule> config;
  if (source.configuration) config = parse_python_file(*source.configuration);
  ModelProfile p = analyse_modules(modeling, config ? &*config : nullptr, source.model_type);
  p.source = source;
  return p;
}

ModelProfile analyse_model(const std::string& spec, const ResolveOptions& options) {
  return analyse_model(resolve_model_input(spec, options));
}

}  // namespace liger::autopatch
