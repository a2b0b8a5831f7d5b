#include "workflows/kernel_dev/codegen.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace liger::kernel_dev {

std::string emit_literal(double value, Dialect dialect) {
  char buffer[64];
  if (std::isinf(value)) {
    std::string inf = dialect == Dialect::CudaF32 ? "INFINITY" : "HUGE_VAL";
    return value > 0 ? inf : "(-" + inf + ")";
  }
  std::snprintf(buffer, sizeof(buffer), dialect == Dialect::CudaF32 ? "%.9g" : "%.17g", std::fabs(value));
  std::string text = buffer;
  // Shortest text that round-trips in the dialect's precision.
  for (int digits = 1; digits <= (dialect == Dialect::CudaF32 ? 9 : 17); ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, std::fabs(value));
    bool same = dialect == Dialect::CudaF32 ? static_cast<float>(std::strtod(buffer, nullptr)) == static_cast<float>(std::fabs(value))
                                            : std::strtod(buffer, nullptr) == std::fabs(value);
    if (same) {
      text = buffer;
      break;
    }
  }
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  if (dialect == Dialect::CudaF32) text += "f";
  return value < 0 ? "(-" + text + ")" : text;
}

namespace {

class Emitter {
 public:
  Emitter(Dialect dialect, std::string indent, std::set<std::string> invariants)
      : d_(dialect), indent_(std::move(indent)), invariants_(std::move(invariants)) {}

  void count(const Expr& e) {
    if (e->args.empty()) return;
    ++uses_[to_string(e)];
    for (const auto& a : e->args) count(a);
  }

  std::string emit(const Expr& e) {
    if (e->kind == Kind::Number) return emit_literal(e->value, d_);
    if (e->kind == Kind::Symbol) return e->name;
    std::string key = to_string(e);
    auto known = temps_.find(key);
    if (known != temps_.end()) return known->second;
    // A subexpression of parameters and constants alone (softplus(alpha), 1 - sigmoid(g)) gets its
    // own statement ahead of every element-dependent branch: the same value for every element, so
    // the compiler evaluates it once per thread instead of inside each element's conditional code
    // (XIELU's two softplus and two sigmoid of learnable scalars were recomputed per element).
    if (!inside_invariant_ && invariant(e)) {
      inside_invariant_ = true;
      std::string code = build(e);
      inside_invariant_ = false;
      return bind(key, code);
    }
    std::string code = build(e);
    if (uses_[key] > 1) return bind(key, code);
    return code;
  }

  std::string statements;
  int temporaries = 0;

 private:
  const char* type() const { return d_ == Dialect::CudaF32 ? "float" : "double"; }
  std::string f(const char* cuda, const char* cpp) const { return d_ == Dialect::CudaF32 ? cuda : cpp; }
  std::string zero() const { return d_ == Dialect::CudaF32 ? "0.0f" : "0.0"; }
  std::string one() const { return d_ == Dialect::CudaF32 ? "1.0f" : "1.0"; }

  std::string bind(const std::string& key, const std::string& code) {
    std::string name = "t" + std::to_string(temporaries++);
    statements += indent_ + "const " + type() + " " + name + " = " + code + ";\n";
    temps_[key] = name;
    return name;
  }
  // A value that is used several times inside one emitted form (x in x*x): named unless a leaf.
  std::string named(const Expr& e) {
    std::string code = emit(e);
    if (e->args.empty()) return code;
    std::string key = to_string(e);
    if (temps_.count(key)) return temps_[key];
    return bind(key, code);
  }
  std::string condition(const Expr& c) {
    if (c->kind == Kind::Compare) return "(" + emit(c->args[0]) + " " + c->name + " " + emit(c->args[1]) + ")";
    return "(" + emit(c) + " != " + zero() + ")";
  }

  std::string build(const Expr& e) {
    const auto& a = e->args;
    switch (e->kind) {
      case Kind::Add: return "(" + emit(a[0]) + " + " + emit(a[1]) + ")";
      case Kind::Sub: return "(" + emit(a[0]) + " - " + emit(a[1]) + ")";
      case Kind::Mul: return "(" + emit(a[0]) + " * " + emit(a[1]) + ")";
      case Kind::Div:
        if (d_ == Dialect::CudaF32) {
          // A constant divisor becomes a multiply by its reciprocal (one rounding apart); any other
          // division goes through the kernel's math policy (IEEE for fp32 storage).
          if (is_number(a[1]) && a[1]->value != 0.0 && std::isfinite(1.0 / a[1]->value))
            return "(" + emit(a[0]) + " * " + emit_literal(1.0 / a[1]->value, d_) + ")";
          return "M::div(" + emit(a[0]) + ", " + emit(a[1]) + ")";
        }
        return "(" + emit(a[0]) + " / " + emit(a[1]) + ")";
      case Kind::Neg: return "(-" + emit(a[0]) + ")";
      case Kind::Compare: return "(" + condition(e) + " ? " + one() + " : " + zero() + ")";
      case Kind::Pow: {
        if (is_number(a[1])) {
          double n = a[1]->value;
          if (n == std::floor(n) && std::fabs(n) >= 1 && std::fabs(n) <= 8) {
            std::string base = named(a[0]);
            std::string product = base;
            for (int k = 1; k < static_cast<int>(std::fabs(n)); ++k) product += " * " + base;
            if (n > 0) return "(" + product + ")";
            return d_ == Dialect::CudaF32 ? "M::div(1.0f, " + product + ")" : "(" + one() + " / (" + product + "))";
          }
        }
        return f("powf(", "std::pow(") + emit(a[0]) + ", " + emit(a[1]) + ")";
      }
      case Kind::Call: break;
      default: return "?";
    }
    const std::string& fn = e->name;
    if (fn == "where") return "(" + condition(a[0]) + " ? " + emit(a[1]) + " : " + emit(a[2]) + ")";
    if (fn == "clamp")
      return f("fminf(fmaxf(", "std::fmin(std::fmax(") + emit(a[0]) + ", " + emit(a[1]) + "), " + emit(a[2]) + ")";
    if (fn == "max") return f("fmaxf(", "std::fmax(") + emit(a[0]) + ", " + emit(a[1]) + ")";
    if (fn == "min") return f("fminf(", "std::fmin(") + emit(a[0]) + ", " + emit(a[1]) + ")";
    std::string x = emit(a[0]);
    if (fn == "relu") {
      std::string v = named(a[0]);
      return "(" + v + " > " + zero() + " ? " + v + " : " + zero() + ")";
    }
    if (fn == "step") return "(" + x + " > " + zero() + " ? " + one() + " : " + zero() + ")";
    if (fn == "rsqrt") return d_ == Dialect::CudaF32 ? "rsqrtf(" + x + ")" : "(1.0 / std::sqrt(" + x + "))";
    if (fn == "detach") return x;  // the value itself; the derivative already dropped it
    static const std::map<std::string, std::pair<const char*, const char*>> calls = {
        // M:: is the kernel's math policy (templates/kernel_dev/kernel.cu.mustache): accurate libm
        // forms for fp32 storage, SFU approximations far below the rounding of 16-bit storage.
        {"exp", {"M::exp", "std::exp"}},       {"log", {"M::log", "std::log"}},     {"log1p", {"M::log1p", "std::log1p"}},
        {"expm1", {"M::expm1", "std::expm1"}}, {"sqrt", {"sqrtf", "std::sqrt"}},    {"tanh", {"M::tanh", "std::tanh"}},
        {"erf", {"M::erf", "std::erf"}},       {"abs", {"fabsf", "std::fabs"}},     {"sin", {"sinf", "std::sin"}},
        {"cos", {"cosf", "std::cos"}},         {"atan", {"atanf", "std::atan"}},
        {"floor", {"floorf", "std::floor"}},   {"ceil", {"ceilf", "std::ceil"}},    {"trunc", {"truncf", "std::trunc"}},
        // rintf rounds halves to even in the default mode, as torch.round (roundf would not).
        {"round", {"rintf", "std::nearbyint"}},    {"sigmoid", {"M::sigmoid", "sigmoid_f64"}},
        {"softplus", {"M::softplus", "softplus_f64"}}, {"sign", {"sign_f32", "sign_f64"}}};
    auto it = calls.find(fn);
    if (it == calls.end()) return "/* unsupported " + fn + " */";
    return std::string(d_ == Dialect::CudaF32 ? it->second.first : it->second.second) + "(" + x + ")";
  }

  bool invariant(const Expr& e) const {
    if (invariants_.empty() || e->args.empty()) return false;
    for (const auto& symbol : free_symbols(e))
      if (!invariants_.count(symbol)) return false;
    return true;
  }

  Dialect d_;
  std::string indent_;
  std::set<std::string> invariants_;
  bool inside_invariant_ = false;
  std::map<std::string, int> uses_;
  std::map<std::string, std::string> temps_;
};

}  // namespace

EmittedCode emit_statements(const std::vector<std::pair<std::string, Expr>>& outputs, Dialect dialect,
                            const std::string& indent, const std::set<std::string>& invariants) {
  Emitter emitter(dialect, indent, invariants);
  for (const auto& [name, e] : outputs) emitter.count(e);
  std::string assignments;
  for (const auto& [name, e] : outputs) {
    std::string code = emitter.emit(e);
    assignments += indent + name + " = " + code + ";\n";
  }
  return {emitter.statements + assignments, emitter.temporaries};
}

namespace {

bool is_call(const Expr& e, const char* function, std::size_t arity = 1) {
  return e->kind == Kind::Call && e->name == function && e->args.size() == arity;
}
Expr where_expr(Expr condition, Expr a, Expr b) { return call("where", {std::move(condition), std::move(a), std::move(b)}); }

// Above these arguments the rewritten forms would evaluate exp(u) = inf (inf/inf = NaN), while
// the function itself already equals its limit in fp32: tanh(softplus(15)) = 1 - 2e-13 and
// sigmoid(20) = 1 - 2e-9 both round to 1.0f (fp32's spacing below 1 is 6e-8).
constexpr double kTanhSoftplusSaturates = 15.0;
constexpr double kSigmoidSaturates = 20.0;

// tanh(softplus(u)) = ((1+e)^2 - 1) / ((1+e)^2 + 1) = n / (n + 2) with e = exp(u), n = e (e + 2):
// one exp and one division instead of exp, log1p and tanh. No cancellation anywhere (n >= 0);
// for u -> -inf, n/(n+2) -> e like the function.
Expr tanh_softplus(const Expr& e, const RewriteContext&) {
  if (!is_call(e, "tanh") || !is_call(e->args[0], "softplus")) return nullptr;
  const Expr& u = e->args[0]->args[0];
  Expr ex = call("exp", {u});
  Expr n = mul(ex, add(ex, num(2)));
  return where_expr(compare(">", u, num(kTanhSoftplusSaturates)), num(1), div(n, add(n, num(2))));
}

// a / sqrt(v) = a * rsqrt(v): one SFU reciprocal square root instead of an IEEE square root and
// an IEEE division (2 ulp against 1 ulp). Equal at the edges: v = 0 gives a * inf, v = inf gives
// a * 0, v < 0 NaN, as the quotient does.
Expr divide_by_sqrt(const Expr& e, const RewriteContext&) {
  if (e->kind != Kind::Div || !is_call(e->args[1], "sqrt")) return nullptr;
  return mul(e->args[0], call("rsqrt", {e->args[1]->args[0]}));
}

// u^(k + 1/2) = u^k * sqrt(u) for k = 1..8: a product and a square root instead of powf
// (exp2 of a log2 with extended-precision fix-ups, ~40 instructions).
Expr half_integer_power(const Expr& e, const RewriteContext&) {
  if (e->kind != Kind::Pow || !is_number(e->args[1])) return nullptr;
  const double p = e->args[1]->value;
  const double k = p - 0.5;
  if (k != std::floor(k) || k < 1 || k > 8) return nullptr;
  return mul(pow(e->args[0], num(k)), call("sqrt", {e->args[0]}));
}

// sigmoid(u) = e / (1 + e) with e = exp(u), when the statements compute exp(u) anyway: the
// exp is shared and only the division remains (the stable form evaluates its own exp(-|u|)).
Expr sigmoid_shared_exp(const Expr& e, const RewriteContext& context) {
  if (!is_call(e, "sigmoid") || !context.exp_arguments.count(to_string(e->args[0]))) return nullptr;
  const Expr& u = e->args[0];
  Expr ex = call("exp", {u});
  return where_expr(compare(">", u, num(kSigmoidSaturates)), num(1), div(ex, add(num(1), ex)));
}

class Rewriter {
 public:
  Rewriter(int pass, RewriteContext context, std::vector<std::string>* applied)
      : pass_(pass), context_(std::move(context)), applied_(applied) {}

  Expr run(const Expr& e) {
    if (e->args.empty()) return e;
    auto known = memo_.find(e.get());
    if (known != memo_.end()) return known->second;
    std::vector<Expr> args;
    bool changed = false;
    for (const auto& a : e->args) {
      args.push_back(run(a));
      changed = changed || args.back() != a;
    }
    Expr node = e;
    if (changed) {
      auto copy = std::make_shared<Node>(*e);
      copy->args = std::move(args);
      node = copy;
    }
    // The first rule of this pass whose pattern and condition hold; its replacement is final
    // (the replacements contain no pattern of their own pass).
    for (const auto& rule : rewrite_rules()) {
      if (rule.pass != pass_) continue;
      if (Expr replacement = rule.apply(node, context_)) {
        if (applied_ && std::find(applied_->begin(), applied_->end(), rule.name) == applied_->end())
          applied_->push_back(rule.name);
        node = replacement;
        break;
      }
    }
    memo_[e.get()] = node;
    return node;
  }

 private:
  int pass_;
  RewriteContext context_;
  std::vector<std::string>* applied_;
  std::map<const Node*, Expr> memo_;
};

void collect_exp_arguments(const Expr& e, std::set<std::string>& out, std::set<const Node*>& seen) {
  if (e->args.empty() || !seen.insert(e.get()).second) return;
  if (is_call(e, "exp")) out.insert(to_string(e->args[0]));
  for (const auto& a : e->args) collect_exp_arguments(a, out, seen);
}

}  // namespace

const std::vector<RewriteRule>& rewrite_rules() {
  static const std::vector<RewriteRule> rules = {
      {"tanh_softplus", "tanh(softplus(u))", "where(u > 15, 1, n / (n + 2)), n = exp(u) * (exp(u) + 2)",
       "every u (the guard keeps exp(u) from overflowing; above it the value is 1.0f)", 0, tanh_softplus},
      {"divide_by_sqrt", "a / sqrt(v)", "a * rsqrt(v)",
       "every a and v (v = 0: a * inf; v = inf: a * 0; v < 0: NaN, as the quotient)", 0, divide_by_sqrt},
      {"half_integer_power", "u^(k + 0.5), k = 1..8", "u^k * sqrt(u)",
       "every u but -inf (powf(-inf, k + 0.5) = +inf, the product NaN); u < 0 is NaN in both", 0, half_integer_power},
      {"sigmoid_shared_exp", "sigmoid(u)", "where(u > 20, 1, exp(u) / (1 + exp(u)))",
       "when the same statements already compute exp(u) (e.g. after tanh_softplus), so the exp is shared", 1,
       sigmoid_shared_exp},
  };
  return rules;
}

std::vector<std::pair<std::string, Expr>> rewrite_for_device(const std::vector<std::pair<std::string, Expr>>& outputs,
                                                             std::vector<std::string>* applied) {
  // Pass 0: context-free rules. Pass 1: rules that reuse what pass 0 left in the statements.
  std::vector<std::pair<std::string, Expr>> current = outputs;
  Rewriter first(0, {}, applied);
  for (auto& [name, e] : current) e = first.run(e);
  RewriteContext context;
  std::set<const Node*> seen;
  for (const auto& [name, e] : current) collect_exp_arguments(e, context.exp_arguments, seen);
  Rewriter second(1, context, applied);
  for (auto& [name, e] : current) e = second.run(e);
  return current;
}

Tier1Code generate_tier1(const Program& program, const CodegenOptions& options) {
  Tier1Code code;
  Expr forward = simplify(program.expression);
  code.forward.push_back({program.output, forward});
  std::string upstream = "d" + program.output;
  for (const auto& input : program.inputs)
    code.backward.push_back({"d" + input, simplify(mul(sym(upstream), derivative(forward, input)))});
  for (const auto& p : program.params)
    if (p.learnable) code.backward.push_back({"d" + p.name, simplify(mul(sym(upstream), derivative(forward, p.name)))});
  code.forward_device = options.rewrites ? rewrite_for_device(code.forward, &code.rewrites_applied) : code.forward;
  code.backward_device = options.rewrites ? rewrite_for_device(code.backward, &code.rewrites_applied) : code.backward;
  // Scalar parameters (learnable or the module's) are the same for every element.
  std::set<std::string> invariants;
  for (const auto& p : program.params)
    if (p.shape == ParamShape::Scalar) invariants.insert(p.name);
  code.forward_cuda = emit_statements(code.forward_device, Dialect::CudaF32, "  ", invariants);
  code.forward_reference = emit_statements(code.forward, Dialect::CppF64);
  code.backward_cuda = emit_statements(code.backward_device, Dialect::CudaF32, "  ", invariants);
  code.backward_reference = emit_statements(code.backward, Dialect::CppF64);
  return code;
}

int Tier1Traffic::forward_tensors() const {
  return static_cast<int>(std::count(forward_reads.begin(), forward_reads.end(), true)) + 1;
}
int Tier1Traffic::backward_tensors() const {
  return static_cast<int>(std::count(backward_reads.begin(), backward_reads.end(), true)) + (backward_reads_upstream ? 1 : 0) +
         static_cast<int>(backward_reads.size());
}

namespace {

// Each identifier of C statements, with whether it is called (`f(`) or names a scope (`M::`);
// a member after `::` (M::exp) is not an identifier of the statements, nor is a literal's suffix
// (1.5e-3f).
template <typename Visit>
void for_each_identifier(const std::string& code, Visit visit) {
  std::size_t i = 0;
  while (i < code.size()) {
    const unsigned char c = static_cast<unsigned char>(code[i]);
    if (std::isalpha(c) || c == '_') {
      std::size_t j = i + 1;
      while (j < code.size() && (std::isalnum(static_cast<unsigned char>(code[j])) || code[j] == '_')) ++j;
      if (!(i >= 2 && code.compare(i - 2, 2, "::") == 0)) {
        const std::size_t next = code.find_first_not_of(' ', j);
        const bool call = next != std::string::npos && code[next] == '(';
        const bool scope = code.compare(j, 2, "::") == 0;
        visit(code.substr(i, j - i), call, scope);
      }
      i = j;
    } else if (std::isdigit(c)) {
      while (i < code.size() && (std::isalnum(static_cast<unsigned char>(code[i])) || code[i] == '.')) ++i;
    } else {
      ++i;
    }
  }
}

}  // namespace

std::set<std::string> identifiers(const std::string& code) {
  std::set<std::string> out;
  for_each_identifier(code, [&](const std::string& id, bool, bool) { out.insert(id); });
  return out;
}

SplitStatements split_per_thread_statements(const std::string& cuda, const std::set<std::string>& invariant_symbols) {
  SplitStatements split;
  std::set<std::string> known = invariant_symbols;
  // Every name the expression reads is a per-thread value, a function it calls or the math policy.
  auto reads_only_known = [&](const std::string& expression) {
    bool only_known = true;
    for_each_identifier(expression, [&](const std::string& id, bool call, bool scope) {
      if (!call && !scope && !known.count(id)) only_known = false;
    });
    return only_known;
  };
  int depth = 0;
  std::stringstream lines(cuda);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t begin = line.find_first_not_of(" \t");
    const std::string text = begin == std::string::npos ? "" : line.substr(begin);
    static const std::string prefix = "const float ";
    if (depth == 0 && text.compare(0, prefix.size(), prefix) == 0 && text.back() == ';' &&
        text.find_first_of("{}") == std::string::npos) {
      const std::size_t name_end =
          text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", prefix.size());
      const std::string name = text.substr(prefix.size(), name_end - prefix.size());
      const std::size_t equals = name_end == std::string::npos ? name_end : text.find_first_not_of(' ', name_end);
      if (!name.empty() && equals != std::string::npos && text[equals] == '=' && text.compare(equals, 2, "==") != 0 &&
          reads_only_known(text.substr(equals + 1, text.size() - equals - 2))) {
        split.per_thread += line + "\n";
        split.names.push_back(name);
        known.insert(name);
        continue;
      }
    }
    for (char c : text) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    split.per_element += line + "\n";
  }
  return split;
}

Tier1Traffic tier1_traffic(const std::vector<std::string>& inputs, const std::string& output, int channel_params,
                           int scalar_params, const std::string& forward_cuda, const std::string& backward_cuda) {
  const std::set<std::string> fwd = identifiers(forward_cuda), bwd = identifiers(backward_cuda);
  Tier1Traffic t;
  for (const auto& in : inputs) {
    t.forward_reads.push_back(fwd.count(in) > 0);
    t.backward_reads.push_back(bwd.count(in) > 0);
  }
  t.backward_reads_upstream = bwd.count("d" + output) > 0;
  // The kernel loads its columns' per-channel parameters once per thread in both directions.
  t.forward_channel_reads = t.backward_channel_reads = t.channel_grads = channel_params;
  t.scalar_params = t.scalar_grads = scalar_params;
  return t;
}

Tier1Traffic tier1_traffic(const Program& program, const Tier1Code& code) {
  int channels = 0, scalars = 0;
  for (const auto& p : program.params) {
    if (!p.learnable) continue;  // module parameters travel in the launch's options, not memory
    (p.shape == ParamShape::Channel ? channels : scalars) += 1;
  }
  return tier1_traffic(program.inputs, program.output, channels, scalars, code.forward_cuda.statements,
                       code.backward_cuda.statements);
}

double tier1_min_bytes(const Tier1Traffic& t, const std::string& mode, double rows, double cols, double element_bytes,
                       double weight_bytes) {
  const double n = rows * cols;
  const double forward = t.forward_tensors() * n * element_bytes + t.forward_channel_reads * cols * weight_bytes + t.scalar_params * 4.0;
  const double backward = t.backward_tensors() * n * element_bytes +
                          (t.backward_channel_reads + t.channel_grads) * cols * weight_bytes +
                          (t.scalar_params + t.scalar_grads) * 4.0;
  if (mode == "forward") return forward;
  if (mode == "backward") return backward;
  return forward + backward;
}

ApproximationPolicy approximation_policy(const std::vector<ToleranceRow>& tolerances) {
  // The loosest error every row of a dtype accepts (outputs and input gradients, parameter gradients).
  auto loosest = [&](const std::string& dtype, double& atol, double& rtol) {
    bool any = false;
    atol = rtol = HUGE_VAL;
    for (const auto& row : tolerances)
      if (row.dtype == dtype) {
        any = true;
        atol = std::min(atol, row.atol);
        rtol = std::min(rtol, row.rtol);
      }
    return any;
  };
  constexpr double kTanhApproxError = 5.0e-4;  // 2^-10.99
  constexpr double kFastLogError = 4.0e-7;     // 2^-21.41 absolute; 3 ulp (3.6e-7) relative
  constexpr double kMargin = 8.0;
  ApproximationPolicy policy;
  double atol = 0, rtol = 0;
  if (loosest("bf16", atol, rtol)) policy.tanh_approx_bf16 = std::min(atol, rtol) >= kMargin * kTanhApproxError;
  if (loosest("fp16", atol, rtol)) policy.tanh_approx_fp16 = std::min(atol, rtol) >= kMargin * kTanhApproxError;
  if (loosest("fp32", atol, rtol)) policy.fast_log_fp32 = std::min(atol, rtol) >= kMargin * kFastLogError;
  return policy;
}

}  // namespace liger::kernel_dev
