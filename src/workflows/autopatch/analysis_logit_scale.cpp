// A scalar factor on the logits before the loss (Granite's `logits / self.config.logits_scaling`,
// Cohere's `logits * self.logit_scale`, FalconH1's `self.lm_head(h) * self.model.lm_head_multiplier`)
// folds into the fused loss: the projection is linear, so (h W^T + b) * s = (h s) W^T + b s. The
// fused forward scales the hidden state (and the bias) instead of the logits it never builds.
// This holds only for a scalar s: a per-vocabulary vector would scale each column differently,
// so the factor must be shown to be one number (a config value, a literal, an attribute set from
// one) or the transform stays a reason to decline.
#include <regex>

#include "workflows/autopatch/analysis_internal.h"

namespace liger::autopatch {

bool is_logit_factor_literal(const std::string& text) {
  static const std::regex r(R"(^[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$|^\.[0-9]+([eE][-+]?[0-9]+)?$)");
  return std::regex_match(text, r);
}

}  // namespace liger::autopatch

namespace liger::autopatch::detail {

namespace {

// `config.x`, `self.config.x`, `config.get_text_config().x` -> x; "" otherwise.
std::string config_field(const std::string& expr) {
  static const std::regex r(R"(^(?:self\.)?config\.(?:get_text_config\(\)\.|text_config\.)?([A-Za-z_]\w*)$)");
  std::smatch m;
  return std::regex_match(expr, m, r) ? m[1].str() : std::string();
}

}  // namespace

// What an __init__ value assigned to the scale attribute is: a config field, a literal, or a
// cast of one (`float(config.x)`); the config field's name is returned in *field.
bool Analyzer::scalar_init_value(const std::string& value, std::string* field) const {
  std::string v = strip_parens(value);
  static const std::regex cast(R"(^(?:float|int)\((.*)\)$)");
  std::smatch m;
  if (std::regex_match(v, m, cast)) v = strip_parens(m[1].str());
  // `getattr(config, "x", 1.0)`: the field or its literal default.
  static const std::regex ga(R"(^getattr\((?:self\.)?config,["']([A-Za-z_]\w*)["'](?:,([^,()]+))?\)$)");
  if (std::regex_match(v, m, ga)) {
    if (m[2].matched && !is_logit_factor_literal(m[2].str()) && m[2].str() != "None") return false;
    *field = m[1].str();
    return true;
  }
  if (is_logit_factor_literal(v)) return true;
  // A learned scalar (`nn.Parameter(torch.tensor(1.0))`, `nn.Parameter(torch.ones(()))`,
  // `torch.ones(1)`): one element, so it folds, and the fused forward keeps its gradient.
  static const std::regex one_element(
      R"(^(?:nn\.Parameter\()?torch\.(?:tensor\((?:[-+]?[0-9.eE+-]+|(?:self\.)?config\.\w+)(?:,[^()]*)?\)|)"
      R"((?:ones|zeros|empty)\((?:\(\)|1|\(1,?\)|\[1\])(?:,[^()]*)?\))(?:,[^()]*)?\)?$)");
  if (std::regex_match(v, one_element)) return true;
  *field = config_field(v);
  return !field->empty();
}

// Classifies one logits transform of head h. A scalar scale is appended to h.scales; anything else
// is returned as the reason it cannot fold ("" for a fold).
// `operand` is what is scaled: "logits" after the projection, or the hidden-state variable before
// it (`hidden_states = hidden_states / self.config.logits_scaling`), which is the same fold.
std::string Analyzer::fold_logit_scale(HeadInfo& h, const std::string& transform, int line,
                                       const std::string& operand) const {
  const std::string v = strip_parens(transform);
  const std::string head_call = "self." + h.head_attr + "(";
  auto is_logits = [&](const std::string& x) {
    const std::string e = strip_parens(x);
    if (e == operand) return true;
    if (operand != "logits") return false;
    // The projection itself on the lm line (`self.lm_head(h[:, s, :]) * m`): one call, nothing after it.
    if (e.rfind(head_call, 0) != 0) return false;
    int depth = 0;
    for (size_t i = head_call.size() - 1; i < e.size(); ++i) {
      if (e[i] == '(' || e[i] == '[') ++depth;
      else if (e[i] == ')' || e[i] == ']') --depth;
      if (depth == 0) return i + 1 == e.size();
    }
    return false;
  };
  std::string op, factor;
  for (char c : {'*', '/'}) {
    const auto parts = split_top_level(v, c);
    if (parts.size() != 2) continue;
    if (is_logits(parts[0])) { op = std::string(1, c); factor = strip_parens(parts[1]); }
    else if (c == '*' && is_logits(parts[1])) { op = "*"; factor = strip_parens(parts[0]); }
    break;
  }
  if (op.empty()) return "not a product or quotient of the " + std::string(operand == "logits" ? "logits" : "hidden state") + " and one factor";
  if (split_top_level(factor, '*').size() > 1 || split_top_level(factor, '/').size() > 1 ||
      split_top_level(factor, '+').size() > 1 || split_top_level(factor, '-').size() > 1)
    return "the factor " + factor + " is an expression, not one value";

  LogitScale sc;
  sc.op = op;
  sc.line = line;
  if (is_logit_factor_literal(factor)) {
    sc.factor = factor;
    h.scales.push_back(sc);
    return "";
  }
  if (std::string f = config_field(factor); !f.empty()) {
    if (auto prm = config_param(f)) {
      const std::string d = unquote(prm->default_value);
      if (!d.empty() && (d.front() == '[' || d.front() == '{' || d.front() == '('))
        return "the factor config." + f + " defaults to " + d + ", not a number";
    }
    sc.factor = "config." + f;
    sc.config_attribute = f;
    h.scales.push_back(sc);
    return "";
  }
  // self.<attr> or self.<submodule>.<attr>: set in the owning class's __init__ from a config field
  // or a literal.
  static const std::regex attr_path(R"(^self\.([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?$)");
  std::smatch pm;
  if (!std::regex_match(factor, pm, attr_path)) return "the factor " + factor + " is not a config value, a literal or an attribute";
  const ClassDef* owner = h.cls;
  std::string attr = pm[1].str();
  if (pm[2].matched) {
    owner = nullptr;
    for (const auto& a : h.cls->init_assignments_to(pm[1].str()))
      for (const auto& local : local_classes_in(s, a))
        if (const ClassDef* k = m.find_class(local)) { owner = k; break; }
    if (!owner) return "the factor " + factor + " lives on self." + pm[1].str() + ", whose class is not in the file";
    attr = pm[2].str();
  }
  const auto sets = owner->init_assignments_to(attr);
  if (sets.empty()) return "the factor " + factor + " is never assigned in " + owner->name + ".__init__";
  std::string field;
  for (const auto& a : sets)
    if (!scalar_init_value(a.value, &field))
      return "the factor " + factor + " is set to " + a.value + " in " + owner->name +
             ".__init__, which is not known to be one number (a per-vocabulary tensor cannot fold into the hidden state)";
  sc.factor = factor.substr(5);
  sc.config_attribute = field;
  h.scales.push_back(sc);
  return "";
}

}  // namespace liger::autopatch::detail
