#include "workflows/kernel_dev/codegen.h"

#include <cmath>
#include <cstdio>
#include <map>

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
  Emitter(Dialect dialect, std::string indent) : d_(dialect), indent_(std::move(indent)) {}

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
    static const std::map<std::string, std::pair<const char*, const char*>> calls = {
        // M:: is the kernel's math policy (templates/kernel_dev/kernel.cu.mustache): accurate libm
        // forms for fp32 storage, SFU approximations far below the rounding of 16-bit storage.
        {"exp", {"M::exp", "std::exp"}},       {"log", {"M::log", "std::log"}},     {"log1p", {"M::log1p", "std::log1p"}},
        {"expm1", {"M::expm1", "std::expm1"}}, {"sqrt", {"sqrtf", "std::sqrt"}},    {"tanh", {"M::tanh", "std::tanh"}},
        {"erf", {"M::erf", "std::erf"}},       {"abs", {"fabsf", "std::fabs"}},     {"sin", {"sinf", "std::sin"}},
        {"cos", {"cosf", "std::cos"}},         {"sigmoid", {"M::sigmoid", "sigmoid_f64"}},
        {"softplus", {"M::softplus", "softplus_f64"}}, {"sign", {"sign_f32", "sign_f64"}}};
    auto it = calls.find(fn);
    if (it == calls.end()) return "/* unsupported " + fn + " */";
    return std::string(d_ == Dialect::CudaF32 ? it->second.first : it->second.second) + "(" + x + ")";
  }

  Dialect d_;
  std::string indent_;
  std::map<std::string, int> uses_;
  std::map<std::string, std::string> temps_;
};

}  // namespace

EmittedCode emit_statements(const std::vector<std::pair<std::string, Expr>>& outputs, Dialect dialect,
                            const std::string& indent) {
  Emitter emitter(dialect, indent);
  for (const auto& [name, e] : outputs) emitter.count(e);
  std::string assignments;
  for (const auto& [name, e] : outputs) {
    std::string code = emitter.emit(e);
    assignments += indent + name + " = " + code + ";\n";
  }
  return {emitter.statements + assignments, emitter.temporaries};
}

Tier1Code generate_tier1(const Program& program) {
  Tier1Code code;
  Expr forward = simplify(program.expression);
  code.forward.push_back({program.output, forward});
  std::string upstream = "d" + program.output;
  for (const auto& input : program.inputs)
    code.backward.push_back({"d" + input, simplify(mul(sym(upstream), derivative(forward, input)))});
  for (const auto& p : program.params)
    if (p.learnable) code.backward.push_back({"d" + p.name, simplify(mul(sym(upstream), derivative(forward, p.name)))});
  code.forward_cuda = emit_statements(code.forward, Dialect::CudaF32);
  code.forward_reference = emit_statements(code.forward, Dialect::CppF64);
  code.backward_cuda = emit_statements(code.backward, Dialect::CudaF32);
  code.backward_reference = emit_statements(code.backward, Dialect::CppF64);
  return code;
}

}  // namespace liger::kernel_dev
