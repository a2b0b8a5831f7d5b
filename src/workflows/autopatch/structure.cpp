// Roles in a modeling file: norm classes (plain or gated), the base text model, the decoder
// layer, its softmax attention, linear-attention mixers, MLP candidates and norm attributes.
#include "workflows/autopatch/analysis_internal.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <regex>
#include <set>

namespace liger::autopatch::detail {


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
  // x ** -0.5 and pow(x, -0.5) are rsqrt too (Gemma 4 writes torch.pow(mean_squared, -0.5)).
  bool rsqrt = contains(body, "rsqrt(") || contains(body, "sqrt(") ||
               std::regex_search(body, std::regex(R"((pow\([^\n]*,|\*\*\(?)-0?\.5\b)"));
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

std::vector<NormAttr> norm_attrs(const Structure& s, const ClassDef& c, const std::set<int>* skip_lines) {
  std::vector<NormAttr> out;
  std::set<std::string> seen;
  for (const auto& a : c.init_assignments()) {
    if (skip_lines && skip_lines->count(a.line)) continue;
    // `A(...) if config.x is not None else B(...)` (Cohere2-MoE: RMSNorm only when rms_norm_eps
    // is set, None by default): the side the default configuration takes.
    std::vector<Token> side = a.value_tokens;
    const auto& t = a.value_tokens;
    if (auto ce = top_level_conditional(t); ce && s.config_default)
      if (auto taken = eval_config_condition(join_tokens(t, ce->if_at + 1, ce->else_at), s.config_default))
        side = *taken ? std::vector<Token>(t.begin() + static_cast<long>(ce->begin), t.begin() + static_cast<long>(ce->if_at))
                      : std::vector<Token>(t.begin() + static_cast<long>(ce->else_at) + 1, t.begin() + static_cast<long>(ce->end));
    for (const auto& call : find_calls(side, a.line)) {
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
  if (!out.empty()) return out;
  // `FALCON_ATTENTION_CLASSES[config._attn_implementation](config, layer_idx)`: a module-level
  // dict of implementations; its first class (the eager one) stands for all of them.
  for (const auto& tok : a.value_tokens) {
    if (tok.kind != TokKind::Name) continue;
    for (const auto& ma : s.m.assignments) {
      if (ma.targets.size() != 1 || ma.targets.front() != tok.text || ma.value.empty() || ma.value.front() != '{') continue;
      for (const auto& vt : ma.value_tokens)
        if (vt.kind == TokKind::Name && s.m.find_class(vt.text)) { out.push_back(vt.text); return out; }
    }
  }
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

// The layer classes of `self.layers = nn.ModuleList(layers)` when `layers` is a local list
// filled in the same __init__ (`layers.append(XCrossAttentionDecoderLayer(...))` on some indices,
// `layers.append(XSelfAttentionDecoderLayer(...))` on the others: Mllama's text model). The
// self-attention layer comes first: it carries the rotary attention and the MLP every layer has.
std::vector<std::string> layer_classes_via_local_list(const Structure& s, const ClassDef& c, const Assignment& a) {
  std::vector<std::string> out;
  const FunctionDef* init = c.method("__init__");
  if (!init || !a.call || a.call->args.size() != 1) return out;
  const std::string var = a.call->args.front();
  if (var.empty() || !std::all_of(var.begin(), var.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; }))
    return out;
  for (const auto& st : init->body)
    for (const auto& call : find_calls(st)) {
      if (call.callee != var + ".append" && call.callee != var + ".extend" && call.callee != var + ".insert") continue;
      for (const auto& inner : find_calls(st))
        if (s.m.find_class(inner.callee) && std::find(out.begin(), out.end(), inner.callee) == out.end())
          out.push_back(inner.callee);
    }
  std::stable_sort(out.begin(), out.end(), [](const std::string& x, const std::string& y) {
    return !contains(x, "Cross") && contains(y, "Cross");
  });
  return out;
}

void find_structure(Structure& s) {
  find_norm_classes(s);
  // Base text model: a class with `self.layers = nn.ModuleList([...])` and embed_tokens.
  const ClassDef* best = nullptr;
  int best_score = -1;
  std::string layer_cls, stack_attr;
  for (const auto& c : s.m.classes) {
    bool has_embedding = false;
    for (const auto& a : c.init_assignments())
      has_embedding |= contains(a.value, "Embedding(") && !contains(a.targets.front(), "position");
    for (const auto& a : c.init_assignments()) {
      // `self.layers = nn.ModuleList(...)`, or another name for the stack (Falcon's `self.h`).
      const std::string attr = a.targets.front().substr(5);
      if (attr != "layers" && !(contains(a.value, "ModuleList(") && (attr == "h" || attr == "blocks" || attr == "layer" ||
                                                                     contains(attr, "layers"))))
        continue;
      auto locals = local_classes_in(s, a);
      if (locals.empty()) locals = layer_classes_via_local_list(s, c, a);
      if (locals.empty()) continue;
      // Of the layer kinds a hybrid stack chooses between (`XLinearAttentionDecoderLayer(...) if
      // config.layer_types[i] == "linear_attention" else XAttentionDecoderLayer(...)`, OLMo-Hybrid),
      // the softmax-attention layer is the decoder: it carries the RoPE the kernels replace.
      std::stable_sort(locals.begin(), locals.end(), [](const std::string& x, const std::string& y) {
        auto mixer = [](const std::string& n) {
          for (const char* w : {"Linear", "Mamba", "Mixer", "DeltaNet", "Conv", "Recurrent", "Ssm", "SSM"})
            if (contains(n, w)) return true;
          return false;
        };
        return !mixer(x) && mixer(y);
      });
      int score = 1;
      if (!c.init_assignments_to("embed_tokens").empty()) score += 4;
      else if (has_embedding) score += 3;
      if (!is_vision_name(c.name)) score += 2;
      if (contains(locals.front(), "Decoder")) score += 2;
      if (score > best_score) {
        best_score = score;
        best = &c;
        layer_cls = locals.front();
        stack_attr = attr;
      }
    }
  }
  // A stack whose layer classes come from a lookup this reading does not follow (Jamba:
  // `layer_class = ALL_DECODER_LAYER_TYPES[...]`, then `layers.append(layer_class(...))`; Zamba2:
  // `self.layers = self.get_layers()`) still names the base model: the text class with
  // embed_tokens and a `layers` attribute.
  if (!best)
    for (const auto& c : s.m.classes)
      if (!is_vision_name(c.name) && !c.init_assignments_to("embed_tokens").empty() &&
          !c.init_assignments_to("layers").empty()) {
        best = &c;
        stack_attr = "layers";
        break;
      }
  s.base_model = best;
  if (!layer_cls.empty()) s.decoder = s.m.find_class(layer_cls);
  if (!s.decoder)
    for (const auto& c : s.m.classes)
      if (ends_with(c.name, "DecoderLayer") && !is_vision_name(c.name)) { s.decoder = &c; break; }
  if (s.base_model) {
    // The final norm is the one the base model's forward applies last, after the layer stack
    // (Gemma 3n assigns per_layer_projection_norm after norm but uses it on the per-layer inputs
    // before the layers; TrOCR's layernorm_embedding, before the layers, is no final norm). A
    // forward that does not show the stack or calls no norm: the last norm assigned.
    const std::vector<NormAttr> base_norms = norm_attrs(s, *s.base_model);
    for (const auto& na : base_norms)
      if (na.attr != "embed_tokens" && na.attr != stack_attr) s.final_norm = na;
    const std::vector<Statement> fwd = method_with_helpers(*s.base_model, "forward");
    size_t from = 0;
    // `self.h` must not match `self.hidden_size` (Falcon's stack is `h`).
    const std::regex stack_ref("self\\." + stack_attr + "\\b");
    for (size_t i = 0; i < fwd.size(); ++i)
      if (!stack_attr.empty() && std::regex_search(fwd[i].text, stack_ref)) from = i + 1;
    std::optional<NormAttr> last;
    bool any_call = false;
    for (size_t i = 0; i < fwd.size(); ++i)
      for (const auto& na : base_norms) {
        if (na.attr == "embed_tokens" || na.attr == stack_attr || !contains(fwd[i].text, "self." + na.attr + "(")) continue;
        any_call = true;
        if (i >= from) last = na;
      }
    if (last) s.final_norm = last;
    else if (any_call && from > 0) s.final_norm.reset();
  }
  if (!s.decoder) return;
  s.decoder_norms = norm_attrs(s, *s.decoder);
  // `ffn_layer_class = JambaSparseMoeBlock if num_experts > 1 else JambaMLP`, then
  // `self.feed_forward = ffn_layer_class(config)` (Jamba, Bamba): the classes the local names.
  auto classes_of_local = [&](const std::string& name) {
    std::vector<std::string> out;
    const FunctionDef* init = s.decoder->method("__init__");
    if (!init) return out;
    for (const auto& st : init->body) {
      auto la = as_assignment(st);
      if (!la || la->targets.size() != 1 || la->targets.front() != name) continue;
      for (const auto& tok : la->value_tokens)
        if (tok.kind == TokKind::Name && s.m.find_class(tok.text) &&
            std::find(out.begin(), out.end(), tok.text) == out.end())
          out.push_back(tok.text);
    }
    return out;
  };
  // The attention class: among the decoder layer's *attn* / *attention* attributes (norms
  // excluded), the softmax attention (self_attn, a forward that applies RoPE or calls the attention
  // interface) over cross-attention; linear-attention / state-space mixers (GatedDeltaNet, Mamba)
  // that hybrid models build on some layers are never taken for it.
  int best_attn = std::numeric_limits<int>::min();
  std::set<const ClassDef*> mixer_seen;
  for (const auto& a : s.decoder->init_assignments()) {
    std::string attr = a.targets.front().substr(5);
    auto locals = local_classes_in(s, a);
    if (locals.empty() && a.call && a.call->callee.find('.') == std::string::npos) locals = classes_of_local(a.call->callee);
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
  // A wrapper that holds the attention one module deeper (DBRX: DbrxBlock.norm_attn_norm is a
  // DbrxNormAttentionNorm holding `attn = DbrxAttention(...)` between two norms; T5-style
  // `self_attention` layers): the inner class is the attention when the wrapper shows none of its
  // own; the wrapper's norms stay with the attention's.
  std::vector<NormAttr> wrapper_norms;
  auto inner_attention = [&](const ClassDef& wrapper, std::string* inner_attr, int* line) -> const ClassDef* {
    for (const auto& a : wrapper.init_assignments()) {
      const std::string attr = a.targets.front().substr(5);
      if (!contains(attr, "attn") && !contains(attr, "attention")) continue;
      const auto locals = local_classes_in(s, a);
      const ClassDef* inner = locals.empty() ? nullptr : s.m.find_class(locals.front());
      if (!inner || inner == &wrapper || softmax_attention_evidence(s.m, *inner) == 0) continue;
      *inner_attr = attr;
      *line = a.line;
      return inner;
    }
    return nullptr;
  };
  if (s.attention && softmax_attention_evidence(s.m, *s.attention) == 0) {
    std::string attr;
    int line = 0;
    if (const ClassDef* inner = inner_attention(*s.attention, &attr, &line)) {
      wrapper_norms = norm_attrs(s, *s.attention);
      s.attention = inner;
      s.attention_attr += "." + attr;
      s.attention_line = line;
    }
  }
  if (!s.attention)
    for (const auto& a : s.decoder->init_assignments()) {
      const auto locals = local_classes_in(s, a);
      const ClassDef* wrapper = locals.empty() ? nullptr : s.m.find_class(locals.front());
      if (!wrapper || s.norms.count(wrapper->name) || wrapper == s.decoder) continue;
      std::string attr;
      int line = 0;
      if (const ClassDef* inner = inner_attention(*wrapper, &attr, &line)) {
        wrapper_norms = norm_attrs(s, *wrapper);
        s.attention = inner;
        s.attention_attr = a.targets.front().substr(5) + "." + attr;
        s.attention_line = line;
        break;
      }
    }
  if (s.attention) {
    s.attention_norms = wrapper_norms;
    for (const auto& na : norm_attrs(s, *s.attention)) s.attention_norms.push_back(na);
  }
  for (auto& lm : s.linear_mixers) lm.norms = norm_attrs(s, *lm.cls);
}

}  // namespace liger::autopatch::detail

namespace liger::autopatch::detail {

namespace {

// The truth of one condition under the default configuration: `config.x`, `not config.x`,
// `config.x is None`, `config.x == 2`, `config.x != "a"`; nullopt when it cannot be told.
std::optional<bool> eval_condition(const std::string& cond, const ConfigLookup& def) {
  static const std::regex re(R"re(^(not\s*)?\(?(?:self\.)?config\.(\w+)\)?\s*(?:(is not|is|==|!=)\s*(.+))?$)re");
  std::smatch m;
  if (!std::regex_match(cond, m, re)) return std::nullopt;
  auto v = def(m[2]);
  if (!v) return std::nullopt;
  std::string value = *v;
  bool result;
  if (!m[3].matched) {
    if (value == "None" || value == "False" || value == "0" || value == "0.0" || value == "\"\"" || value == "[]") result = false;
    else if (value == "True" || std::regex_match(value, std::regex(R"(-?[0-9.e+-]+)"))) result = true;
    else return std::nullopt;
  } else {
    std::string rhs = m[4];
    while (!rhs.empty() && rhs.back() == ' ') rhs.pop_back();
    const std::string op = m[3];
    bool eq = unquote(rhs) == unquote(value);
    if (op == "is" || op == "==") result = eq;
    else result = !eq;
  }
  return m[1].matched ? !result : result;
}

std::optional<bool> eval_expr(std::string cond, const ConfigLookup& def) {
  for (const char* joiner : {" or ", " and "}) {
    size_t pos = 0, start = 0;
    std::vector<std::string> parts;
    while ((pos = cond.find(joiner, start)) != std::string::npos) {
      parts.push_back(cond.substr(start, pos - start));
      start = pos + std::string(joiner).size();
    }
    if (parts.empty()) continue;
    parts.push_back(cond.substr(start));
    const bool is_or = std::string(joiner) == " or ";
    bool unknown = false;
    for (const auto& p : parts) {
      auto v = eval_expr(p, def);
      if (!v) { unknown = true; continue; }
      if (*v == is_or) return is_or;  // one true disjunct / one false conjunct decides
    }
    if (unknown) return std::nullopt;
    return !is_or;
  }
  return eval_condition(cond, def);
}

}  // namespace

std::optional<Conditional> top_level_conditional(const std::vector<Token>& t) {
  Conditional c;
  c.end = t.size();
  if (c.end >= 2 && t[0].text == "(" && t[c.end - 1].text == ")") { ++c.begin; --c.end; }
  int depth = 0;
  for (size_t i = c.begin; i < c.end; ++i) {
    const std::string& x = t[i].text;
    if (t[i].kind == TokKind::Op && (x == "(" || x == "[" || x == "{")) ++depth;
    else if (t[i].kind == TokKind::Op && (x == ")" || x == "]" || x == "}")) --depth;
    else if (depth == 0 && t[i].kind == TokKind::Name && x == "if" && !c.if_at) c.if_at = i;
    else if (depth == 0 && t[i].kind == TokKind::Name && x == "else" && c.if_at && !c.else_at) c.else_at = i;
  }
  if (!c.if_at || !c.else_at) return std::nullopt;
  return c;
}

std::optional<bool> eval_config_condition(const std::string& cond, const ConfigLookup& def) {
  return eval_expr(cond, def);
}

// Lines of `f` inside if/elif/else branches the default configuration does not take (Falcon's
// decoder builds ln_attn/ln_mlp only `if config.new_decoder_architecture and ...`, else
// input_layernorm / post_attention_layernorm). Branches whose condition cannot be evaluated stay.
std::set<int> inactive_branch_lines(const FunctionDef& f, const ConfigLookup& def, std::vector<std::string>* why) {
  std::set<int> out;
  struct Branch { int depth; bool known; bool taken; bool any_taken; };
  std::vector<Branch> stack;  // the if-chain open at each depth
  std::vector<int> off_depths;  // depths of the headers whose bodies are inactive
  for (const auto& st : f.body) {
    while (!off_depths.empty() && st.depth <= off_depths.back()) off_depths.pop_back();
    while (!stack.empty() && st.depth < stack.back().depth) stack.pop_back();
    const std::string kw = st.keyword();
    const bool inactive_here = !off_depths.empty();
    if (inactive_here) out.insert(st.line);
    if (kw == "if" || kw == "elif" || kw == "else") {
      if (kw == "if") {
        while (!stack.empty() && stack.back().depth >= st.depth) stack.pop_back();
        stack.push_back({st.depth, true, false, false});
      }
      if (stack.empty() || stack.back().depth != st.depth) continue;
      Branch& b = stack.back();
      std::optional<bool> taken;
      if (kw == "else") taken = b.known ? std::optional<bool>(!b.any_taken) : std::nullopt;
      else {
        std::string cond = st.text.substr(kw.size());
        if (!cond.empty() && cond.back() == ':') cond.pop_back();
        while (!cond.empty() && cond.front() == ' ') cond.erase(cond.begin());
        taken = eval_expr(cond, def);
        if (kw == "elif" && b.known && b.any_taken) taken = false;
      }
      if (!taken) b.known = false;
      else {
        b.any_taken |= *taken;
        if (!*taken && !inactive_here) {
          off_depths.push_back(st.depth);
          if (why) why->push_back("line " + std::to_string(st.line) + " (" + st.text + ") is not taken with the default configuration");
        }
      }
    }
  }
  return out;
}

}  // namespace liger::autopatch::detail
