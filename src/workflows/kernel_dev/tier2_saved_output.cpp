// Tier 2 offline: the backward of a derived row program rewritten to read the saved output y
// instead of the input x (tier2_derive.h, backward_from_output).
//
// The reverse-mode backward (tier2_derive.cpp) is written in x and the forward row statistics r,
// which the kernel would recompute from x: one more reduction (and block barrier) per statistic.
// Often the backward depends on x and r only through the output itself, and then it is cheaper
// to save y: softmax's dx = y * (dy - sum(dy * y)), log-softmax's dx = dy - exp(y) * sum(dy).
// The rule that finds these forms, for any row program:
//
//  1. Invert the output along its x-spine. When x occurs once in Y(x, r), every node on the path
//     from the root to x is an invertible function of its child given row-uniform values (y = u/s
//     gives u = y*s; u = exp(v) gives v = log(u); v = x - m gives x = v + m ...). Each node on
//     that path gets a form in y and r, down to the first node that is not invertible.
//  2. Replace, in every backward expression, each subexpression equal to a spine node by its form
//     (largest first): softmax's exp(x - m) becomes y*s.
//  3. Give each forward statistic a fixed value (sum/mean 1, max/min/shift 0) and simplify. This
//     is exact when, and only when, the backward as a function of (y, dy) does not depend on the
//     statistics -- softmax's s cancels between its sum(-dy*y*s/s^2) and its dx -- which is what
//     step 4 checks; when it does depend on them (L2 normalise, RMSNorm need the row's norm), the
//     candidate disagrees and the backward stays on x.
//  4. Verify in fp64: on random rows of several lengths and scales, with the module parameters at
//     their defaults and moved away from them, the candidate from (y, dy) must equal the x-based
//     backward. The candidate must also use y only in well-conditioned places: not inside log,
//     sqrt, rsqrt, a power with a non-integer or negative exponent, or a denominator, where the
//     rounding of a stored bf16/fp16 y would be amplified (x = log(y*s) + m is exact in fp64 and
//     wrong in bf16 near y = 0).
// The generated fp64 reference's finite-difference test then checks the chosen backward again.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <unordered_map>

#include "workflows/kernel_dev/tier2_derive.h"

namespace liger::kernel_dev {

namespace {

// Occurrences of `name` in the expanded tree (capped: only 0, 1 and "more" matter).
int occurrences(const Expr& e, const std::string& name, int cap = 2) {
  if (e->kind == Kind::Symbol) return e->name == name ? 1 : 0;
  int n = 0;
  for (const auto& a : e->args) {
    n += occurrences(a, name, cap - n);
    if (n >= cap) return n;
  }
  return n;
}

// Whether a subtree holds `name`, memoised per node: the expressions are DAGs whose expanded
// size may be far larger than their distinct nodes (a derivative repeats its operands).
class Contains {
 public:
  explicit Contains(std::string name) : name_(std::move(name)) {}
  bool operator()(const Expr& e) {
    if (e->kind == Kind::Symbol) return e->name == name_;
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second;
    bool found = false;
    for (const auto& a : e->args) found = found || (*this)(a);
    memo_.emplace(e.get(), found);
    return found;
  }

 private:
  std::string name_;
  std::unordered_map<const Node*, bool> memo_;
};

// The form of `node`'s child at `index` (the one holding x) given `form`, the node's own form in
// y; nullptr when the node is not invertible in that child.
Expr invert_child(const Expr& node, std::size_t index, const Expr& form) {
  const auto& a = node->args;
  const Expr other = a.size() == 2 ? a[1 - index] : nullptr;
  switch (node->kind) {
    case Kind::Add: return sub(form, other);
    case Kind::Sub: return index == 0 ? add(form, other) : sub(other, form);
    case Kind::Mul: return div(form, other);
    case Kind::Div: return index == 0 ? mul(form, other) : div(other, form);
    case Kind::Neg: return neg(form);
    case Kind::Pow:
      if (index == 0 && is_number(a[1]) && a[1]->value != 0) return pow(form, num(1.0 / a[1]->value));
      return nullptr;
    case Kind::Call:
      if (a.size() != 1) return nullptr;
      if (node->name == "exp") return call("log", {form});
      if (node->name == "log") return call("exp", {form});
      if (node->name == "sqrt") return pow(form, num(2));
      if (node->name == "expm1") return call("log1p", {form});
      if (node->name == "log1p") return call("expm1", {form});
      return nullptr;
    default: return nullptr;
  }
}

// Spine nodes of `output` (root first) with their forms in y.
std::vector<std::pair<Expr, Expr>> spine_forms(const Expr& output, const std::string& x, const std::string& y) {
  std::vector<std::pair<Expr, Expr>> spine;
  if (occurrences(output, x) != 1) return spine;
  Contains has_x(x);
  Expr node = output, form = sym(y);
  while (true) {
    spine.push_back({node, form});
    if (node->kind == Kind::Symbol) break;
    std::size_t index = node->args.size();
    for (std::size_t i = 0; i < node->args.size(); ++i)
      if (has_x(node->args[i])) index = i;
    if (index == node->args.size()) break;
    Expr child_form = invert_child(node, index, form);
    if (!child_form) break;
    node = node->args[index];
    form = child_form;
  }
  return spine;
}

// Each subexpression equal to a spine node replaced by its form (largest first), memoised per node.
Expr replace_spine(const Expr& e, const std::vector<std::pair<Expr, Expr>>& spine,
                   std::unordered_map<const Node*, Expr>& memo) {
  auto it = memo.find(e.get());
  if (it != memo.end()) return it->second;
  Expr result;
  for (const auto& [node, form] : spine)
    if (node->kind == e->kind && equal(e, node)) {
      result = form;
      break;
    }
  if (!result) {
    if (e->args.empty()) {
      result = e;
    } else {
      std::vector<Expr> args;
      for (const auto& a : e->args) args.push_back(replace_spine(a, spine, memo));
      result = rebuild(e, std::move(args));
    }
  }
  memo.emplace(e.get(), result);
  return result;
}

// Whether y appears only where storage rounding of y stays as small in the result as in y.
bool well_conditioned(const Expr& e, Contains& has_y, std::set<const Node*>& checked) {
  if (!checked.insert(e.get()).second) return true;  // a shared node already passed
  const auto& a = e->args;
  switch (e->kind) {
    case Kind::Div:
      if (has_y(a[1])) return false;
      break;
    case Kind::Pow:
      if (has_y(a[0]) && !(is_number(a[1]) && a[1]->value >= 0 && a[1]->value == std::floor(a[1]->value)))
        return false;
      if (has_y(a[1])) return false;
      break;
    case Kind::Call: {
      static const std::set<std::string> singular = {"log", "log1p", "sqrt", "rsqrt"};
      if (singular.count(e->name) && has_y(e)) return false;
      break;
    }
    default: break;
  }
  for (const auto& arg : a)
    if (!well_conditioned(arg, has_y, checked)) return false;
  return true;
}

double reduce(const std::string& op, const Expr& argument, Environment env,
              const std::map<std::string, std::vector<double>>& columns, std::size_t cols) {
  double acc = op == "max" || op == "shift" ? -INFINITY : op == "min" ? INFINITY : 0.0;
  for (std::size_t j = 0; j < cols; ++j) {
    for (const auto& [name, values] : columns) env[name] = values[j];
    const double v = eval_f64(argument, env);
    if (op == "max" || op == "shift") acc = std::max(acc, v);
    else if (op == "min") acc = std::min(acc, v);
    else acc += v;
  }
  return op == "mean" ? acc / static_cast<double>(cols) : acc;
}

std::vector<double> backward(const RowStructure& s, Environment env, const std::map<std::string, std::vector<double>>& columns,
                             std::size_t cols) {
  for (const auto& r : s.backward) env[r.name] = reduce(r.op, r.argument, env, columns, cols);
  std::vector<double> dx(cols);
  for (std::size_t j = 0; j < cols; ++j) {
    Environment at = env;
    for (const auto& [name, values] : columns) at[name] = values[j];
    dx[j] = eval_f64(s.grad, at);
  }
  return dx;
}

// fp64 agreement of `candidate` (from y, dy) with `original` (from x, dy, recomputed statistics).
bool agrees(const RowStructure& original, const RowStructure& candidate) {
  std::mt19937_64 rng(20240611);
  std::vector<Environment> parameter_sets = {original.parameters};
  Environment moved = original.parameters;
  for (auto& [name, value] : moved) value = value == 0 ? 0.375 : value * 1.375;
  if (!moved.empty()) parameter_sets.push_back(moved);
  int compared = 0;
  for (const auto& parameters : parameter_sets) {
    for (std::size_t cols : {1u, 2u, 5u, 16u, 33u}) {
      for (double scale : {0.25, 1.5, 6.0}) {
        std::normal_distribution<double> normal(0.0, scale), unit(0.0, 1.0);
        std::vector<double> x(cols), dy(cols);
        for (auto& v : x) v = normal(rng);
        for (auto& v : dy) v = unit(rng);
        Environment env = parameters;
        env["n"] = static_cast<double>(cols);
        std::map<std::string, std::vector<double>> columns = {{original.x, x}};
        for (const auto& r : original.forward) env[r.name] = reduce(r.op, r.argument, env, columns, cols);
        std::vector<double> y(cols);
        for (std::size_t j = 0; j < cols; ++j) {
          Environment at = env;
          at[original.x] = x[j];
          y[j] = eval_f64(original.output, at);
        }
        columns[original.y] = y;
        columns[original.dy] = dy;
        const std::vector<double> expected = backward(original, env, columns, cols);
        if (std::any_of(expected.begin(), expected.end(), [](double v) { return !std::isfinite(v); })) continue;
        Environment plain = parameters;
        plain["n"] = static_cast<double>(cols);
        const std::vector<double> got = backward(candidate, plain, {{original.y, y}, {original.dy, dy}}, cols);
        double size = 1.0;
        for (double v : expected) size = std::max(size, std::fabs(v));
        for (std::size_t j = 0; j < cols; ++j)
          if (!std::isfinite(got[j]) || std::fabs(got[j] - expected[j]) > 1e-9 * size) return false;
        ++compared;
      }
    }
  }
  return compared >= 8;  // most rows gave a finite gradient to compare
}

}  // namespace

bool output_invariant_to(const RowStructure& s, std::size_t index) {
  if (index >= s.forward.size()) return false;
  std::mt19937_64 rng(977);
  int compared = 0;
  for (std::size_t cols : {2u, 5u, 16u, 33u}) {
    for (double scale : {0.25, 1.5, 6.0}) {
      std::normal_distribution<double> normal(0.0, scale);
      std::vector<double> x(cols);
      for (auto& v : x) v = normal(rng);
      const std::map<std::string, std::vector<double>> columns = {{s.x, x}};
      auto output = [&](double moved_by) {
        Environment env = s.parameters;
        env["n"] = static_cast<double>(cols);
        for (std::size_t i = 0; i < s.forward.size(); ++i) {
          const auto& r = s.forward[i];
          env[r.name] = reduce(r.op, r.argument, env, columns, cols) + (i == index ? moved_by : 0.0);
        }
        std::vector<double> y(cols);
        for (std::size_t j = 0; j < cols; ++j) {
          Environment at = env;
          at[s.x] = x[j];
          y[j] = eval_f64(s.output, at);
        }
        return y;
      };
      const std::vector<double> plain = output(0.0), moved = output(0.75 * scale + 0.5);
      bool finite = true;
      for (std::size_t j = 0; j < cols; ++j) {
        if (!std::isfinite(plain[j]) || !std::isfinite(moved[j])) {
          finite = false;
          continue;
        }
        if (std::fabs(plain[j] - moved[j]) > 1e-9 * (1.0 + std::fabs(plain[j]))) return false;
      }
      if (finite) ++compared;
    }
  }
  return compared >= 6;
}

std::optional<RowStructure> backward_from_output(const RowStructure& s) {
  const auto spine = spine_forms(s.output, s.x, s.y);
  if (spine.empty()) return std::nullopt;
  std::map<std::string, Expr> fixed;
  for (const auto& r : s.forward) fixed[r.name] = num(r.op == "sum" || r.op == "mean" ? 1.0 : 0.0);
  std::unordered_map<const Node*, Expr> memo;
  auto rewrite = [&](const Expr& e) { return simplify(substitute(replace_spine(e, spine, memo), fixed)); };
  RowStructure out = s;
  for (auto& r : out.backward) r.argument = rewrite(r.argument);
  out.grad = rewrite(s.grad);
  std::vector<Expr> all = {out.grad};
  for (const auto& r : out.backward) all.push_back(r.argument);
  Contains has_y(s.y);
  std::set<const Node*> checked;
  for (const auto& e : all) {
    const auto names = free_symbols(e);
    if (names.count(s.x)) return std::nullopt;
    for (const auto& r : s.forward)
      if (names.count(r.name)) return std::nullopt;  // (substituted: cannot happen; kept as a guard)
    if (!well_conditioned(e, has_y, checked)) return std::nullopt;
  }
  if (!agrees(s, out)) return std::nullopt;
  return out;
}

}  // namespace liger::kernel_dev
