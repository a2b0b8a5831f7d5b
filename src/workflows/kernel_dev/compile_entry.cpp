#include "workflows/kernel_dev/compile_entry.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>

namespace liger::kernel_dev {

namespace {

// Shortest text that reads back as the same double, as a Python float literal. The pattern
// compares constants by value (2 == 2.0), so the spelling only has to be exact.
std::string python_number(double value) {
  if (std::isinf(value)) return value > 0 ? "float(\"inf\")" : "(-float(\"inf\"))";
  if (std::isnan(value)) return "float(\"nan\")";
  char buffer[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  std::string text = buffer;
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return value < 0 ? "(" + text + ")" : text;
}

// Functions that are one torch.<name> call of one tensor in every PyTorch version the backend
// supports; their graph kind (graph.py) is the name itself.
const std::set<std::string>& unary_torch() {
  static const std::set<std::string> names = {"exp",  "log", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sigmoid",
                                              "erf",  "abs", "relu",  "sign",  "sin",  "cos",   "square"};
  return names;
}

}  // namespace

std::string torch_expression(const Expr& e) {
  const auto& a = e->args;
  // Every compound operand is parenthesised: the text never depends on Python's precedence
  // agreeing with the expression language's (-x^2 is -(x^2) in both, but nothing relies on it).
  switch (e->kind) {
    case Kind::Number: return python_number(e->value);
    case Kind::Symbol: return e->name;
    case Kind::Add: return "(" + torch_expression(a[0]) + " + " + torch_expression(a[1]) + ")";
    case Kind::Sub: return "(" + torch_expression(a[0]) + " - " + torch_expression(a[1]) + ")";
    case Kind::Mul: return "(" + torch_expression(a[0]) + " * " + torch_expression(a[1]) + ")";
    case Kind::Div: return "(" + torch_expression(a[0]) + " / " + torch_expression(a[1]) + ")";
    case Kind::Pow: return "(" + torch_expression(a[0]) + " ** " + torch_expression(a[1]) + ")";
    case Kind::Neg: return "(-" + torch_expression(a[0]) + ")";
    case Kind::Compare: return "(" + torch_expression(a[0]) + " " + e->name + " " + torch_expression(a[1]) + ")";
    case Kind::Call: break;
  }
  const std::string& f = e->name;
  if (unary_torch().count(f) && a.size() == 1) return "torch." + f + "(" + torch_expression(a[0]) + ")";
  if (f == "softplus" && a.size() == 1) return "F.softplus(" + torch_expression(a[0]) + ")";
  // The step as a comparison cast back to the operand's type; type_as keeps the cast a call on
  // graph values (.to(x.dtype) would trace a getattr the matcher cannot compare).
  if (f == "step" && a.size() == 1) {
    const std::string v = torch_expression(a[0]);
    return "(" + v + " > 0.0).type_as(" + v + ")";
  }
  if ((f == "max" || f == "min") && a.size() == 2) {
    // A bound by a constant is a clamp, as models write max(x, 0) (torch.maximum needs a tensor).
    const char* bound = f == "max" ? "min" : "max";
    if (is_number(a[1])) return "torch.clamp(" + torch_expression(a[0]) + ", " + bound + "=" + torch_expression(a[1]) + ")";
    if (is_number(a[0])) return "torch.clamp(" + torch_expression(a[1]) + ", " + bound + "=" + torch_expression(a[0]) + ")";
    return std::string("torch.") + (f == "max" ? "maximum" : "minimum") + "(" + torch_expression(a[0]) + ", " +
           torch_expression(a[1]) + ")";
  }
  if (f == "clamp" && a.size() == 3)
    return "torch.clamp(" + torch_expression(a[0]) + ", " + torch_expression(a[1]) + ", " + torch_expression(a[2]) + ")";
  if (f == "where" && a.size() == 3)
    return "torch.where(" + torch_expression(a[0]) + ", " + torch_expression(a[1]) + ", " + torch_expression(a[2]) + ")";
  if (f == "pow" && a.size() == 2) return "(" + torch_expression(a[0]) + " ** " + torch_expression(a[1]) + ")";
  throw std::invalid_argument("no PyTorch spelling for the function '" + f + "' with " + std::to_string(a.size()) +
                              " argument(s)");
}

CompileEntryPlan plan_compile_entry(const KernelProfile& p) {
  CompileEntryPlan plan;
  if (p.tier != 1) {
    plan.skipped = "Tier " + std::to_string(p.tier) +
                   ": only element-wise (Tier 1) ops get a compile-backend entry; a row reduction is written in too "
                   "many ways (dim=-1 or dim=1, keepdim, x.max(-1)[0] or amax, the row length from x.shape) for one "
                   "traced pattern to find it";
    return plan;
  }
  if (!p.forward || p.forward->expression.empty()) {
    plan.skipped = "the profile has no forward expression";
    return plan;
  }
  Expr forward;
  try {
    forward = parse_expression(p.forward->expression);
    plan.expression = torch_expression(forward);
  } catch (const std::exception& error) {
    plan.expression.clear();
    plan.skipped = std::string("the forward has no PyTorch pattern: ") + error.what();
    return plan;
  }
  // The pattern binds each argument of the library call to a graph value it matched; an argument
  // the forward does not use has nothing to bind to.
  const std::set<std::string> used = free_symbols(forward);
  std::string unused;
  auto need = [&](const std::string& name) {
    if (!used.count(name)) unused += (unused.empty() ? "" : ", ") + name;
  };
  for (const auto& t : p.inputs) need(t.name);
  for (const auto& l : p.learnable_parameters) need(l.name);
  for (const auto& m : p.module_parameters) need(m.name);
  if (!unused.empty()) {
    plan.expression.clear();
    plan.skipped = "the forward does not use " + unused + ", so a matched graph region has no value to pass for it";
    return plan;
  }
  // The entry's functions take the op's names as parameters next to the modules they call.
  static const std::set<std::string> taken = {
      "torch", "F", "LF", "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
      "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in",
      "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield"};
  for (const auto& name : used)
    if (taken.count(name)) {
      plan.expression.clear();
      plan.skipped = "the name '" + name + "' is a Python keyword or a module the entry uses (torch, F, LF)";
      return plan;
    }
  return plan;
}

}  // namespace liger::kernel_dev
