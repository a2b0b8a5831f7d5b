#include "workflows/autopatch/model_analysis.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <regex>
#include <set>

#include "liger/error.h"

namespace liger::autopatch {

namespace {

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}
bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}
bool starts_with(std::string_view s, std::string_view pre) { return s.rfind(pre, 0) == 0; }

// What a `return` statement returns, joined again from its tokens: the normalised text puts no
// space after `return` when the value opens with a bracket ("return(w*h).to(t)"), so cutting a
// fixed "return " prefix would eat that bracket and misread the expression (OLMo2's RMSNorm).
std::string returned_expr(const Statement& st) {
  return st.tokens.empty() ? std::string() : join_tokens(st.tokens, 1, st.tokens.size());
}

std::string unquote(std::string s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front())
    return s.substr(1, s.size() - 2);
  return s;
}

bool is_vision_name(std::string_view n) {
  static const char* marks[] = {"Vision", "Visual", "Siglip", "Clip", "CLIP", "Patch", "Image",
                                "Projector", "Merger", "Pixtral", "ViT", "Vit"};
  for (const char* m : marks)
    if (contains(n, m)) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// The model's structure: which classes play which role
// ---------------------------------------------------------------------------------------------

enum class NormKind { None, Rms, Layer };

struct NormClass {
  std::string name;  // local class name, or "nn.LayerNorm" / "nn.RMSNorm"
  NormKind kind = NormKind::None;
  const ClassDef* cls = nullptr;  // null for torch classes
  // Set when the forward takes more than the hidden states (a gate) or multiplies by an
  // activation (Qwen3.5's / Mamba2's RMSNormGated: norm(x) * silu(gate)): such a class is never
  // replaced by the library RMSNorm, which has no gate.
  std::string gated_why;
  int gated_line = 0;
  bool gated() const { return !gated_why.empty(); }

  NormClass() = default;
  NormClass(std::string n, NormKind k, const ClassDef* c) : name(std::move(n)), kind(k), cls(c) {}
};

struct NormAttr {
  std::string attr;
  std::string cls;
  int line = 0;
};

// A token mixer of the decoder layer that is not softmax attention (a GatedDeltaNet, a Mamba
// mixer...): hybrid models build one on some layers and softmax attention on the others.
struct LinearMixer {
  std::string attr;
  const ClassDef* cls = nullptr;
  int line = 0;
  std::vector<NormAttr> norms;  // its norm attributes (Qwen3.5's `norm = ...RMSNormGated(...)`)
};

// The text model is built from another model's config (`self.language_model =
// AutoModel.from_config(config.text_config)`, GLM-4.6V): its classes are not in this file.
struct ExternalText {
  std::string attr;         // language_model
  std::string owner;        // the class assigning it
  int line = 0;
  std::string model_type;   // the text_config's default model type, from the configuration file
  int config_line = 0;
  std::string modeling;     // models/<dir>/modeling_<dir>.py when found next to this model
};

struct Structure {
  const PythonModule& m;
  std::map<std::string, NormClass> norms;  // by class name
  const ClassDef* base_model = nullptr;    // text model: embed_tokens + layers
  const ClassDef* decoder = nullptr;
  const ClassDef* attention = nullptr;
  std::string attention_attr;
  int attention_line = 0;
  std::vector<LinearMixer> linear_mixers;
  std::optional<ExternalText> external_text;
  std::vector<NormAttr> decoder_norms, attention_norms;
  std::optional<NormAttr> final_norm;
  std::vector<std::pair<std::string, const ClassDef*>> mlp_candidates;  // attr, class
  std::string mlp_attr;
  int mlp_line = 0;

  explicit Structure(const PythonModule& mod) : m(mod) {}
};

// The statements of a method with `self._helper(...)` bodies inlined (norms often compute in a
// `_norm` helper).
std::vector<Statement> method_with_helpers(const ClassDef& c, std::string_view name) {
  std::vector<Statement> out;
  const FunctionDef* f = c.method(name);
  if (!f) return out;
  for (const auto& st : f->body) {
    for (const auto& call : find_calls(st)) {
      if (starts_with(call.callee, "self.") && std::count(call.callee.begin(), call.callee.end(), '.') == 1) {
        const FunctionDef* h = c.method(call.callee.substr(5));
        if (h && h->name != name) out.insert(out.end(), h->body.begin(), h->body.end());
      }
    }
    out.push_back(st);
  }
  return out;
}

std::string joined_text(const std::vector<Statement>& sts) {
  std::string s;
  for (const auto& st : sts) s += st.text + "\n";
  return s;
}

NormKind classify_norm_body(const ClassDef& c) {
  std::string body = joined_text(method_with_helpers(c, "forward"));
  if (body.empty()) return NormKind::None;
  if (contains(body, "layer_norm(")) return NormKind::Layer;
  if (contains(body, "rms_norm(")) return NormKind::Rms;
  bool sq_mean = contains(body, "pow(2).mean(") || contains(body, "**2).mean(") ||
                 contains(body, "square().mean(") || contains(body, "pow(2),dim=") ||
                 std::regex_search(body, std::regex(R"(\.mean\([^\n]*\)\n?.*rsqrt)"));
  bool rsqrt = contains(body, "rsqrt(") || contains(body, "sqrt(");
  bool mean_sub = std::regex_search(body, std::regex(R"(-\s*\w*mean\b)")) ||
                  std::regex_search(body, std::regex(R"(-\w+\.mean\()"));
  if (rsqrt && mean_sub) return NormKind::Layer;
  if (rsqrt && sq_mean) return NormKind::Rms;
  return NormKind::None;
}

// Why a norm class is gated (empty when it is a plain norm): its forward takes an input besides
// the hidden states and uses it (`forward(hidden_states, gate)`), or multiplies by an activation
// (ACT2FN[...], silu, sigmoid, gelu). *line is the statement that shows it.
std::string gated_norm_reason(const ClassDef& c, int* line) {
  const FunctionDef* f = c.method("forward");
  if (!f) return "";
  auto sts = method_with_helpers(c, "forward");
  std::vector<std::string> extra;
  for (size_t i = 2; i < f->params.size(); ++i)
    if (f->params[i] != "args" && f->params[i] != "kwargs") extra.push_back(f->params[i]);
  std::string used;
  int used_line = 0;
  for (const auto& st : sts) {
    for (const auto& t : st.tokens)
      if (t.kind == TokKind::Name && std::find(extra.begin(), extra.end(), t.text) != extra.end()) {
        used = t.text;
        used_line = st.line;
        break;
      }
    if (!used.empty()) break;
  }
  static const std::regex act(R"((ACT2FN\[|silu\(|sigmoid\(|gelu\(|swish\(|self\.act\w*\())");
  int act_line = 0;
  std::string act_text;
  for (const auto& st : sts)
    if (std::regex_search(st.text, act)) { act_line = st.line; act_text = st.text; break; }
  if (used.empty() && act_line == 0) return "";
  std::string params;
  for (size_t i = 1; i < f->params.size(); ++i) params += (i > 1 ? ", " : "") + f->params[i];
  std::string why = c.name + ".forward(" + params + ")";
  if (!used.empty()) why += " takes '" + used + "' besides the hidden states";
  if (act_line) why += std::string(used.empty() ? "" : " and") + " multiplies by an activation" +
                       (used.empty() ? std::string() : " of it");
  why += " (a gated norm); the library norm kernels compute only the normalisation and the weight "
         "(RMSNorm: x * rstd * w), so replacing the class would drop the gate";
  *line = act_line ? act_line : used_line;
  return why;
}

void find_norm_classes(Structure& s) {
  // Iterate to a fixed point so subclasses of a norm class (GemmaRMSNorm(LlamaRMSNorm)) count.
  for (const auto& c : s.m.classes) {
    NormKind k = NormKind::None;
    if (c.has_base("LayerNorm")) k = NormKind::Layer;
    else if (c.has_base("RMSNorm")) k = NormKind::Rms;
    NormKind body = classify_norm_body(c);
    if (body != NormKind::None) k = body;
    if (k == NormKind::None && c.method("forward") == nullptr) continue;
    if (k != NormKind::None) s.norms[c.name] = NormClass{c.name, k, &c};
  }
  for (int pass = 0; pass < 3; ++pass)
    for (const auto& c : s.m.classes) {
      if (s.norms.count(c.name)) continue;
      for (const auto& b : c.bases)
        if (s.norms.count(b)) s.norms[c.name] = NormClass{c.name, s.norms[b].kind, &c};
    }
  // Only RMSNorm-like classes named as norms (a decoder layer calling self.layer_norm(...) can
  // look like a norm to the arithmetic test above).
  for (auto& [name, nc] : s.norms) {
    if (!nc.cls || nc.kind != NormKind::Rms || !contains(name, "Norm")) continue;
    nc.gated_why = gated_norm_reason(*nc.cls, &nc.gated_line);
    // A subclass without its own forward inherits the base's gate.
    if (nc.gated_why.empty() && !nc.cls->method("forward"))
      for (const auto& b : nc.cls->bases) {
        const ClassDef* bc = s.m.find_class(b);
        if (bc && (nc.gated_why = gated_norm_reason(*bc, &nc.gated_line), !nc.gated_why.empty())) break;
      }
  }
}

const NormClass* norm_of_callee(const Structure& s, const std::string& callee) {
  static std::map<std::string, NormClass> torch_norms = {
      {"nn.LayerNorm", {"nn.LayerNorm", NormKind::Layer, nullptr}},
      {"torch.nn.LayerNorm", {"nn.LayerNorm", NormKind::Layer, nullptr}},
      {"LayerNorm", {"nn.LayerNorm", NormKind::Layer, nullptr}},
      {"nn.RMSNorm", {"nn.RMSNorm", NormKind::Rms, nullptr}},
      {"torch.nn.RMSNorm", {"nn.RMSNorm", NormKind::Rms, nullptr}}};
  auto it = s.norms.find(callee);
  if (it != s.norms.end()) return &it->second;
  auto jt = torch_norms.find(callee);
  if (jt != torch_norms.end() && !s.m.find_class(callee)) return &jt->second;
  return nullptr;
}

std::vector<NormAttr> norm_attrs(const Structure& s, const ClassDef& c) {
  std::vector<NormAttr> out;
  std::set<std::string> seen;
  for (const auto& a : c.init_assignments()) {
    for (const auto& call : find_calls(a.value_tokens, a.line)) {
      const NormClass* nc = norm_of_callee(s, call.callee);
      if (!nc) continue;
      std::string attr = a.targets.front().substr(5);
      if (seen.insert(attr).second) out.push_back(NormAttr{attr, nc->name, a.line});
      break;
    }
  }
  return out;
}

std::vector<std::string> local_classes_in(const Structure& s, const Assignment& a) {
  std::vector<std::string> out;
  for (const auto& call : find_calls(a.value_tokens, a.line))
    if (s.m.find_class(call.callee)) out.push_back(call.callee);
  return out;
}

// A token-mixer class or attribute named like linear attention / a state-space mixer
// (Qwen3.5's `linear_attn = Qwen3_5GatedDeltaNet(...)`, Bamba's `mamba = BambaMixer(...)`).
// The class name is read without the prefix it shares with the decoder layer's name (the model
// prefix): KimiLinearAttention is Kimi Linear's softmax attention, KimiLinearDeltaAttention its
// linear one.
bool is_linear_mixer(std::string_view attr, std::string_view cls, std::string_view decoder) {
  size_t common = 0;
  while (common < cls.size() && common < decoder.size() && cls[common] == decoder[common]) ++common;
  cls = cls.substr(common);
  static const char* attr_marks[] = {"linear", "mamba", "mixer", "ssm", "recurrent", "lightning"};
  static const char* cls_marks[] = {"DeltaNet", "Mamba", "Mixer", "SSM", "LinearAttention", "Lightning",
                                    "Recurrent", "Rwkv", "RWKV", "ShortConv", "DeltaAttention"};
  for (const char* m : attr_marks)
    if (contains(attr, m)) return true;
  for (const char* m : cls_marks)
    if (contains(cls, m)) return true;
  return false;
}

// How clearly a class's forward is softmax attention: a module-level rotary apply, the eager
// attention function, the attention interface, SDPA or a softmax.
int softmax_attention_evidence(const PythonModule& m, const ClassDef& c) {
  const FunctionDef* f = c.method("forward");
  if (!f) return 0;
  int score = 0;
  for (const auto& st : method_with_helpers(c, "forward")) {
    for (const auto& call : find_calls(st)) {
      const FunctionDef* fn = m.find_function(call.callee);
      if (fn && (contains(fn->name, "rotary") || contains(fn->name, "rope"))) score = std::max(score, 3);
      if (contains(call.callee, "eager_attention_forward") || contains(call.callee, "attention_interface") ||
          contains(call.callee, "scaled_dot_product_attention"))
        score = std::max(score, 2);
      if (contains(call.callee, "softmax")) score = std::max(score, 1);
    }
    if (contains(st.text, "ALL_ATTENTION_FUNCTIONS")) score = std::max(score, 2);
  }
  return score;
}

void find_structure(Structure& s) {
  find_norm_classes(s);
  // Base text model: a class with `self.layers = nn.ModuleList([...])` and embed_tokens.
  const ClassDef* best = nullptr;
  int best_score = -1;
  std::string layer_cls;
  for (const auto& c : s.m.classes) {
    for (const auto& a : c.init_assignments_to("layers")) {
      auto locals = local_classes_in(s, a);
      if (locals.empty()) continue;
      int score = 1;
      if (!c.init_assignments_to("embed_tokens").empty()) score += 4;
      if (!is_vision_name(c.name)) score += 2;
      if (contains(locals.front(), "Decoder")) score += 2;
      if (score > best_score) {
        best_score = score;
        best = &c;
        layer_cls = locals.front();
      }
    }
  }
  s.base_model = best;
  if (!layer_cls.empty()) s.decoder = s.m.find_class(layer_cls);
  if (!s.decoder)
    for (const auto& c : s.m.classes)
      if (ends_with(c.name, "DecoderLayer") && !is_vision_name(c.name)) { s.decoder = &c; break; }
  if (s.base_model) {
    for (const auto& na : norm_attrs(s, *s.base_model))
      if (na.attr != "embed_tokens") s.final_norm = na;  // the last norm assigned is the final one
  }
  if (!s.decoder) return;
  s.decoder_norms = norm_attrs(s, *s.decoder);
  // The attention class: among the decoder layer's *attn* / *attention* attributes (norms
  // excluded), the softmax attention (self_attn, a forward that applies RoPE or calls the attention
  // interface) over cross-attention; linear-attention / state-space mixers (GatedDeltaNet, Mamba)
  // that hybrid models build on some layers are never taken for it.
  int best_attn = std::numeric_limits<int>::min();
  std::set<const ClassDef*> mixer_seen;
  for (const auto& a : s.decoder->init_assignments()) {
    std::string attr = a.targets.front().substr(5);
    auto locals = local_classes_in(s, a);
    for (const auto& l : locals) {
      const ClassDef* c = s.m.find_class(l);
      if (!c || contains(attr, "norm") || (s.norms.count(l) && contains(l, "Norm"))) continue;
      bool named = contains(attr, "attn") || contains(attr, "attention");
      if (is_linear_mixer(attr, l, s.decoder->name) && (named || contains(attr, "mixer") || contains(attr, "mamba") ||
                                       contains(attr, "linear") || contains(attr, "ssm"))) {
        if (mixer_seen.insert(c).second) s.linear_mixers.push_back(LinearMixer{attr, c, a.line, {}});
        continue;
      }
      if (!named) continue;
      int score = 0;
      if (attr == "self_attn" || attr == "self_attention") score += 4;
      else if (attr == "attn" || attr == "attention") score += 2;
      if (contains(attr, "cross") || contains(attr, "encoder")) score -= 4;
      if (contains(attr, "dropout") || ends_with(attr, "_hc") || contains(attr, "gate")) score -= 6;
      score += 2 * softmax_attention_evidence(s.m, *c);
      if (score > best_attn) {
        best_attn = score;
        s.attention = c;
        s.attention_attr = attr;
        s.attention_line = a.line;
      }
    }
    static const std::set<std::string> mlp_attrs = {"mlp", "feed_forward", "block_sparse_moe",
                                                    "moe", "ffn", "mlp_block"};
    if (mlp_attrs.count(attr)) {
      if (s.mlp_attr.empty()) { s.mlp_attr = attr; s.mlp_line = a.line; }
      for (const auto& l : locals) {
        const ClassDef* c = s.m.find_class(l);
        bool dup = false;
        for (auto& [_, pc] : s.mlp_candidates) dup |= pc == c;
        if (c && !dup && !s.norms.count(l)) s.mlp_candidates.push_back({attr, c});
      }
    }
  }
  if (s.attention) s.attention_norms = norm_attrs(s, *s.attention);
  for (auto& lm : s.linear_mixers) lm.norms = norm_attrs(s, *lm.cls);
}

// ---------------------------------------------------------------------------------------------
// Decision helpers
// ---------------------------------------------------------------------------------------------

struct Analyzer {
  const PythonModule& m;
  const PythonModule* cfg_module;
  ConfigInfo cfg;
  std::string model_type;
  Structure s;
  ModelProfile p;

  Analyzer(const PythonModule& mod, const PythonModule* c, std::string type)
      : m(mod), cfg_module(c), model_type(std::move(type)), s(mod) {
    if (c) cfg = parse_config_module(*c);
  }

  Evidence ev(int line) const { return Evidence{m.origin, line, m.line_text(line)}; }
  Evidence cfg_ev(int line) const {
    return Evidence{cfg_module ? cfg_module->origin : "", line,
                    cfg_module ? cfg_module->line_text(line) : ""};
  }

  Decision& d(std::string_view key) {
    for (auto& x : p.decisions)
      if (x.key == key) return x;
    throw Error(ErrorKind::Internal, "unknown decision " + std::string(key));
  }
  void undecide(Decision& x, std::string why) {
    x.value = YAML::Node();
    x.undecided = std::move(why);
    x.confidence = 0.0;
  }
  template <class T>
  void decide(Decision& x, const T& v, double conf) {
    x.value = YAML::Node(v);
    x.undecided.clear();
    x.confidence = conf;
  }

  std::optional<std::string> config_default(const std::string& attr) const {
    auto prm = cfg.default_of(model_type, attr);
    if (!prm) return std::nullopt;
    return unquote(prm->default_value);
  }

  // ---- 1-3: norms ---------------------------------------------------------------------------
  struct RmsArith {
    std::string casting;  // llama | gemma | none | "" (undecided)
    int offset = -1;
    bool has_weight = true;
    std::string why;
    std::vector<int> lines;
  };

  static std::regex cast_down_re() {
    return std::regex(R"(\.(type_as\([^()]*\)|to\((?!torch\.float32|dtype=torch\.float32|torch\.float\b)[^()]*\)))");
  }
  static bool is_cast_up(const std::string& t) {
    return contains(t, ".float()") || contains(t, "to(torch.float32)") ||
           contains(t, "to(dtype=torch.float32)") || contains(t, "to(torch.float)");
  }
  static bool ends_with_cast_down(const std::string& expr) {
    static const std::regex re(R"(\.(type_as\([^()]*\)|to\((?!torch\.float32\)|dtype=torch\.float32\)|torch\.float\))[^()]*\))$)");
    return std::regex_search(expr, re);
  }

  RmsArith rms_arithmetic(const ClassDef& c) {
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

  std::vector<NormAttr> text_norm_attrs() const {
    std::vector<NormAttr> all = s.decoder_norms;
    all.insert(all.end(), s.attention_norms.begin(), s.attention_norms.end());
    if (s.final_norm) all.push_back(*s.final_norm);
    return all;
  }

  const NormClass* primary_norm(NormKind kind) const {
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

  // Gated norm classes (norm(x, gate)) of the text model: the decoder layer's, the attention's,
  // the linear-attention mixers' and the final norm's, then any other in the file outside a
  // vision tower. Each is excluded from the norm kernels with its reason.
  struct GatedNorm {
    const NormClass* nc;
    std::vector<std::string> attrs;  // "norm" (in Qwen3_5GatedDeltaNet)...
    std::vector<std::string> owners; // the classes holding those attributes
  };
  std::vector<GatedNorm> gated_norms() const {
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

  void decide_norms() {
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
      }
      lnd["weight_offset"] = offset;
      lnd["bias"] = bias;
      d1.details["layer_norm"] = lnd;
    }
  }

  // ---- 4: in-place backward --------------------------------------------------------------------
  void decide_in_place() {
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

  // ---- 5: MLP ----------------------------------------------------------------------------------
  struct MlpInfo {
    std::string kind;  // swiglu | geglu | fused_swiglu | other | "" (undecided)
    std::string why;
    std::string activation, config_attr, gate, up, down, gate_up;
    std::vector<int> lines;
    bool gated = false, fused = false;
  };

  static std::string map_activation(const std::string& act) {
    static const std::set<std::string> silu = {"silu", "swish"};
    static const std::set<std::string> gelu_tanh = {"gelu_pytorch_tanh", "gelu_new", "gelu_tanh"};
    if (silu.count(act)) return "silu";
    if (gelu_tanh.count(act)) return "gelu_tanh";
    return "";
  }

  MlpInfo analyse_mlp(const ClassDef& c) {
    MlpInfo r;
    std::string act_attr;
    for (const auto& a : c.init_assignments()) {
      static const std::regex act2fn(R"(ACT2FN\[(?:self\.)?(?:config|text_config)\.(\w+)\])");
      static const std::regex literal(R"(ACT2FN\[["'](\w+)["']\])");
      std::smatch mm;
      std::string attr = a.targets.front().substr(5);
      if (std::regex_search(a.value, mm, act2fn)) {
        act_attr = attr;
        r.config_attr = mm[1];
        r.lines.push_back(a.line);
        auto def = config_default(r.config_attr);
        if (def) r.activation = *def;
      } else if (std::regex_search(a.value, mm, literal)) {
        act_attr = attr;
        r.activation = mm[1];
        r.lines.push_back(a.line);
      } else if (a.call && (a.call->callee == "nn.SiLU" || a.call->callee == "nn.GELU" ||
                            a.call->callee == "nn.ReLU" || a.call->callee == "nn.Tanh")) {
        act_attr = attr;
        r.lines.push_back(a.line);
        if (a.call->callee == "nn.SiLU") r.activation = "silu";
        else if (a.call->callee == "nn.GELU")
          r.activation = contains(a.value, "tanh") ? "gelu_pytorch_tanh" : "gelu";
        else r.activation = a.call->callee == "nn.ReLU" ? "relu" : "tanh";
      }
    }
    const FunctionDef* fwd = c.method("forward");
    if (!fwd) { r.why = c.name + " has no forward"; return r; }
    // Activation call spellings in the forward.
    std::vector<std::string> act_calls;
    if (!act_attr.empty()) act_calls.push_back("self." + act_attr + "(");
    for (const char* f : {"F.silu(", "nn.functional.silu(", "torch.nn.functional.silu(", "F.gelu(",
                          "nn.functional.gelu(", "torch.nn.functional.gelu(", "F.relu(", "torch.relu("})
      act_calls.push_back(f);
    auto has_act = [&](const std::string& e, std::string* which) {
      for (auto& ac : act_calls)
        if (contains(e, ac)) { if (which) *which = ac; return true; }
      return false;
    };
    std::map<std::string, std::string> assigned;  // var -> value
    std::string gated_stmt;
    for (const auto& st : fwd->body) {
      auto a = as_assignment(st);
      std::string rhs = a ? a->value : (st.keyword() == "return" ? returned_expr(st) : st.text);
      if (a) {
        // gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        if (contains(rhs, ".chunk(2") || contains(rhs, "torch.chunk(")) {
          std::smatch mm;
          static const std::regex proj(R"(self\.(\w+)\()");
          std::string src = rhs;
          if (!std::regex_search(src, mm, proj) && a->value_tokens.size() && assigned.count(a->value_tokens.front().text))
            src = assigned[a->value_tokens.front().text];
          if (std::regex_search(src, mm, proj)) r.gate_up = mm[1];
          r.fused = true;
          r.lines.push_back(st.line);
          if (a->targets.size() == 2) { assigned["__gate"] = a->targets[0]; assigned["__up"] = a->targets[1]; }
        }
      }
      // Find a product with an activation factor.
      std::function<void(const std::string&)> scan = [&](const std::string& expr) {
        auto fs = split_top_level(strip_parens(expr), '*');
        if (fs.size() >= 2) {
          std::string which;
          int act_i = -1;
          for (size_t i = 0; i < fs.size(); ++i)
            if (has_act(fs[i], &which)) act_i = static_cast<int>(i);
          if (act_i >= 0 && !r.gated) {
            r.gated = true;
            gated_stmt = st.text;
            r.lines.push_back(st.line);
            if (which != act_calls.front() || act_attr.empty()) {
              if (contains(which, "silu")) r.activation = "silu";
              else if (contains(which, "gelu"))
                r.activation = contains(fs[static_cast<size_t>(act_i)], "tanh") ? "gelu_pytorch_tanh" : "gelu";
              else if (contains(which, "relu")) r.activation = "relu";
            }
            static const std::regex proj(R"(self\.(\w+)\()");
            std::smatch mm;
            std::string inner = fs[static_cast<size_t>(act_i)].substr(which.size());
            if (std::regex_search(inner, mm, proj)) r.gate = mm[1];
            for (size_t i = 0; i < fs.size(); ++i) {
              if (static_cast<int>(i) == act_i) continue;
              if (std::regex_search(fs[i], mm, proj)) r.up = mm[1];
            }
          }
          return;
        }
        // Recurse into call arguments: self.down_proj(act(g) * u)
        for (const auto& call : find_calls(tokenize(expr).tokens, st.line)) {
          for (const auto& arg : call.args) {
            if (split_top_level(strip_parens(arg), '*').size() >= 2) {
              bool before = r.gated;
              scan(arg);
              if (!before && r.gated && starts_with(call.callee, "self.") && r.down.empty())
                r.down = call.callee.substr(5);
            }
          }
        }
      };
      if (!r.gated) scan(rhs);
      else if (r.down.empty()) {
        static const std::regex outer(R"(^self\.(\w+)\()");
        std::smatch mm;
        std::string e = strip_parens(rhs);
        if (std::regex_search(e, mm, outer) && mm[1] != act_attr) r.down = mm[1];
      }
      if (a) assigned[a->targets.front()] = rhs;
    }
    if (r.activation.empty()) {
      if (!r.config_attr.empty())
        r.why = "the activation comes from config." + r.config_attr +
                " and its default could not be read (no configuration file?)";
      else
        r.why = "no activation (ACT2FN[...], nn.SiLU, F.silu, ...) found in " + c.name;
      return r;
    }
    std::string fam = map_activation(r.activation);
    if (!r.gated) {
      r.kind = "other";
      r.why = c.name + " is not gated (act(x) is not multiplied by a second projection); no "
              "library kernel computes it";
      return r;
    }
    if (fam.empty()) {
      r.kind = "other";
      r.why = "activation '" + r.activation + "' has no gated library kernel (SwiGLU needs silu, "
              "GeGLU the tanh approximation of gelu)";
      return r;
    }
    if (r.fused) {
      if (fam == "silu") r.kind = "fused_swiglu";
      else {
        r.kind = "other";
        r.why = "fused gate_up projection with a GELU activation: no library kernel";
      }
      return r;
    }
    r.kind = fam == "silu" ? "swiglu" : "geglu";
    return r;
  }

  static bool is_moe_class(const ClassDef& c) {
    for (const auto& a : c.init_assignments()) {
      std::string attr = a.targets.front().substr(5);
      if (attr == "experts" || attr == "num_experts" || attr == "router") return true;
    }
    return false;
  }

  void decide_mlp_and_arch() {
    Decision& d5 = d("mlp_activation");
    Decision& d6 = d("architecture");
    if (!s.decoder) {
      undecide(d5, "no decoder-layer class found");
      undecide(d6, "no decoder-layer class found");
      return;
    }
    const ClassDef* dense = nullptr;
    const ClassDef* moe = nullptr;
    for (auto& [attr, c] : s.mlp_candidates) {
      if (is_moe_class(*c)) { if (!moe) moe = c; }
      else if (!dense) dense = c;
    }
    d6.details["decoder_attribute"] = s.mlp_attr;
    if (s.mlp_line) d6.evidence.push_back(ev(s.mlp_line));
    const ClassDef* expert_cls = nullptr;   // per-expert MLP module class
    const ClassDef* fused_experts = nullptr;  // 3-D parameter experts
    if (!dense && !moe) {
      undecide(d6, "no MLP attribute (mlp / feed_forward / block_sparse_moe) with a class of this "
                   "file in " + s.decoder->name);
    } else if (moe) {
      d6.details["moe_class"] = moe->name;
      d6.evidence.push_back(ev(moe->line));
      YAML::Node ex;
      for (const auto& a : moe->init_assignments_to("experts")) {
        d6.evidence.push_back(ev(a.line));
        auto locals = local_classes_in(s, a);
        if (contains(a.value, "ModuleList") && !locals.empty()) {
          expert_cls = m.find_class(locals.front());
          ex["layout"] = "module_list";
          ex["expert_class"] = locals.front();
        } else if (!locals.empty()) {
          const ClassDef* ec = m.find_class(locals.front());
          ex["class"] = locals.front();
          if (ec && ec->has_base("ModuleList")) {
            ex["layout"] = "module_list";
            for (const auto& a2 : ec->init_assignments())
              (void)a2;
            for (const auto& st : ec->method("__init__") ? ec->method("__init__")->body : std::vector<Statement>{})
              for (const auto& call : find_calls(st))
                if (m.find_class(call.callee) && !expert_cls) {
                  expert_cls = m.find_class(call.callee);
                  ex["expert_class"] = call.callee;
                }
          } else if (ec) {
            YAML::Node params(YAML::NodeType::Sequence);
            for (const auto& a2 : ec->init_assignments())
              if (contains(a2.value, "nn.Parameter(")) {
                params.push_back(a2.targets.front().substr(5));
                d6.evidence.push_back(ev(a2.line));
              }
            if (params.size() > 0) {
              ex["layout"] = "fused_3d";
              ex["parameters"] = params;
              fused_experts = ec;
            } else {
              ex["layout"] = "module";
            }
          }
        }
      }
      if (!ex["layout"]) ex["layout"] = YAML::Node();
      d6.details["experts"] = ex;
      for (const char* ra : {"gate", "router"}) {
        for (const auto& a : moe->init_assignments_to(ra)) {
          YAML::Node r;
          r["attribute"] = ra;
          r["class"] = a.call ? a.call->callee : a.value;
          d6.details["router"] = r;
          d6.evidence.push_back(ev(a.line));
        }
      }
      for (const auto& a : moe->init_assignments()) {
        std::string attr = a.targets.front().substr(5);
        if (starts_with(attr, "shared_expert") && !contains(attr, "gate")) {
          YAML::Node sh;
          sh["attribute"] = attr;
          auto locals = local_classes_in(s, a);
          sh["class"] = locals.empty() ? a.value : locals.front();
          d6.details["shared_experts"] = sh;
          if (!dense && !locals.empty()) d6.details["shared_expert_class"] = locals.front();
        }
      }
      if (dense) {
        d6.details["dense_class"] = dense->name;
        // Hybrid when the default configuration really has dense layers.
        bool hybrid = false;
        std::string cond;
        for (const auto& a : s.decoder->init_assignments_to(s.mlp_attr)) cond += a.value + " ";
        for (const auto& st : s.decoder->method("__init__")->body)
          if (st.keyword() == "if" || st.keyword() == "elif") cond += st.text + " ";
        static const std::regex cattr(R"(config\.(\w+))");
        for (auto it = std::sregex_iterator(cond.begin(), cond.end(), cattr); it != std::sregex_iterator(); ++it) {
          std::string name = (*it)[1];
          auto def = config_default(name);
          if (!def) continue;
          double v = std::atof(def->c_str());
          bool dense_first = contains(name, "dense") && v > 0;
          bool interleave = (contains(name, "step") || contains(name, "freq") || contains(name, "interleave")) && v > 1;
          bool list = contains(name, "layers") && def->size() > 2 && def->front() == '[';
          if (dense_first || interleave || list) {
            hybrid = true;
            d6.notes.push_back("config." + name + " defaults to " + *def + ": some layers are dense");
          }
        }
        if (hybrid) decide(d6, "hybrid", 0.85);
        else {
          decide(d6, "moe", 0.8);
          d6.notes.push_back(dense->name + " is used for layers a configuration marks as dense; "
                             "with the default configuration every layer is sparse");
        }
      } else {
        decide(d6, "moe", 0.9);
      }
    } else {
      decide(d6, "dense", 0.95);
      d6.details["mlp_class"] = dense->name;
      d6.evidence.push_back(ev(dense->line));
    }

    // Decision 5 on the dense MLP, else the shared expert, else the expert class.
    const ClassDef* mlp_cls = dense;
    if (!mlp_cls && d6.details["shared_expert_class"])
      mlp_cls = m.find_class(d6.details["shared_expert_class"].as<std::string>());
    if (!mlp_cls) mlp_cls = expert_cls;
    if (!mlp_cls) mlp_cls = fused_experts;
    if (!mlp_cls) {
      undecide(d5, "no MLP class could be identified");
      return;
    }
    MlpInfo mi = analyse_mlp(*mlp_cls);
    d5.details["mlp_class"] = mlp_cls->name;
    if (!mi.activation.empty()) d5.details["activation"] = mi.activation;
    if (!mi.config_attr.empty()) {
      d5.details["config_attribute"] = mi.config_attr;
      if (auto prm = cfg.default_of(model_type, mi.config_attr)) {
        d5.details["config_default"] = unquote(prm->default_value);
      }
    }
    YAML::Node proj;
    if (!mi.gate.empty()) proj["gate"] = mi.gate;
    if (!mi.up.empty()) proj["up"] = mi.up;
    if (!mi.gate_up.empty()) proj["gate_up"] = mi.gate_up;
    if (!mi.down.empty()) proj["down"] = mi.down;
    d5.details["projections"] = proj;
    for (int l : mi.lines) d5.evidence.push_back(ev(l));
    if (!mi.config_attr.empty())
      if (auto prm = cfg.default_of(model_type, mi.config_attr)) d5.evidence.push_back(cfg_ev(prm->line));
    if (mi.kind.empty()) undecide(d5, mi.why);
    else {
      decide(d5, mi.kind, mi.kind == "other" ? 0.85 : 0.9);
      if (!mi.why.empty()) d5.notes.push_back(mi.why);
    }
    if (fused_experts && mlp_cls != fused_experts) {
      MlpInfo ei = analyse_mlp(*fused_experts);
      d5.details["experts_activation"] = ei.kind.empty() ? "undecided" : ei.kind;
    }
  }

  // ---- 7: vision -------------------------------------------------------------------------------
  void decide_vision() {
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

  // ---- 8: RoPE ---------------------------------------------------------------------------------
  struct RopeFn {
    std::string variant;  // standard | partial | interleaved | mrope | complex | custom
    std::string why;
    int line = 0;
    bool partial_capable = false;
  };

  RopeFn classify_rope_function(const FunctionDef& f) {
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
  const ClassDef* text_rotary_class(int* assigned_line) const {
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
  static std::vector<int> mrope_statements(const ClassDef& c, std::string* section_default) {
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

  void decide_rope() {
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
      bool any_rotary = false;
      for (const auto& c : m.classes) any_rotary |= contains(c.name, "Rotary");
      for (const auto& f : m.functions) any_rotary |= contains(f.name, "rotary") || contains(f.name, "rope");
      if (!any_rotary) {
        decide(dd, "none", 0.85);
        dd.notes.push_back("no rotary embedding in the file (absolute or ALiBi positions)");
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
    std::string variant = best.variant;
    if ((variant == "standard" && (best.partial_capable || attention_slices))) {
      auto factor = config_default("partial_rotary_factor");
      dd.details["partial_rotary_factor_default"] = factor ? *factor : "absent";
      if (factor) {
        if (auto prm = cfg.default_of(model_type, "partial_rotary_factor")) dd.evidence.push_back(cfg_ev(prm->line));
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
  void add_linear_mixer_facts(Decision& dd) {
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

  // ---- 9-11: output class, last hidden state, soft-capping -------------------------------------
  const ClassDef* output_cls = nullptr;

  void decide_output() {
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

  // ---- 12: norm names --------------------------------------------------------------------------
  void decide_norm_names() {
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
    if (dec.size() == 0) undecide(dd, "no norm attributes found in " + s.decoder->name);
    else decide(dd, v, s.final_norm ? 0.95 : 0.75);
    if (!s.final_norm) dd.notes.push_back("no final norm found on the base model");
  }

  // ---- patch plan ------------------------------------------------------------------------------
  void plan() {
    if (s.external_text) plan_external_text();
    const Decision& nt = d("norm_type");
    const Decision& cm = d("rms_norm_casting");
    const Decision& off = d("rms_norm_offset");
    const Decision& ip = d("in_place_backward");
    auto names_of = [&](const std::string& cls) {
      std::vector<std::string> out;
      for (const auto& na : text_norm_attrs())
        if (na.cls == cls) out.push_back(na.attr);
      return out;
    };
    if (const NormClass* rms = primary_norm(NormKind::Rms)) {
      PatchItem it;
      it.kernel = "rms_norm";
      it.target = rms->name;
      it.attributes = names_of(rms->name);
      if (cm.decided() && off.decided() && cm.value_string() != "not_applicable") {
        it.params["offset"] = off.value.as<int>();
        it.params["casting_mode"] = cm.value_string();
        it.params["in_place"] = ip.decided() ? ip.value.as<bool>() : false;
        it.params["init_fn"] = off.value.as<int>() == 1 ? "zeros" : "ones";
        p.apply.push_back(it);
      } else {
        it.reason = "the norm's arithmetic does not match the library RMSNorm: " +
                    (!cm.decided() ? cm.undecided : off.undecided);
        p.declined.push_back(it);
      }
      // Other RMSNorm classes used in the text model (e.g. a weightless qk-norm).
      std::set<std::string> others;
      for (const auto& na : text_norm_attrs())
        if (na.cls != rms->name && s.norms.count(na.cls) && s.norms.at(na.cls).kind == NormKind::Rms &&
            !s.norms.at(na.cls).gated())
          others.insert(na.cls);
      for (const auto& o : others) {
        PatchItem x;
        x.kernel = "rms_norm";
        x.target = o;
        x.attributes = names_of(o);
        RmsArith r = rms_arithmetic(*s.norms.at(o).cls);
        if (r.casting.empty() || r.offset < 0 || !r.has_weight) {
          x.reason = o + ": " + (r.why.empty() ? "arithmetic not recognised" : r.why);
          p.declined.push_back(x);
        } else {
          x.params["offset"] = r.offset;
          x.params["casting_mode"] = r.casting;
          x.params["in_place"] = ip.decided() ? ip.value.as<bool>() : false;
          p.apply.push_back(x);
        }
      }
    }
    // Gated norms (norm(x, gate) * act(gate)) keep their own class, whatever else is patched.
    for (const auto& g : gated_norms()) {
      PatchItem x;
      x.kernel = g.nc->kind == NormKind::Layer ? "layer_norm" : "rms_norm";
      x.target = g.nc->name;
      x.attributes = g.attrs;
      x.reason = g.nc->gated_why;
      p.declined.push_back(x);
    }
    if (nt.details["layer_norm"]) {
      YAML::Node ln = nt.details["layer_norm"];
      PatchItem it;
      it.kernel = "layer_norm";
      it.target = ln["class"].as<std::string>();
      it.attributes = names_of(it.target);
      if (ln["weight_offset"].as<int>() != 0) {
        it.reason = it.target + " normalises with (weight + 1) (LayerNorm1P); the library LayerNorm has no weight offset";
        p.declined.push_back(it);
      } else if (!ln["bias"].as<bool>()) {
        it.reason = it.target + " has no bias parameter; the library LayerNorm computes y = x_hat * w + b with a bias tensor";
        p.declined.push_back(it);
      } else {
        p.apply.push_back(it);
      }
    }
    // MLP
    const Decision& mlp = d("mlp_activation");
    const Decision& arch = d("architecture");
    if (mlp.decided()) {
      std::string k = mlp.value_string();
      PatchItem it;
      it.target = mlp.details["mlp_class"].as<std::string>();
      it.attributes = {arch.details["decoder_attribute"] ? arch.details["decoder_attribute"].as<std::string>() : "mlp"};
      it.params["projections"] = mlp.details["projections"];
      // The MLP decision fell back to fused 3-D experts (no dense or shared-expert MLP module): the
      // experts item below declines them; do not also apply the gated-MLP forward to that class.
      const bool mlp_is_fused_experts =
          arch.details["experts"] && arch.details["experts"]["layout"] && arch.details["experts"]["layout"].IsScalar() &&
          arch.details["experts"]["layout"].as<std::string>() == "fused_3d" && arch.details["experts"]["class"] &&
          arch.details["experts"]["class"].as<std::string>() == it.target;
      if (mlp_is_fused_experts) {
        // declined below with the experts' reason
      } else if (k == "swiglu" || k == "fused_swiglu") {
        it.kernel = "swiglu";
        if (k == "fused_swiglu") it.params["fused_gate_up"] = true;
        p.apply.push_back(it);
      } else if (k == "geglu") {
        it.kernel = "geglu";
        p.apply.push_back(it);
      } else {
        it.kernel = "swiglu";
        it.reason = mlp.notes.empty() ? "the MLP is not a gated SiLU/GELU-tanh MLP" : mlp.notes.front();
        p.declined.push_back(it);
      }
      if (arch.details["experts"] && arch.details["experts"]["layout"] &&
          arch.details["experts"]["layout"].IsScalar()) {
        std::string layout = arch.details["experts"]["layout"].as<std::string>();
        if (layout == "fused_3d") {
          PatchItem x;
          x.kernel = k == "geglu" ? "geglu" : "swiglu";
          x.target = arch.details["experts"]["class"].as<std::string>();
          x.reason = "experts are stored as fused 3-D parameter tensors and computed in a loop "
                     "or grouped GEMM; the library gated-MLP kernel replaces per-expert MLP modules";
          p.declined.push_back(x);
        } else if (layout == "module_list" && arch.details["experts"]["expert_class"] &&
                   arch.details["experts"]["expert_class"].as<std::string>() != it.target) {
          const ClassDef* ec = m.find_class(arch.details["experts"]["expert_class"].as<std::string>());
          if (ec) {
            MlpInfo ei = analyse_mlp(*ec);
            PatchItem x;
            x.target = ec->name;
            x.attributes = {"experts"};
            x.kernel = ei.kind == "geglu" ? "geglu" : "swiglu";
            if (ei.kind == "swiglu" || ei.kind == "geglu") {
              YAML::Node pr;
              if (!ei.gate.empty()) pr["gate"] = ei.gate;
              if (!ei.up.empty()) pr["up"] = ei.up;
              if (!ei.down.empty()) pr["down"] = ei.down;
              x.params["projections"] = pr;
              p.apply.push_back(x);
            } else {
              x.reason = ei.why.empty() ? "expert MLP not recognised" : ei.why;
              p.declined.push_back(x);
            }
          }
        }
      }
    }
    // RoPE
    const Decision& rope = d("rope");
    if (rope.decided()) {
      std::string v = rope.value_string();
      PatchItem it;
      it.kernel = "rope";
      it.target = rope.details["functions"] && rope.details["functions"].size() > 0
                      ? rope.details["functions"][0].as<std::string>() : "apply_rotary_pos_emb";
      static const std::map<std::string, std::string> why = {
          {"partial", "only part of the head dim is rotated (partial_rotary_factor / rotary_dim); the library RoPE rotates the whole head dim"},
          {"interleaved", "pairs are interleaved (x[..., ::2], x[..., 1::2]); the library RoPE uses the rotate-half layout"},
          {"mrope", "multimodal M-RoPE (mrope_section splits the frequencies over t/h/w positions); no library kernel"},
          {"complex", "rotation done with complex numbers (torch.view_as_complex, Llama4 style); no library kernel"},
          {"custom", "the rotary function is not the rotate-half form; the model keeps its own"},
          {"none", "the model has no rotary embedding"}};
      if (v == "standard") {
        if (rope.details["partial_capable"]) it.params["guard"] = "config.partial_rotary_factor == 1.0";
        p.apply.push_back(it);
      } else {
        it.reason = why.count(v) ? why.at(v) : "unsupported RoPE variant";
        if (v == "mrope" && rope.details["mrope_in"])
          it.reason += "; here " + rope.details["mrope_in"].as<std::string>() +
                       " recomposes cos/sin from the sections before " + it.target + " is called";
        p.declined.push_back(it);
      }
    }
    // Loss
    const Decision& last = d("last_hidden_state");
    const Decision& cap = d("softcapping");
    if (output_cls) {
      PatchItem it;
      it.kernel = "fused_linear_cross_entropy";
      it.target = output_cls->name + ".forward";
      it.attributes = {"lm_head"};
      if (!last.decided()) {
        it.reason = "the path to the last hidden state is undecided: " + last.undecided;
        p.declined.push_back(it);
      } else if (last.details["logits_transforms"] && last.details["logits_transforms"].size() > 0) {
        it.reason = "the logits are transformed before the loss (" +
                    last.details["logits_transforms"][0].as<std::string>() +
                    "); the fused loss kernel has no such option";
        p.declined.push_back(it);
        PatchItem ce;
        ce.kernel = "cross_entropy";
        ce.target = "loss function of " + output_cls->name;
        p.apply.push_back(ce);
      } else {
        if (cap.decided() && cap.value.as<bool>())
          it.params["softcap"] = "config." + cap.details["config_attribute"].as<std::string>();
        it.params["hidden_state"] = last.value_string();
        it.params["logits_to_keep"] = last.details["logits_to_keep"].as<bool>();
        p.apply.push_back(it);
      }
    }
    // Reference integration.
    bool gemma_family = (off.decided() && off.value_string() == "1") ||
                        (mlp.decided() && mlp.value_string() == "geglu") ||
                        (cm.decided() && cm.value_string() == "gemma");
    if (arch.decided() && arch.value_string() != "dense") {
      p.reference_integration = "moe";
      p.reference_reason = "the decoder has mixture-of-experts layers (" + arch.value_string() + ")";
    } else if (gemma_family) {
      p.reference_integration = "gemma";
      p.reference_reason = "Gemma-family norm/MLP: (1 + weight) offset, gemma casting or GeGLU";
    } else {
      p.reference_integration = "llama";
      p.reference_reason = "dense decoder with llama-style parts";
    }
  }

  // ---- mini model -----------------------------------------------------------------------------
  void mini_config() {
    YAML::Node mc;
    const ConfigClass* main = cfg.main(model_type);
    if (!main) {
      p.warnings.push_back("no configuration file: the mini-model configuration lists the usual "
                           "attribute names unverified");
    }
    // 4 layers where layer kinds alternate (dense/MoE hybrids; linear-attention hybrids such as
    // Qwen3.5, whose default pattern makes every 4th layer full attention), so both kinds exist.
    bool hybrid = (d("architecture").decided() && d("architecture").value_string() == "hybrid") ||
                  !s.linear_mixers.empty();
    bool moe = d("architecture").decided() && d("architecture").value_string() != "dense";
    const std::vector<std::pair<std::string, YAML::Node>> text_values = {
        {"vocab_size", YAML::Node(1024)},
        {"hidden_size", YAML::Node(128)},
        {"intermediate_size", YAML::Node(256)},
        {"intermediate_size_mlp", YAML::Node(256)},
        {"num_hidden_layers", YAML::Node(hybrid ? 4 : 2)},
        {"num_attention_heads", YAML::Node(4)},
        {"num_key_value_heads", YAML::Node(2)},
        {"head_dim", YAML::Node(32)},
        {"max_position_embeddings", YAML::Node(512)},
        {"moe_intermediate_size", YAML::Node(64)},
        {"num_experts", YAML::Node(4)},
        {"num_local_experts", YAML::Node(4)},
        {"n_routed_experts", YAML::Node(4)},
        {"num_experts_per_tok", YAML::Node(2)},
        {"n_shared_experts", YAML::Node(1)},
        {"shared_expert_intermediate_size", YAML::Node(64)},
        {"first_k_dense_replace", YAML::Node(1)},
        {"n_group", YAML::Node(1)},
        {"topk_group", YAML::Node(1)},
        {"kv_lora_rank", YAML::Node(32)},
        {"q_lora_rank", YAML::Node(64)},
        {"qk_rope_head_dim", YAML::Node(16)},
        {"qk_nope_head_dim", YAML::Node(16)},
        {"v_head_dim", YAML::Node(32)},
        {"sliding_window", YAML::Node(64)},
    };
    auto fill = [&](const ConfigClass* cc, YAML::Node& out) {
      for (const auto& [name, v] : text_values) {
        if (!moe && (contains(name, "expert") || name == "moe_intermediate_size" || name == "first_k_dense_replace"))
          continue;
        if (!cc) {
          static const std::set<std::string> core = {"vocab_size", "hidden_size", "intermediate_size",
                                                     "num_hidden_layers", "num_attention_heads",
                                                     "num_key_value_heads"};
          if (core.count(name)) out[name] = v;
          continue;
        }
        if (cc->param(name)) out[name] = v;
      }
    };
    const ConfigClass* text = cfg.text(model_type);
    if (main) {
      mc["config_class"] = main->name;
      mc["model_type"] = main->model_type.empty() ? model_type : main->model_type;
    } else {
      mc["model_type"] = model_type;
    }
    YAML::Node attrs;
    if (text && main && text != main) {
      YAML::Node tc;
      fill(text, tc);
      attrs["text_config"] = tc;
    } else {
      fill(text ? text : main, attrs);
    }
    // M-RoPE sections must add up to head_dim / 2.
    if (d("rope").decided() && d("rope").value_string() == "mrope") {
      YAML::Node rs;
      rs["rope_type"] = "default";
      rs["mrope_section"].push_back(4);
      rs["mrope_section"].push_back(6);
      rs["mrope_section"].push_back(6);
      const ConfigClass* rc = text ? text : main;
      std::string key = rc && rc->param("rope_parameters") ? "rope_parameters" : "rope_scaling";
      if (text && main && text != main) attrs["text_config"][key] = rs;
      else attrs[key] = rs;
    }
    if (d("vision").decided() && d("vision").value.as<bool>() && main) {
      auto it = main->sub_configs.find("vision_config");
      const ConfigClass* vc = it != main->sub_configs.end() ? cfg.find(it->second) : nullptr;
      YAML::Node v;
      const std::vector<std::pair<std::string, int>> vision_values = {
          {"hidden_size", 64}, {"embed_dim", 64}, {"depth", 2}, {"num_hidden_layers", 2},
          {"num_heads", 2}, {"num_attention_heads", 2}, {"intermediate_size", 128},
          {"out_hidden_size", 128}, {"projection_dim", 128}, {"vision_output_dim", 128}};
      for (const auto& [name, val] : vision_values)
        if (!vc || vc->param(name)) v[name] = val;
      if (!vc) p.warnings.push_back("vision sub-config class not found; vision_config attribute names unverified");
      else v["config_class"] = vc->name;
      attrs["vision_config"] = v;
    }
    mc["attributes"] = attrs;
    p.mini_config = mc;
  }

  // ---- a text model defined in another model's file -----------------------------------------
  // GLM-4.6V: `self.language_model = AutoModel.from_config(config.text_config)`, the text config
  // defaulting to another model type (glm4v_text). Its classes are not in this file.
  void find_external_text() {
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

  std::string external_text_reason() const {
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
  void apply_external_text() {
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

  void plan_external_text() {
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

  ModelProfile run() {
    p.model_type = model_type;
    const auto& keys = decision_keys();
    for (size_t i = 0; i < keys.size(); ++i) {
      Decision x;
      x.number = static_cast<int>(i) + 1;
      x.key = keys[i];
      x.undecided = "not analysed";
      p.decisions.push_back(x);
    }
    find_structure(s);
    if (!s.decoder) find_external_text();
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
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Config module
// ---------------------------------------------------------------------------------------------

const ConfigParam* ConfigClass::param(std::string_view n) const {
  for (const auto& p : params)
    if (p.name == n) return &p;
  return nullptr;
}

const ConfigClass* ConfigInfo::find(std::string_view n) const {
  for (const auto& c : classes)
    if (c.name == n) return &c;
  return nullptr;
}

const ConfigClass* ConfigInfo::main(std::string_view type) const {
  const ConfigClass* fallback = nullptr;
  for (const auto& c : classes) {
    bool sub = false;
    for (const auto& o : classes)
      for (const auto& [k, v] : o.sub_configs) sub |= v == c.name;
    if (c.model_type == type && !sub) return &c;
    if (!sub && !fallback && !c.params.empty()) fallback = &c;
  }
  return fallback ? fallback : (classes.empty() ? nullptr : &classes.front());
}

const ConfigClass* ConfigInfo::text(std::string_view type) const {
  const ConfigClass* m = main(type);
  if (!m) return nullptr;
  auto it = m->sub_configs.find("text_config");
  if (it != m->sub_configs.end())
    if (const ConfigClass* t = find(it->second)) return t;
  return m;
}

std::optional<ConfigParam> ConfigInfo::default_of(std::string_view type, std::string_view n) const {
  for (const ConfigClass* c : {text(type), main(type)})
    if (c)
      if (const ConfigParam* p = c->param(n)) return *p;
  for (const auto& c : classes)
    if (const ConfigParam* p = c.param(n)) return *p;
  return std::nullopt;
}

ConfigInfo parse_config_module(const PythonModule& module) {
  ConfigInfo info;
  info.file = module.origin;
  for (const auto& c : module.classes) {
    bool is_config = contains(c.name, "Config");
    for (const auto& b : c.bases) is_config |= contains(b, "Config");
    if (!is_config) continue;
    ConfigClass cc;
    cc.name = c.name;
    cc.line = c.line;
    for (const auto& st : c.class_body) {
      auto a = as_assignment(st);
      if (!a || a->targets.empty()) continue;
      const std::string& t = a->targets.front();
      if (t == "model_type") cc.model_type = unquote(a->value);
      else if (t == "sub_configs") {
        static const std::regex kv(R"(["'](\w+)["']:(\w+))");
        for (auto it = std::sregex_iterator(a->value.begin(), a->value.end(), kv); it != std::sregex_iterator(); ++it)
          cc.sub_configs[(*it)[1]] = (*it)[2];
      } else if (st.tokens.size() > 2 && st.tokens[1].text == ":") {
        cc.params.push_back(ConfigParam{t, a->value, st.line});  // dataclass-style field
      }
    }
    if (const FunctionDef* init = c.method("__init__")) {
      // Re-tokenise the header to read parameter defaults.
      std::string header;
      for (int l = init->line; l <= init->end_line && l <= static_cast<int>(module.lines.size()); ++l) {
        header += module.lines[static_cast<size_t>(l - 1)] + "\n";
        if (contains(module.lines[static_cast<size_t>(l - 1)], "):") ||
            std::regex_search(module.lines[static_cast<size_t>(l - 1)], std::regex(R"(\)\s*(->.*)?:\s*$)")))
          break;
      }
      std::vector<Token> t;
      try {
        t = tokenize(header + "    pass\n").tokens;
      } catch (const Error&) {
      }
      size_t open = 0;
      while (open < t.size() && t[open].text != "(") ++open;
      int depth = 0;
      size_t start = open + 1;
      for (size_t k = open; k < t.size(); ++k) {
        const Token& tk = t[k];
        if (tk.kind != TokKind::Op) continue;
        if (tk.text == "(" || tk.text == "[" || tk.text == "{") { ++depth; continue; }
        bool end = false;
        if (tk.text == ")" || tk.text == "]" || tk.text == "}") {
          --depth;
          end = depth == 0;
          if (!end) continue;
        }
        if ((depth == 1 && tk.text == ",") || end) {
          if (k > start && t[start].kind == TokKind::Name) {
            ConfigParam prm;
            prm.name = t[start].text;
            prm.line = init->line + t[start].line - 1;
            for (size_t q = start + 1; q < k; ++q)
              if (t[q].kind == TokKind::Op && t[q].text == "=") {
                prm.default_value = join_tokens(t, q + 1, k);
                break;
              }
            if (prm.name != "self" && prm.name != "kwargs") cc.params.push_back(prm);
          }
          start = k + 1;
          if (end) break;
        }
      }
      // sub-config classes assigned in __init__ (self.vision_config = XVisionConfig(**vision_config))
      for (const auto& st : init->body) {
        auto a = as_assignment(st);
        if (!a) continue;
        for (const auto& call : find_calls(a->value_tokens, a->line))
          if (ends_with(call.callee, "Config") && starts_with(a->targets.front(), "self.") &&
              ends_with(a->targets.front(), "_config") && module.find_class(call.callee))
            cc.sub_configs.emplace(a->targets.front().substr(5), call.callee);
      }
    }
    info.classes.push_back(std::move(cc));
  }
  return info;
}

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
