// Decisions 7 and 9-11: vision parts, the output class, the path to the last hidden state and
// logit soft-capping.
#include "workflows/autopatch/analysis_internal.h"

#include <regex>

namespace liger::autopatch::detail {

void Analyzer::decide_vision() {
  Decision& dd = d("vision");
  YAML::Node towers(YAML::NodeType::Sequence), projs(YAML::NodeType::Sequence),
      mm(YAML::NodeType::Sequence), vnorms(YAML::NodeType::Sequence);
  bool auto_tower = false;
  for (const auto& c : m.classes) {
    if (ends_with(c.name, "ForConditionalGeneration") || contains(c.name, "Multimodal") ||
        contains(c.name, "MultiModal")) {
      if (!contains(c.name, "Projector")) mm.push_back(c.name);
    }
    if (contains(c.name, "Projector") || contains(c.name, "PatchMerger") || ends_with(c.name, "Merger")) {
      projs.push_back(c.name);
      dd.evidence.push_back(ev(c.line));
      continue;
    }
    bool vision = contains(c.name, "Vision") || contains(c.name, "Visual") ||
                  (contains(c.name, "Siglip") && !contains(c.name, "Text"));
    if (vision && (ends_with(c.name, "Model") || ends_with(c.name, "Transformer") ||
                   ends_with(c.name, "TransformerPretrainedModel") || ends_with(c.name, "Encoder") ||
                   ends_with(c.name, "Tower"))) {
      towers.push_back(c.name);
      dd.evidence.push_back(ev(c.line));
    }
    if (vision) {
      for (const auto& na : norm_attrs(s, c)) {
        bool dup = false;
        for (auto n : vnorms) dup |= n.as<std::string>() == na.cls;
        if (!dup) vnorms.push_back(na.cls);
      }
    }
    for (const auto& a : c.init_assignments())
      if (contains(a.value, "vision_config") && (contains(a.value, "AutoModel") || contains(a.value, "from_config"))) {
        auto_tower = true;
        dd.evidence.push_back(ev(a.line));
      }
  }
  dd.details["vision_towers"] = towers;
  dd.details["projectors"] = projs;
  dd.details["multimodal_classes"] = mm;
  dd.details["vision_norm_classes"] = vnorms;
  dd.details["vision_tower_from_auto_model"] = auto_tower;
  bool present = towers.size() > 0 || auto_tower || (projs.size() > 0 && mm.size() > 0);
  decide(dd, present, present ? 0.9 : 0.85);
  if (!present) dd.notes.push_back("no vision tower, projector or multimodal class in the file");
}

void Analyzer::decide_output() {
  Decision& d9 = d("output_class");
  Decision& d10 = d("last_hidden_state");
  Decision& d11 = d("softcapping");
  std::vector<const ClassDef*> lm;
  for (const auto& c : m.classes) {
    if (!(ends_with(c.name, "ForCausalLM") || ends_with(c.name, "ForConditionalGeneration"))) continue;
    if (c.init_assignments_to("lm_head").empty() && !c.method("forward")) continue;
    lm.push_back(&c);
  }
  bool vision = d("vision").decided() && d("vision").value.as<bool>();
  YAML::Node all(YAML::NodeType::Sequence);
  for (auto* c : lm) all.push_back(c->name);
  d9.details["all"] = all;
  for (auto* c : lm)
    if (vision == ends_with(c->name, "ForConditionalGeneration")) { output_cls = c; break; }
  if (!output_cls && !lm.empty()) output_cls = lm.front();
  if (!output_cls) {
    undecide(d9, "no XForCausalLM / XForConditionalGeneration class in the file");
    undecide(d10, "no output class");
    undecide(d11, "no output class");
    return;
  }
  decide(d9, output_cls->name, 0.95);
  d9.evidence.push_back(ev(output_cls->line));
  for (const auto& a : output_cls->init_assignments())
    if (a.targets.front() == "self.model" || a.targets.front() == "self.language_model" ||
        a.targets.front() == "self.transformer") {
      d9.details["base_model_attribute"] = a.targets.front().substr(5);
      auto locals = local_classes_in(s, a);
      if (!locals.empty()) d9.details["base_model_class"] = locals.front();
      break;
    }
  std::string lm_head = "lm_head";
  for (const auto& a : output_cls->init_assignments_to("lm_head")) {
    d9.evidence.push_back(ev(a.line));
  }
  d9.details["lm_head"] = lm_head;

  const FunctionDef* fwd = output_cls->method("forward");
  if (!fwd) {
    undecide(d10, output_cls->name + " has no forward");
    undecide(d11, output_cls->name + " has no forward");
    return;
  }
  std::string hs_var, access;
  bool keep = false;
  YAML::Node transforms(YAML::NodeType::Sequence);
  int lm_line = 0;
  YAML::Node caps(YAML::NodeType::Sequence);
  std::string cap_attr;
  for (const auto& st : fwd->body) {
    if (contains(st.text, "logits_to_keep")) keep = true;
    auto a = as_assignment(st);
    if (a && a->targets.size() == 1) {
      static const std::regex acc(R"(^(outputs?(?:\.last_hidden_state|\[0\]|\.hidden_states\[-1\]))$)");
      std::smatch mm;
      if (std::regex_match(a->value, mm, acc)) {
        hs_var = a->targets.front();
        access = mm[1];
        d10.evidence.push_back(ev(st.line));
      }
      if (contains(a->value, "self." + lm_head + "(") && !lm_line) {
        lm_line = st.line;
        d10.evidence.push_back(ev(st.line));
        continue;
      }
      if (lm_line && a->targets.front() == "logits") {
        bool softcap_stmt = contains(st.text, "softcap") || contains(a->value, "torch.tanh(logits)");
        if (softcap_stmt) {
          caps.push_back(st.line);
          d11.evidence.push_back(ev(st.line));
          static const std::regex cre(R"((?:self\.)?config\.(?:text_config\.)?(\w*softcap\w*))");
          std::smatch cm;
          if (std::regex_search(st.text, cm, cre)) cap_attr = cm[1];
        } else if (!contains(a->value, ".float()") && a->value != "logits") {
          transforms.push_back(a->value);
          d10.evidence.push_back(ev(st.line));
        }
      }
    }
    if (lm_line && (st.keyword() == "if") && contains(st.text, "softcap")) {
      d11.evidence.push_back(ev(st.line));
      static const std::regex cre(R"((?:self\.)?config\.(?:text_config\.)?(\w*softcap\w*))");
      std::smatch cm;
      if (std::regex_search(st.text, cm, cre)) cap_attr = cm[1];
    }
  }
  if (!lm_line) {
    undecide(d10, output_cls->name + ".forward never calls self.lm_head");
  } else {
    if (access.empty()) {
      undecide(d10, "the hidden state fed to self.lm_head is not read as outputs.last_hidden_state or outputs[0]");
    } else {
      decide(d10, access, 0.95);
    }
    d10.details["variable"] = hs_var;
    d10.details["logits_to_keep"] = keep;
    d10.details["lm_head"] = lm_head;
    d10.details["logits_transforms"] = transforms;
  }
  if (caps.size() > 0 || !cap_attr.empty()) {
    decide(d11, true, 0.95);
    d11.details["config_attribute"] = cap_attr;
    if (!cap_attr.empty())
      if (auto prm = cfg.default_of(model_type, cap_attr)) {
        d11.details["config_default"] = unquote(prm->default_value);
        d11.evidence.push_back(cfg_ev(prm->line));
      }
  } else {
    decide(d11, false, 0.9);
    d11.evidence.push_back(ev(lm_line ? lm_line : fwd->line));
    d11.notes.push_back("no soft-capping applied to the logits in " + output_cls->name + ".forward");
  }
  // Attention soft-capping is informative only (it is not a loss-kernel option).
  for (const auto& c : m.classes)
    for (const auto& a : c.init_assignments())
      if (contains(a.value, "attn_logit_softcapping")) { d11.details["attention_softcapping"] = true; break; }
}

}  // namespace liger::autopatch::detail
