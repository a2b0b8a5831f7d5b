// Decision 8: the RoPE variant, from the rotary apply function the text attention calls and
// the text rotary module (M-RoPE sections).
#include "workflows/autopatch/analysis_internal.h"

#include <map>
#include <regex>
#include <set>

namespace liger::autopatch::detail {

Analyzer::RopeFn Analyzer::classify_rope_function(const FunctionDef& f) {
  RopeFn r;
  r.line = f.line;
  std::string body = joined_text(f.body);
  std::string all = body;
  std::string rotate;
  for (const auto& st : f.body)
    for (const auto& call : find_calls(st))
      if (const FunctionDef* g = m.find_function(call.callee); g && g != &f) {
        std::string gb = joined_text(g->body);
        all += gb;
        if (contains(call.callee, "rotate")) rotate = gb;
      }
  if (contains(f.name, "multimodal") || contains(body, "mrope_section")) {
    r.variant = "mrope";
    return r;
  }
  if (contains(all, "view_as_complex") || contains(all, "torch.polar")) {
    r.variant = "complex";
    return r;
  }
  bool interleaved = contains(rotate, "::2]") || contains(rotate, "0::2") ||
                     (contains(rotate, "stack(") && contains(rotate, "flatten(")) ||
                     contains(body, "repeat_interleave(") || contains(f.name, "interleave");
  if (interleaved) {
    r.variant = "interleaved";
    return r;
  }
  r.partial_capable = contains(body, "rotary_dim") || contains(body, "_pass") ||
                      contains(body, "rot_dim") || std::regex_search(body, std::regex(R"(\[\.\.\.,:\w+\])"));
  bool standard_apply = contains(body, "rotate_half(") && contains(body, "*cos") && contains(body, "*sin");
  bool standard_rotate = contains(rotate, "torch.cat((-x2,x1),dim=-1)") ||
                         contains(rotate, "torch.cat([-x2,x1],dim=-1)") ||
                         contains(rotate, "cat((-x2,x1),dim=-1)");
  if (standard_apply && standard_rotate) {
    r.variant = "standard";
    return r;
  }
  r.variant = "custom";
  r.why = f.name + " does not compute the rotate-half form (q*cos + rotate_half(q)*sin)";
  return r;
}

// The class that builds the text model's cos/sin (`self.rotary_emb = XRotaryEmbedding(...)` in
// the base model, the decoder layer or the attention); vision rotaries are never assigned there.
const ClassDef* Analyzer::text_rotary_class(int* assigned_line) const {
  for (const ClassDef* c : {s.base_model, s.decoder, s.attention}) {
    if (!c) continue;
    for (const auto& a : c->init_assignments())
      for (const auto& callee : local_classes_in(s, a))
        if (contains(callee, "Rotary")) {
          *assigned_line = a.line;
          return s.m.find_class(callee);
        }
  }
  return nullptr;
}

// Statements of a rotary class that work with M-RoPE sections. Transformers 5.x moved the
// sectioning of Qwen2-VL, Qwen2.5-VL, Qwen3-VL and GLM-4V out of the apply function into the
// rotary module (`self.mrope_section` used by recomposition_frequencies / apply_interleaved_mrope),
// so their attention calls a plain rotate-half apply_rotary_pos_emb on recomposed cos/sin.
// Tokens, not text, so a docstring that merely mentions M-RoPE does not count.
std::vector<int> Analyzer::mrope_statements(const ClassDef& c, std::string* section_default) {
  std::vector<int> lines;
  for (const auto& f : c.methods)
    for (const auto& st : f.body) {
      bool uses = false;
      for (const auto& t : st.tokens)
        uses |= (t.kind == TokKind::Name && (t.text == "mrope_section" || ends_with(t.text, "_mrope"))) ||
                (t.kind == TokKind::String && unquote(t.text) == "mrope_section");
      if (!uses) continue;
      lines.push_back(st.line);
      static const std::regex dflt(R"re(\.get\(["']mrope_section["'],(\[[^\]]*\])\))re");
      std::smatch mm;
      if (section_default->empty() && std::regex_search(st.text, mm, dflt)) *section_default = mm[1];
    }
  return lines;
}

void Analyzer::decide_rope() {
  Decision& dd = d("rope");
  std::vector<const ClassDef*> where;
  if (s.attention) where.push_back(s.attention);
  if (s.decoder) where.push_back(s.decoder);
  if (s.base_model) where.push_back(s.base_model);
  std::vector<std::pair<const FunctionDef*, int>> fns;  // function, call line
  std::set<const FunctionDef*> seen;
  bool attention_slices = false;
  for (const ClassDef* c : where) {
    const FunctionDef* fwd = c->method("forward");
    if (!fwd) continue;
    for (const auto& st : fwd->body) {
      if (c == s.attention && (contains(st.text, "_rot=") || contains(st.text, "_pass=") ||
                               contains(st.text, "rope_head_dim")))
        attention_slices = true;
      for (const auto& call : find_calls(st)) {
        const FunctionDef* f = m.find_function(call.callee);
        if (!f || !(contains(f->name, "rotary") || contains(f->name, "rope"))) continue;
        if (seen.insert(f).second) fns.push_back({f, st.line});
      }
    }
    if (!fns.empty()) break;
  }
  if (fns.empty()) {
    // Rotary code of a vision tower (Glm5NextVisionRotaryEmbedding, apply_rotary_pos_emb_vision)
    // says nothing about the text attention's positions.
    auto vision = [](const std::string& n) {
      return contains(n, "Vision") || contains(n, "vision") || contains(n, "Visual") || contains(n, "visual");
    };
    bool any_rotary = false;
    std::vector<std::string> vision_rotary;
    for (const auto& c : m.classes)
      if (contains(c.name, "Rotary")) (vision(c.name) ? vision_rotary.push_back(c.name) : void(any_rotary = true));
    // A rotary function nothing calls (Jamba's apply_rotary_pos_emb, only named in a decorator of
    // an attention whose forward never applies it) is no rotary embedding either.
    auto called = [&](const std::string& name) {
      auto in = [&](const std::vector<Statement>& body) {
        for (const auto& st : body)
          for (const auto& call : find_calls(st))
            if (call.callee == name) return true;
        return false;
      };
      for (const auto& c : m.classes)
        for (const auto& f : c.methods)
          if (in(f.body)) return true;
      for (const auto& f : m.functions)
        if (f.name != name && in(f.body)) return true;
      return false;
    };
    std::vector<std::string> uncalled;
    for (const auto& f : m.functions)
      if (contains(f.name, "rotary") || contains(f.name, "rope")) {
        if (vision(f.name)) vision_rotary.push_back(f.name);
        else if (called(f.name)) any_rotary = true;
        else uncalled.push_back(f.name);
      }
    if (!any_rotary) {
      decide(dd, "none", vision_rotary.empty() ? 0.85 : 0.8);
      if (!uncalled.empty()) {
        std::string names;
        for (const auto& n : uncalled) names += (names.empty() ? "" : ", ") + n;
        dd.notes.push_back("the rotary function(s) " + names + " are defined but never called; the attention applies no "
                           "rotary embedding");
      }
      if (vision_rotary.empty()) {
        if (uncalled.empty()) dd.notes.push_back("no rotary embedding in the file (absolute or ALiBi positions)");
      } else {
        std::string names;
        for (const auto& n : vision_rotary) names += (names.empty() ? "" : ", ") + n;
        dd.notes.push_back("the only rotary code is the vision tower's (" + names +
                           "); the text attention applies no rotary embedding");
      }
    } else {
      undecide(dd, "rotary code exists but the text attention forward calls no module-level "
                   "rotary function this analysis can follow");
    }
    return;
  }
  static const std::map<std::string, int> rank = {{"standard", 0}, {"partial", 1}, {"custom", 2},
                                                  {"interleaved", 3}, {"complex", 4}, {"mrope", 5}};
  RopeFn best;
  best.variant = "standard";
  int best_rank = -1;
  YAML::Node funcs(YAML::NodeType::Sequence);
  for (auto& [f, line] : fns) {
    RopeFn r = classify_rope_function(*f);
    funcs.push_back(f->name);
    dd.evidence.push_back(ev(line));
    dd.evidence.push_back(ev(f->line));
    if (rank.at(r.variant) > best_rank || (r.partial_capable && best.variant == r.variant)) {
      best_rank = std::max(best_rank, rank.at(r.variant));
      bool pc = best.partial_capable || r.partial_capable;
      best = r;
      best.partial_capable = pc;
    }
  }
  dd.details["functions"] = funcs;
  // The replacement (liger_rotary_pos_emb) is a drop-in for apply_rotary_pos_emb(q, k, cos, sin,
  // ...): a rotate-half function with another parameter list (Gemma 4's apply_rotary_pos_emb(x,
  // cos, sin, unsqueeze_dim), called once per tensor) cannot be swapped for it.
  for (auto& [f, line] : fns) {
    const auto& ps = f->params;
    if (ps.size() >= 4 && ps[2] == "cos" && ps[3] == "sin") continue;
    std::string sig;
    for (const auto& x : ps) sig += (sig.empty() ? "" : ", ") + x;
    dd.details["signature_mismatch"] = f->name + "(" + sig + ")";
    break;
  }
  std::string variant = best.variant;
  if ((variant == "standard" && (best.partial_capable || attention_slices))) {
    auto factor = config_default("partial_rotary_factor");
    dd.details["partial_rotary_factor_default"] = factor ? *factor : "absent";
    if (factor) {
      if (auto prm = config_param("partial_rotary_factor")) dd.evidence.push_back(cfg_ev(prm->line));
    }
    if (attention_slices && !best.partial_capable) variant = "partial";
    else if (!factor || std::atof(factor->c_str()) < 1.0) variant = "partial";
    else dd.notes.push_back("the rotary function slices q/k for partial_rotary_factor, which "
                            "defaults to 1.0: full rotation unless a checkpoint sets it");
    dd.details["partial_capable"] = true;
  }
  int rotary_line = 0;
  std::string rotary_default;
  if (const ClassDef* rc = text_rotary_class(&rotary_line)) {
    auto lines = mrope_statements(*rc, &rotary_default);
    if (!lines.empty()) {
      if (variant != "mrope")
        dd.notes.push_back(best.variant == "standard"
            ? funcs[0].as<std::string>() + " is the rotate-half form, but " + rc->name +
                  " recomposes cos/sin from temporal/height/width position sections (mrope_section) "
                  "before it is called: the model's RoPE is M-RoPE"
            : rc->name + " recomposes cos/sin from position sections (mrope_section): the model's "
                  "RoPE is M-RoPE; the apply function itself is " + best.variant);
      variant = "mrope";
      best.why.clear();
      dd.details["mrope_in"] = rc->name;
      dd.evidence.push_back(ev(rotary_line));
      for (int l : lines) dd.evidence.push_back(ev(l));
    }
  }
  if (variant == "mrope") {
    if (auto sec = config_default("mrope_section")) dd.details["mrope_section"] = *sec;
    else if (!rotary_default.empty()) dd.details["mrope_section"] = rotary_default;
  }
  decide(dd, variant, variant == "custom" ? 0.7 : 0.9);
  if (!best.why.empty()) dd.notes.push_back(best.why);
  add_linear_mixer_facts(dd);
}

// Hybrid decoders (Qwen3.5, Qwen3-Next, Bamba...): the layers that use a linear-attention or
// state-space mixer have no RoPE; the decision is read from the softmax attention.
void Analyzer::add_linear_mixer_facts(Decision& dd) {
  if (s.linear_mixers.empty()) return;
  YAML::Node mix(YAML::NodeType::Sequence);
  std::string names;
  for (const auto& lm : s.linear_mixers) {
    YAML::Node n;
    n["attribute"] = lm.attr;
    n["class"] = lm.cls->name;
    mix.push_back(n);
    names += (names.empty() ? "" : ", ") + lm.attr + " = " + lm.cls->name;
  }
  dd.details["linear_attention"] = mix;
  if (s.attention) dd.details["attention_class"] = s.attention->name;
  dd.notes.push_back("the decoder layer also builds linear-attention / state-space mixers (" + names +
                     ") on some layers; they take no position embeddings, so rope is decided from "
                     "the softmax attention " +
                     (s.attention ? s.attention->name + " (" + s.attention_attr + ")" : std::string("(none found)")));
}

}  // namespace liger::autopatch::detail
