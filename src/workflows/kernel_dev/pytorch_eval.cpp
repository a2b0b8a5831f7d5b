// The PyTorch translator's expression evaluator (pytorch_translator.h): recursive descent over
// Python's expression grammar, calls to torch./F./tensor-method functions lowered to the IR, and
// nn modules built and applied through their functional forms.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "workflows/kernel_dev/pytorch_translator.h"
#include "workflows/kernel_dev/tier2_derive.h"

namespace liger::kernel_dev::torch_detail {

Value Translator::evaluate(const std::string& text) {
  // Reentrant: a helper function called inside an expression evaluates its own body, and the
  // caller's expression continues after the call.
  struct Saved {
    Translator& t;
    std::vector<PyToken> tokens;
    std::size_t pos;
    int nesting, line, column_base;
    ~Saved() {
      t.tokens_ = std::move(tokens);
      t.pos_ = pos;
      t.nesting_ = nesting;
      t.line = line;
      t.column_base = column_base;
    }
  } saved{*this, std::move(tokens_), pos_, nesting_, line, column_base};
  tokens_ = py_lex(text);
  pos_ = 0;
  nesting_ = 0;
  try {
    return evaluate_tokens();
  } catch (Reject& r) {
    // A refusal found inside the expression names where: the token the parser had just read (the
    // operator or name at fault) unless the thrower knew better.
    if (r.column == 0) r.column = column_base + static_cast<int>(tokens_[pos_ > 0 ? pos_ - 1 : 0].offset) + 1;
    throw;
  }
}

Value Translator::evaluate_tokens() {
  Value v = expression();
  if (peek().type != PyTok::End) {
    if (peek().text == ",") {  // a tuple
      Value tuple;
      tuple.type = Value::Tuple;
      tuple.items.push_back(v);
      while (accept(",")) {
        if (peek().type == PyTok::End) break;
        tuple.items.push_back(expression());
      }
      if (peek().type == PyTok::End) return tuple;
    }
    throw Reject{"cannot translate the expression near '" + peek().text + "'", 0,
                 column_base + static_cast<int>(peek().offset) + 1};
  }
  return v;
}

bool Translator::reads_inputs(const Expr& e) const {
  for (const auto& name : free_symbols(e))
    if (inputs.count(name) || name == kRankSymbol) return true;
  return false;
}

Expr Translator::as_tensor(const Value& v, const std::string& what) {
  if (v.type == Value::Tensor) return v.expr;
  if (v.type == Value::Tuple) throw Reject{"a tuple is used where " + what + " is expected", 0};
  throw Reject{"'" + v.text + "' is used where " + what + " is expected", 0};
}

bool Translator::accept(const char* op) {
  if (peek().type == PyTok::Op && peek().text == op) {
    ++pos_;
    return true;
  }
  return false;
}

void Translator::expect(const char* op) {
  if (accept(op)) return;
  const std::string found = peek().type == PyTok::End ? "the end of the line" : "'" + peek().text + "'";
  throw Reject{std::string("expected '") + op + "', found " + found, 0,
               column_base + static_cast<int>(peek().offset) + 1};
}

void Translator::sequence_items(const char* close, Value& into) {
  while (!accept(close)) {
    into.items.push_back(expression());
    if (!accept(",")) {
      expect(close);
      break;
    }
  }
}

Value Translator::expression() {
  Nest guard(*this);
  if (peek().type == PyTok::Name && peek().text == "lambda") throw Reject{"a lambda inside an expression is not supported: name it (f = lambda x: ...) or write a def, "
                 "and call it",
                 0, column_base + static_cast<int>(peek().offset) + 1};
  Value left = comparison();
  if (peek().type == PyTok::Name && peek().text == "if") {
    // `a if c else b`: Python picks one branch by c's truth value, so c is a constant here (a
    // module parameter, a literal); a tensor condition is an element-wise choice: torch.where.
    const int column = column_base + static_cast<int>(peek().offset) + 1;
    ++pos_;
    const Value condition = comparison();
    if (!(peek().type == PyTok::Name && peek().text == "else")) throw Reject{"expected 'else' in a conditional expression", 0};
    ++pos_;
    const Value other = expression();
    const Expr c = condition.type == Value::Tensor ? simplify(condition.expr) : nullptr;
    if (c && is_number(c)) return c->value != 0 ? left : other;
    // A condition on the op's scalar parameters only (beta > 0) picks one branch per call, which an
    // element-wise where of a scalar condition computes, gradients included.
    if (c && !reads_inputs(c))
      return tensor(call("where", {c, as_tensor(left, "a tensor"), as_tensor(other, "a tensor")}));
    throw Reject{"a conditional expression (a if c else b) whose condition depends on an input tensor: Python needs "
                 "one truth value, a tensor condition chooses per element: write torch.where(c, a, b)",
                 0, column};
  }
  return left;
}

Value Translator::comparison() {
  Value left = additive();
  if (peek().type == PyTok::Name && peek().text == "is") {
    // `v is None` / `v is not None`: a tensor (an input of the op, given) is not None; a None
    // default left unset is. Decided here, so the branch it guards is taken or not for every element.
    ++pos_;
    bool negated = false;
    if (peek().type == PyTok::Name && peek().text == "not") {
      ++pos_;
      negated = true;
    }
    const Value right = additive();
    if (right.type != Value::None) throw Reject{"'is' compares with None only", 0};
    const bool is_none = left.type == Value::None;
    return tensor(num(is_none != negated ? 1 : 0));
  }
  static const char* ops[] = {"<", "<=", ">", ">=", "==", "!="};
  for (const char* op : ops)
    if (accept(op)) {
      Value right = additive();
      return tensor(compare(op, as_tensor(left, "a tensor"), as_tensor(right, "a tensor")));
    }
  return left;
}

Value Translator::additive() {
  Value first = term();
  std::vector<Expr> terms;
  std::vector<char> ops{'+'};
  while (true) {
    char op = accept("+") ? '+' : accept("-") ? '-' : 0;
    if (!op) return terms.empty() ? first : tensor(build_chain(terms, ops));
    if (terms.empty()) terms.push_back(as_tensor(first, "a tensor"));
    ops.push_back(op);
    terms.push_back(as_tensor(term(), "a tensor"));
  }
}

Value Translator::term() {
  Value first = unary();
  std::vector<Expr> terms;
  std::vector<char> ops{'*'};
  while (true) {
    char op = 0;
    if (accept("*")) op = '*';
    else if (accept("/")) op = '/';
    else if (accept("@")) throw Reject{"'@' is a matrix multiplication (GEMM)", 3};
    else if (accept("//")) {
      // x.shape[-1] // k: a whole fraction of the row length (the bound of a cut, x[..., :d]).
      const Value divisor = terms.empty() ? unary() : Value{};
      const Expr lhs = terms.empty() && first.type == Value::Tensor ? simplify(first.expr) : nullptr;
      const Expr k = divisor.type == Value::Tensor ? simplify(divisor.expr) : nullptr;
      if (lhs && k && is_number(k) && k->value >= 1 && k->value == std::floor(k->value) &&
          free_symbols(lhs) == std::set<std::string>{"n"}) {
        first = tensor(call("floor", {div(lhs, k)}));
        continue;
      }
      throw Reject{"integer division is not a floating-point element-wise op (only x.shape[-1] // k, the bound of a cut "
                   "x[..., :d], is read)", 0};
    } else if (accept("%")) {
      throw Reject{"integer division / modulo is not a floating-point element-wise op", 0};
    }
    if (!op) return terms.empty() ? first : tensor(build_chain(terms, ops));
    if (terms.empty()) terms.push_back(as_tensor(first, "a tensor"));
    ops.push_back(op);
    terms.push_back(as_tensor(unary(), "a tensor"));
  }
}

Value Translator::unary() {
  if (peek().type == PyTok::Op && (peek().text == "-" || peek().text == "+")) {
    Nest guard(*this);
    return signed_unary();
  }
  return power();
}

Value Translator::signed_unary() {
  if (accept("-")) {
    Expr e = as_tensor(unary(), "a tensor");
    return tensor(is_number(e) ? num(-e->value) : neg(e));
  }
  if (accept("+")) return unary();
  return power();
}

Value Translator::power() {
  Value base = postfix();
  if (accept("**")) {
    Nest guard(*this);
    return tensor(pow(as_tensor(base, "a tensor"), as_tensor(unary(), "an exponent")));
  }
  return base;
}

std::vector<Arg> Translator::arguments() {
  std::vector<Arg> args;
  if (accept(")")) return args;
  while (true) {
    Arg arg;
    if (peek().type == PyTok::Name && peek(1).type == PyTok::Op && peek(1).text == "=") {
      arg.keyword = peek().text;
      pos_ += 2;
    }
    arg.value = expression();
    args.push_back(arg);
    if (accept(",")) {
      if (accept(")")) return args;
      continue;
    }
    expect(")");
    return args;
  }
}

Value Translator::postfix() {
  Value v = atom();
  while (true) {
    if (accept(".")) {
      if (peek().type != PyTok::Name) throw Reject{"expected an attribute name after '.'", 0};
      std::string attribute = peek().text;
      ++pos_;
      if (v.type == Value::Path && v.text.rfind("<finfo:", 0) == 0) {
        // eps, tiny / smallest_normal, max, min of fp32 / fp16 / bf16 / fp64.
        const std::string dtype = v.text.substr(7, v.text.size() - 8);
        static const std::map<std::string, std::map<std::string, double>> constants = {
            {"fp32", {{"eps", 1.1920928955078125e-07}, {"tiny", 1.1754943508222875e-38}, {"max", 3.4028234663852886e+38}}},
            {"fp16", {{"eps", 0.0009765625}, {"tiny", 6.103515625e-05}, {"max", 65504.0}}},
            {"bf16", {{"eps", 0.0078125}, {"tiny", 1.1754943508222875e-38}, {"max", 3.3895313892515355e+38}}},
            {"fp64", {{"eps", 2.220446049250313e-16}, {"tiny", 2.2250738585072014e-308}, {"max", 1.7976931348623157e+308}}}};
        const auto& c = constants.at(dtype);
        std::string key = attribute == "smallest_normal" ? "tiny" : attribute;
        if (key == "min") v = tensor(num(-c.at("max")));
        else if (c.count(key)) v = tensor(num(c.at(key)));
        else throw Reject{"torch.finfo(...)." + attribute + ": only eps, tiny, smallest_normal, max and min are read", 0};
      } else if (v.type == Value::Path) {
        std::string path = v.text + "." + attribute;
        if (v.text == "self") {
          auto it = self_attributes.find(attribute);
          if (auto unread = unreadable_attributes.find(attribute);
              it == self_attributes.end() && unread != unreadable_attributes.end()) {
            throw Reject{unread->second, 0};
          }
          if (it != self_attributes.end()) {
            v = it->second;
          } else if (methods.count(attribute)) {
            v.text = path;  // self.<method>: inlined when called (apply)
          } else {
            throw Reject{"self." + attribute + " is not set in __init__ (unknown attribute)", 0};
          }
        } else if (path == "math.pi" || path == "torch.pi" || path == "np.pi") {
          v = tensor(num(M_PI));
        } else if (path == "math.e") {
          v = tensor(num(M_E));
        } else if (path == "math.inf" || path == "torch.inf" || path == "np.inf" || path == "numpy.inf") {
          v = tensor(num(HUGE_VAL));
        } else {
          v.text = path;
        }
      } else if (v.type == Value::Module && v.instance >= 0) {
      v = instance_attribute(v.instance, attribute);  // self.norm.weight
    } else if (v.type == Value::Tuple && v.text == "max" && attribute == "values") {
        v = v.items[0];
      } else if (v.type == Value::Tensor && attribute == "ndim") {
        v = tensor(sym(kRankSymbol));
      } else if (v.type == Value::Tensor && attribute == "shape") {
        v.type = Value::Path;  // x.shape[-1]: the row length, read by the indexing below
        v.text = "<shape>";
      } else if (v.type == Value::Tensor) {
        Value method;
        method.type = Value::Method;
        method.receiver = v.expr;
        method.text = attribute;
        v = method;
      } else {
        throw Reject{"attribute '" + attribute + "' of a non-tensor value", 0};
      }
    } else if (accept("(")) {
      // The callee's name, for the column of a refusal.
      const int column = column_base + static_cast<int>(tokens_[pos_ >= 2 ? pos_ - 2 : 0].offset) + 1;
      std::vector<Arg> args = arguments();
      try {
        v = apply(v, args);
      } catch (Reject& r) {
        if (r.column == 0) r.column = column;
        throw;
      }
    } else if (accept("[")) {
      // x.shape[-1] is the row length n; x.shape[-1:] the one-element shape (n,) that
      // layer_norm / rms_norm take as normalized_shape; max(dim=...)[0] its values. Other
      // indexing is not element-wise.
      const int column = column_base + static_cast<int>(tokens_[pos_ - 1].offset) + 1;
      const bool shape = v.type == Value::Path && v.text == "<shape>";
      if (v.type == Value::Tuple && v.text == kParameterVector) {
        // self.weight[k] of a parameter of a few elements (torch.ones(3)): its k-th scalar.
        const Value index = expression();
        expect("]");
        const Expr k = index.type == Value::Tensor ? simplify(index.expr) : nullptr;
        const long size = static_cast<long>(v.items.size());
        if (!k || !is_number(k) || k->value != std::floor(k->value) || k->value < -size || k->value >= size)
          throw Reject{"a parameter of " + std::to_string(size) + " elements is indexed by a constant from 0 to " +
                           std::to_string(size - 1) + " (or -" + std::to_string(size) + " to -1) only",
                       0, column};
        v = v.items[static_cast<std::size_t>(k->value < 0 ? k->value + static_cast<double>(size) : k->value)];
        continue;
      }
      // x.chunk(2, dim=-1)[k]: the k-th part (pytorch_split.cpp).
      const bool result_tuple = is_reduction_tuple(v) || (v.type == Value::Tuple && v.text == "chunk");
      if (v.type == Value::Tensor && !shape) {
        v = last_dim_slice(v, column);
        continue;
      }
      if (!shape && !result_tuple)
        throw Reject{"indexing / slicing a tensor is not element-wise: the built-in analyser reads whole tensors "
                     "(element-wise ops and reductions over dim=-1) and indexes only x.shape[-1], x.shape[-1:], "
                     "max(dim=-1)[0] and var_mean / std_mean(dim=-1)[0 or 1]; pass the slice itself as the op's input",
                     0};
      auto slice_refusal = [&] {
        return Reject{"x.shape[...] slice: only x.shape[-1:] (the last dimension, as a normalized_shape) is "
                      "translated; the Tier-2 row program reduces over the last dimension only",
                      2, column};
      };
      if (accept(":")) throw slice_refusal();
      Value index = expression();
      if (accept(":")) {
        const Expr start = index.type == Value::Tensor ? simplify(index.expr) : nullptr;
        if (!shape || !start || !is_number(start, -1) || !accept("]")) {
          if (!shape) throw Reject{"slicing a tensor is not element-wise: pass the slice itself as the op's input", 0, column};
          throw slice_refusal();
        }
        Value tuple;
        tuple.type = Value::Tuple;
        tuple.items.push_back(tensor(sym("n")));
        v = tuple;
        continue;
      }
      expect("]");
      const Expr i = index.type == Value::Tensor ? simplify(index.expr) : nullptr;
      if (shape && i && is_number(i, -1)) v = tensor(sym("n"));
      else if (!shape && i && is_number(i) && i->value == std::floor(i->value) && i->value >= 0 &&
               i->value < static_cast<double>(v.items.size()) &&
               v.items[static_cast<std::size_t>(i->value)].type != Value::None)
        v = v.items[static_cast<std::size_t>(i->value)];
      else
        throw Reject{shape ? "x.shape[...]: only x.shape[-1] (the row length) is translated"
                           : v.text == "max" ? "max/min(dim=...)[...]: only [0] (the values) is translated; the indices are not"
                                             : v.text + "(dim=...)[...]: [0] and [1] are its two row values",
                     0};
    } else {
      return v;
    }
  }
}

Value Translator::atom() {
  const PyToken t = peek();
  ++pos_;
  if (t.type == PyTok::Number) return tensor(num(t.number));
  if (t.type == PyTok::String) {
    Value v;
    v.type = Value::String;
    v.text = t.text;
    return v;
  }
  if (t.type == PyTok::Op && t.text == "(") {
    Value inner = expression();
    if (accept(",")) {  // (a,) or (a, b): a shape argument such as normalized_shape
      Value tuple;
      tuple.type = Value::Tuple;
      tuple.items.push_back(inner);
      sequence_items(")", tuple);
      return tuple;
    }
    expect(")");
    return inner;
  }
  if (t.type == PyTok::Op && t.text == "[") {  // [a, b]: a shape argument such as [x.shape[-1]]
    Value list;
    list.type = Value::Tuple;
    sequence_items("]", list);
    return list;
  }
  if (t.type == PyTok::Name) {
    if (t.text == "None" || t.text == "True" || t.text == "False") {
      if (t.text == "None") return Value{};
      return tensor(num(t.text == "True" ? 1 : 0));
    }
    auto local = locals.find(t.text);
    if (local != locals.end()) return local->second;
    if (inputs.count(t.text)) return tensor(sym(t.text));
    auto global = globals.find(t.text);
    if (global != globals.end()) return global->second;
    // A name an import gave (import torch as th, from torch.nn.functional import softmax): the
    // module or function it stands for, unless the source defines one of that name.
    if (auto alias = aliases.find(t.text);
        alias != aliases.end() && !helpers.count(t.text) && !source_classes.count(t.text)) {
      Value path;
      path.type = Value::Path;
      path.text = alias->second;
      return path;
    }
    Value path;
    path.type = Value::Path;
    path.text = t.text;
    return path;
  }
  throw Reject{"unexpected '" + t.text + "'", 0};
}

std::string Translator::torch_function(const std::string& path) {
  static const char* prefixes[] = {"torch.nn.functional.", "nn.functional.", "F.", "torch.special.", "torch."};
  for (const char* prefix : prefixes)
    if (path.rfind(prefix, 0) == 0) return path.substr(std::string(prefix).size());
  return "";
}

Expr Translator::catalogue_call(const std::string& name, Expr x, const std::vector<std::pair<std::string, Expr>>& named) {
  std::vector<CallArgument> args = {{"", x}};
  for (const auto& [k, v] : named) args.push_back({k, v});
  auto resolved = catalogue_.resolver()(name, args);
  if (!resolved) throw Reject{"the catalogue has no '" + name + "'", 0};
  return *resolved;
}

namespace {

// Masking with an infinity (where(m, x, float('-inf')), masked_fill(m, -inf)) is refused at the
// call: the generated kernel and its gradient are written with finite numbers.
void refuse_infinity(const std::string& fn, const Expr& value) {
  const Expr v = simplify(value);
  if (is_number(v) && std::isinf(v->value))
    throw Reject{fn + "() with an infinite value: the generated kernel and its gradient are written with finite "
                      "numbers; mask with a large finite value (for a softmax, -1e4 in fp16 / -1e30 in fp32) or leave "
                      "the masking out of the op",
                 0};
}

}  // namespace

std::vector<std::pair<std::string, Expr>> Translator::bind(const std::string& fn, const std::vector<Arg>& args, std::size_t skip,
                                               const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, Expr>> out;
  std::size_t positional = 0;
  for (std::size_t i = skip; i < args.size(); ++i) {
    const Arg& a = args[i];
    if (a.keyword == "inplace") continue;
    std::string name = a.keyword;
    if (name.empty()) {
      if (positional >= names.size()) throw Reject{fn + "(): too many arguments", 0};
      name = names[positional++];
    } else if (std::find(names.begin(), names.end(), name) == names.end()) {
      throw Reject{fn + "(): unsupported argument '" + name + "'", 0};
    }
    out.push_back({name, as_tensor(a.value, "a number")});
  }
  return out;
}

// The losses torch.nn.functional computes per element before it reduces: with reduction='none'
// they are element-wise ops of (input, target). The default reduction ('mean') averages over every
// element, which is no row reduction; it is refused with the rewrite. Weights are refused (they
// broadcast against a class or batch axis the element-wise subset does not have).
std::optional<Expr> Translator::pointwise_loss(const std::string& fn, const std::string& f, const std::vector<Arg>& all) {
  static const std::map<std::string, std::vector<std::string>> options = {
      {"mse_loss", {}},
      {"l1_loss", {}},
      {"smooth_l1_loss", {"beta"}},
      {"huber_loss", {"delta"}},
      {"binary_cross_entropy_with_logits", {}},
      {"binary_cross_entropy", {}},
      {"soft_margin_loss", {}},
      {"kl_div", {"log_target"}},
      {"poisson_nll_loss", {"log_input", "full", "eps"}}};
  const auto known = options.find(f);
  if (known == options.end()) return std::nullopt;
  Expr input, target;
  std::map<std::string, Expr> given;
  std::string reduction = "mean";
  std::size_t positional = 0;
  for (const auto& a : all) {
    if (a.keyword == "reduction") {
      if (a.value.type != Value::String) throw Reject{fn + "(): reduction must be a string literal", 0};
      reduction = a.value.text;
    } else if (a.keyword.empty() || a.keyword == "input" || a.keyword == "target") {
      const bool is_target = a.keyword == "target" || (a.keyword.empty() && positional == 1);
      if (a.keyword.empty() && positional++ >= 2)
        throw Reject{fn + "(): write the arguments after input and target by keyword (reduction='none', ...)", 0};
      (is_target ? target : input) = as_tensor(a.value, std::string("the ") + (is_target ? "target" : "input"));
    } else if (std::find(known->second.begin(), known->second.end(), a.keyword) != known->second.end()) {
      given[a.keyword] = as_tensor(a.value, "a number");
    } else {
      throw Reject{fn + "(): argument '" + a.keyword + "' is not read (weights broadcast along a class or batch "
                        "axis; apply them outside the op)", 0};
    }
  }
  if (!input || !target) throw Reject{fn + "() needs an input and a target", 0};
  if (reduction != "none")
    throw Reject{fn + "(reduction='" + reduction + "') reduces over every element, not along rows; write "
                      "reduction='none' (the element-wise loss, which the kernel computes) and reduce its output",
                 2};
  const Expr d = sub(input, target);
  if (f == "mse_loss") return pow(d, num(2));
  if (f == "l1_loss") return call("abs", {d});
  if (f == "smooth_l1_loss" || f == "huber_loss") {
    const bool huber = f == "huber_loss";
    const Expr b = given.count(huber ? "delta" : "beta") ? given.at(huber ? "delta" : "beta") : num(1);
    const Expr quadratic = huber ? mul(num(0.5), pow(d, num(2))) : div(mul(num(0.5), pow(d, num(2))), b);
    const Expr linear = huber ? mul(b, sub(call("abs", {d}), mul(num(0.5), b))) : sub(call("abs", {d}), mul(num(0.5), b));
    if (!huber && is_number(simplify(b), 0)) return call("abs", {d});  // beta = 0 is the L1 loss
    return call("where", {compare("<", call("abs", {d}), b), quadratic, linear});
  }
  if (f == "binary_cross_entropy_with_logits")  // log(1 + exp(x)) - x t, with softplus's stable form
    return sub(call("softplus", {input}), mul(input, target));
  // A flag (log_target=True, log_input=False, full=True) is a literal: it picks the formula.
  auto flag = [&](const char* name, bool otherwise) {
    if (!given.count(name)) return otherwise;
    const Expr v = simplify(given.at(name));
    if (!is_number(v)) throw Reject{fn + "(): " + name + " must be True or False", 0};
    return v->value != 0;
  };
  if (f == "binary_cross_entropy") {  // -(t log p + (1 - t) log(1 - p)), each log clamped at -100 as PyTorch
    // PyTorch documents both in [0, 1] (its CUDA kernel asserts it): the tests draw them there.
    for (const Expr& e : {input, target})
      if (e->kind == Kind::Symbol) sample_hints[e->name] = "unit";
    const Expr log_p = call("max", {call("log", {input}), num(-100)});
    const Expr log_q = call("max", {call("log1p", {neg(input)}), num(-100)});
    return neg(add(mul(target, log_p), mul(sub(num(1), target), log_q)));
  }
  if (f == "kl_div") {  // the pointwise KL term of log-probabilities `input` against `target`
    if (flag("log_target", false)) return mul(call("exp", {target}), sub(target, input));
    return sub(*identity_function("xlogy", {target, target}), mul(target, input));
  }
  if (f == "poisson_nll_loss") {
    if (flag("full", false))
      throw Reject{fn + "(full=True) adds Stirling's term where target > 1; leave full=False and add it outside the op", 0};
    if (flag("log_input", true)) return sub(call("exp", {input}), mul(target, input));
    const Expr eps = given.count("eps") ? given.at("eps") : num(1e-8);
    return sub(input, mul(target, call("log", {add(input, eps)})));
  }
  return call("softplus", {neg(mul(target, input))});  // soft_margin_loss: log(1 + exp(-y x))
}

Value Translator::elementwise(const std::string& fn, const std::vector<Arg>& args, Expr receiver) {
  std::vector<Arg> all = args;
  if (receiver) all.insert(all.begin(), Arg{"", tensor(receiver)});
  auto arg_tensor = [&](std::size_t i, const char* keyword = nullptr) -> Expr {
    if (keyword)
      for (const auto& a : all)
        if (a.keyword == keyword) return as_tensor(a.value, std::string("argument ") + keyword);
    std::size_t positional = 0;
    for (const auto& a : all) {
      if (!a.keyword.empty()) continue;
      if (positional++ == i) return as_tensor(a.value, "argument " + std::to_string(i + 1) + " of " + fn);
    }
    return nullptr;
  };
  auto has_keyword = [&](const char* k) {
    return std::any_of(all.begin(), all.end(), [&](const Arg& a) { return a.keyword == k; });
  };
  static const std::set<std::string> unary = {"relu", "sigmoid", "tanh", "exp", "log", "log1p", "expm1", "sqrt",
                                              "rsqrt", "abs", "erf", "sin", "cos", "sign", "floor", "ceil", "trunc"};
  std::string f = fn;
  if (receiver && (f == "dim" || f == "ndimension") && args.empty()) return tensor(sym(kRankSymbol));
  if (f.size() > 1 && f.back() == '_' && f != "relu_") f.pop_back();  // in-place variants
  if (f == "relu_") f = "relu";
  if (f == "expit") f = "sigmoid";
  if (f == "absolute") f = "abs";
  if (f == "sgn") f = "sign";
  Expr x = arg_tensor(0, "input");
  if (!x && f != "tensor") throw Reject{fn + "() needs a tensor argument", 0};
  if (unary.count(f)) return tensor(call(f, {x}));
  if (f == "square") return tensor(pow(x, num(2)));
  if (f == "fix") return tensor(call("trunc", {x}));
  if (f == "frac") return tensor(sub(x, call("trunc", {x})));
  if (f == "round") {  // torch.round(x, decimals=d): round(x * 10^d) / 10^d
    Expr decimals = arg_tensor(1, "decimals");
    if (!decimals) return tensor(call("round", {x}));
    const Expr d = simplify(decimals);
    if (!is_number(d) || d->value != std::floor(d->value)) throw Reject{"round(): decimals must be an integer literal", 0};
    const Expr scale = num(std::pow(10.0, d->value));
    return tensor(div(call("round", {mul(x, scale)}), scale));
  }
  // .detach() keeps the value and cuts the gradient (straight-through estimators:
  // x + (q(x) - x).detach()); dropping it would give the op a gradient PyTorch does not have.
  if (f == "detach") return tensor(call("detach", {x}));
  // Functions the expression language lacks, written with those it has (same values; the
  // derivatives follow from the identities).
  if (f == "logit") {  // logit(x, eps) clamps x to [eps, 1 - eps] first
    Expr eps = arg_tensor(1, "eps");
    Expr p = eps ? call("clamp", {x, eps, sub(num(1), eps)}) : x;
    return tensor(*identity_function("logit", {p}));
  }
  static const std::map<std::string, std::string> aliases = {
      {"arcsinh", "asinh"}, {"arccosh", "acosh"}, {"arctanh", "atanh"}, {"arcsin", "asin"},
      {"arccos", "acos"},   {"arctan", "atan"},   {"arctan2", "atan2"}};
  if (auto alias = aliases.find(f); alias != aliases.end()) f = alias->second;
  if (f == "atan" && all.size() == 1) return tensor(call("atan", {x}));
  if (all.size() == 1)
    if (auto expanded = identity_function(f, {x})) return tensor(*expanded);
  // PyTorch's binary (and lerp's ternary) element-wise functions, in their signature's order.
  static const std::map<std::string, std::vector<const char*>> several = {
      {"logaddexp", {"input", "other"}}, {"logaddexp2", {"input", "other"}}, {"hypot", {"input", "other"}},
      {"atan2", {"input", "other"}},     {"xlogy", {"input", "other"}},      {"xlog1py", {"input", "other"}},
      {"copysign", {"input", "other"}},  {"lerp", {"input", "end", "weight"}}};
  if (auto names = several.find(f); names != several.end()) {
    std::vector<Expr> operands;
    for (std::size_t i = 0; i < names->second.size(); ++i) {
      Expr operand = arg_tensor(i, names->second[i]);
      if (!operand) throw Reject{fn + "() needs " + std::to_string(names->second.size()) + " arguments", 0};
      operands.push_back(operand);
    }
    return tensor(*identity_function(f, operands));
  }
  // addcmul / addcdiv: input + value * t1 (* or /) t2.
  if (f == "addcmul" || f == "addcdiv") {
    Expr t1 = arg_tensor(1, "tensor1"), t2 = arg_tensor(2, "tensor2");
    if (!t1 || !t2) throw Reject{fn + "() needs input, tensor1 and tensor2", 0};
    Expr value = arg_tensor(99, "value");
    Expr product = f == "addcmul" ? mul(t1, t2) : div(t1, t2);
    return tensor(add(x, value ? mul(value, product) : product));
  }
  // The shrinkage functions and F.threshold, by their definitions (lambd defaults to 0.5).
  if (f == "hardshrink" || f == "softshrink") {
    Expr lambd = arg_tensor(1, "lambd");
    if (!lambd) lambd = num(0.5);
    const Expr outside = compare(">", call("abs", {x}), lambd);
    if (f == "hardshrink") return tensor(call("where", {outside, x, num(0)}));
    return tensor(call("where", {outside, sub(x, mul(call("sign", {x}), lambd)), num(0)}));
  }
  if (f == "threshold") {  // F.threshold(input, threshold, value): x where x > threshold, else value
    Expr threshold = arg_tensor(1, "threshold"), value = arg_tensor(2, "value");
    if (!threshold || !value) throw Reject{fn + "() needs a threshold and a value", 0};
    return tensor(call("where", {compare(">", x, threshold), x, value}));
  }
  // heaviside(x, values): 1 above 0, `values` at 0, 0 below (PyTorch defines no gradient; the
  // generated op's is 0 almost everywhere, as the step's).
  if (f == "heaviside") {
    Expr at_zero = arg_tensor(1, "values");
    if (!at_zero) throw Reject{fn + "() needs the values taken where the input is 0", 0};
    return tensor(call("where", {compare(">", x, num(0)), num(1),
                                 call("where", {compare("==", x, num(0)), at_zero, num(0)})}));
  }
  // F.rrelu outside training (its default, training=False) is a leaky ReLU with the mean slope
  // (lower + upper) / 2; in training it draws a slope per element (an RNG state): refused.
  if (f == "rrelu") {
    std::optional<double> lower = 1.0 / 8.0, upper = 1.0 / 3.0, training = 0.0;
    std::size_t positional = 0;
    const std::vector<const char*> order = {"input", "lower", "upper", "training"};
    for (const auto& a : all) {
      const std::string key = a.keyword.empty() ? (positional < order.size() ? order[positional++] : "") : a.keyword;
      if (key == "lower") lower = constant(a.value);
      else if (key == "upper") upper = constant(a.value);
      else if (key == "training") training = constant(a.value);
    }
    if (!training || *training != 0)
      throw Reject{fn + "(training=True) draws a random slope per element (it needs an RNG state): not a "
                        "deterministic element-wise op; outside training it is leaky_relu with slope (lower + upper) / 2", 0};
    if (!lower || !upper) throw Reject{fn + "(): lower and upper must be numbers the analyser can read", 0};
    const double slope = (*lower + *upper) / 2.0;
    notes_.push_back(fn + "() outside training: leaky_relu with the mean slope " + std::to_string(slope));
    return tensor(call("where", {compare(">=", x, num(0)), x, mul(num(slope), x)}));
  }
  if (f == "pow" || f == "float_power") {
    Expr e = arg_tensor(1, "exponent");
    if (!e) throw Reject{"pow() needs an exponent", 0};
    return tensor(pow(x, e));
  }
  if (f == "neg" || f == "negative") return tensor(neg(x));
  if (f == "mul" || f == "multiply") return tensor(mul(x, arg_tensor(1, "other")));
  if (f == "add") return tensor(add(x, arg_tensor(1, "other")));
  if (f == "sub" || f == "subtract") return tensor(sub(x, arg_tensor(1, "other")));
  if (f == "div" || f == "divide" || f == "true_divide") return tensor(div(x, arg_tensor(1, "other")));
  if (f == "masked_fill") {  // x.masked_fill(mask, value): value where mask holds, else x
    Expr mask = arg_tensor(1, "mask"), value = arg_tensor(2, "value");
    if (!mask || !value) throw Reject{"masked_fill() needs a mask and a value", 0};
    refuse_infinity(fn, value);
    return tensor(call("where", {mask, value, x}));
  }
  if (f == "where") {
    Expr a = arg_tensor(1, "input"), b = arg_tensor(2, "other");
    if (!a || !b) throw Reject{"where() needs a condition and two values", 0};
    refuse_infinity(fn, a);
    refuse_infinity(fn, b);
    return tensor(call("where", {x, a, b}));
  }
  if (f == "clamp" || f == "clip" || f == "clamp_min" || f == "clamp_max") {
    Expr lo = f == "clamp_max" ? nullptr : arg_tensor(1, "min");
    Expr hi = f == "clamp_min" ? nullptr : (f == "clamp_max" ? arg_tensor(1, "max") : arg_tensor(2, "max"));
    // An infinite bound (max=float('inf'), min=-math.inf) is no bound.
    auto infinite = [](const Expr& e) { return e && is_number(simplify(e)) && std::isinf(simplify(e)->value); };
    if (infinite(lo)) lo = nullptr;
    if (infinite(hi)) hi = nullptr;
    if (lo && hi) return tensor(call("clamp", {x, lo, hi}));
    if (lo) return tensor(is_number(lo, 0) ? call("relu", {x}) : call("max", {x, lo}));
    if (hi) return tensor(call("min", {x, hi}));
    return tensor(x);
  }
  std::map<std::string, double> fixed;
  if (declared)
    for (const auto& p : *declared)
      if (!p.learnable) fixed[p.name] = p.init;
  if (auto reduction = row_function(f, fn, all, notes_, fixed, column_roles)) {
    if (f != "size" && std::find(row_callees.begin(), row_callees.end(), f) == row_callees.end())
      row_callees.push_back(f);
    return *reduction;
  }
  if (f == "maximum" || f == "fmax" || f == "minimum" || f == "fmin" || f == "max" || f == "min") {
    Expr other = arg_tensor(1, "other");
    if (!other || has_keyword("dim"))
      throw Reject{fn + "() over a dimension is a reduction", 2};
    bool is_max = f == "maximum" || f == "fmax" || f == "max";
    return tensor(call(is_max ? "max" : "min", {x, other}));
  }
  if (f == "gelu") {
    std::string approximate = "none";
    for (const auto& a : all)
      if (a.keyword == "approximate") {
        if (a.value.type != Value::String) throw Reject{"gelu(): approximate must be a string literal", 0};
        approximate = a.value.text;
      }
    if (approximate != "none" && approximate != "tanh")
      throw Reject{"gelu(): approximate must be 'none' or 'tanh', got '" + approximate + "'", 0};
    notes_.push_back(approximate == "tanh" ? "F.gelu(approximate='tanh') -> gelu_tanh" : "F.gelu -> gelu (erf)");
    return tensor(catalogue_call(approximate == "tanh" ? "gelu_tanh" : "gelu", x, {}));
  }
  if (auto loss = pointwise_loss(fn, f, all)) return tensor(*loss);
  auto cat = catalogue_functionals().find(f);
  if (cat != catalogue_functionals().end()) {
    std::vector<Arg> rest;
    bool first = true;
    for (const auto& a : all) {
      if (first && a.keyword.empty()) {
        first = false;
        continue;
      }
      if (a.keyword == "input") continue;
      rest.push_back(a);
    }
    return tensor(catalogue_call(f, x, bind(fn, rest, 0, cat->second)));
  }
  if (f == "float" || f == "half" || f == "bfloat16" || f == "to" || f == "type_as" || f == "contiguous" ||
      f == "type" || f == "clone") {
    notes_.push_back("." + f + "() dropped: the kernel loads its storage type and computes in fp32");
    return tensor(x);
  }
  if (f == "full_like") {  // torch.full_like(x, c): c everywhere (c a number or a scalar parameter)
    for (std::size_t i = 1; i < all.size(); ++i)
      if ((all[i].keyword.empty() && i == 1) || all[i].keyword == "fill_value") {
        const Expr c = as_tensor(all[i].value, "full_like's fill_value (a number)");
        if (reads_inputs(c)) throw Reject{"full_like(): fill_value is a number (or a scalar parameter), not a tensor", 0};
        return tensor(c);
      }
    throw Reject{"full_like() needs its fill_value", 0};
  }
  if (f == "zeros_like") return tensor(num(0));
  if (f == "ones_like") return tensor(num(1));
  if (auto cut = split_call(fn, f, all)) return *cut;
  // Dropout that cannot drop anything is the identity: p = 0 (nn.Dropout(0.0), a config's
  // attention_dropout of 0) or training=False written in the call. Any other dropout is random and
  // refused below.
  if (f == "dropout" || f == "alpha_dropout" || f == "feature_alpha_dropout" || f == "dropout1d") {
    std::map<std::string, Value> bound;
    const std::vector<std::string> order = {"input", "p", "training", "inplace"};
    std::size_t positional = 0;
    for (const auto& a : all) {
      const std::string key = a.keyword.empty() ? (positional < order.size() ? order[positional++] : std::string()) : a.keyword;
      if (!key.empty()) bound[key] = a.value;
    }
    const auto number = [&](const char* key) -> std::optional<double> {
      auto it = bound.find(key);
      return it == bound.end() ? std::nullopt : constant(it->second);
    };
    const auto p = number("p");
    const auto training = number("training");
    if ((p && *p == 0) || (training && *training == 0)) {
      notes_.push_back(fn + "() read as the identity (" + (p && *p == 0 ? "p = 0" : "training=False") + ")");
      return tensor(x);
    }
  }
  auto ne = non_elementwise().find(f);
  if (ne != non_elementwise().end())
    throw Reject{fn + "() is " + ne->second.second +
                     (ne->second.first == 2 ? "; the row reductions the built-in analyser derives are sum, mean, amax, "
                                              "amin, max/min(dim), logsumexp, norm, var, std, softmax, log_softmax, "
                                              "softmin, normalize, rms_norm and layer_norm over dim=-1"
                                            : ""),
                 ne->second.first};
  if (f == "view" || f == "reshape" || f == "transpose" || f == "permute" || f == "chunk" || f == "split" ||
      f == "cat" || f == "stack" || f == "flatten" || f == "unsqueeze" || f == "squeeze" || f == "expand")
    throw Reject{fn + "() changes the tensor layout; the built-in analyser handles element-wise ops on same-shape inputs only", 0};
  throw Reject{fn + "() is not in the element-wise subset the built-in analyser translates; write it with the "
                    "functions it reads (exp, log, log1p, expm1, sqrt, rsqrt, tanh, sigmoid, erf, abs, sin, cos, sign, "
                    "pow, clamp, where, maximum, minimum and the F.* activations) or as an expression (y = ...)",
               0};
}

Value Translator::apply(const Value& callee, const std::vector<Arg>& args) {
  if (callee.type == Value::Method) return elementwise(callee.text, args, callee.receiver);
  if (callee.type == Value::Module && callee.instance >= 0)
    return call_instance(callee.instance, callee.text.empty() ? "forward" : callee.text, args);
  if (callee.type == Value::Module) {
    // A module: its constructor arguments follow the input.
    std::vector<Arg> all = args;
    for (const auto& [k, v] : callee.module_args) all.push_back(Arg{k, v});
    if (callee.text == "identity") return args.at(0).value;
    return elementwise(callee.text, all);
  }
  if (callee.type != Value::Path) throw Reject{"calling a value that is not a function", 0};
  const std::string& path = callee.text;
  // nn.<Module>(...) builds a module; nn.functional.<f> / torch.nn.functional.<f> is a function.
  const bool functional = path.rfind("nn.functional.", 0) == 0 || path.rfind("torch.nn.functional.", 0) == 0;
  if (!functional && (path.rfind("nn.", 0) == 0 || path.rfind("torch.nn.", 0) == 0)) {
    std::string cls = path.substr(path.rfind('.') + 1);
    auto it = module_functionals().find(cls);
    if (it == module_functionals().end()) throw Reject{path + " is not a module the built-in analyser knows", 0};
    Value module;
    module.type = Value::Module;
    module.text = it->second;
    static const std::map<std::string, std::vector<std::string>> ctor = {
        {"leaky_relu", {"negative_slope"}}, {"elu", {"alpha"}}, {"celu", {"alpha"}},
        {"softplus", {"beta", "threshold"}}, {"hardtanh", {"min_val", "max_val"}}, {"gelu", {"approximate"}},
        {"softmax", {"dim"}}, {"log_softmax", {"dim"}}, {"dropout", {"p"}},
        {"layer_norm", {"normalized_shape", "eps", "elementwise_affine", "bias"}},
        {"rms_norm", {"normalized_shape", "eps", "elementwise_affine"}}};
    auto names = ctor.find(module.text);
    std::size_t positional = 0;
    for (const auto& a : args) {
      if (a.keyword == "inplace") continue;
      std::string k = a.keyword;
      if (k.empty()) {
        if (names == ctor.end() || positional >= names->second.size()) continue;  // dims of Linear etc.
        k = names->second[positional++];
      }
      module.module_args.push_back({k, a.value});
    }
    // nn.LayerNorm / nn.RMSNorm have a learnable weight unless elementwise_affine=False.
    if ((module.text == "layer_norm" || module.text == "rms_norm") &&
        std::none_of(module.module_args.begin(), module.module_args.end(),
                     [](const NamedValue& a) { return a.first == "elementwise_affine"; }))
      module.module_args.push_back({"elementwise_affine", tensor(num(1))});
    return module;
  }
  if (path == "math.sqrt" || path == "math.exp" || path == "math.log" || path == "math.tanh") {
    Expr x = as_tensor(args.at(0).value, "a number");
    std::string problem = tree_limit_problem(x);
    if (!problem.empty()) throw Reject{problem, 0};
    return tensor(simplify(call(path.substr(5), {x})));
  }
  if (path == "float" && args.size() == 1 && args[0].value.type == Value::String) {
    // float('inf'), float('-inf'): a bound clamp drops; elsewhere refused (translate_pytorch)
    std::string text = args[0].value.text;
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    const bool negative = !text.empty() && text[0] == '-';
    if (negative || (!text.empty() && text[0] == '+')) text.erase(0, 1);
    if (text == "inf" || text == "infinity") return tensor(num(negative ? -HUGE_VAL : HUGE_VAL));
    throw Reject{"float('" + args[0].value.text + "'): only float('inf') and float('-inf') are read from a string", 0};
  }
  if (path == "torch.finfo" || path == "np.finfo" || path == "numpy.finfo") {
    // A dtype's constants (torch.finfo(torch.bfloat16).eps): exact for a named dtype; the input's
    // own dtype (x.dtype) is the storage type, one of three, and the kernel computes in fp32, so its
    // fp32 constants are taken and the note says so.
    const Value& d = args.at(0).value;
    std::string dtype = d.type == Value::Path ? d.text : "";
    for (const char* prefix : {"torch.", "np.", "numpy."})
      if (dtype.rfind(prefix, 0) == 0) dtype = dtype.substr(std::string(prefix).size());
    static const std::map<std::string, std::string> names = {
        {"float32", "fp32"}, {"float", "fp32"}, {"float16", "fp16"}, {"half", "fp16"}, {"bfloat16", "bf16"},
        {"float64", "fp64"}, {"double", "fp64"}};
    Value info;
    info.type = Value::Path;
    if (auto it = names.find(dtype); it != names.end()) {
      info.text = "<finfo:" + it->second + ">";
    } else if (d.type == Value::Method && d.text == "dtype") {
      info.text = "<finfo:fp32>";
      notes_.push_back("torch.finfo(<input>.dtype) taken for fp32: the kernel computes in fp32 whatever the storage "
                       "type (PyTorch would use the bf16 / fp16 constants for those inputs)");
    } else {
      throw Reject{"torch.finfo(...): the dtype must be torch.float32, torch.float16, torch.bfloat16, torch.float64 or "
                   "an input's .dtype",
                   0};
    }
    return info;
  }
  if (path == "functools.partial" || path == "partial") {
    // functools.partial(F.gelu, approximate="tanh"): a function with keyword arguments bound, called
    // later with the tensor (HF's GELUTanh builds its activation this way in __init__).
    if (args.empty() || !args[0].keyword.empty() || args[0].value.type != Value::Path ||
        torch_function(args[0].value.text).empty())
      throw Reject{"functools.partial(...): the first argument must be a torch / F. function", 0};
    Value bound_fn;
    bound_fn.type = Value::Module;
    bound_fn.text = torch_function(args[0].value.text);
    for (std::size_t i = 1; i < args.size(); ++i) {
      if (args[i].keyword.empty())
        throw Reject{"functools.partial(...): only keyword arguments are bound (a positional one would come "
                     "before the tensor)",
                     0};
      bound_fn.module_args.push_back({args[i].keyword, args[i].value});
    }
    return bound_fn;
  }
  if (path == "float" || path == "torch.tensor" || path == "torch.as_tensor") return args.at(0).value;
  if (path == "len" && args.size() == 1 && args[0].value.type == Value::Path && args[0].value.text == "<shape>")
    return tensor(sym(kRankSymbol));  // len(x.shape)
  if (construct && source_classes.count(path)) return construct(path, args);
  if (source_classes.count(path))
    throw Reject{path + "(...) builds a module where the op runs; the built-in analyser inlines modules built in "
                        "__init__: write self.m = " + path + "(...) there and call self.m(x)",
                 0};
  if (helpers.count(path)) return call_helper(path, args);
  if (path.rfind("self.", 0) == 0 && methods.count(path.substr(5))) return call_helper(path, args);
  std::string fn = torch_function(path);
  if (fn.empty()) throw Reject{"unknown function '" + path + "'", 0};
  return elementwise(fn, args);
}

}  // namespace liger::kernel_dev::torch_detail
