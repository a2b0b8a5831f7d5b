// A text model built from another config (`AutoModel.from_config(config.text_config)`):
// its classes are in another model's file.
#include "workflows/autopatch/analysis_internal.h"

#include <regex>

namespace liger::autopatch::detail {

// ---- a text model defined in another model's file -----------------------------------------
// GLM-4.6V: `self.language_model = AutoModel.from_config(config.text_config)`, the text config
// defaulting to another model type (glm4v_text). Its classes are not in this file.
void Analyzer::find_external_text() {
  static const std::regex from_cfg(R"(AutoModel\w*\.from_config\((?:self\.)?config\.text_config\b)");
  for (const auto& c : m.classes) {
    if (is_vision_name(c.name)) continue;
    for (const auto& a : c.init_assignments())
      if (std::regex_search(a.value, from_cfg)) {
        ExternalText e;
        e.attr = a.targets.front().substr(5);
        e.owner = c.name;
        e.line = a.line;
        s.external_text = e;
        break;
      }
    if (s.external_text) break;
  }
  if (!s.external_text || !cfg_module) return;
  ExternalText& e = *s.external_text;
  static const std::regex get_type(R"re(text_config.*\.get\(["']model_type["'],["'](\w+)["']\))re");
  static const std::regex mapping(R"re(text_config=CONFIG_MAPPING\[["'](\w+)["']\]\(\))re");
  for (const auto& st : cfg_module->statements) {
    std::smatch mm;
    if (std::regex_search(st.text, mm, get_type) || std::regex_search(st.text, mm, mapping)) {
      e.model_type = mm[1];
      e.config_line = st.line;
      break;
    }
  }
  if (e.model_type.empty() || m.path.empty()) return;
  // The folder holding that type's modeling file: the type itself, or without a _text suffix.
  fs::path models = m.path.parent_path().parent_path();
  std::vector<std::string> cands = {e.model_type};
  for (const char* suf : {"_text", "_language", "_lm"})
    if (ends_with(e.model_type, suf)) cands.push_back(e.model_type.substr(0, e.model_type.size() - std::string(suf).size()));
  for (const auto& cand : cands) {
    fs::path f = models / cand / ("modeling_" + cand + ".py");
    std::error_code ec;
    if (fs::exists(f, ec)) { e.modeling = "models/" + cand + "/modeling_" + cand + ".py"; break; }
  }
}

std::string Analyzer::external_text_reason() const {
  const ExternalText& e = *s.external_text;
  std::string r = "the text model is defined in another model's file: " + e.owner + "." + e.attr +
                  " = AutoModel.from_config(config.text_config)";
  if (!e.model_type.empty()) r += ", whose default model type is " + e.model_type;
  if (!e.modeling.empty()) r += " (" + e.modeling + ")";
  r += "; this analysis reads one file, so analyse " +
       (e.modeling.empty() ? std::string("that model") : e.modeling) + " for the text model's parts";
  return r;
}

// Every decision about the text model's parts becomes undecided with that reason (rope is not
// "none": the file has no rotary code because the text model is elsewhere).
void Analyzer::apply_external_text() {
  const std::string why = external_text_reason();
  for (const char* k : {"norm_type", "rms_norm_casting", "rms_norm_offset", "in_place_backward",
                        "mlp_activation", "architecture", "rope", "norm_names"}) {
    Decision& x = d(k);
    undecide(x, why);
    x.evidence.clear();
    x.notes.clear();
    x.evidence.push_back(ev(s.external_text->line));
    if (s.external_text->config_line) x.evidence.push_back(cfg_ev(s.external_text->config_line));
    x.details["text_model_attribute"] = s.external_text->attr;
    if (!s.external_text->model_type.empty()) x.details["text_model_type"] = s.external_text->model_type;
    if (!s.external_text->modeling.empty()) x.details["text_model_file"] = s.external_text->modeling;
  }
}

void Analyzer::plan_external_text() {
  const std::string why = external_text_reason();
  const std::string target = "text model (" + (s.external_text->model_type.empty() ? std::string("config.text_config")
                                                                                  : s.external_text->model_type) + ")";
  for (const char* k : {"rms_norm", "swiglu", "rope"}) {
    PatchItem x;
    x.kernel = k;
    x.target = target;
    x.attributes = {s.external_text->attr};
    x.reason = why;
    p.declined.push_back(x);
  }
}

}  // namespace liger::autopatch::detail
