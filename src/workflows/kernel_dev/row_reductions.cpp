// Row reductions in the expression IR and the named row ops lowered to them (tier2_derive.h).
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "workflows/kernel_dev/tier2_derive.h"

namespace liger::kernel_dev {

namespace {
const char* const kDropped = "row_dropped";

bool is_reduction_call(const Expr& e) {
  return e->kind == Kind::Call && e->args.size() == 1 &&
         (e->name == "row_sum" || e->name == "row_mean" || e->name == "row_max" || e->name == "row_min" ||
          e->name == "row_shift" || e->name == kDropped);
}
}  // namespace

Expr row_reduce(const std::string& op, Expr per_column) {
  if (op != "sum" && op != "mean" && op != "max" && op != "min" && op != "shift")
    throw std::invalid_argument("unknown row reduction '" + op + "'");
  return call("row_" + op, {std::move(per_column)});
}

Expr row_dropped(Expr row_scalar) { return call(kDropped, {std::move(row_scalar)}); }

bool has_row_reduction(const Expr& e) {
  if (is_reduction_call(e)) return true;
  for (const auto& a : e->args)
    if (has_row_reduction(a)) return true;
  return false;
}

Expr row_logsumexp(const Expr& v) {
  Expr m = row_reduce("shift", v);
  return add(m, call("log", {row_reduce("sum", call("exp", {sub(v, m)}))}));
}

Expr row_softmax(const Expr& v) {
  Expr m = row_reduce("shift", v);
  Expr shifted = call("exp", {sub(v, m)});
  return div(shifted, row_reduce("sum", shifted));
}

Expr row_log_softmax(const Expr& v) {
  Expr m = row_reduce("shift", v);
  return sub(sub(v, m), call("log", {row_reduce("sum", call("exp", {sub(v, m)}))}));
}

Expr row_norm(const Expr& v, double p) {
  if (std::isinf(p) && p > 0) return row_reduce("max", call("abs", {v}));
  if (p == 2) return call("sqrt", {row_reduce("sum", pow(v, num(2)))});
  if (p == 1) return row_reduce("sum", call("abs", {v}));
  if (!(p > 0) || std::isinf(p))
    throw std::invalid_argument("norm order p = " + std::to_string(p) + " is not supported; use p > 0 or inf");
  return pow(row_reduce("sum", pow(call("abs", {v}), num(p))), num(1.0 / p));
}

Expr row_var(const Expr& v, double correction) {
  Expr centred = sub(v, row_reduce("mean", v));
  if (correction == 0) return row_reduce("mean", pow(centred, num(2)));
  return div(row_reduce("sum", pow(centred, num(2))), sub(sym("n"), num(correction)));
}

Expr row_rms_norm(const Expr& v, const Expr& eps) {
  return mul(v, call("rsqrt", {add(row_reduce("mean", pow(v, num(2))), eps)}));
}

Expr row_layer_norm(const Expr& v, const Expr& eps) {
  return mul(sub(v, row_reduce("mean", v)), call("rsqrt", {add(row_var(v, 0), eps)}));
}

Expr row_normalize(const Expr& v, double p, const Expr& eps) {
  return div(v, call("max", {row_norm(v, p), eps}));
}

const std::vector<std::string>& row_function_names() {
  static const std::vector<std::string> names = {
      "sum", "mean", "max(v)", "min(v)", "amax", "amin", "logsumexp", "softmax", "log_softmax", "norm", "var", "std",
      "rms_norm", "layer_norm", "normalize", "row_sum", "row_mean", "row_max", "row_min", "row_shift"};
  return names;
}

FunctionResolver row_reduction_resolver(FunctionResolver inner) {
  return [inner](const std::string& name, const std::vector<CallArgument>& args) -> std::optional<Expr> {
    static const std::map<std::string, std::vector<std::string>> signatures = {
        {"sum", {"x", "dim"}},        {"mean", {"x", "dim"}},          {"max", {"x"}},
        {"min", {"x"}},               {"amax", {"x", "dim"}},          {"amin", {"x", "dim"}},
        {"logsumexp", {"x", "dim"}},  {"softmax", {"x", "dim"}},       {"log_softmax", {"x", "dim"}},
        {"norm", {"x", "p", "dim"}},  {"var", {"x", "dim", "correction"}}, {"std", {"x", "dim", "correction"}},
        {"rms_norm", {"x", "eps"}},   {"layer_norm", {"x", "eps"}},    {"normalize", {"x", "p", "dim", "eps"}},
        {"row_sum", {"x"}},           {"row_mean", {"x"}},             {"row_max", {"x"}},
        {"row_min", {"x"}},           {"row_shift", {"x"}}};
    auto signature = signatures.find(name);
    if (signature == signatures.end()) return inner ? inner(name, args) : std::nullopt;
    std::map<std::string, Expr> bound;
    std::size_t positional = 0;
    for (const auto& a : args) {
      std::string key = a.keyword;
      if (key.empty()) {
        if (positional >= signature->second.size())
          throw std::invalid_argument(name + "() takes at most " + std::to_string(signature->second.size()) +
                                      " argument(s) (" + name + " reduces over the row, the last dimension)");
        key = signature->second[positional++];
      } else if (std::find(signature->second.begin(), signature->second.end(), key) == signature->second.end()) {
        throw std::invalid_argument(name + "() has no parameter '" + key + "'");
      }
      bound[key] = a.value;
    }
    auto number = [&](const std::string& key, double fallback) {
      auto it = bound.find(key);
      if (it == bound.end()) return fallback;
      const Expr value = simplify(it->second);  // -1 parses as -(1)
      if (!is_number(value))
        throw std::invalid_argument(name + "(): " + key + " must be a number, got '" + to_string(it->second) + "'");
      return value->value;
    };
    if (!bound.count("x")) throw std::invalid_argument(name + "() needs the value to reduce");
    if (bound.count("dim") && number("dim", -1) != -1)
      throw std::invalid_argument(name + "(): only dim=-1 (the row, the last dimension) is supported");
    const Expr& v = bound.at("x");
    const Expr eps = bound.count("eps") ? bound.at("eps") : nullptr;
    if (name.rfind("row_", 0) == 0) return row_reduce(name.substr(4), v);
    if (name == "sum" || name == "mean") return row_reduce(name, v);
    if (name == "max" || name == "amax") return row_reduce("max", v);
    if (name == "min" || name == "amin") return row_reduce("min", v);
    if (name == "logsumexp") return row_logsumexp(v);
    if (name == "softmax") return row_softmax(v);
    if (name == "log_softmax") return row_log_softmax(v);
    if (name == "norm") return row_norm(v, number("p", 2));
    if (name == "var") return row_var(v, number("correction", 1));
    if (name == "std") return call("sqrt", {row_var(v, number("correction", 1))});
    if (name == "rms_norm") return row_rms_norm(v, eps ? eps : num(1e-6));
    if (name == "layer_norm") return row_layer_norm(v, eps ? eps : num(1e-5));
    return row_normalize(v, number("p", 2), eps ? eps : num(1e-12));
  };
}

}  // namespace liger::kernel_dev
