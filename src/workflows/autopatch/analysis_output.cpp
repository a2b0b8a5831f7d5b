// Decisions 7 and 9-11: vision parts, the output class, the path to the last hidden state and
// logit soft-capping.
#include "workflows/autopatch/analysis_internal.h"

#include <algorithm>
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

// One causal-LM head's forward: the hidden state fed to lm_head, logits_to_keep, transforms of
// the logits other than soft-capping, and soft-capping with its config attribute.
Analyzer::HeadInfo Analyzer::analyse_head(const ClassDef& c) const {
  HeadInfo h;
  h.cls = &c;
  const FunctionDef* fwd = c.method("forward");
  if (!fwd) {
    h.undecided = c.name + " has no forward";
    return h;
  }
  h.forward_line = fwd->line;
  if (const FunctionDef* g = c.method("get_output_embeddings"))
    for (const auto& st : g->body) {
      static const std::regex ret(R"(^return self\.(\w+)$)");
      std::smatch mm;
      if (std::regex_match(st.text, mm, ret) && !c.init_assignments_to(mm[1].str()).empty()) h.head_attr = mm[1];
    }
  const std::string head_call = "self." + h.head_attr + "(";
  // outputs / transformer_outputs / model_outputs: the base model's return value.
  static const std::regex acc(R"(^((?:\w+_)?outputs?(?:\.last_hidden_state|\[0\]|\.hidden_states\[-1\]))$)");
  static const std::regex cre(R"((?:self\.)?config\.(?:(?:get_)?text_config(?:\(\))?\.)?(\w*softcap\w*))");
  for (const auto& st : fwd->body) {
    if (contains(st.text, "logits_to_keep")) h.logits_to_keep = true;
    auto a = as_assignment(st);
    if (a && a->targets.size() == 1) {
      std::smatch mm;
      if (std::regex_match(a->value, mm, acc)) {
        h.hs_var = a->targets.front();
        h.access = mm[1];
        h.hs_lines.push_back(st.line);
        h.hs_changed.clear();
        h.scales.clear();  // a scale of an earlier read of the hidden state no longer applies
      } else if (!h.lm_line && !h.hs_var.empty() && a->targets.front() == h.hs_var &&
                 a->value.rfind(h.hs_var + "[", 0) != 0) {  // a slice (logits_to_keep) changes no value
        // The hidden state is changed before the projection. A scalar scale folds like a scale of
        // the logits (the projection is linear); anything else (a norm) the fused loss would skip.
        if (!fold_logit_scale(h, a->value, st.line, h.hs_var).empty() && h.hs_changed.empty()) h.hs_changed = a->value;
      }
      // The base model: the first submodule the forward calls and assigns, before the projection.
      if (!h.lm_line && h.base_attr.empty() && a->call && starts_with(a->call->callee, "self.") &&
          a->call->callee.find('.', 5) == std::string::npos) {
        const std::string attr = a->call->callee.substr(5);
        if (attr != h.head_attr && !c.init_assignments_to(attr).empty()) h.base_attr = attr;
      }
      if (contains(a->value, head_call) && !h.lm_line) {
        h.lm_line = st.line;
        // What the projection is applied to: the hidden state (optionally sliced), or something
        // computed from it (Electra's self.generator_predictions(sequence_output)).
        for (const auto& call : find_calls(a->value_tokens, a->line))
          if (call.callee == head_call.substr(0, head_call.size() - 1) && !call.args.empty()) {
            std::string arg = strip_parens(call.args.front());
            // A cast to the head's dtype (Mamba: `.to(self.lm_head.weight.dtype)`) changes no value.
            static const std::regex cast(R"(\.(to\([^()]*\)|float\(\)|type_as\([^()]*\))$)");
            arg = std::regex_replace(arg, cast, "");
            std::smatch am;
            if (std::regex_match(arg, am, acc)) {  // outputs[0] fed directly: that is the hidden state read
              h.head_arg = h.access = am[1];
              break;
            }
            if (const auto b = arg.find('['); b != std::string::npos && arg.back() == ']') arg = arg.substr(0, b);
            h.head_arg = arg;
            break;
          }
        // A scale on the same line (FalconH1: `self.lm_head(h) * self.model.lm_head_multiplier`) is
        // a logits transform like a separate `logits = logits / scaling`.
        const std::string v = strip_parens(a->value);
        for (char op : {'*', '/', '+', '-'})
          if (split_top_level(v, op).size() > 1) {
            h.transforms.push_back(a->value);
            h.transform_lines.push_back(st.line);
            break;
          }
        continue;
      }
      if (h.lm_line && a->targets.front() == "logits") {
        bool softcap_stmt = contains(st.text, "softcap") || contains(a->value, "torch.tanh(logits)");
        if (softcap_stmt) {
          h.cap_lines.push_back(st.line);
          std::smatch cm;
          if (std::regex_search(st.text, cm, cre)) h.cap_attr = cm[1];
        } else if (!contains(a->value, ".float()") && a->value != "logits") {
          h.transforms.push_back(a->value);
          h.transform_lines.push_back(st.line);
        }
      }
    }
    if (h.lm_line && st.keyword() == "if" && contains(st.text, "softcap")) {
      h.cap_lines.push_back(st.line);
      std::smatch cm;
      if (std::regex_search(st.text, cm, cre)) h.cap_attr = cm[1];
    }
  }
  // A scalar scale of the logits folds into the fused loss; it must come before any soft-cap
  // (tanh(s z / c) is not s tanh(z / c)).
  const int first_cap = h.cap_lines.empty() ? 0 : *std::min_element(h.cap_lines.begin(), h.cap_lines.end());
  for (size_t i = 0; i < h.transforms.size() && h.unfoldable.empty(); ++i) {
    std::string why = fold_logit_scale(h, h.transforms[i], h.transform_lines[i]);
    if (why.empty() && first_cap && h.transform_lines[i] > first_cap)
      why = "the scale comes after the soft-cap, which the fused loss applies last";
    if (!why.empty()) h.unfoldable = h.transforms[i] + ": " + why;
  }
  if (!h.lm_line) h.undecided = c.name + ".forward never calls self." + h.head_attr;
  else if (h.access.empty())
    h.undecided = "the hidden state fed to self." + h.head_attr + " is not read as outputs.last_hidden_state or outputs[0]";
  else if (!h.hs_changed.empty())
    h.undecided = h.hs_var + " is changed before self." + h.head_attr + " (" + h.hs_var + " = " + h.hs_changed +
                  "); the fused loss would read the base model's output unchanged";
  else if (!h.head_arg.empty() && h.head_arg != h.hs_var && h.head_arg != h.access &&
           !std::regex_match(h.head_arg, acc))
    h.undecided = "self." + h.head_attr + " is applied to " + h.head_arg + ", not to the base model's hidden state " +
                  h.hs_var + "; the fused loss would skip what lies between";
  return h;
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
  // The head configured by this model type's own config class (`config: Gemma3TextConfig` on
  // Gemma3ForCausalLM for gemma3_text, `config: Gemma3Config` on Gemma3ForConditionalGeneration for
  // gemma3); else the head that matches the vision decision.
  if (const ConfigClass* own = cfg.main(model_type); own && cfg_module)
    for (auto* c : lm) {
      for (const auto& st : c->class_body)
        if (st.text == "config:" + own->name || st.text == "config_class=" + own->name) { output_cls = c; break; }
      if (output_cls) break;
    }
  if (!output_cls)
    for (auto* c : lm)
      if (vision == ends_with(c->name, "ForConditionalGeneration")) { output_cls = c; break; }
  if (!output_cls && !lm.empty()) output_cls = lm.front();
  if (!output_cls) {
    undecide(d9, "no XForCausalLM / XForConditionalGeneration class in the file");
    undecide(d10, "no output class");
    undecide(d11, "no output class");
    return;
  }
  for (auto* c : lm) heads.push_back(analyse_head(*c));
  // A head that never calls self.lm_head itself but takes the logits from another head of the file
  // (Llama4ForConditionalGeneration calls self.language_model = Llama4ForCausalLM(...)) has no
  // hidden state for the fused loss. Decision 9 stays the model's output class; the head that
  // computes the logits is the one whose forward is patched (details.patched_head, the plan's item).
  const ClassDef* decided_cls = output_cls;
  if (const HeadInfo* chosen = head_of(output_cls); chosen && !chosen->lm_line)
    for (const auto& x : heads)
      if (x.lm_line && !x.access.empty()) {
        d9.notes.push_back(output_cls->name + ".forward never calls its output projection; " + x.cls->name +
                           " computes the logits, so its forward is the one the fused loss replaces");
        d9.details["patched_head"] = x.cls->name;
        output_cls = x.cls;
        break;
      }
  // The configuration class the patched head is built with (`config: Gemma3TextConfig`), for the mini model.
  for (const auto& st : output_cls->class_body)
    if (st.text.rfind("config:", 0) == 0 || st.text.rfind("config_class=", 0) == 0) {
      const std::string name = st.text.substr(st.text.find_first_of(":=") + 1);
      if (cfg.find(name)) output_config_class = name;
      break;
    }
  decide(d9, decided_cls->name, 0.95);
  d9.evidence.push_back(ev(decided_cls->line));
  if (decided_cls != output_cls) d9.evidence.push_back(ev(output_cls->line));
  const HeadInfo* patched = head_of(output_cls);
  for (const auto& a : output_cls->init_assignments()) {
    const std::string attr = a.targets.front().substr(5);
    // The attribute the forward calls first (BioGPT's self.biogpt), else the usual names.
    if (patched && !patched->base_attr.empty() ? attr == patched->base_attr
                                               : (attr == "model" || attr == "language_model" || attr == "transformer")) {
      d9.details["base_model_attribute"] = attr;
      auto locals = local_classes_in(s, a);
      if (!locals.empty()) d9.details["base_model_class"] = locals.front();
      break;
    }
  }
  const std::string head_attr = patched ? patched->head_attr : std::string("lm_head");
  for (const auto& a : output_cls->init_assignments_to(head_attr)) d9.evidence.push_back(ev(a.line));
  d9.details["lm_head"] = head_attr;

  const HeadInfo* h = head_of(output_cls);
  if (!h->forward_line) {
    undecide(d10, h->undecided);
    undecide(d11, h->undecided);
    return;
  }
  for (int l : h->hs_lines) d10.evidence.push_back(ev(l));
  if (h->lm_line) d10.evidence.push_back(ev(h->lm_line));
  for (int l : h->transform_lines) d10.evidence.push_back(ev(l));
  if (!h->lm_line) {
    undecide(d10, h->undecided);
  } else {
    if (h->access.empty() || !h->undecided.empty()) undecide(d10, h->undecided);
    else decide(d10, h->access, 0.95);
    d10.details["variable"] = h->hs_var;
    d10.details["logits_to_keep"] = h->logits_to_keep;
    d10.details["lm_head"] = h->head_attr;
    YAML::Node transforms(YAML::NodeType::Sequence);
    for (const auto& x : h->transforms) transforms.push_back(x);
    d10.details["logits_transforms"] = transforms;
    if (h->transforms_fold()) {
      YAML::Node scales(YAML::NodeType::Sequence);
      for (const auto& x : h->scales) {
        YAML::Node n;
        n["op"] = x.op;
        n["factor"] = x.factor;
        if (!x.config_attribute.empty()) n["config_attribute"] = x.config_attribute;
        scales.push_back(n);
      }
      d10.details["logits_scale"] = scales;
      d10.notes.push_back("the logits are scaled by a scalar before the loss; the fused loss scales the hidden state "
                          "(and the projection's bias) instead, which gives the same logits");
    } else if (!h->unfoldable.empty()) {
      d10.details["logits_transform_unfoldable"] = h->unfoldable;
    }
  }
  for (int l : h->cap_lines) d11.evidence.push_back(ev(l));
  if (h->softcaps()) {
    decide(d11, true, 0.95);
    d11.details["config_attribute"] = h->cap_attr;
    if (!h->cap_attr.empty())
      if (auto prm = config_param(h->cap_attr)) {
        d11.details["config_default"] = unquote(prm->default_value);
        d11.evidence.push_back(cfg_ev(prm->line));
      }
  } else {
    decide(d11, false, 0.9);
    d11.evidence.push_back(ev(h->lm_line ? h->lm_line : h->forward_line));
    d11.notes.push_back("no soft-capping applied to the logits in " + output_cls->name + ".forward");
  }
  // Every head's own answer, so a head that differs from the chosen one (Gemma3ForCausalLM
  // soft-caps, Gemma3ForConditionalGeneration does not) is visible where it is declined.
  YAML::Node hs(YAML::NodeType::Sequence);
  for (const auto& x : heads) {
    YAML::Node n;
    n["class"] = x.cls->name;
    n["line"] = x.cls->line;
    n["last_hidden_state"] = x.undecided.empty() ? YAML::Node(x.access) : YAML::Node("undecided: " + x.undecided);
    n["softcapping"] = x.softcaps();
    if (!x.cap_attr.empty()) n["softcap_attribute"] = x.cap_attr;
    if (!x.transforms.empty()) n["logits_transform"] = x.transforms.front();
    hs.push_back(n);
    if (x.cls != output_cls && x.softcaps() != h->softcaps())
      d11.notes.push_back(x.cls->name + (x.softcaps() ? " soft-caps" : " does not soft-cap") +
                          " its logits, unlike " + output_cls->name + "; see the patch plan for that head");
  }
  d9.details["heads"] = hs;
  // Attention soft-capping is informative only (it is not a loss-kernel option).
  for (const auto& c : m.classes)
    for (const auto& a : c.init_assignments())
      if (contains(a.value, "attn_logit_softcapping")) { d11.details["attention_softcapping"] = true; break; }
}
}  // namespace liger::autopatch::detail
