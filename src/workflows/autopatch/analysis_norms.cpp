// Decisions 1-4 and 12: norm type, RMSNorm casting and offset, in-place backward, norm names.
#include "workflows/autopatch/analysis_internal.h"

#include <algorithm>
#include <regex>
#include <set>

namespace liger::autopatch::detail {

namespace {

std::regex cast_down_re() {
  return std::regex(R"(\.(type_as\([^()]*\)|to\((?!torch\.float32|dtype=torch\.float32|torch\.float\b)[^()]*\)))");
}
bool is_cast_up(const std::string& t) {
  return contains(t, ".float()") || contains(t, "to(torch.float32)") ||
         contains(t, "to(dtype=torch.float32)") || contains(t, "to(torch.float)");
}
bool ends_with_cast_down(const std::string& expr) {
  const std::regex re(R"(\.(type_as\([^()]*\)|to\((?!torch\.float32\)|dtype=torch\.float32\)|torch\.float\))[^()]*\))$)");
  return std::regex_search(expr, re);
}

}  // namespace

Analyzer::RmsArith Analyzer::rms_arithmetic(const ClassDef& c) {
  RmsArith r;
  auto sts = method_with_helpers(c, "forward");
  std::string all = joined_text(sts);
  bool cast_up = is_cast_up(all);
  // The statement multiplying by the weight.
  int wi = -1;
  for (size_t i = 0; i < sts.size(); ++i)
    if (contains(sts[i].text, "self.weight") && contains(sts[i].text, "*")) { wi = static_cast<int>(i); }
  if (wi < 0) {
    r.has_weight = contains(all, "self.weight");
    r.why = r.has_weight ? "the forward uses self.weight but not in a product this analysis recognises"
                         : "the norm has no learnable weight";
    return r;
  }
  const Statement& ws = sts[static_cast<size_t>(wi)];
  r.lines.push_back(ws.line);
  std::string rhs;
  std::string target;
  if (auto a = as_assignment(ws)) { rhs = a->value; target = a->targets.front(); }
  else if (ws.keyword() == "return") rhs = returned_expr(ws);
  else rhs = ws.text;
  std::string expr = strip_parens(rhs);
  bool outer_cast = false;
  // (a*b).to(dtype) / (a*b).type_as(x)
  {
    static const std::regex outer(R"(^\((.*)\)\.(type_as\([^()]*\)|to\([^()]*\))$)");
    std::smatch mm;
    if (std::regex_match(expr, mm, outer) && split_top_level(mm[1].str(), '*').size() > 1) {
      outer_cast = !is_cast_up("." + mm[2].str());
      expr = mm[1].str();
    }
  }
  if (split_top_level(expr, '+').size() > 1 || split_top_level(expr, '-').size() > 1) {
    r.why = "the weight product has extra terms ('" + expr + "'): not y = x * rstd * (offset + w)";
    return r;
  }
  auto factors = split_top_level(expr, '*');
  std::string weight_factor, other;
  for (auto& f : factors) {
    std::string ff = strip_parens(f);
    if (contains(ff, "self.weight")) weight_factor = ff;
    else other += (other.empty() ? "" : "*") + ff;
  }
  // Offset: (1 + weight) / (1.0 + self.weight.float()) / self.weight + 1.
  {
    auto terms = split_top_level(weight_factor, '+');
    r.offset = 0;
    if (terms.size() == 2) {
      for (auto& t : terms) {
        std::string tt = strip_parens(t);
        if (tt == "1" || tt == "1.0" || tt == "1." ) r.offset = 1;
      }
      if (r.offset == 0) { r.offset = -1; r.why = "weight factor '" + weight_factor + "' is not w or (1 + w)"; }
    } else if (!(starts_with(weight_factor, "self.weight") &&
                 (weight_factor == "self.weight" || is_cast_up(weight_factor) ||
                  ends_with_cast_down(weight_factor)))) {
      r.offset = -1;
      r.why = "weight factor '" + weight_factor + "' is not w or (1 + w)";
    }
  }
  if (!cast_up) {
    r.casting = std::regex_search(all, cast_down_re()) ? "" : "none";
    if (r.casting.empty()) r.why = "casts back to the input dtype without computing in float32";
    return r;
  }
  // Is the normalised operand cast down before the weight multiply?
  bool operand_cast = ends_with_cast_down(other);
  if (!operand_cast && !other.empty()) {
    // A variable: look at its last assignment before the weight statement.
    for (int k = wi - 1; k >= 0; --k) {
      auto a = as_assignment(sts[static_cast<size_t>(k)]);
      if (!a || a->targets.size() != 1 || a->targets.front() != other) continue;
      operand_cast = ends_with_cast_down(strip_parens(a->value));
      if (operand_cast) r.lines.insert(r.lines.begin(), a->line);
      break;
    }
  }
  if (operand_cast) { r.casting = "llama"; return r; }
  if (outer_cast) { r.casting = "gemma"; return r; }
  // The product is cast down later: `return output.type_as(x)` / `.to(input_dtype)`.
  for (size_t k = static_cast<size_t>(wi) + 1; k < sts.size(); ++k) {
    const std::string& t = sts[k].text;
    if (!target.empty() && contains(t, target + ".") && std::regex_search(t, cast_down_re())) {
      r.lines.push_back(sts[k].line);
      r.casting = "gemma";
      return r;
    }
  }
  r.why = "float32 computation found but the cast back to the input dtype is not where the "
          "llama or gemma casting modes put it";
  return r;
}

std::vector<NormAttr> Analyzer::text_norm_attrs() const {
  std::vector<NormAttr> all = s.decoder_norms;
  all.insert(all.end(), s.attention_norms.begin(), s.attention_norms.end());
  if (s.final_norm) all.push_back(*s.final_norm);
  return all;
}

const NormClass* Analyzer::primary_norm(NormKind kind) const {
  for (const auto& na : text_norm_attrs()) {
    auto it = s.norms.find(na.cls);
    const NormClass* nc = it != s.norms.end() ? &it->second : nullptr;
    if (!nc && (na.cls == "nn.LayerNorm" || na.cls == "nn.RMSNorm")) {
      static NormClass ln{"nn.LayerNorm", NormKind::Layer, nullptr};
      static NormClass rn{"nn.RMSNorm", NormKind::Rms, nullptr};
      nc = na.cls == "nn.LayerNorm" ? &ln : &rn;
    }
    if (nc && nc->kind == kind && !nc->gated()) return nc;
  }
  return nullptr;
}

std::vector<Analyzer::GatedNorm> Analyzer::gated_norms() const {
  std::vector<GatedNorm> out;
  auto add = [&](const std::string& cls, const std::string& attr, const std::string& owner) {
    auto it = s.norms.find(cls);
    if (it == s.norms.end() || !it->second.gated()) return;
    for (auto& g : out)
      if (g.nc == &it->second) {
        if (!attr.empty() && std::find(g.attrs.begin(), g.attrs.end(), attr) == g.attrs.end()) g.attrs.push_back(attr);
        if (!owner.empty() && std::find(g.owners.begin(), g.owners.end(), owner) == g.owners.end()) g.owners.push_back(owner);
        return;
      }
    GatedNorm g{&it->second, {}, {}};
    if (!attr.empty()) g.attrs.push_back(attr);
    if (!owner.empty()) g.owners.push_back(owner);
    out.push_back(g);
  };
  for (const auto& na : s.decoder_norms) add(na.cls, na.attr, s.decoder->name);
  for (const auto& na : s.attention_norms) add(na.cls, na.attr, s.attention->name);
  for (const auto& lm : s.linear_mixers)
    for (const auto& na : lm.norms) add(na.cls, na.attr, lm.cls->name);
  if (s.final_norm) add(s.final_norm->cls, s.final_norm->attr, s.base_model ? s.base_model->name : "");
  for (const auto& [name, nc] : s.norms)
    if (nc.gated() && nc.kind == NormKind::Rms && !is_vision_name(name)) add(name, "", "");
  return out;
}

void Analyzer::decide_norms() {
  Decision& d1 = d("norm_type");
  Decision& d2 = d("rms_norm_casting");
  Decision& d3 = d("rms_norm_offset");
  auto attrs = text_norm_attrs();
  std::set<std::string> kinds;
  YAML::Node classes(YAML::NodeType::Sequence);
  std::set<std::string> listed;
  for (const auto& na : attrs) {
    const NormClass* nc = norm_of_callee(s, na.cls);
    if (!nc) continue;
    kinds.insert(nc->kind == NormKind::Rms ? "RMSNorm" : "LayerNorm");
    if (listed.insert(na.cls).second) {
      YAML::Node c;
      c["class"] = na.cls;
      c["kind"] = nc->kind == NormKind::Rms ? "RMSNorm" : "LayerNorm";
      if (nc->cls) c["line"] = nc->cls->line;
      classes.push_back(c);
      d1.evidence.push_back(nc->cls ? ev(nc->cls->line) : ev(na.line));
    }
  }
  d1.details["classes"] = classes;
  auto gated = gated_norms();
  if (!gated.empty()) {
    YAML::Node ex(YAML::NodeType::Sequence);
    for (const auto& g : gated) {
      YAML::Node e;
      e["class"] = g.nc->name;
      if (!g.attrs.empty()) e["attributes"] = g.attrs;
      if (!g.owners.empty()) e["in"] = g.owners;
      e["line"] = g.nc->cls->line;
      e["reason"] = g.nc->gated_why;
      ex.push_back(e);
      d1.evidence.push_back(ev(g.nc->cls->line));
      if (g.nc->gated_line) d1.evidence.push_back(ev(g.nc->gated_line));
    }
    d1.details["excluded"] = ex;
    d1.notes.push_back("gated norm class(es) excluded from the norm kernels (they take a gate "
                       "besides the hidden states): " +
                       [&] { std::string t; for (auto& g : gated) t += (t.empty() ? "" : ", ") + g.nc->name; return t; }());
  }
  if (kinds.empty()) {
    undecide(d1, s.decoder ? "no norm attribute in " + s.decoder->name + " resolves to a recognised RMSNorm/LayerNorm class"
                           : "no decoder-layer class found");
  } else if (kinds.size() == 2) {
    decide(d1, "both", 0.9);
  } else {
    decide(d1, *kinds.begin(), 0.95);
  }

  const NormClass* rms = primary_norm(NormKind::Rms);
  const NormClass* ln = primary_norm(NormKind::Layer);
  bool text_gated_rms = false;
  for (const auto& na : attrs) {
    auto it = s.norms.find(na.cls);
    text_gated_rms |= it != s.norms.end() && it->second.gated() && it->second.kind == NormKind::Rms;
  }
  if (!rms && text_gated_rms) {
    undecide(d2, "the text model's RMSNorm classes are all gated (norm(x, gate)); the library RMSNorm has no gate");
    undecide(d3, d2.undecided);
  } else if (!rms) {
    decide(d2, "not_applicable", 0.95);
    d2.notes.push_back("the text model has no RMSNorm");
    decide(d3, "not_applicable", 0.95);
  } else if (!rms->cls) {
    decide(d2, "none", 0.6);
    d2.notes.push_back("torch.nn.RMSNorm computes in the input dtype");
    decide(d3, 0, 0.9);
  } else {
    RmsArith r = rms_arithmetic(*rms->cls);
    d2.details["class"] = rms->name;
    d3.details["class"] = rms->name;
    for (int l : r.lines) { d2.evidence.push_back(ev(l)); }
    if (!r.has_weight) {
      undecide(d2, rms->name + ": " + r.why);
      undecide(d3, rms->name + ": " + r.why);
    } else {
      if (r.casting.empty()) undecide(d2, rms->name + ": " + r.why);
      else decide(d2, r.casting, 0.9);
      if (r.offset < 0) undecide(d3, rms->name + ": " + r.why);
      else {
        decide(d3, r.offset, 0.95);
        if (!r.lines.empty()) d3.evidence.push_back(ev(r.lines.back()));
        // init with zeros confirms the (1 + w) parameterisation
        for (const auto& a : rms->cls->init_assignments_to("weight"))
          if (contains(a.value, "zeros")) d3.evidence.push_back(ev(a.line));
      }
    }
  }
  if (ln) {
    YAML::Node lnd;
    lnd["class"] = ln->name;
    int offset = 0;
    bool bias = true;
    if (ln->cls) {
      std::string body = joined_text(method_with_helpers(*ln->cls, "forward"));
      if (contains(body, "self.weight+1") || contains(body, "1+self.weight")) offset = 1;
      bool custom = !ln->cls->has_base("LayerNorm");
      if (custom) {
        bool has_bias_param = false;
        for (const auto& a : ln->cls->init_assignments_to("bias"))
          has_bias_param |= contains(a.value, "Parameter");
        bias = has_bias_param && contains(body, "self.bias");
      }
      lnd["line"] = ln->cls->line;
    } else {
      // torch's LayerNorm built without its bias or without any affine parameters
      // (`nn.LayerNorm(d, bias=False)`, DBRX; `elementwise_affine=False`): the library LayerNorm
      // needs both. A flag read from the configuration is taken at its default; one that cannot
      // be told counts as missing, so the kernel is declined rather than applied on a guess.
      for (const auto& na : attrs) {
        if (na.cls != ln->name) continue;
        for (const auto& c : m.classes)
          for (const auto& a : c.init_assignments()) {
            if (a.line != na.line || !a.call) continue;
            // Removed after construction (MPT: `self.norm_1.bias = None`).
            for (const auto& st : c.method("__init__")->body) {
              auto r = as_assignment(st);
              if (!r || r->targets.size() != 1 || r->value != "None" ||
                  (r->targets.front() != "self." + na.attr + ".bias" && r->targets.front() != "self." + na.attr + ".weight"))
                continue;
              bias = false;
              lnd["no_bias"] = st.text;
              d1.evidence.push_back(ev(st.line));
            }
            for (const char* flag : {"bias", "elementwise_affine"}) {
              auto kw = a.call->kwargs.find(flag);
              if (kw == a.call->kwargs.end()) continue;
              std::string v = kw->second;
              static const std::regex cfg(R"(^(?:self\.)?config\.(\w+)$)");
              std::smatch mm;
              if (std::regex_match(v, mm, cfg)) v = config_default_raw(mm[1]).value_or("?");
              if (v == "True") continue;
              bias = false;
              lnd["no_bias"] = na.attr + " = " + a.value + (v == "False" ? "" : " (" + std::string(flag) + " cannot be told)");
              d1.evidence.push_back(ev(a.line));
            }
          }
      }
    }
    lnd["weight_offset"] = offset;
    lnd["bias"] = bias;
    d1.details["layer_norm"] = lnd;
  }
}

void Analyzer::decide_in_place() {
  Decision& dd = d("in_place_backward");
  if (!s.decoder || !s.decoder->method("forward")) {
    undecide(dd, "no decoder-layer forward to inspect");
    return;
  }
  std::set<std::string> norm_names;
  for (const auto& na : s.decoder_norms) norm_names.insert(na.attr);
  const auto& body = s.decoder->method("forward")->body;
  YAML::Node unsafe(YAML::NodeType::Sequence);
  auto is_norm_call = [&](const std::string& expr) -> std::string {
    for (const auto& n : norm_names)
      if (starts_with(expr, "self." + n + "(")) return n;
    return "";
  };
  for (size_t i = 0; i < body.size(); ++i) {
    auto a = as_assignment(body[i]);
    if (!a || a->targets.size() != 1 || a->op != "=") continue;
    // Inline: residual + self.post_norm(h)
    auto terms = split_top_level(a->value, '+');
    if (terms.size() >= 2) {
      for (auto& t : terms) {
        std::string n = is_norm_call(strip_parens(t));
        if (!n.empty()) {
          unsafe.push_back(n);
          dd.evidence.push_back(ev(a->line));
        }
      }
      continue;
    }
    std::string n = is_norm_call(a->value);
    if (n.empty()) continue;
    const std::string v = a->targets.front();
    // The next statement that reads v.
    for (size_t j = i + 1; j < body.size(); ++j) {
      const Statement& st = body[j];
      if (!std::regex_search(st.text, std::regex("\\b" + v + "\\b"))) continue;
      auto b = as_assignment(st);
      if (b && b->op == "+=" ) {
        // residual += hidden_states
        unsafe.push_back(n);
        dd.evidence.push_back(ev(a->line));
        dd.evidence.push_back(ev(st.line));
      } else if (b && b->op == "=") {
        auto ts = split_top_level(b->value, '+');
        bool direct = false;
        if (ts.size() >= 2)
          for (auto& t : ts) {
            std::string tt = strip_parens(t);
            if (tt == v || std::regex_match(tt, std::regex(R"(self\.\w*dropout\w*\()" + v + R"(\))")))
              direct = true;
          }
        if (direct) {
          unsafe.push_back(n);
          dd.evidence.push_back(ev(a->line));
          dd.evidence.push_back(ev(st.line));
        }
      }
      break;
    }
  }
  dd.details["unsafe_norms"] = unsafe;
  if (unsafe.size() > 0) {
    decide(dd, false, 0.9);
    dd.notes.push_back("a norm output is added straight to the residual stream: the gradient "
                       "tensor reaching the norm is shared with the residual branch, so the "
                       "norm's backward must not overwrite it");
  } else {
    decide(dd, true, 0.85);
    dd.evidence.push_back(ev(s.decoder->method("forward")->line));
    dd.notes.push_back("every norm output feeds a sublayer (pre-norm); none is added directly "
                       "to the residual");
  }
}

void Analyzer::decide_norm_names() {
  Decision& dd = d("norm_names");
  if (!s.decoder) {
    undecide(dd, "no decoder-layer class found");
    return;
  }
  YAML::Node v;
  YAML::Node dec(YAML::NodeType::Sequence), att(YAML::NodeType::Sequence);
  for (const auto& na : s.decoder_norms) { dec.push_back(na.attr); dd.evidence.push_back(ev(na.line)); }
  for (const auto& na : s.attention_norms) { att.push_back(na.attr); dd.evidence.push_back(ev(na.line)); }
  v["decoder"] = dec;
  v["attention"] = att;
  if (s.final_norm) {
    v["final"] = s.final_norm->attr;
    dd.evidence.push_back(ev(s.final_norm->line));
  } else {
    v["final"] = YAML::Node();
  }
  YAML::Node classes;
  for (const auto& na : s.decoder_norms) classes[na.attr] = na.cls;
  for (const auto& na : s.attention_norms) classes[na.attr] = na.cls;
  if (s.final_norm) classes[s.final_norm->attr] = s.final_norm->cls;
  dd.details["classes"] = classes;
  dd.details["decoder_class"] = s.decoder->name;
  if (s.attention) dd.details["attention_class"] = s.attention->name;
  if (!s.linear_mixers.empty()) {
    YAML::Node mix(YAML::NodeType::Sequence);
    for (const auto& lm : s.linear_mixers) {
      YAML::Node n;
      n["attribute"] = lm.attr;
      n["class"] = lm.cls->name;
      YAML::Node nn_(YAML::NodeType::Map);
      for (const auto& na : lm.norms) nn_[na.attr] = na.cls;
      n["norms"] = nn_;
      mix.push_back(n);
    }
    dd.details["linear_attention"] = mix;
  }
  if (s.base_model) dd.details["base_model_class"] = s.base_model->name;
  if (!s.skipped_norms.empty()) {
    YAML::Node sk(YAML::NodeType::Sequence);
    std::string names;
    for (const auto& na : s.skipped_norms) {
      sk.push_back(na.attr);
      names += (names.empty() ? "" : ", ") + na.attr;
    }
    dd.details["other_configuration_norms"] = sk;
    std::string why;
    for (const auto& w : s.skipped_why) why += (why.empty() ? "" : "; ") + w;
    dd.notes.push_back(names + " exist only in another layer variant: " + why);
  }
  if (dec.size() == 0) undecide(dd, "no norm attributes found in " + s.decoder->name);
  else decide(dd, v, s.final_norm ? 0.95 : 0.75);
  if (!s.final_norm) dd.notes.push_back("no final norm found on the base model");
}

}  // namespace liger::autopatch::detail
