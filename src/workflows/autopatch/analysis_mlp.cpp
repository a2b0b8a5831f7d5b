// Decisions 5 and 6: the MLP's activation and gating, dense / MoE / hybrid architecture.
#include "workflows/autopatch/analysis_internal.h"

#include <functional>
#include <regex>
#include <set>

namespace liger::autopatch::detail {

namespace {

// A number written in a configuration class: a literal, min()/max() of such, a field (its
// default) or a local of `fn` (`n = kwargs.get("first_k_dense_replace", 1)`,
// `n = min(self.first_k_dense_replace, self.num_hidden_layers)`); nullopt otherwise.
std::optional<double> config_number(std::string e, const FunctionDef& fn, const ConfigLookup& field, int depth = 3) {
  e = strip_parens(e);
  static const std::regex num(R"(-?[0-9]+(\.[0-9]*)?)");
  if (std::regex_match(e, num)) return std::atof(e.c_str());
  if (depth <= 0) return std::nullopt;
  std::smatch m;
  // `1 if self.num_hidden_layers > 0 else 0` (HY-V3): a comparison of two such numbers.
  static const std::regex ternary(R"(^(.+?)\s*\bif\s+(.+?)\s*(>=|<=|==|!=|>|<)\s*(.+?)\s+else\b\s*(.+)$)");
  if (std::regex_match(e, m, ternary)) {
    auto l = config_number(m[2], fn, field, depth - 1), r = config_number(m[4], fn, field, depth - 1);
    if (!l || !r) return std::nullopt;
    const std::string op = m[3];
    const bool yes = op == ">=" ? *l >= *r : op == "<=" ? *l <= *r : op == ">" ? *l > *r : op == "<" ? *l < *r
                     : op == "==" ? *l == *r : *l != *r;
    return config_number(yes ? m[1].str() : m[5].str(), fn, field, depth - 1);
  }
  static const std::regex minmax(R"(^(min|max)\((.*)\)$)");
  if (std::regex_match(e, m, minmax)) {
    std::optional<double> out;
    for (const auto& arg : split_top_level(m[2].str(), ',')) {
      auto v = config_number(arg, fn, field, depth - 1);
      if (!v) return std::nullopt;
      out = !out ? *v : (m[1] == "min" ? std::min(*out, *v) : std::max(*out, *v));
    }
    return out;
  }
  static const std::regex name(R"(^(self\.)?(\w+)$)");
  if (!std::regex_match(e, m, name)) return std::nullopt;
  if (!m[1].matched)
    for (const auto& st : fn.body) {
      auto a = as_assignment(st);
      if (!a || a->targets.size() != 1 || a->targets.front() != m[2].str()) continue;
      static const std::regex kw(R"(kwargs\.(?:get|pop)\(["']\w+["'],(-?[0-9.]+)\))");
      std::smatch k;
      if (std::regex_match(a->value, k, kw)) return std::atof(k[1].str().c_str());
      return config_number(a->value, fn, field, depth - 1);
    }
  auto d = field(m[2]);
  if (d && std::regex_match(*d, num)) return std::atof(d->c_str());
  return std::nullopt;
}

// How many layers a per-layer list filled in the configuration class gives its first kind, when
// it names two kinds: `["dense"] * n + ["sparse"] * (N - n)`, `["dense"] + ["sparse"] * (N - 1)`,
// `["dense" if i < k else "sparse" for i in range(N)]`; nullopt when that cannot be told.
std::optional<double> first_kind_count(const std::string& value, const FunctionDef& fn, const ConfigLookup& field) {
  static const std::regex label(R"(["'](\w+)["'])");
  std::set<std::string> kinds;
  for (auto it = std::sregex_iterator(value.begin(), value.end(), label); it != std::sregex_iterator(); ++it)
    kinds.insert((*it)[1]);
  if (kinds.size() != 2) return std::nullopt;
  std::smatch m;
  static const std::regex repeated(R"(^\[["']\w+["']\]\*(.+?)\+\[)");
  static const std::regex single(R"(^\[["']\w+["']\]\+)");
  static const std::regex comprehension(R"(^\[["']\w+["']\s*if\s+\w+\s*<\s*(.+?)\s+else\b)");
  if (std::regex_search(value, m, repeated)) return config_number(m[1], fn, field);
  if (std::regex_search(value, m, single)) return 1;
  if (std::regex_search(value, m, comprehension)) return config_number(m[1], fn, field);
  return std::nullopt;
}

}  // namespace

std::string Analyzer::map_activation(const std::string& act) {
  static const std::set<std::string> silu = {"silu", "swish"};
  static const std::set<std::string> gelu_tanh = {"gelu_pytorch_tanh", "gelu_new", "gelu_tanh"};
  if (silu.count(act)) return "silu";
  if (gelu_tanh.count(act)) return "gelu_tanh";
  return "";
}

Analyzer::MlpInfo Analyzer::analyse_mlp(const ClassDef& c) {
  MlpInfo r;
  std::string act_attr;
  for (const auto& a : c.init_assignments()) {
    // ACT2FN[config.x] and transformers' get_activation(config.x) (Falcon) name the same table.
    static const std::regex act2fn(R"((?:ACT2FN\[|get_activation\()(?:self\.)?(?:config|text_config)\.(\w+)[\])])");
    static const std::regex literal(R"((?:ACT2FN\[|get_activation\()["'](\w+)["'][\])])");
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
  // ACT2FN[name] of a local of __init__ (DBRX: `act_fn_name = config.ffn_act_fn.get("name", "silu")`):
  // the local's literal, config field, or the .get default of a dict field.
  if (act_attr.empty())
    if (const FunctionDef* init = c.method("__init__")) {
      struct Local {
        std::string activation, config_attr, note;
        int line = 0;
      };
      std::map<std::string, Local> locals;
      // `config.ffn_act_fn.get("name", "silu")`, or a constructor argument holding that dict
      // (`ffn_act_fn.get(...)` in DBRX before transformers 5).
      static const std::regex dict_get(R"(^(?:(?:self\.)?config\.)?(\w+)\.get\(["']name["'],["'](\w+)["']\)$)");
      static const std::regex str_lit(R"(^["'](\w+)["']$)");
      static const std::regex cfg_field(R"(^(?:self\.)?config\.(\w+)$)");
      static const std::regex by_local(R"(ACT2FN\[(\w+)\])");
      for (const auto& st : init->body) {
        auto a = as_assignment(st);
        if (!a || a->targets.size() != 1) continue;
        std::smatch mm;
        const std::string& t = a->targets.front();
        if (t.rfind("self.", 0) != 0) {
          if (std::regex_match(a->value, mm, dict_get))
            locals[t] = {mm[2], "", "the activation is the .get default of " + mm[1].str() +
                                        "['name']; a configuration naming another activation there changes it",
                         st.line};
          else if (std::regex_match(a->value, mm, str_lit))
            locals[t] = {mm[1], "", "", st.line};
          else if (std::regex_match(a->value, mm, cfg_field))
            locals[t] = {config_default(mm[1]).value_or(""), mm[1], "", st.line};
        } else if (std::regex_search(a->value, mm, by_local) && locals.count(mm[1])) {
          const Local& l = locals[mm[1]];
          act_attr = t.substr(5);
          r.activation = l.activation;
          r.config_attr = l.config_attr;
          r.activation_note = l.note;
          r.lines.push_back(l.line);
          r.lines.push_back(st.line);
        }
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
  std::map<std::string, std::vector<std::string>> all_values;  // var -> every value assigned to it, in order
  std::string gated_stmt;
  // A factor named by a local variable reads as the expression assigned to it
  // (`activations = self.act_fn(gate_proj)`, then `self.down_proj(activations * up_proj)`).
  auto resolve = [&](const std::string& f) {
    const std::string x = strip_parens(f);
    auto it = assigned.find(x);
    return it == assigned.end() ? f : it->second;
  };
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
        // (A fused gate_up split into locals keeps its names: the projections are the chunked one.)
        if (!r.fused)
          for (auto& f : fs) f = resolve(f);
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
          auto scaled_by = [](const std::string& e) {
            const std::string x = strip_parens(e);
            return split_top_level(x, '*').size() > 1 || split_top_level(x, '/').size() > 1;
          };
          const std::string act_arg = inner.empty() ? inner : inner.substr(0, inner.rfind(')'));
          if (fs.size() > 2)
            r.scaled = c.name + " multiplies the gated product by more than the up projection ('" + strip_parens(expr) +
                       "'); the library kernel computes act(gate) * up only";
          else if (scaled_by(act_arg))
            r.scaled = c.name + " scales the gate projection before the activation ('" + strip_parens(act_arg) +
                       "'); the library kernel computes act(gate(x)) * up(x) only";
          else if (auto v = all_values.find(strip_parens(act_arg)); v != all_values.end() && v->second.size() > 1)
            r.scaled = c.name + " transforms the gate projection before the activation (" + strip_parens(act_arg) +
                       " = " + v->second.back() + "); the library kernel computes act(gate(x)) * up(x) only";
          else if (!r.fused) {
            // Each operand must be a bare projection of the input: a clamp, a bias term or any
            // other step on it (DeepSeek-V4's gate_proj(x).clamp(max=limit)) is not in the kernel.
            static const std::regex bare(R"(^self\.\w+\([^()]*\)$)");
            auto value_of = [&](const std::string& e) {
              const std::string x = strip_parens(e);
              auto v = all_values.find(x);
              return v == all_values.end() ? x : strip_parens(v->second.front());
            };
            const std::string g = value_of(act_arg);
            std::string u;
            for (size_t i = 0; i < fs.size(); ++i)
              if (static_cast<int>(i) != act_i) u = value_of(fs[i]);
            for (const auto& [what, e] : {std::pair<const char*, std::string>{"gate", g}, {"up", u}})
              if (!std::regex_match(e, bare)) {
                r.scaled = c.name + " computes its " + what + " operand as '" + e +
                           "', not a bare projection of the input; the library kernel computes act(gate(x)) * up(x) only";
                break;
              }
          }
          // The gate projection behind a variable (`gate_proj = self.gate_proj(x)`).
          if (auto v = all_values.find(strip_parens(act_arg)); v != all_values.end() && !r.fused) inner = v->second.front();
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
      if (std::regex_search(e, mm, outer) && mm[1] != act_attr) {
        r.down = mm[1];
        if (r.scaled.empty() && (split_top_level(e, '*').size() > 1 || split_top_level(e, '/').size() > 1))
          r.scaled = c.name + " scales the down projection's output ('" + e + "'); the library kernel does not";
      }
    }
    if (a) {
      assigned[a->targets.front()] = rhs;
      all_values[a->targets.front()].push_back(rhs);
    }
  }
  // The fused forward computes down(act(gate(x)) * up(x)) and nothing else: a step the MLP's own
  // forward takes between the product and the down projection (BitNet's ffn_sub_norm) or after
  // it (Seed-OSS's dropout on the output) would be left out, so the patch is declined.
  if (r.gated && r.scaled.empty() && !r.down.empty()) {
    for (const auto& a : c.init_assignments_to(r.down))
      if (a.call && !ends_with(a.call->callee, "Linear"))
        r.scaled = c.name + " applies self." + r.down + " (" + a.call->callee +
                   ") to the gated product before its down projection; the library kernel computes act(gate(x)) * up(x) only";
    bool after = false;
    std::string result;
    for (const auto& st : fwd->body) {
      if (!r.scaled.empty()) break;
      auto a = as_assignment(st);
      if (!after) {
        if (contains(st.text, "self." + r.down + "(")) {
          after = true;
          if (a && a->targets.size() == 1) result = a->targets.front();
          // The statement itself must be the projection alone (`self.dropout(self.down_proj(h))`,
          // `self.down_proj(h) * self.scale` are more).
          const std::string e = strip_parens(a ? a->value : returned_expr(st));
          if ((a || st.keyword() == "return") &&
              (!starts_with(e, "self." + r.down + "(") || split_top_level(e, '*').size() > 1 ||
               split_top_level(e, '+').size() > 1 || split_top_level(e, '/').size() > 1)) {
            r.scaled = c.name + " computes '" + e + "' around its down projection; the fused forward would leave it out";
            r.lines.push_back(st.line);
          }
        }
        continue;
      }
      if (st.keyword() == "return" && strip_parens(returned_expr(st)) == result) continue;
      r.scaled = c.name + " computes '" + st.text + "' after its down projection; the fused forward would leave it out";
      r.lines.push_back(st.line);
    }
  }
  if (r.activation.empty() && r.config_attr.empty()) {
    // An activation written out in the forward or its helpers (GPT-OSS experts:
    // `glu = gate * torch.sigmoid(gate * self.alpha); (up + 1) * glu`): no library kernel
    // computes a hand-written activation, so the MLP is "other" and its patch is declined.
    static const std::regex elementwise(R"((?:torch\.|F\.|\.)(sigmoid|tanh|erf|exp)\()");
    for (const auto& st : method_with_helpers(c, "forward")) {
      std::smatch mm;
      if (!std::regex_search(st.text, mm, elementwise) || !contains(st.text, "*")) continue;
      r.activation = "custom";
      r.kind = "other";
      r.lines.push_back(st.line);
      r.why = c.name + " computes its own activation (" + st.text + "); no library kernel computes it";
      return r;
    }
  }
  if (r.activation.empty() && r.config_attr.empty() && !r.fused) {
    // A gated MLP needs a gate and an up projection beside the down projection (or one projection
    // split into the two halves, r.fused): with two projections and no split the MLP is
    // act(in(x)) -> out, whatever its activation module is (Bloom's BloomGelu), so it is "other".
    std::vector<std::string> projections;
    int line = 0;
    for (const auto& a : c.init_assignments())
      if (a.call && a.targets.size() == 1 && a.targets[0].rfind("self.", 0) == 0 &&
          (a.call->callee == "nn.Linear" || a.call->callee == "Conv1D" || a.call->callee == "nn.Conv1d")) {
        projections.push_back(a.targets[0].substr(5));
        line = line ? line : a.line;
      }
    if (projections.size() == 2) {
      r.activation = "custom";
      r.kind = "other";
      r.lines.push_back(line);
      r.why = c.name + " is not gated: two projections (" + projections[0] + ", " + projections[1] +
              ") and no split of one into halves, so act(x) is not multiplied by a second projection; no library "
              "kernel computes it";
      return r;
    }
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

bool Analyzer::is_moe_class(const ClassDef& c) {
  for (const auto& a : c.init_assignments()) {
    std::string attr = a.targets.front().substr(5);
    if (attr == "experts" || attr == "num_experts" || attr == "router") return true;
  }
  return false;
}

// MLP classes the decoder layer builds only under a condition the default configuration does not
// meet: an `if config.x:` branch not taken, or the untaken side of a conditional expression
// (`DogeMLP(config) if not config.is_moe else DogeCDMoE(config)`: with is_moe=False no layer has
// the MoE block, so the model is dense). A condition on anything but the configuration (the
// layer index) keeps both classes.
std::set<const ClassDef*> Analyzer::mlp_classes_not_built(std::vector<std::string>* notes) const {
  std::set<const ClassDef*> unbuilt, built;
  const FunctionDef* init = s.decoder ? s.decoder->method("__init__") : nullptr;
  if (!init) return unbuilt;
  std::set<std::string> attrs;
  for (const auto& [attr, c] : s.mlp_candidates) attrs.insert(attr);
  const ConfigLookup lookup = [&](const std::string& a) { return config_default_raw(a); };
  std::vector<std::string> why;
  const std::set<int> inactive = inactive_branch_lines(*init, lookup, &why);
  auto classes_in = [&](const std::vector<Token>& t, size_t b, size_t e) {
    std::vector<const ClassDef*> out;
    for (size_t i = b; i < e && i < t.size(); ++i)
      if (t[i].kind == TokKind::Name)
        if (const ClassDef* c = m.find_class(t[i].text)) out.push_back(c);
    return out;
  };
  for (const auto& a : s.decoder->init_assignments()) {
    if (a.targets.size() != 1 || !starts_with(a.targets.front(), "self.") || !attrs.count(a.targets.front().substr(5)))
      continue;
    const auto& t = a.value_tokens;
    if (inactive.count(a.line)) {
      for (const ClassDef* c : classes_in(t, 0, t.size())) unbuilt.insert(c);
      for (const auto& w : why) notes->push_back(a.targets.front() + ": " + w);
      continue;
    }
    const auto ce = top_level_conditional(t);
    const size_t b = ce ? ce->begin : 0, e = ce ? ce->end : t.size(), if_at = ce ? ce->if_at : 0,
                 else_at = ce ? ce->else_at : 0;
    std::optional<bool> taken;
    if (ce) taken = eval_config_condition(join_tokens(t, if_at + 1, else_at), lookup);
    if (!taken) {
      for (const ClassDef* c : classes_in(t, 0, t.size())) built.insert(c);
      continue;
    }
    for (const ClassDef* c : classes_in(t, b, if_at)) (*taken ? built : unbuilt).insert(c);
    for (const ClassDef* c : classes_in(t, else_at + 1, e)) (*taken ? unbuilt : built).insert(c);
    notes->push_back(a.targets.front() + " = " + a.value + ": the condition '" + join_tokens(t, if_at + 1, else_at) +
                     "' is " + (*taken ? "true" : "false") + " with the default configuration");
  }
  for (const ClassDef* c : built) unbuilt.erase(c);
  return unbuilt;
}

void Analyzer::decide_mlp_and_arch() {
  Decision& d5 = d("mlp_activation");
  Decision& d6 = d("architecture");
  if (!s.decoder) {
    undecide(d5, "no decoder-layer class found");
    undecide(d6, "no decoder-layer class found");
    return;
  }
  const ClassDef* dense = nullptr;
  const ClassDef* moe = nullptr;
  std::vector<std::string> choice_notes;
  const std::set<const ClassDef*> unbuilt = mlp_classes_not_built(&choice_notes);
  for (auto& [attr, c] : s.mlp_candidates) {
    if (unbuilt.count(c)) continue;
    if (is_moe_class(*c)) { if (!moe) moe = c; }
    else if (!dense) dense = c;
  }
  for (const auto& n : choice_notes) d6.notes.push_back(n);
  // No MLP module: the feed-forward may be written inline in the decoder layer (BART, BioGPT, OPT:
  // `self.fc1 = nn.Linear(...)`, `self.fc2 = ...`, `self.activation_fn = ACT2FN[...]`); the layer
  // itself is then the MLP class the activation is read from.
  if (!dense && !moe) {
    static const std::regex act(R"((ACT2FN\[|get_activation\(|nn\.(GELU|SiLU|ReLU)\())");
    static const std::regex attn_proj(R"(^(q|k|v|o|out|qkv|query|key|value)(_proj)?$)");
    bool has_act = false;
    int linears = 0;
    for (const auto& a : s.decoder->init_assignments()) {
      has_act |= std::regex_search(a.value, act);
      if (a.call && (a.call->callee == "nn.Linear" || ends_with(a.call->callee, ".Linear")) &&
          !std::regex_match(a.targets.front().substr(5), attn_proj))
        ++linears;
    }
    if (has_act && linears >= 2) {
      dense = s.decoder;
      d6.details["inline_mlp"] = true;
      d6.notes.push_back("the feed-forward is written inline in " + s.decoder->name +
                         " (its own projections and activation, no MLP module)");
    }
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
          // The 3-D parameters one module deeper (DBRX: DbrxExperts.mlp = DbrxExpertGLU holds w1, v1,
          // w2 and the activation; DbrxExperts loops over the experts).
          const ClassDef* holder = ec;
          if (params.size() == 0)
            for (const auto& a2 : ec->init_assignments()) {
              for (const auto& local : local_classes_in(s, a2)) {
                const ClassDef* inner = m.find_class(local);
                if (!inner || inner == ec) continue;
                for (const auto& a3 : inner->init_assignments())
                  if (contains(a3.value, "nn.Parameter(")) {
                    params.push_back(a2.targets.front().substr(5) + "." + a3.targets.front().substr(5));
                    d6.evidence.push_back(ev(a3.line));
                    holder = inner;
                  }
                if (holder != ec) break;
              }
              if (holder != ec) break;
            }
          if (params.size() > 0) {
            ex["layout"] = "fused_3d";
            ex["parameters"] = params;
            if (holder != ec) ex["parameters_class"] = holder->name;
            fused_experts = holder;
          } else {
            ex["layout"] = "module";
          }
        }
      }
    }
    // No `experts` submodule: the block computes its experts itself (JetMoE's `input_linear` /
    // `output_linear` parallel-expert modules holding [experts, out, in] weights, the gated
    // activation in the block's own forward). The block is the fused-experts class: its
    // activation decides decision 5, and the gated-MLP patch is declined like any 3-D experts.
    if (!ex["layout"] && moe->init_assignments_to("experts").empty()) {
      bool own_parallel = false;
      for (const auto& a : moe->init_assignments())
        for (const auto& local : local_classes_in(s, a))
          if (const ClassDef* k = m.find_class(local); k && k != moe && contains(local, "Expert")) {
            own_parallel = true;
            d6.evidence.push_back(ev(a.line));
          }
      if (own_parallel) {
        ex["layout"] = "fused_3d";
        ex["class"] = moe->name;
        ex["note"] = moe->name + " has no experts submodule: it runs parallel-expert projections and the activation "
                     "in its own forward";
        fused_experts = moe;
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
      // The condition may go through an attribute of the layer (`self.moe_enabled = layer_idx >=
      // config.num_dense_layers`, then `if self.moe_enabled:`).
      static const std::regex self_attr(R"(self\.(\w+))");
      std::set<std::string> via;
      for (auto it = std::sregex_iterator(cond.begin(), cond.end(), self_attr); it != std::sregex_iterator(); ++it)
        if ((*it)[1] != s.mlp_attr) via.insert((*it)[1]);
      for (const auto& v : via)
        for (const auto& a : s.decoder->init_assignments_to(v)) cond += a.value + " ";
      // Or through locals of __init__ (Jamba: `num_experts = config.layers_num_experts[layer_idx]`,
      // `ffn_layer_class = JambaSparseMoeBlock if num_experts > 1 else JambaMLP`).
      {
        std::map<std::string, std::string> locals;
        for (const auto& st : s.decoder->method("__init__")->body)
          if (auto la = as_assignment(st); la && la->targets.size() == 1 && !starts_with(la->targets.front(), "self."))
            locals[la->targets.front()] += la->value + " ";
        std::set<std::string> added;
        for (int pass = 0; pass < 3; ++pass) {
          static const std::regex word(R"(\b([A-Za-z_]\w*)\b)");
          std::string more;
          for (auto it = std::sregex_iterator(cond.begin(), cond.end(), word); it != std::sregex_iterator(); ++it)
            if (locals.count((*it)[1]) && added.insert((*it)[1]).second) more += locals[(*it)[1]];
          if (more.empty()) break;
          cond += more;
        }
      }
      // A per-layer field the configuration computes in a property (Jamba's layers_num_experts from
      // expert_layer_period / expert_layer_offset): its return expression, read as config fields.
      if (cfg_module) {
        static const std::regex cfg_name(R"(config\.(\w+))");
        std::string more;
        std::set<std::string> seen_props;
        for (auto it = std::sregex_iterator(cond.begin(), cond.end(), cfg_name); it != std::sregex_iterator(); ++it) {
          const std::string name = (*it)[1];
          if (config_default(name) || !seen_props.insert(name).second) continue;
          for (const auto& cc : cfg_module->classes)
            if (const FunctionDef* prop = cc.method(name))
              for (const auto& st : prop->body)
                if (st.keyword() == "return")
                  more += std::regex_replace(st.text.substr(6), self_attr, "config.$1") + " ";
        }
        cond += more;
      }
      // A per-layer list whose default is None is filled by the configuration class from other
      // fields (`mlp_layer_types = ["dense" if i < self.first_k_dense_replace else "sparse" ...]`):
      // those fields decide, so they are read as well.
      static const std::regex cfg_ref(R"(config\.(\w+))");
      std::set<std::string> filled;
      std::optional<bool> filled_split;
      for (auto it = std::sregex_iterator(cond.begin(), cond.end(), cfg_ref); it != std::sregex_iterator(); ++it)
        if (auto def = config_default((*it)[1]); def && *def == "None") filled.insert((*it)[1]);
      if (cfg_module)
        for (const auto& cc : cfg_module->classes)
          for (const auto& fn : cc.methods)
            for (const auto& st : fn.body) {
              auto a = as_assignment(st);
              if (!a || a->targets.size() != 1 || !starts_with(a->targets.front(), "self.") ||
                  !filled.count(a->targets.front().substr(5)))
                continue;
              cond += std::regex_replace(a->value, self_attr, "config.$1") + " ";
              const ConfigLookup numeric = [&](const std::string& f) { return config_default(f); };
              if (auto n = first_kind_count(a->value, fn, numeric)) {
                filled_split = *n > 0;
                d6.notes.push_back("config." + a->targets.front().substr(5) + " defaults to None and is filled as " +
                                   a->value + ": " + (*n > 0 ? "its first layers are of another kind" : "one kind for every layer"));
              } else if (!filled_split && a->value.rfind("[]", 0) == 0 && ends_with(a->targets.front(), "layers")) {
                // An index list filled with [] (Qwen3-MoE's mlp_only_layers): no layer of the other kind;
                // a step or period beside it is read below.
                filled_split = false;
                d6.notes.push_back("config." + a->targets.front().substr(5) + " defaults to None and is filled as " +
                                   a->value + ": no layer listed");
              }
            }
      static const std::regex cattr(R"(config\.(\w+))");
      for (auto it = std::sregex_iterator(cond.begin(), cond.end(), cattr); it != std::sregex_iterator(); ++it) {
        std::string name = (*it)[1];
        auto def = config_default(name);
        if (!def) continue;
        double v = std::atof(def->c_str());
        bool dense_first = contains(name, "dense") && v > 0;
        bool interleave = (contains(name, "step") || contains(name, "freq") || contains(name, "interleave") ||
                           contains(name, "period")) && v > 1;
        bool list = contains(name, "layers") && def->size() > 2 && def->front() == '[';
        if (dense_first || interleave || list) {
          hybrid = true;
          d6.notes.push_back("config." + name + " defaults to " + *def + ": some layers are dense");
        }
      }
      // Whatever the field is called: a comparison of the layer index with a field whose default
      // leaves layers on both sides (`layer_idx >= config.moe_layer_start_index` with 1: layer 0 is
      // dense, ERNIE 4.5 MoE), or a modulus above 1 (`(layer_idx + 1) % config.interval == 0`).
      static const std::regex cmp_idx(R"(layer_idx\)?\s*(>=|>|<=|<)\s*\(?(?:self\.)?config\.(\w+))");
      static const std::regex idx_cmp(R"((?:self\.)?config\.(\w+)\)?\s*(>=|>|<=|<)\s*\(?layer_idx)");
      static const std::regex modulus(R"(%\s*\(?(?:self\.)?config\.(\w+))");
      auto numeric_default = [&](const std::string& name) -> std::optional<double> {
        auto def = config_default(name);
        if (!def || !std::regex_match(*def, std::regex(R"(-?[0-9]+(\.[0-9]*)?)"))) return std::nullopt;
        return std::atof(def->c_str());
      };
      auto note_split = [&](const std::string& name, const std::string& why) {
        if (hybrid) return;
        hybrid = true;
        d6.notes.push_back("config." + name + " defaults to " + config_default(name).value_or("?") + ": " + why);
      };
      for (auto it = std::sregex_iterator(cond.begin(), cond.end(), cmp_idx); it != std::sregex_iterator(); ++it)
        if (auto v = numeric_default((*it)[2]); v && (*v > 0 || ((*it)[1] == ">" && *v == 0)))
          note_split((*it)[2], "the layer index is compared with it, so the first layers differ from the rest");
      for (auto it = std::sregex_iterator(cond.begin(), cond.end(), idx_cmp); it != std::sregex_iterator(); ++it)
        if (auto v = numeric_default((*it)[1]); v && (*v > 0 || ((*it)[2] == "<" && *v == 0)))
          note_split((*it)[1], "the layer index is compared with it, so the first layers differ from the rest");
      for (auto it = std::sregex_iterator(cond.begin(), cond.end(), modulus); it != std::sregex_iterator(); ++it)
        if (auto v = numeric_default((*it)[1]); v && *v > 1)
          note_split((*it)[1], "the layer index is taken modulo it, so layers alternate");
      if (filled_split) hybrid = *filled_split;
      if (hybrid) decide(d6, "hybrid", 0.85);
      else if (!filled.empty() && !filled_split) {
        // The per-layer kinds come from configuration code this analysis does not evaluate
        // (Step3p7: `moe_set = set(range(3, n))`): MoE layers exist, whether dense ones do by
        // default is not known, so no claim about them.
        decide(d6, "moe", 0.6);
        std::string fields;
        for (const auto& f : filled) fields += (fields.empty() ? "config." : ", config.") + f;
        d6.notes.push_back(dense->name + " is used for layers a configuration marks as dense; " + fields +
                           " defaults to None and is filled by the configuration class in code this analysis does not "
                           "evaluate, so whether the default configuration has dense layers (hybrid) is not known");
      } else {
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
    if (auto prm = config_param(mi.config_attr)) {
      d5.details["config_default"] = unquote(prm->default_value);
    }
  }
  YAML::Node proj;
  if (!mi.gate.empty()) proj["gate"] = mi.gate;
  if (!mi.up.empty()) proj["up"] = mi.up;
  if (!mi.gate_up.empty()) proj["gate_up"] = mi.gate_up;
  if (!mi.down.empty()) proj["down"] = mi.down;
  d5.details["projections"] = proj;
  if (!mi.scaled.empty()) d5.details["scaled"] = mi.scaled;
  for (int l : mi.lines) d5.evidence.push_back(ev(l));
  if (!mi.config_attr.empty())
    if (auto prm = config_param(mi.config_attr)) d5.evidence.push_back(cfg_ev(prm->line));
  if (mi.kind.empty()) undecide(d5, mi.why);
  else {
    decide(d5, mi.kind, mi.kind == "other" ? 0.85 : 0.9);
    if (!mi.why.empty()) d5.notes.push_back(mi.why);
    if (!mi.activation_note.empty()) d5.notes.push_back(mi.activation_note);
  }
  if (fused_experts && mlp_cls != fused_experts) {
    MlpInfo ei = analyse_mlp(*fused_experts);
    d5.details["experts_activation"] = ei.kind.empty() ? "undecided" : ei.kind;
  }
}

}  // namespace liger::autopatch::detail
