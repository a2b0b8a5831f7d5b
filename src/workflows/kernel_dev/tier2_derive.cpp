// Tier 2 offline: a row program and its backward derived from an expression with row reductions
// (tier2_derive.h).
//
// The forward is cut into passes by hoisting every reduction call into a named row scalar r_i =
// red_i(g_i(x, r_<i)) (bottom-up, identical reductions shared), leaving the output as an
// element-wise expression Y(x, r). The backward is reverse-mode differentiation over that
// structure: with dy the upstream gradient,
//   adjoint(r_i) = sum_j [ dy_j dY_j/dr_i + sum_{l>i} adjoint(r_l) w_l,j dg_l,j/dr_i ]
//   dx_j        = dy_j dY_j/dx_j + sum_l adjoint(r_l) w_l,j dg_l,j/dx_j
// where w is the derivative of the reduction with respect to its per-column argument: 1 for a
// sum (the adjoint is broadcast), 1/n for a mean, the indicator g_l,j == r_l for max/min (every
// column tied at the extremum receives the full adjoint; PyTorch's amax splits it evenly between
// ties and max(dim) gives it to one index, so the three agree whenever the extremum is unique),
// and 0 for the stabilising shift of the lowered softmax family. Each nonzero adjoint is one sum
// pass of the backward, computed from the last reduction to the first.
#include "workflows/kernel_dev/tier2_derive.h"
#include "workflows/kernel_dev/row_program.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

namespace liger::kernel_dev {

Expr rebuild(const Expr& e, std::vector<Expr> args) {
  switch (e->kind) {
    case Kind::Number:
    case Kind::Symbol: return e;
    case Kind::Add: return add(args[0], args[1]);
    case Kind::Sub: return sub(args[0], args[1]);
    case Kind::Mul: return mul(args[0], args[1]);
    case Kind::Div: return div(args[0], args[1]);
    case Kind::Pow: return pow(args[0], args[1]);
    case Kind::Neg: return neg(args[0]);
    case Kind::Call: return call(e->name, std::move(args));
    case Kind::Compare: return compare(e->name, args[0], args[1]);
  }
  return e;
}

namespace {

struct Hoisted {
  struct Reduction {
    std::string name, op;  // op: sum | mean | max | min | shift
    Expr argument;         // per column, over x, parameters, n and earlier reductions
  };
  std::vector<Reduction> reductions;
  Expr output;
  bool dropped_in_arithmetic = false;  // a keepdim=False result combined with per-column values
  bool output_dropped = false;         // the output is a keepdim=False row value (shape [rows])
};

class Hoister {
 public:
  explicit Hoister(std::set<std::string> taken) : taken_(std::move(taken)) {}

  Hoisted run(const Expr& output) {
    Hoisted h;
    h.output = visit(output);
    h.reductions = reductions_;
    h.dropped_in_arithmetic = dropped_in_arithmetic_;
    h.output_dropped = dropped_.count(output.get()) > 0;
    return h;
  }

 private:
  Expr visit(const Expr& e) {
    auto done = memo_.find(e.get());
    if (done != memo_.end()) return done->second;
    Expr result;
    bool dropped = false;
    if (e->kind == Kind::Call && e->name == "row_dropped") {
      result = visit(e->args[0]);
      dropped = true;
    } else if (e->kind == Kind::Call && e->args.size() == 1 && e->name.rfind("row_", 0) == 0) {
      Expr argument = visit(e->args[0]);
      const std::string op = e->name.substr(4);
      for (const auto& r : reductions_)
        if (r.op == op && equal(r.argument, argument)) result = sym(r.name);
      if (!result) result = from_earlier_reduction(op, argument);
      if (!result) {
        reductions_.push_back({fresh(op), op, argument});
        result = sym(reductions_.back().name);
      }
    } else {
      std::vector<Expr> args;
      bool any_dropped = false, per_column = false, kept_row_value = false;
      for (const auto& a : e->args) {
        args.push_back(visit(a));
        if (dropped_.count(a.get())) any_dropped = true;
        else if (!row_only(args.back())) per_column = true;
        else if (uses_reduction(args.back())) kept_row_value = true;
      }
      result = rebuild(e, std::move(args));
      // A [rows] value (keepdim=False) meeting a [rows, cols] one, or a [rows, 1] one (keepdim=True:
      // PyTorch broadcasts the two to [rows, rows]); a value computed from [rows] values and
      // constants only stays [rows].
      if (any_dropped && per_column) dropped_in_arithmetic_ = true;
      if (any_dropped && kept_row_value) mixed_keepdim_ = true;
      dropped = any_dropped && !per_column;
    }
    if (dropped) dropped_.insert(e.get());
    memo_.emplace(e.get(), result);
    return result;
  }

  // A reduction of an earlier one's argument shifted by a row value, in terms of the earlier one:
  // mean(x - mu) = mu - mu = 0 for a standardisation written x - mean(x) then .std(), max(x + r) =
  // max(x) + r, sum(x - r) = sum(x) - n r. Only where the earlier reduction exists, so no pass is
  // added, and the value is exact where the direct one would be a rounded zero.
  Expr from_earlier_reduction(const std::string& op, const Expr& argument) {
    if (op != "sum" && op != "mean" && op != "max" && op != "min" && op != "shift") return nullptr;
    // A softmax's shift is the row max, but no gradient flows through it: a shift may be written
    // with an earlier max, never a max (whose gradient counts) with an earlier shift.
    auto same_op = [&](const std::string& earlier) { return earlier == op || (op == "shift" && earlier == "max"); };
    std::vector<std::pair<Expr, bool>> terms, column_terms, row_terms;
    sum_terms(argument, false, terms);
    for (const auto& term : terms) (row_only(term.first) ? row_terms : column_terms).push_back(term);
    if (row_terms.empty() || column_terms.empty()) return nullptr;
    const Expr column = sum_of(column_terms), row = sum_of(row_terms);
    for (const auto& r : reductions_) {
      if (!same_op(r.op) || !equal(simplify(r.argument), simplify(column))) continue;
      return simplify(add(sym(r.name), op == "sum" ? mul(sym("n"), row) : row));
    }
    return nullptr;
  }

  bool uses_reduction(const Expr& e) const {
    for (const auto& s : free_symbols(e))
      if (scalar_names_.count(s)) return true;
    return false;
  }

  // Whether a hoisted expression is one value per row (no per-column input in it).
  bool row_only(const Expr& e) const {
    for (const auto& s : free_symbols(e))
      if (!scalar_names_.count(s) && s != "n" && !parameters_.count(s)) return false;
    return true;
  }

 public:
  std::set<std::string> parameters_;  // module parameters (row-uniform)

 private:
  std::string fresh(const std::string& op) {
    static const std::map<std::string, std::string> stem = {
        {"sum", "s"}, {"mean", "mu"}, {"max", "mx"}, {"min", "mn"}, {"shift", "m"}};
    std::string base = stem.at(op), name = base;
    for (int k = 2; taken_.count(name) || scalar_names_.count(name) || name == "n"; ++k) name = base + std::to_string(k);
    scalar_names_.insert(name);
    return name;
  }

  std::set<std::string> taken_;
  std::set<std::string> scalar_names_;
  std::vector<Hoisted::Reduction> reductions_;
  std::map<const Node*, Expr> memo_;
  std::set<const Node*> dropped_;
  bool dropped_in_arithmetic_ = false;
  bool mixed_keepdim_ = false;

 public:
  bool mixed_keepdim() const { return mixed_keepdim_; }
};

// d(red)/d(argument_j): see the file comment.
Expr reduction_weight(const Hoisted::Reduction& r) {
  if (r.op == "sum") return num(1);
  if (r.op == "mean") return div(num(1), sym("n"));
  return call("where", {compare("==", r.argument, sym(r.name)), num(1), num(0)});
}

void collect_functions(const Expr& e, std::set<std::string>& out) {
  if (e->kind == Kind::Call) out.insert(e->name);
  for (const auto& a : e->args) collect_functions(a, out);
}

std::string reduction_text(const std::string& op, const std::string& expression) {
  return (op == "shift" ? "max" : op) + "(" + expression + ")";
}

}  // namespace

RowDerivation derive_row_program(const Program& program) {
  RowDerivation d;
  if (program.inputs.empty()) {
    d.declined = "the op has no input tensor";
    return d;
  }
  if (program.inputs.size() > kMaxRowInputs) {
    d.declined = "the op has " + std::to_string(program.inputs.size()) + " input tensors; a generated row kernel reads "
                 "at most " + std::to_string(kMaxRowInputs) + " (combine some of them in a Tier-1 op first, or pass "
                 "per-column weights as parameters)";
    return d;
  }
  // Module parameters are row scalars; a learnable per-column weight is one value per column,
  // the same on every row: a per-column symbol of the row program (the hoisting keeps it in the
  // column loops) whose gradient is the sum over the rows of its per-row contribution.
  std::set<std::string> parameters;
  std::vector<std::string> channel;
  // A learnable scalar is such a weight with every column equal: the same chain rule per column,
  // its gradient the sum of the per-column sums (the binding adds the columns up).
  for (const auto& p : program.params) {
    if (p.learnable) channel.push_back(p.name);
    if (p.learnable && p.shape == ParamShape::Scalar) d.scalar_weights.insert(p.name);
    else parameters.insert(p.name);
  }
  const std::string x = program.inputs[0], y = program.output, dy = "d" + y, dx = "d" + x;
  // The inputs after the first are [rows, cols] like x (a target, the other operand of a cosine
  // similarity): per-column symbols of the row program, as the weights are, but one row each, and
  // each with its own gradient per element -- the weights' chain rule without the sum over rows.
  const std::vector<std::string> others(program.inputs.begin() + 1, program.inputs.end());
  std::set<std::string> taken = parameters;
  taken.insert({x, y, dy, dx});
  for (const auto& w : channel) taken.insert({w, "d" + w});
  for (const auto& o : others) taken.insert({o, "d" + o});
  Hoister hoister(taken);
  hoister.parameters_ = parameters;
  const Hoisted h = hoister.run(program.expression);
  if (h.dropped_in_arithmetic) {
    d.declined = "a reduction without keepdim=True (shape [rows]) is combined with a [rows, cols] tensor: PyTorch "
                 "broadcasts it along the columns, not the rows (an error or a different op); write keepdim=True";
    return d;
  }
  if (hoister.mixed_keepdim()) {
    d.declined = "a reduction without keepdim=True (shape [rows]) is combined with one with keepdim=True (shape "
                 "[rows, 1]): PyTorch broadcasts the two to [rows, rows]; write keepdim the same way in both";
    return d;
  }
  if (h.reductions.empty()) {
    d.declined = "the expression has no row reduction (it is element-wise: Tier 1)";
    return d;
  }
  Expr output = simplify(h.output);
  // An output without x is one value per row (logsumexp, a z-loss): the forward writes one value
  // per row, the upstream gradient is one value per row, and the chain rule below takes the
  // output's derivatives as row scalars (nothing to sum over the columns).
  const std::set<std::string> output_symbols = free_symbols(output);
  auto reads = [&](const std::vector<std::string>& names) {
    return std::any_of(names.begin(), names.end(), [&](const std::string& w) { return output_symbols.count(w) > 0; });
  };
  const bool per_row = !output_symbols.count(x) && !reads(channel) && !reads(others);
  d.per_row_output = per_row;
  d.keepdim = !h.output_dropped;

  RowProgramSpec spec;
  std::set<std::string> functions;
  for (const auto& r : h.reductions) {
    Expr argument = simplify(r.argument);
    spec.forward_reductions.push_back({r.name, r.op == "shift" ? "max" : r.op, to_string(argument)});
    d.forward_text.push_back(r.name + " = " + reduction_text(r.op, to_string(argument)));
    collect_functions(argument, functions);
  }
  spec.output = to_string(output);
  d.forward_text.push_back(y + " = " + spec.output);
  collect_functions(output, functions);

  // Reverse mode, last reduction first.
  RowStructure structure;
  structure.x = x;
  structure.y = y;
  structure.dy = dy;
  structure.output = output;
  for (const auto& p : program.params) structure.parameters[p.name] = p.init;
  for (const auto& r : h.reductions) structure.forward.push_back({r.name, r.op, simplify(r.argument)});
  const std::size_t k = h.reductions.size();
  // A max or min the output does not depend on (a shift the user wrote out) has a zero adjoint,
  // as the lowered softmax family's row_shift: no pass, no tie rule.
  std::vector<bool> gradient_free(k);
  for (std::size_t i = 0; i < k; ++i) {
    const auto& op = h.reductions[i].op;
    gradient_free[i] = op == "shift";
    if (op == "max" || op == "min") {
      try {
        gradient_free[i] = output_invariant_to(structure, i);
      } catch (const std::exception&) {
        gradient_free[i] = false;  // not evaluable here: differentiate it
      }
      if (gradient_free[i])
        d.notes.push_back(h.reductions[i].name + " = " + op + "(...) only shifts values whose shift cancels in the "
                          "output (checked in fp64): it gets no gradient");
    }
  }
  // The adjoint of each row scalar: a backward sum pass g<r> over the columns of its per-column
  // terms, plus (per-row output) the output's own derivative dy * dY/dr, a row scalar used in
  // place without a pass. nullptr where the adjoint is zero.
  std::vector<Expr> adjoint(k);
  // A max or min's gradient is split evenly between the columns equal to it, as PyTorch's amax /
  // amin do: each tied column gets 1 / (number of ties). The tie count is a backward sum over the
  // row, placed before the sums that use it (it needs only the recomputed forward reductions), and
  // made the first time the weight of that reduction is used.
  std::map<std::string, std::string> tie_count;
  auto weight = [&](const Hoisted::Reduction& r) -> Expr {
    if (r.op != "max" && r.op != "min") return reduction_weight(r);
    auto it = tie_count.find(r.name);
    if (it == tie_count.end()) {
      std::string name = "t" + r.name;
      while (taken.count(name)) name += "b";
      taken.insert(name);
      structure.backward.insert(structure.backward.begin(), {name, "sum", reduction_weight(r)});
      it = tie_count.emplace(r.name, name).first;
    }
    return div(reduction_weight(r), sym(it->second));
  };
  for (std::size_t i = k; i-- > 0;) {
    const auto& r = h.reductions[i];
    if (gradient_free[i]) continue;
    const Expr direct = simplify(mul(sym(dy), differentiate(output, r.name)));
    Expr term = per_row ? num(0) : direct;
    for (std::size_t l = i + 1; l < k; ++l) {
      if (!adjoint[l]) continue;
      const auto& later = h.reductions[l];
      term = add(term, mul(mul(adjoint[l], weight(later)), differentiate(later.argument, r.name)));
    }
    term = simplify(term);
    Expr total = per_row && !is_number(direct, 0) ? direct : nullptr;
    if (!is_number(term, 0)) {
      std::string name = "g" + r.name;
      while (taken.count(name)) name += "b";
      taken.insert(name);
      structure.backward.push_back({name, "sum", term});
      total = total ? add(total, sym(name)) : sym(name);
    }
    if (!total) continue;
    adjoint[i] = total;
    if (r.op == "max" || r.op == "min")
      d.notes.push_back(r.name + " = " + r.op + "(...): its gradient is split evenly between the columns equal to "
                        "the " + r.op + " (as PyTorch's amax / amin; torch.max(x, dim)'s values send it to one of the "
                        "tied columns)");
  }
  // The chain rule with respect to one per-column symbol v (x, a weight, another input): at column
  // j, dy_j dY_j/dv_j + sum_l adjoint(r_l) w_l,j dg_l,j/dv_j (v_j enters only column j of each
  // reduction's argument). For x and the other inputs it is the gradient per element; for a
  // per-column weight it is this row's contribution, which the kernel sums over the rows.
  auto gradient_wrt = [&](const std::string& v) {
    Expr g = per_row ? num(0) : mul(sym(dy), differentiate(output, v));
    for (std::size_t l = 0; l < k; ++l) {
      if (!adjoint[l]) continue;
      g = add(g, mul(mul(adjoint[l], weight(h.reductions[l])), differentiate(h.reductions[l].argument, v)));
    }
    return simplify(g);
  };
  structure.grad = gradient_wrt(x);
  std::vector<std::pair<std::string, Expr>> param_grads, input_grads;
  for (const auto& w : channel) param_grads.push_back({w, gradient_wrt(w)});
  for (const auto& o : others) input_grads.push_back({o, gradient_wrt(o)});

  // The backward reads x and the forward reductions it names, which the forward stores per row
  // (fp32, 4 bytes a row against the row's kilobytes: recomputing them cost the backward a pass
  // over the row each, and the row entropy's backward made four passes where two remain), unless
  // it can be written from the saved output alone (tier2_saved_output.cpp): then it reads y and
  // needs no statistic.
  std::set<std::string> used;
  for (const auto& b : structure.backward)
    for (const auto& s : free_symbols(b.argument)) used.insert(s);
  for (const auto& s : free_symbols(structure.grad)) used.insert(s);
  for (const auto& [w, g] : param_grads)
    for (const auto& s : free_symbols(g)) used.insert(s);
  for (const auto& [o, g] : input_grads)
    for (const auto& s : free_symbols(g)) used.insert(s);
  std::size_t prefix = 0;
  for (std::size_t i = 0; i < k; ++i)
    if (used.count(h.reductions[i].name)) prefix = i + 1;
  // The saved-output rewrite reads y per column; a per-row y determines no column of x.
  // A weight's gradient needs the normalised input (x and the statistics), not y: with learnable
  // weights the backward stays on x, and so it does with other input tensors (their gradients are
  // functions of every input, and the backward reads them anyway).
  if (prefix > 0 && !per_row && channel.empty() && others.empty()) {
    std::optional<RowStructure> from_y;
    try {
      from_y = backward_from_output(structure);
    } catch (const std::exception&) {
      from_y.reset();  // an evaluation the rewrite could not make: keep the backward on x
    }
    if (from_y) {
      structure = *from_y;
      prefix = 0;
      d.from_output = true;
      std::set<const Node*> seen;  // the expressions are DAGs: each distinct node once
      std::function<bool(const Expr&)> exp_of_y = [&](const Expr& e) {
        if (!seen.insert(e.get()).second) return false;
        if (e->kind == Kind::Call && e->name == "exp" && free_symbols(e).count(y)) return true;
        return std::any_of(e->args.begin(), e->args.end(), exp_of_y);
      };
      d.exp_of_output = exp_of_y(structure.grad) ||
                        std::any_of(structure.backward.begin(), structure.backward.end(),
                                    [&](const RowStructure::Reduction& r) { return exp_of_y(r.argument); });
      d.notes.push_back("the backward reads the saved output " + y + " (and " + dy +
                        "): written from it, the gradient needs none of the forward reductions, so none is recomputed");
    }
  }
  for (const auto& b : structure.backward) {
    spec.backward_reductions.push_back({b.name, b.op, to_string(b.argument)});
    d.backward_text.push_back(b.name + " = sum(" + to_string(b.argument) + ")");
    collect_functions(b.argument, functions);
  }
  collect_functions(structure.grad, functions);
  spec.grad_input = to_string(structure.grad);
  spec.backward_uses = {d.from_output ? y : x};
  if (!d.from_output)
    for (std::size_t i = 0; i < prefix; ++i)
      if (used.count(h.reductions[i].name)) {
        spec.backward_uses.push_back(h.reductions[i].name);
        d.saved_stats.push_back(h.reductions[i].name);
      }
  d.backward_text.push_back(dx + " = " + spec.grad_input);
  for (const auto& [w, g] : param_grads) {
    spec.param_gradients.push_back({w, to_string(g)});
    d.backward_text.push_back("d" + w + (d.scalar_weights.count(w) ? " = sum over rows and columns(" : " = sum over rows(") +
                              to_string(g) + ")");
    collect_functions(g, functions);
  }
  for (const auto& [o, g] : input_grads) {
    spec.input_gradients.push_back({o, to_string(g)});
    d.backward_text.push_back("d" + o + " = " + to_string(g));
    collect_functions(g, functions);
  }
  functions.erase("where");
  d.functions.assign(functions.begin(), functions.end());
  d.program = spec;
  return d;
}

std::string recognised_row_op(const Program& program) {
  if (program.inputs.size() != 1 || !program.params.empty()) return "";
  const Expr x = sym(program.inputs[0]);
  // torch.logsumexp(x, dim=-1) without keepdim is the same op, of shape [rows].
  const Expr& written = program.expression;
  const bool dropped = written->kind == Kind::Call && written->name == "row_dropped";
  const Expr e = simplify(dropped ? written->args[0] : written);
  const std::vector<std::pair<std::string, Expr>> known = {
      {"softmax", row_softmax(x)},
      {"log_softmax", row_log_softmax(x)},
      {"logsumexp", row_logsumexp(x)},
      {"l2_normalize", div(x, row_norm(x, 2))}};
  for (const auto& [name, form] : known)
    if (equal(e, simplify(form))) return name;
  return "";
}

// ---------------------------------------------------------------------------------------------
// fp64 evaluation of a row program.
namespace {

struct RowEvaluator {
  const KernelProfile& p;
  Environment base;
  std::string x, y;

  RowEvaluator(const KernelProfile& profile, const Environment& parameters) : p(profile) {
    if (!p.row_program || p.inputs.empty() || p.outputs.size() != 1)
      throw std::invalid_argument("profile '" + p.op_name + "' has no row program with an input and one output");
    x = p.inputs[0].name;
    y = p.outputs[0].name;
    for (const auto& m : p.module_parameters) base[m.name] = m.value;
    for (const auto& [k, v] : parameters) base[k] = v;
  }

  // Each reduction over the row, in order, into env.
  void reduce(const std::vector<RowReduction>& reductions, Environment& env,
              const std::map<std::string, std::vector<double>>& columns, std::size_t cols) const {
    for (const auto& r : reductions) {
      Expr e = parse_expression(r.expression);
      double acc = r.op == "max" ? -INFINITY : r.op == "min" ? INFINITY : 0.0;
      for (std::size_t j = 0; j < cols; ++j) {
        Environment at = env;
        for (const auto& [name, values] : columns) at[name] = values[j];
        double v = eval_f64(e, at);
        if (r.op == "max") acc = std::max(acc, v);
        else if (r.op == "min") acc = std::min(acc, v);
        else acc += v;
      }
      env[r.name] = r.op == "mean" ? acc / static_cast<double>(cols) : acc;
    }
  }

  std::vector<double> elementwise(const std::string& text, const Environment& env,
                                  const std::map<std::string, std::vector<double>>& columns, std::size_t cols) const {
    Expr e = parse_expression(text);
    std::vector<double> out(cols);
    for (std::size_t j = 0; j < cols; ++j) {
      Environment at = env;
      for (const auto& [name, values] : columns) at[name] = values[j];
      out[j] = eval_f64(e, at);
    }
    return out;
  }
};

}  // namespace

namespace {

// The per-column tensors of one row: x, the other input tensors' rows (given; required) and the
// learnable weights (given, else their init value in every column).
std::map<std::string, std::vector<double>> row_columns(const KernelProfile& profile, const RowEvaluator& ev,
                                                       const std::vector<double>& x, const ColumnValues& weights) {
  std::map<std::string, std::vector<double>> columns = {{ev.x, x}};
  for (std::size_t i = 1; i < profile.inputs.size(); ++i) {
    const std::string& name = profile.inputs[i].name;
    auto given = weights.find(name);
    if (given == weights.end() || given->second.size() != x.size())
      throw std::invalid_argument("row evaluation: the input '" + name + "' needs " + std::to_string(x.size()) +
                                  " values (its row), " +
                                  (given == weights.end() ? std::string("none given") : std::to_string(given->second.size()) + " given"));
    columns[name] = given->second;
  }
  for (const auto& l : profile.learnable_parameters) {
    auto given = weights.find(l.name);
    if (given == weights.end()) {
      columns[l.name].assign(x.size(), l.value);
    } else {
      if (given->second.size() != x.size())
        throw std::invalid_argument("row evaluation: weight '" + l.name + "' has " + std::to_string(given->second.size()) +
                                    " values for a row of " + std::to_string(x.size()));
      columns[l.name] = given->second;
    }
  }
  return columns;
}

// The backward's scope after its reductions: every row scalar in `env`, every column in `columns`.
void backward_scope(const KernelProfile& profile, const RowEvaluator& ev, const std::vector<double>& x,
                    const std::vector<double>& dy, Environment& env, std::map<std::string, std::vector<double>>& columns) {
  env["n"] = static_cast<double>(x.size());
  ev.reduce(profile.row_program->forward_reductions, env, columns, x.size());
  if (per_row_output(profile)) {
    // y and dy are one value per row (the backward never reads y: row_program_problems).
    if (dy.size() != 1) throw std::invalid_argument("row_backward_f64: a per-row output has one upstream gradient per row");
    env["d" + ev.y] = dy[0];
  } else {
    columns[ev.y] = ev.elementwise(profile.row_program->output, env, columns, x.size());
    columns["d" + ev.y] = dy;
  }
  ev.reduce(profile.row_program->backward_reductions, env, columns, x.size());
}

}  // namespace

std::vector<double> row_forward_f64(const KernelProfile& profile, const std::vector<double>& x,
                                    const Environment& parameters, const ColumnValues& weights) {
  RowEvaluator ev(profile, parameters);
  Environment env = ev.base;
  env["n"] = static_cast<double>(x.size());
  std::map<std::string, std::vector<double>> columns = row_columns(profile, ev, x, weights);
  ev.reduce(profile.row_program->forward_reductions, env, columns, x.size());
  if (per_row_output(profile)) return {eval_f64(parse_expression(profile.row_program->output), env)};
  return ev.elementwise(profile.row_program->output, env, columns, x.size());
}

std::vector<double> row_backward_f64(const KernelProfile& profile, const std::vector<double>& x,
                                     const std::vector<double>& dy, const Environment& parameters,
                                     const ColumnValues& weights) {
  RowEvaluator ev(profile, parameters);
  Environment env = ev.base;
  std::map<std::string, std::vector<double>> columns = row_columns(profile, ev, x, weights);
  backward_scope(profile, ev, x, dy, env, columns);
  return ev.elementwise(profile.row_program->grad_input, env, columns, x.size());
}

namespace {

// Each gradient in `list` over this row, per column, in the backward's scope.
ColumnValues gradients_over_row(const KernelProfile& profile, const std::vector<double>& x,
                                const std::vector<double>& dy, const Environment& parameters,
                                const ColumnValues& given, const std::vector<RowParamGradient>& list) {
  RowEvaluator ev(profile, parameters);
  Environment env = ev.base;
  std::map<std::string, std::vector<double>> columns = row_columns(profile, ev, x, given);
  backward_scope(profile, ev, x, dy, env, columns);
  ColumnValues out;
  for (const auto& g : list) out[g.name] = ev.elementwise(g.expression, env, columns, x.size());
  return out;
}

}  // namespace

ColumnValues row_param_gradients_f64(const KernelProfile& profile, const std::vector<double>& x,
                                     const std::vector<double>& dy, const Environment& parameters,
                                     const ColumnValues& weights) {
  return gradients_over_row(profile, x, dy, parameters, weights, profile.row_program->param_gradients);
}

ColumnValues row_input_gradients_f64(const KernelProfile& profile, const std::vector<double>& x,
                                     const std::vector<double>& dy, const Environment& parameters,
                                     const ColumnValues& columns_given) {
  return gradients_over_row(profile, x, dy, parameters, columns_given, profile.row_program->input_gradients);
}

}  // namespace liger::kernel_dev
