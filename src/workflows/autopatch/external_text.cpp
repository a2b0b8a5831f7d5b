// A text model built from another config (`AutoModel.from_config(config.text_config)`):
// its classes are in another model's file.
#include "workflows/autopatch/analysis_internal.h"

#include <map>
#include <regex>
#include <set>

namespace liger::autopatch::detail {

// ---- a text model defined in another model's file -----------------------------------------
// GLM-4.6V: `self.language_model = AutoModel.from_config(config.text_config)`, the text config
// defaulting to another model type (glm4v_text). Its classes are not in this file.
void Analyzer::find_external_text() {
  // The call that builds the text model: any AutoModel factory but the encoder-decoder and
  // text-encoder ones (their text model is no causal decoder), with the text config as its first
  // argument or `config=`, spelt `config.text_config`, `self.config.text_config`,
  // `config.get_text_config()` or a local name bound to one of those earlier in __init__.
  auto found = [](std::string attr, std::string owner, int line) {
    ExternalText e;
    e.attr = std::move(attr);
    e.owner = std::move(owner);
    e.line = line;
    return e;
  };
  static const std::regex factory(R"(^AutoModel(ForCausalLM)?$)");
  static const std::regex text_cfg(R"(^(self\.)?config\.(text_config|get_text_config\(\))$)");
  // Any class, a vision-named one included: the wrapper of AyaVision / Cohere2Vision is
  // AyaVisionModel, and only the text config is matched, never a vision tower's.
  for (const auto& c : m.classes) {
    const FunctionDef* init = c.method("__init__");
    if (!init) continue;
    std::set<std::string> cfg_names;     // locals bound to the text config
    std::map<std::string, int> built;    // local name holding the text model -> line
    for (const auto& st : init->body) {
      auto a = as_assignment(st);
      if (!a || a->op != "=" || a->targets.size() != 1) continue;
      const std::string& tgt = a->targets.front();
      if (std::regex_match(a->value, text_cfg)) { cfg_names.insert(tgt); continue; }
      // `self.language_model = language_model` after `language_model = AutoModel.from_config(...)`.
      if (tgt.rfind("self.", 0) == 0 && built.count(a->value)) {
        s.external_text = found(tgt.substr(5), c.name, built[a->value]);
        break;
      }
      if (!a->call) continue;
      const std::string& callee = a->call->callee;
      const auto dot = callee.rfind(".from_config");
      if (dot == std::string::npos || dot + 12 != callee.size() ||
          !std::regex_match(callee.substr(0, dot), factory))
        continue;
      std::string arg = !a->call->args.empty() ? a->call->args.front() : std::string();
      if (auto k = a->call->kwargs.find("config"); arg.empty() && k != a->call->kwargs.end()) arg = k->second;
      if (!std::regex_match(arg, text_cfg) && !cfg_names.count(arg)) continue;
      if (tgt.rfind("self.", 0) == 0) {
        s.external_text = found(tgt.substr(5), c.name, a->line);
        break;
      }
      built[tgt] = a->line;
    }
    // A local that is never stored on self still names the text model.
    if (!s.external_text && !built.empty())
      s.external_text = found(built.begin()->first, c.name, built.begin()->second);
    if (s.external_text) break;
  }
  if (!s.external_text || !cfg_module) return;
  ExternalText& e = *s.external_text;
  // The text config's default model type, in any of the spellings transformers' configuration files
  // use: `text_config.get("model_type", "llama")`, `... if "model_type" in text_config else "llama"`,
  // `text_config = CONFIG_MAPPING["llama"]()` / `CONFIG_MAPPING["gemma"](hidden_size=2048, ...)`.
  static const std::regex get_type(R"re(text_config.*\.get\(["']model_type["'],["'](\w+)["']\))re");
  static const std::regex mapping(R"re(text_config\w*=CONFIG_MAPPING\[["'](\w+)["']\]\()re");
  for (const auto& st : cfg_module->statements) {
    std::smatch mm;
    if (std::regex_search(st.text, mm, get_type) || std::regex_search(st.text, mm, mapping)) {
      e.model_type = mm[1];
      e.config_line = st.line;
      break;
    }
    if (contains(st.text, "text_config") && contains(st.text, "model_type"))
      for (size_t i = 0; i + 1 < st.tokens.size(); ++i)
        if (st.tokens[i].text == "else" && st.tokens[i + 1].kind == TokKind::String) {
          e.model_type = unquote(st.tokens[i + 1].text);
          e.config_line = st.line;
          break;
        }
    if (!e.model_type.empty()) break;
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
    if (fs::exists(f, ec)) {
      e.modeling = "models/" + cand + "/modeling_" + cand + ".py";
      e.modeling_path = f;
      e.folder = cand;
      break;
    }
  }
}

// Analyses the backbone's modeling file (and its configuration file) with the same rules; the
// text decisions, the text kernels of the plan and the mini model's text_config come from it.
// One level only: a backbone that itself builds its text model elsewhere stays undecided.
void Analyzer::follow_external_text() {
  ExternalText& e = *s.external_text;
  if (!follow || e.modeling_path.empty()) return;
  try {
    backbone_modeling = parse_python_file(e.modeling_path);
    fs::path cfg_path = e.modeling_path.parent_path() / ("configuration_" + e.folder + ".py");
    std::error_code ec;
    if (fs::exists(cfg_path, ec)) backbone_config = parse_python_file(cfg_path);
    Analyzer sub(*backbone_modeling, backbone_config ? &*backbone_config : nullptr, e.folder);
    sub.follow = false;
    backbone = sub.run();
  } catch (const Error& err) {
    backbone.reset();
    e.follow_error = err.what();
    return;
  }
  if (!backbone->decision("norm_names").decided() && !backbone->decision("norm_type").decided()) {
    e.follow_error = e.modeling + " has no text decoder this analysis recognises either";
    backbone.reset();
  }
}

std::string Analyzer::external_text_reason() const {
  const ExternalText& e = *s.external_text;
  std::string r = "the text model is defined in another model's file: " + e.owner + "." + e.attr +
                  " = AutoModel.from_config(config.text_config)";
  if (!e.model_type.empty()) r += ", whose default model type is " + e.model_type;
  if (!e.modeling.empty()) r += " (" + e.modeling + ")";
  if (!e.follow_error.empty())
    r += "; following it failed: " + e.follow_error;
  else if (e.modeling.empty())
    r += "; that model's modeling file was not found beside this one (models/<type>/modeling_<type>.py), so the "
         "text model's parts cannot be read";
  return r;
}

// Every decision about the text model's parts comes from the backbone's file when it was followed
// (with where it was decided), else becomes undecided with the reason (rope is not "none": the
// file has no rotary code because the text model is elsewhere).
void Analyzer::apply_external_text() {
  const ExternalText& e = *s.external_text;
  const std::string how = e.owner + "." + e.attr + " = AutoModel.from_config(config.text_config) (" + m.origin + ":" +
                          std::to_string(e.line) + ")" +
                          (e.config_line ? ", text_config defaulting to " + e.model_type + " (" + cfg_module->origin + ":" +
                                               std::to_string(e.config_line) + ")"
                                         : std::string());
  for (const char* k : {"norm_type", "rms_norm_casting", "rms_norm_offset", "in_place_backward",
                        "mlp_activation", "architecture", "rope", "norm_names"}) {
    Decision& x = d(k);
    if (backbone) {
      const int number = x.number;
      x = backbone->decision(k);
      x.number = number;
      x.details = x.details ? YAML::Clone(x.details) : YAML::Node();
      x.details["decided_in"] = e.modeling;
      x.notes.insert(x.notes.begin(), "decided on the text model's file " + e.modeling + ": " + how);
      x.evidence.push_back(ev(e.line));
      if (e.config_line) x.evidence.push_back(cfg_ev(e.config_line));
      continue;
    }
    undecide(x, external_text_reason());
    x.evidence.clear();
    x.notes.clear();
    x.evidence.push_back(ev(e.line));
    if (e.config_line) x.evidence.push_back(cfg_ev(e.config_line));
    x.details["text_model_attribute"] = e.attr;
    if (!e.model_type.empty()) x.details["text_model_type"] = e.model_type;
    if (!e.modeling.empty()) x.details["text_model_file"] = e.modeling;
  }
}

void Analyzer::plan_external_text() {
  const ExternalText& e = *s.external_text;
  if (backbone) {
    // The backbone's text kernels, applied or declined as its own analysis planned them, each
    // naming the module that defines the class (the integration patches it there).
    const std::string module = "transformers.models." + e.folder + ".modeling_" + e.folder;
    static const std::set<std::string> text_kernels = {"rms_norm", "layer_norm", "swiglu", "geglu", "rope"};
    for (const auto* list : {&backbone->apply, &backbone->declined})
      for (PatchItem it : *list) {
        if (!text_kernels.count(it.kernel)) continue;
        // The backbone's own vision parts (if any) are not this model's text model.
        if (it.reason.rfind("vision tower", 0) == 0) continue;
        it.module = module;
        it.source = e.modeling;
        (list == &backbone->apply ? p.apply : p.declined).push_back(it);
      }
    return;
  }
  const std::string why = external_text_reason();
  const std::string target = "text model (" + (e.model_type.empty() ? std::string("config.text_config") : e.model_type) + ")";
  for (const char* k : {"rms_norm", "swiglu", "rope"}) {
    PatchItem x;
    x.kernel = k;
    x.target = target;
    x.attributes = {e.attr};
    x.reason = why;
    p.declined.push_back(x);
  }
}
}  // namespace liger::autopatch::detail
