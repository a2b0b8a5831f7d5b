#include "workflows/kernel_dev/expr.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>
#include <unordered_map>

namespace liger::kernel_dev {

// ============================================================================================
// Construction and inspection

namespace {
Expr make(Kind kind, std::vector<Expr> args, std::string name = {}, double value = 0.0) {
  auto node = std::make_shared<Node>();
  node->kind = kind;
  node->args = std::move(args);
  node->name = std::move(name);
  node->value = value;
  return node;
}
}  // namespace

Expr num(double value) { return make(Kind::Number, {}, {}, value); }
Expr sym(const std::string& name) { return make(Kind::Symbol, {}, name); }
Expr add(Expr a, Expr b) { return make(Kind::Add, {std::move(a), std::move(b)}); }
Expr sub(Expr a, Expr b) { return make(Kind::Sub, {std::move(a), std::move(b)}); }
Expr mul(Expr a, Expr b) { return make(Kind::Mul, {std::move(a), std::move(b)}); }
Expr div(Expr a, Expr b) { return make(Kind::Div, {std::move(a), std::move(b)}); }
Expr pow(Expr a, Expr b) { return make(Kind::Pow, {std::move(a), std::move(b)}); }
Expr neg(Expr a) { return make(Kind::Neg, {std::move(a)}); }
Expr call(const std::string& function, std::vector<Expr> args) { return make(Kind::Call, std::move(args), function); }
Expr compare(const std::string& op, Expr a, Expr b) { return make(Kind::Compare, {std::move(a), std::move(b)}, op); }

bool is_number(const Expr& e) { return e->kind == Kind::Number; }
bool is_number(const Expr& e, double value) { return e->kind == Kind::Number && e->value == value; }

bool equal(const Expr& a, const Expr& b) {
  if (a == b) return true;
  if (a->kind != b->kind || a->args.size() != b->args.size()) return false;
  if (a->kind == Kind::Number) return a->value == b->value;
  if (a->name != b->name) return false;
  for (std::size_t i = 0; i < a->args.size(); ++i)
    if (!equal(a->args[i], b->args[i])) return false;
  return true;
}

namespace {
std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

int precedence(const Expr& e) {
  switch (e->kind) {
    case Kind::Compare: return 0;
    case Kind::Add:
    case Kind::Sub: return 1;
    case Kind::Mul:
    case Kind::Div: return 2;
    case Kind::Neg: return 3;
    case Kind::Pow: return 4;
    case Kind::Number: return e->value < 0 || std::signbit(e->value) ? 3 : 5;
    default: return 5;
  }
}

std::string print(const Expr& e);

std::string wrap(const Expr& e, bool parens) { return parens ? "(" + print(e) + ")" : print(e); }

std::string print(const Expr& e) {
  switch (e->kind) {
    case Kind::Number: return format_number(e->value);
    case Kind::Symbol: return e->name;
    case Kind::Call: {
      std::string out = e->name + "(";
      for (std::size_t i = 0; i < e->args.size(); ++i) {
        if (i) out += ", ";
        out += print(e->args[i]);
      }
      return out + ")";
    }
    case Kind::Neg: return "-" + wrap(e->args[0], precedence(e->args[0]) < 3 || e->args[0]->kind == Kind::Number);
    case Kind::Pow:
      return wrap(e->args[0], precedence(e->args[0]) <= 4) + "^" + wrap(e->args[1], precedence(e->args[1]) < 5);
    case Kind::Compare:
      return wrap(e->args[0], precedence(e->args[0]) <= 0) + " " + e->name + " " +
             wrap(e->args[1], precedence(e->args[1]) <= 0);
    default: {
      int p = precedence(e);
      const char* op = e->kind == Kind::Add ? " + " : e->kind == Kind::Sub ? " - " : e->kind == Kind::Mul ? " * " : " / ";
      bool right_strict = e->kind == Kind::Sub || e->kind == Kind::Div;
      int pr = precedence(e->args[1]);
      // A leading minus on the right operand of a binary operator would not re-parse as the
      // same tree for * and / ("a * -b" parses, but keep it readable): parenthesise it.
      bool right_parens = pr < p || (right_strict && pr == p) || pr == 3;
      return wrap(e->args[0], precedence(e->args[0]) < p) + op + wrap(e->args[1], right_parens);
    }
  }
}
}  // namespace

std::string to_string(const Expr& e) { return print(e); }

namespace {
void collect_symbols(const Expr& e, std::set<std::string>& out) {
  if (e->kind == Kind::Symbol) out.insert(e->name);
  for (const auto& a : e->args) collect_symbols(a, out);
}
}  // namespace

std::set<std::string> free_symbols(const Expr& e) {
  std::set<std::string> out;
  collect_symbols(e, out);
  return out;
}

Expr substitute(const Expr& e, const std::map<std::string, Expr>& bindings) {
  if (e->kind == Kind::Symbol) {
    auto it = bindings.find(e->name);
    return it == bindings.end() ? e : it->second;
  }
  if (e->args.empty()) return e;
  std::vector<Expr> args;
  bool changed = false;
  for (const auto& a : e->args) {
    args.push_back(substitute(a, bindings));
    changed = changed || args.back() != a;
  }
  if (!changed) return e;
  return make(e->kind, std::move(args), e->name, e->value);
}

bool contains_function(const Expr& e, const std::string& function) {
  if (e->kind == Kind::Call && e->name == function) return true;
  for (const auto& a : e->args)
    if (contains_function(a, function)) return true;
  return false;
}

std::size_t node_count(const Expr& e) {
  std::size_t n = 1;
  for (const auto& a : e->args) n += node_count(a);
  return n;
}

TreeShape tree_shape(const Expr& root) {
  // Post-order over the DAG with an explicit stack; each distinct node is measured once.
  std::unordered_map<const Node*, TreeShape> done;
  std::vector<std::pair<const Node*, bool>> stack{{root.get(), false}};
  while (!stack.empty()) {
    auto [node, children_done] = stack.back();
    stack.pop_back();
    if (done.count(node)) continue;
    if (!children_done) {
      stack.push_back({node, true});
      for (const auto& a : node->args)
        if (!done.count(a.get())) stack.push_back({a.get(), false});
      continue;
    }
    TreeShape shape{1, 1};
    for (const auto& a : node->args) {
      const TreeShape& c = done.at(a.get());
      shape.depth = std::max(shape.depth, c.depth + 1);
      shape.nodes = std::min<std::uint64_t>(shape.nodes + c.nodes, kTreeNodesCap);
    }
    done[node] = shape;
  }
  return done.at(root.get());
}

std::string tree_limit_problem(const Expr& e) {
  TreeShape shape = tree_shape(e);
  if (shape.depth > kMaxTreeDepth)
    return "the expression nests " + std::to_string(shape.depth) + " operations deep once assignments are substituted (limit " +
           std::to_string(kMaxTreeDepth) + "); write it with fewer nested operations";
  if (shape.nodes > kMaxTreeNodes)
    return "the expression has more than " + std::to_string(kMaxTreeNodes) +
           " operations once assignments are substituted (limit " + std::to_string(kMaxTreeNodes) +
           "); an intermediate variable used many times multiplies its size: write a smaller expression";
  // Understand derives the gradient of every input and parameter, and the backward kernel is
  // generated from it: a few lines can have a small expression whose derivative is huge (the
  // product rule copies a subexpression per use), so the derivative is held to a limit too.
  for (const auto& variable : free_symbols(e)) {
    Expr raw;
    try {
      raw = differentiate(e, variable);
    } catch (const std::invalid_argument&) {
      continue;  // a function without a derivative: reported where gradients are derived
    }
    if (tree_shape(raw).nodes > kMaxDerivativeNodes)
      return "the derivative with respect to " + variable + " has more than " + std::to_string(kMaxDerivativeNodes) +
             " operations once assignments are substituted (limit " + std::to_string(kMaxDerivativeNodes) +
             "); an intermediate variable used many times multiplies its size: write a smaller expression";
  }
  return "";
}

namespace {
// Left-associative run terms[lo..hi) with signs relative to terms[lo].
Expr chain_range(const std::vector<Expr>& terms, const std::vector<bool>& inverted, std::size_t lo, std::size_t hi,
                 bool additive) {
  constexpr std::size_t kLeaf = 16;
  if (hi - lo <= kLeaf) {
    Expr out = terms[lo];
    for (std::size_t i = lo + 1; i < hi; ++i) {
      bool inverse = inverted[i] != inverted[lo];
      out = additive ? (inverse ? sub(out, terms[i]) : add(out, terms[i]))
                     : (inverse ? div(out, terms[i]) : mul(out, terms[i]));
    }
    return out;
  }
  // a0 ± ... ± a(m-1) ± am ± ... = (a0 ± ... ) (+|-) (am ± ... with signs relative to am):
  // the same value whichever way it is grouped.
  std::size_t mid = lo + (hi - lo) / 2;
  Expr left = chain_range(terms, inverted, lo, mid, additive);
  Expr right = chain_range(terms, inverted, mid, hi, additive);
  bool inverse = inverted[mid] != inverted[lo];
  return additive ? (inverse ? sub(left, right) : add(left, right)) : (inverse ? div(left, right) : mul(left, right));
}
}  // namespace

Expr build_chain(const std::vector<Expr>& terms, const std::vector<char>& ops) {
  if (terms.empty()) throw std::invalid_argument("build_chain: no terms");
  bool additive = ops.size() < 2 || ops[1] == '+' || ops[1] == '-';
  std::vector<bool> inverted(terms.size(), false);
  for (std::size_t i = 1; i < terms.size(); ++i) inverted[i] = ops[i] == '-' || ops[i] == '/';
  // Short chains keep the written (left-associative) grouping: their trees print and round-trip
  // exactly as before, and shallow depth is not at stake.
  constexpr std::size_t kBalanceFrom = 32;
  if (terms.size() < kBalanceFrom) {
    Expr out = terms[0];
    for (std::size_t i = 1; i < terms.size(); ++i)
      out = additive ? (inverted[i] ? sub(out, terms[i]) : add(out, terms[i]))
                     : (inverted[i] ? div(out, terms[i]) : mul(out, terms[i]));
    return out;
  }
  return chain_range(terms, inverted, 0, terms.size(), additive);
}

const std::vector<PrimitiveFunction>& primitive_functions() {
  static const std::vector<PrimitiveFunction> table = {
      {"exp", {"x"}, "e^x (fp32 expf)"},
      {"log", {"x"}, "natural logarithm (fp32 logf)"},
      {"log1p", {"x"}, "log(1 + x), accurate near 0"},
      {"expm1", {"x"}, "e^x - 1, accurate near 0"},
      {"sqrt", {"x"}, "square root"},
      {"rsqrt", {"x"}, "1 / sqrt(x) (fp32 rsqrtf)"},
      {"tanh", {"x"}, "hyperbolic tangent (fp32 tanhf)"},
      {"sigmoid", {"x"}, "1 / (1 + e^-x), evaluated by the sign-split stable formula in fp32"},
      {"erf", {"x"}, "error function (fp32 erff)"},
      {"abs", {"x"}, "absolute value; derivative sign(x), 0 at 0 as PyTorch"},
      {"relu", {"x"}, "max(x, 0); derivative step(x), 0 at 0 as PyTorch"},
      {"softplus", {"x"}, "log(1 + e^x) as log1p(e^-|x|) + max(x, 0)"},
      {"step", {"x"}, "Heaviside step: 1 for x > 0, else 0"},
      {"sign", {"x"}, "-1, 0 or 1"},
      {"sin", {"x"}, "sine"},
      {"cos", {"x"}, "cosine"},
      {"atan", {"x"}, "arc tangent (fp32 atanf); asin, acos and atan2 are written with it"},
      {"floor", {"x"}, "largest integer <= x; derivative 0, as PyTorch"},
      {"ceil", {"x"}, "smallest integer >= x; derivative 0, as PyTorch"},
      {"round", {"x"}, "nearest integer, halves to even (torch.round); derivative 0, as PyTorch"},
      {"trunc", {"x"}, "integer part, towards 0; derivative 0, as PyTorch"},
      {"detach", {"x"}, "x itself, with no gradient through it (Tensor.detach: straight-through estimators)"},
      {"max", {"a", "b"}, "element-wise maximum; a tie splits the gradient as torch.maximum"},
      {"min", {"a", "b"}, "element-wise minimum; a tie splits the gradient as torch.minimum"},
      {"clamp", {"x", "min", "max"}, "min(max(x, min), max); gradient 1 on [min, max] as torch.clamp"},
      {"where", {"condition", "a", "b"}, "a where condition holds, else b"},
      {"pow", {"x", "y"}, "x^y"},
      {"square", {"x"}, "x^2"},
  };
  return table;
}

const PrimitiveFunction* find_primitive(const std::string& name) {
  for (const auto& f : primitive_functions())
    if (f.name == name) return &f;
  return nullptr;
}

// ============================================================================================
// Evaluation

namespace {
template <typename T>
T stable_sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  T z = std::exp(x);
  return z / (T(1) + z);
}
template <typename T>
T stable_softplus(T x) {
  return std::log1p(std::exp(-std::fabs(x))) + std::max(x, T(0));
}

template <typename T>
T evaluate(const Expr& e, const Environment& env) {
  switch (e->kind) {
    case Kind::Number: return static_cast<T>(e->value);
    case Kind::Symbol: {
      auto it = env.find(e->name);
      if (it == env.end()) throw std::invalid_argument("no value for symbol '" + e->name + "'");
      return static_cast<T>(it->second);
    }
    case Kind::Add: return evaluate<T>(e->args[0], env) + evaluate<T>(e->args[1], env);
    case Kind::Sub: return evaluate<T>(e->args[0], env) - evaluate<T>(e->args[1], env);
    case Kind::Mul: return evaluate<T>(e->args[0], env) * evaluate<T>(e->args[1], env);
    case Kind::Div: return evaluate<T>(e->args[0], env) / evaluate<T>(e->args[1], env);
    case Kind::Neg: return -evaluate<T>(e->args[0], env);
    case Kind::Pow: {
      T base = evaluate<T>(e->args[0], env);
      if (is_number(e->args[1])) {
        double n = e->args[1]->value;
        if (n == std::floor(n) && std::fabs(n) <= 16) {  // integer powers as products, as the codegen
          T result = T(1);
          for (int k = 0; k < static_cast<int>(std::fabs(n)); ++k) result *= base;
          return n < 0 ? T(1) / result : result;
        }
      }
      return std::pow(base, evaluate<T>(e->args[1], env));
    }
    case Kind::Compare: {
      T a = evaluate<T>(e->args[0], env), b = evaluate<T>(e->args[1], env);
      const std::string& op = e->name;
      bool r = op == "<" ? a < b : op == "<=" ? a <= b : op == ">" ? a > b : op == ">=" ? a >= b : op == "==" ? a == b : a != b;
      return r ? T(1) : T(0);
    }
    case Kind::Call: break;
  }
  const std::string& f = e->name;
  if (f == "where") return evaluate<T>(e->args[0], env) != T(0) ? evaluate<T>(e->args[1], env) : evaluate<T>(e->args[2], env);
  T x = evaluate<T>(e->args[0], env);
  if (f == "exp") return std::exp(x);
  if (f == "log") return std::log(x);
  if (f == "log1p") return std::log1p(x);
  if (f == "expm1") return std::expm1(x);
  if (f == "sqrt") return std::sqrt(x);
  if (f == "rsqrt") return T(1) / std::sqrt(x);
  if (f == "tanh") return std::tanh(x);
  if (f == "sigmoid") return stable_sigmoid(x);
  if (f == "erf") return std::erf(x);
  if (f == "abs") return std::fabs(x);
  if (f == "relu") return x > T(0) ? x : T(0);
  if (f == "softplus") return stable_softplus(x);
  if (f == "step") return x > T(0) ? T(1) : T(0);
  if (f == "sign") return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0);
  if (f == "sin") return std::sin(x);
  if (f == "cos") return std::cos(x);
  if (f == "atan") return std::atan(x);
  if (f == "floor") return std::floor(x);
  if (f == "ceil") return std::ceil(x);
  if (f == "round") return std::nearbyint(x);  // the default rounding mode: halves to even
  if (f == "trunc") return std::trunc(x);
  if (f == "detach") return x;
  if (f == "max") return std::max(x, evaluate<T>(e->args[1], env));
  if (f == "min") return std::min(x, evaluate<T>(e->args[1], env));
  if (f == "clamp") return std::min(std::max(x, evaluate<T>(e->args[1], env)), evaluate<T>(e->args[2], env));
  throw std::invalid_argument("cannot evaluate function '" + f + "'");
}
}  // namespace

double eval_f64(const Expr& e, const Environment& env) { return evaluate<double>(e, env); }
float eval_f32(const Expr& e, const Environment& env) { return evaluate<float>(e, env); }

// ============================================================================================
// Differentiation

namespace {
// Whether a subtree mentions the variable, memoised per node: asking free_symbols() at every
// node made differentiation quadratic in the size of the expression.
class Differentiator {
 public:
  explicit Differentiator(const std::string& variable) : v(variable) {}
  Expr operator()(const Expr& e) { return d(e); }

 private:
  bool depends(const Expr& e) {
    if (e->kind == Kind::Symbol) return e->name == v;
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second;
    bool result = false;
    for (const auto& a : e->args)
      if (depends(a)) {
        result = true;
        break;
      }
    memo_[e.get()] = result;
    return result;
  }
  Expr differentiate(const Expr& e, const std::string&) { return d(e); }
  // Memoised per node: a subexpression shared by assignments is differentiated once, and the
  // result is shared in turn (without it, t = t * t + 1 repeated k times costs 2^k calls).
  Expr d(const Expr& e) {
    auto it = derived_.find(e.get());
    if (it != derived_.end()) return it->second;
    Expr result = d_node(e);
    derived_.emplace(e.get(), result);
    return result;
  }
  Expr d_node(const Expr& e);

  const std::string& v;
  std::unordered_map<const Node*, bool> memo_;
  std::unordered_map<const Node*, Expr> derived_;
};

Expr Differentiator::d_node(const Expr& e) {
  if (!depends(e)) return num(0);
  const auto& a = e->args;
  switch (e->kind) {
    case Kind::Number: return num(0);
    case Kind::Symbol: return num(e->name == v ? 1 : 0);
    case Kind::Add: return add(differentiate(a[0], v), differentiate(a[1], v));
    case Kind::Sub: return sub(differentiate(a[0], v), differentiate(a[1], v));
    case Kind::Neg: return neg(differentiate(a[0], v));
    case Kind::Mul: return add(mul(differentiate(a[0], v), a[1]), mul(a[0], differentiate(a[1], v)));
    case Kind::Div: {
      Expr da = differentiate(a[0], v);
      if (!depends(a[1])) return div(da, a[1]);
      return sub(div(da, a[1]), div(mul(a[0], differentiate(a[1], v)), pow(a[1], num(2))));
    }
    case Kind::Pow: {
      Expr da = differentiate(a[0], v);
      if (!depends(a[1])) return mul(mul(a[1], pow(a[0], sub(a[1], num(1)))), da);
      // a^b (b' log a + b a'/a)
      return mul(e, add(mul(differentiate(a[1], v), call("log", {a[0]})), div(mul(a[1], da), a[0])));
    }
    case Kind::Compare: return num(0);
    case Kind::Call: break;
  }
  const std::string& f = e->name;
  if (f == "where") return call("where", {a[0], differentiate(a[1], v), differentiate(a[2], v)});
  if (f == "step" || f == "sign") return num(0);
  if (f == "max" || f == "min") {
    Expr da = differentiate(a[0], v), db = differentiate(a[1], v);
    const char* wins = f == "max" ? ">" : "<";
    const char* loses = f == "max" ? "<" : ">";
    return call("where", {compare(wins, a[0], a[1]), da,
                          call("where", {compare(loses, a[0], a[1]), db, mul(num(0.5), add(da, db))})});
  }
  if (f == "clamp") {
    Expr dx = differentiate(a[0], v);
    return call("where", {compare("<", a[0], a[1]), differentiate(a[1], v),
                          call("where", {compare(">", a[0], a[2]), differentiate(a[2], v), dx})});
  }
  // Piecewise constant, or cut out of the graph: PyTorch's gradient through them is 0.
  if (f == "floor" || f == "ceil" || f == "round" || f == "trunc" || f == "detach") return num(0);
  Expr u = a[0];
  Expr du = differentiate(u, v);
  Expr outer;
  if (f == "exp") outer = e;
  else if (f == "log") return div(du, u);
  else if (f == "log1p") return div(du, add(num(1), u));
  else if (f == "expm1") outer = call("exp", {u});
  else if (f == "sqrt") return div(mul(num(0.5), du), e);
  else if (f == "rsqrt") outer = mul(num(-0.5), pow(e, num(3)));
  else if (f == "tanh") outer = sub(num(1), pow(e, num(2)));
  else if (f == "sigmoid") outer = mul(e, sub(num(1), e));
  else if (f == "erf") outer = mul(num(2.0 / std::sqrt(M_PI)), call("exp", {neg(pow(u, num(2)))}));
  else if (f == "abs") outer = call("sign", {u});
  else if (f == "relu") outer = call("step", {u});
  else if (f == "softplus") outer = call("sigmoid", {u});
  else if (f == "sin") outer = call("cos", {u});
  else if (f == "cos") outer = neg(call("sin", {u}));
  else if (f == "atan") outer = div(num(1), add(num(1), pow(u, num(2))));
  else throw std::invalid_argument("cannot differentiate function '" + f + "'");
  return mul(outer, du);
}
}  // namespace

Expr differentiate(const Expr& e, const std::string& variable) { return Differentiator(variable)(e); }

// ============================================================================================
// Simplification

namespace {

bool is_int(double v) { return v == std::floor(v) && std::fabs(v) < 1e15; }

bool is_call(const Expr& e, const char* f) { return e->kind == Kind::Call && e->name == f; }

// 1 + u or u + 1 -> u (else nullptr)
Expr one_plus(const Expr& e) {
  if (e->kind != Kind::Add) return nullptr;
  if (is_number(e->args[0], 1)) return e->args[1];
  if (is_number(e->args[1], 1)) return e->args[0];
  return nullptr;
}

// `product` with one factor equal to `factor` removed (through products and negations), or null
// when no factor of the product equals it.
Expr without_factor(const Expr& product, const Expr& factor) {
  if (product->kind == Kind::Neg) {
    Expr inner = without_factor(product->args[0], factor);
    return inner ? neg(inner) : nullptr;
  }
  if (product->kind != Kind::Mul) return nullptr;
  for (int side = 0; side < 2; ++side) {
    const Expr& here = product->args[side];
    const Expr& other = product->args[1 - side];
    if (equal(here, factor)) return other;
    if (Expr rest = without_factor(here, factor)) return side == 0 ? mul(rest, other) : mul(other, rest);
  }
  return nullptr;
}

Expr rule(const Expr& e) {
  const auto& a = e->args;
  switch (e->kind) {
    case Kind::Number:
    case Kind::Symbol: return e;
    case Kind::Add: {
      if (is_number(a[0]) && is_number(a[1])) return num(a[0]->value + a[1]->value);
      if (is_number(a[0], 0)) return a[1];
      if (is_number(a[1], 0)) return a[0];
      if (is_number(a[0]) && !is_number(a[1])) return add(a[1], a[0]);
      if (a[1]->kind == Kind::Neg) return sub(a[0], a[1]->args[0]);
      if (a[0]->kind == Kind::Neg) return sub(a[1], a[0]->args[0]);
      if (is_number(a[1]) && a[1]->value < 0) return sub(a[0], num(-a[1]->value));
      if (equal(a[0], a[1])) return mul(num(2), a[0]);
      // (u + c1) + c2
      if (is_number(a[1]) && a[0]->kind == Kind::Add && is_number(a[0]->args[1]))
        return add(a[0]->args[0], num(a[0]->args[1]->value + a[1]->value));
      return e;
    }
    case Kind::Sub: {
      if (is_number(a[0]) && is_number(a[1])) return num(a[0]->value - a[1]->value);
      if (is_number(a[1], 0)) return a[0];
      if (is_number(a[0], 0)) return neg(a[1]);
      if (equal(a[0], a[1])) return num(0);
      if (a[1]->kind == Kind::Neg) return add(a[0], a[1]->args[0]);
      if (is_number(a[1]) && a[1]->value < 0) return add(a[0], num(-a[1]->value));
      if (is_call(a[0], "exp") && is_number(a[1], 1)) return call("expm1", {a[0]->args[0]});
      return e;
    }
    case Kind::Mul: {
      if (is_number(a[0]) && is_number(a[1])) return num(a[0]->value * a[1]->value);
      if (is_number(a[0], 0) || is_number(a[1], 0)) return num(0);
      if (is_number(a[0], 1)) return a[1];
      if (is_number(a[1], 1)) return a[0];
      if (is_number(a[0], -1)) return neg(a[1]);
      if (is_number(a[1], -1)) return neg(a[0]);
      if (is_number(a[1])) return mul(a[1], a[0]);  // constants to the left
      if (is_number(a[0]) && a[1]->kind == Kind::Mul && is_number(a[1]->args[0]))
        return mul(num(a[0]->value * a[1]->args[0]->value), a[1]->args[1]);
      if (is_number(a[0]) && a[1]->kind == Kind::Neg) return mul(num(-a[0]->value), a[1]->args[0]);
      if (a[0]->kind == Kind::Neg) return neg(mul(a[0]->args[0], a[1]));
      if (a[1]->kind == Kind::Neg) return neg(mul(a[0], a[1]->args[0]));
      if (equal(a[0], a[1])) return pow(a[0], num(2));
      if (a[1]->kind == Kind::Div && is_number(a[1]->args[0], 1)) return div(a[0], a[1]->args[1]);
      if (a[0]->kind == Kind::Div && is_number(a[0]->args[0], 1)) return div(a[1], a[0]->args[1]);
      // x^n * x -> x^(n+1), x * x^n -> x^(n+1)
      if (a[0]->kind == Kind::Pow && is_number(a[0]->args[1]) && equal(a[0]->args[0], a[1]))
        return pow(a[1], num(a[0]->args[1]->value + 1));
      if (a[1]->kind == Kind::Pow && is_number(a[1]->args[1]) && equal(a[1]->args[0], a[0]))
        return pow(a[0], num(a[1]->args[1]->value + 1));
      // (c * u) * v -> c * (u * v): constants float to the front
      if (a[0]->kind == Kind::Mul && is_number(a[0]->args[0]) && !is_number(a[1]))
        return mul(a[0]->args[0], mul(a[0]->args[1], a[1]));
      if (a[1]->kind == Kind::Mul && is_number(a[1]->args[0]) && !is_number(a[0]))
        return mul(a[1]->args[0], mul(a[0], a[1]->args[1]));
      return e;
    }
    case Kind::Div: {
      if (is_number(a[0]) && is_number(a[1]) && a[1]->value != 0) return num(a[0]->value / a[1]->value);
      if (is_number(a[0], 0)) return num(0);
      if (is_number(a[1], 1)) return a[0];
      if (is_number(a[1], -1)) return neg(a[0]);
      if (equal(a[0], a[1])) return num(1);
      // (c * u * w) / w -> c * u, by the same convention as w / w -> 1 (a parameter such as a cap
      // or a scale divides out of its own chain rule: cap * tanh'(x / cap) / cap).
      if (!is_number(a[1]))
        if (Expr rest = without_factor(a[0], a[1])) return rest;
      if (a[0]->kind == Kind::Neg) return neg(div(a[0]->args[0], a[1]));
      // Safe forms: 1 / (1 + exp(-u)) -> sigmoid(u); exp(u) / (1 + exp(u)) -> sigmoid(u)
      if (Expr inner = one_plus(a[1])) {
        if (is_number(a[0], 1) && is_call(inner, "exp")) {
          const Expr& z = inner->args[0];
          return call("sigmoid", {z->kind == Kind::Neg ? z->args[0] : neg(z)});
        }
        if (is_call(a[0], "exp") && is_call(inner, "exp") && equal(a[0]->args[0], inner->args[0]))
          return call("sigmoid", {a[0]->args[0]});
      }
      return e;
    }
    case Kind::Pow: {
      if (is_number(a[0]) && is_number(a[1])) return num(std::pow(a[0]->value, a[1]->value));
      if (is_number(a[1], 0)) return num(1);
      if (is_number(a[1], 1)) return a[0];
      if (is_number(a[0], 1)) return num(1);
      if (is_number(a[0], 0) && is_number(a[1]) && a[1]->value > 0) return num(0);
      if (a[0]->kind == Kind::Pow && is_number(a[0]->args[1]) && is_number(a[1]) && is_int(a[0]->args[1]->value) &&
          is_int(a[1]->value))
        return pow(a[0]->args[0], num(a[0]->args[1]->value * a[1]->value));
      if (is_number(a[1], 0.5)) return call("sqrt", {a[0]});
      if (is_number(a[1], -0.5)) return call("rsqrt", {a[0]});
      // (-u)^n for even integer n -> u^n
      if (a[0]->kind == Kind::Neg && is_number(a[1]) && is_int(a[1]->value) &&
          static_cast<long long>(a[1]->value) % 2 == 0)
        return pow(a[0]->args[0], a[1]);
      return e;
    }
    case Kind::Neg: {
      if (is_number(a[0])) return num(-a[0]->value);
      if (a[0]->kind == Kind::Neg) return a[0]->args[0];
      if (a[0]->kind == Kind::Sub) return sub(a[0]->args[1], a[0]->args[0]);
      if (a[0]->kind == Kind::Mul && is_number(a[0]->args[0])) return mul(num(-a[0]->args[0]->value), a[0]->args[1]);
      return e;
    }
    case Kind::Compare: {
      if (is_number(a[0]) && is_number(a[1])) return num(eval_f64(e, {}));
      return e;
    }
    case Kind::Call: {
      const std::string& f = e->name;
      if (f == "where") {
        if (is_number(a[0])) return a[0]->value != 0 ? a[1] : a[2];
        if (equal(a[1], a[2])) return a[1];
        return e;
      }
      bool all_numbers = std::all_of(a.begin(), a.end(), [](const Expr& x) { return is_number(x); });
      if (all_numbers) {
        double value = eval_f64(e, {});
        if (std::isfinite(value)) return num(value);
      }
      // Safe forms.
      if (f == "log") {
        if (Expr inner = one_plus(a[0])) {
          if (is_call(inner, "exp")) return call("softplus", {inner->args[0]});
          return call("log1p", {inner});
        }
        if (is_call(a[0], "exp")) return a[0]->args[0];
      }
      if (f == "log1p" && is_call(a[0], "exp")) return call("softplus", {a[0]->args[0]});
      if (f == "exp" && is_call(a[0], "log")) return a[0]->args[0];
      if (f == "max" && is_number(a[1], 0)) return call("relu", {a[0]});
      if (f == "max" && is_number(a[0], 0)) return call("relu", {a[1]});
      if (f == "sqrt" && a[0]->kind == Kind::Pow && is_number(a[0]->args[1], 2)) return call("abs", {a[0]->args[0]});
      if (f == "abs" && a[0]->kind == Kind::Neg) return call("abs", {a[0]->args[0]});
      return e;
    }
  }
  return e;
}

// One bottom-up pass, memoised per node so that a subexpression shared by several uses is
// rewritten once and stays shared: the pass is linear in the distinct nodes, not in the size of
// the expanded tree.
Expr simplify_once(const Expr& e, std::unordered_map<const Node*, Expr>& done) {
  if (e->args.empty()) return e;
  auto it = done.find(e.get());
  if (it != done.end()) return it->second;
  std::vector<Expr> args;
  bool changed = false;
  for (const auto& a : e->args) {
    args.push_back(simplify_once(a, done));
    changed = changed || args.back() != a;
  }
  Expr rebuilt = changed ? make(e->kind, std::move(args), e->name, e->value) : e;
  Expr result = rule(rebuilt);
  done.emplace(e.get(), result);
  return result;
}

}  // namespace

Expr simplify(const Expr& e) {
  Expr current = e;
  for (int pass = 0; pass < 32; ++pass) {
    std::unordered_map<const Node*, Expr> done;
    Expr next = simplify_once(current, done);
    if (equal(next, current)) return next;
    // Rewrites reassociate (constants float to the front): a pass may deepen the tree. The
    // walkers' stack stays bounded because a pass that would go past the limit is not taken.
    if (tree_shape(next).depth > 2 * kMaxTreeDepth) return current;
    current = next;
  }
  return current;
}

Expr derivative(const Expr& e, const std::string& variable) { return simplify(differentiate(e, variable)); }

}  // namespace liger::kernel_dev

namespace liger::kernel_dev {

const std::vector<std::string>& identity_function_names() {
  static const std::vector<std::string> names = {
      "sinh",   "cosh",      "tan",   "asinh",  "acosh",      "atanh", "asin", "acos", "exp2", "log2",
      "log10",  "reciprocal", "logsigmoid", "logit", "sinc", "erfc", "ndtr", "entr",
      "logaddexp(a, b)", "logaddexp2(a, b)", "hypot(a, b)", "atan2(y, x)", "xlogy(a, b)", "xlog1py(a, b)",
      "copysign(a, b)", "lerp(a, b, w)"};
  return names;
}

namespace {

// Functions of two or three tensors (PyTorch's binary element-wise functions), written with the
// primitives. Each form is the one that stays finite where the naive one overflows or cancels.
std::optional<Expr> identity_of_several(const std::string& name, const std::vector<Expr>& args) {
  if (args.size() == 2) {
    const Expr& a = args[0];
    const Expr& b = args[1];
    // log(e^a + e^b) = max(a, b) + log1p(e^-|a - b|): no exp of a large argument. At a tie the
    // max's split gradient (1/2 each) plus the log1p term's (0: abs'(0) = 0) is sigmoid(0) = 1/2,
    // as torch.logaddexp's.
    if (name == "logaddexp")
      return add(call("max", {a, b}), call("log1p", {call("exp", {neg(call("abs", {sub(a, b)}))})}));
    if (name == "logaddexp2")  // log2(2^a + 2^b) = max + log2(1 + 2^-|a - b|)
      return add(call("max", {a, b}),
                 div(call("log1p", {call("exp", {mul(num(-M_LN2), call("abs", {sub(a, b)}))})}), num(M_LN2)));
    // sqrt(a^2 + b^2); on a = 0 it is |b|, whose derivatives (0, sign b) are PyTorch's there and
    // stay finite at the origin, where a / r and b / r are 0/0.
    if (name == "hypot")
      return call("where", {compare("==", a, num(0)), call("abs", {b}), call("sqrt", {add(pow(a, num(2)), pow(b, num(2)))})});
    // xlogy(a, b) = a log b, 0 where a = 0 (also when b = 0); xlog1py likewise with log1p. At
    // a = 0 the a-gradient stays PyTorch's log b (0 only where b <= 0, log's domain edge): the
    // a = 0 branch multiplies a by the log of b moved into the domain, not by nothing.
    if (name == "xlogy")
      return call("where", {compare("==", a, num(0)),
                            mul(a, call("log", {call("where", {compare(">", b, num(0)), b, num(1)})})),
                            mul(a, call("log", {b}))});
    if (name == "xlog1py")
      return call("where", {compare("==", a, num(0)),
                            mul(a, call("log1p", {call("where", {compare(">", b, num(-1)), b, num(0)})})),
                            mul(a, call("log1p", {b}))});
    if (name == "copysign")  // |a| with b's sign (b = -0 counts as positive here)
      return call("where", {compare("<", b, num(0)), neg(call("abs", {a})), call("abs", {a})});
    // atan2(y, x): the quadrant from the signs. The derivatives of atan(y / x) are PyTorch's
    // (x / r^2, -y / r^2) wherever x != 0; on x = 0 (an exact zero: randn gives a few in 10^7)
    // sign(y) pi/2 - atan(x / y) has the same value and PyTorch's derivatives (-1 / y, 0); at the
    // origin 0, as torch.atan2(0, 0), with finite (zero) gradients where PyTorch's are 0/0.
    if (name == "atan2") {
      const Expr& y = a;
      const Expr& x = b;
      const Expr base = call("atan", {div(y, x)});
      return call("where",
                  {compare(">", x, num(0)), base,
                   call("where", {compare("<", x, num(0)),
                                  call("where", {compare(">=", y, num(0)), add(base, num(M_PI)), sub(base, num(M_PI))}),
                                  call("where", {compare("==", y, num(0)), num(0),
                                                 sub(mul(call("sign", {y}), num(M_PI / 2)), call("atan", {div(x, y)}))})})});
    }
  }
  if (args.size() == 3 && name == "lerp")  // a + w (b - a)
    return add(args[0], mul(args[2], sub(args[1], args[0])));
  return std::nullopt;
}

}  // namespace

std::optional<Expr> identity_function(const std::string& name, const std::vector<Expr>& args) {
  if (args.size() != 1) return identity_of_several(name, args);
  const Expr& x = args[0];
  if (name == "sinh") return div(sub(call("exp", {x}), call("exp", {neg(x)})), num(2));
  if (name == "cosh") return div(add(call("exp", {x}), call("exp", {neg(x)})), num(2));
  if (name == "tan") return div(call("sin", {x}), call("cos", {x}));
  // Odd, evaluated on the side without cancellation: x + sqrt(x^2 + 1) reaches 0 in fp32 for large
  // negative x. A where (not sign(x) * ...) keeps the derivative 1 at x = 0.
  if (name == "asinh") {
    const Expr root = call("sqrt", {add(pow(x, num(2)), num(1))});
    return call("where", {compare(">=", x, num(0)), call("log", {add(x, root)}), neg(call("log", {sub(root, x)}))});
  }
  if (name == "acosh") return call("log", {add(x, call("sqrt", {sub(pow(x, num(2)), num(1))}))});
  if (name == "atanh") return mul(num(0.5), sub(call("log1p", {x}), call("log1p", {neg(x)})));
  if (name == "exp2") return call("exp", {mul(num(M_LN2), x)});
  if (name == "log2") return div(call("log", {x}), num(M_LN2));
  if (name == "log10") return div(call("log", {x}), num(M_LN10));
  if (name == "reciprocal") return div(num(1), x);
  // asin(x) = atan(x / sqrt(1 - x^2)); its derivative simplifies to 1 / sqrt(1 - x^2), asin's.
  if (name == "asin") return call("atan", {div(x, call("sqrt", {sub(num(1), pow(x, num(2)))}))});
  if (name == "acos")
    return sub(num(M_PI / 2), call("atan", {div(x, call("sqrt", {sub(num(1), pow(x, num(2)))}))}));
  if (name == "erfc") return sub(num(1), call("erf", {x}));
  // The standard normal CDF (torch.special.ndtr).
  if (name == "ndtr") return mul(num(0.5), add(num(1), call("erf", {mul(x, num(M_SQRT1_2))})));
  // torch.special.entr: -x log x, 0 at x = 0 (negative x is -inf there; the op's domain is x >= 0).
  if (name == "entr") return call("where", {compare("==", x, num(0)), num(0), neg(mul(x, call("log", {x})))});
  if (name == "logsigmoid") return neg(call("softplus", {neg(x)}));
  if (name == "logit") return sub(call("log", {x}), call("log1p", {neg(x)}));
  // torch.sinc, the normalised one: sin(pi x) / (pi x). Near 0 its series (z = (pi x)^2; the next
  // term, z^4 / 9!, is below 1e-12 there): the quotient is 0/0 at 0, and its derivative
  // cos(pi x) / x - sin(pi x) / (pi x^2) cancels in fp32 (errors of 1e-3 measured on an H200
  // for |x| ~ 1e-3, where the derivative is ~3e-3).
  if (name == "sinc") {
    const Expr px = mul(num(M_PI), x);
    const Expr z = pow(px, num(2));
    const Expr series = add(sub(num(1), div(z, num(6))), sub(div(pow(z, num(2)), num(120)), div(pow(z, num(3)), num(5040))));
    return call("where", {compare("<", call("abs", {x}), num(0.05)), series, div(call("sin", {px}), px)});
  }
  return std::nullopt;
}

void sum_terms(const Expr& e, bool negative, std::vector<std::pair<Expr, bool>>& out) {
  if (e->kind == Kind::Add || e->kind == Kind::Sub) {
    sum_terms(e->args[0], negative, out);
    sum_terms(e->args[1], e->kind == Kind::Sub ? !negative : negative, out);
  } else if (e->kind == Kind::Neg) {
    sum_terms(e->args[0], !negative, out);
  } else {
    out.push_back({e, negative});
  }
}

Expr sum_of(const std::vector<std::pair<Expr, bool>>& terms) {
  Expr total;
  for (const auto& [term, negative] : terms)
    total = !total ? (negative ? neg(term) : term) : (negative ? sub(total, term) : add(total, term));
  return simplify(total);
}

}  // namespace liger::kernel_dev
