#include "workflows/kernel_dev/row_program.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <regex>
#include <set>
#include <stdexcept>

#include "workflows/kernel_dev/codegen.h"

namespace liger::kernel_dev {

namespace {

const std::set<std::string> kOps = {"sum", "mean", "max", "min"};

// Names the generated C++, CUDA and Python cannot take as a row scalar: the templates' own locals
// (trailing '_', the emitter's t<N> temporaries), the math policy M, keywords of the three
// languages the expressions are emitted into, and the expression language's constants/functions.
bool reserved_name(const std::string& name) {
  static const std::set<std::string> words = {
      "n", "pi", "e", "M", "p", "torch", "F", "T", "float", "double", "int", "const", "return", "if", "else", "for",
      "while", "do", "in", "is", "and", "or", "not", "lambda", "def", "class", "None", "True", "False", "auto",
      "static", "struct", "void", "new", "delete", "this", "true", "false", "inline", "template", "typename",
      "sizeof", "switch", "case", "break", "continue", "default", "namespace", "using", "pass", "import", "from",
      "with", "as", "global", "yield", "raise", "try", "except", "finally", "assert", "del", "elif", "nonlocal"};
  if (words.count(name) || find_primitive(name)) return true;
  static const std::regex temporary("t[0-9]+");
  return std::regex_match(name, temporary);
}

bool identifier(const std::string& name) {
  static const std::regex re("[A-Za-z][A-Za-z0-9_]*");
  return std::regex_match(name, re) && name.back() != '_';
}

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

struct Checked {
  std::vector<std::string> problems;
  std::vector<std::pair<std::string, Expr>> forward, backward;  // (field path, parsed expression)
  Expr output, grad;
  std::vector<std::pair<std::string, Expr>> param_grads;  // (weight, its per-row contribution)
  std::vector<std::string> weights;                      // learnable per-column parameters
  std::set<std::string> scalar_weights;                  // those of them that are one learnable scalar
  std::vector<std::string> others;                       // the input tensors after the first
  std::vector<std::pair<std::string, Expr>> input_grads;  // (input, its gradient per column)
  // Forward reductions the backward recomputes from x (indices, forward order): those it reads that
  // are not saved, and what they need in turn.
  std::vector<std::size_t> recompute;
  // Forward reductions the forward stores per row (fp32) for the backward (backward.uses names them).
  std::vector<std::string> saved_stats;
  bool saves_input = false, saves_output = false;
  bool per_row = false;
};

Checked check(const KernelProfile& p) {
  Checked c;
  auto problem = [&](const std::string& text) { c.problems.push_back("row_program: " + text); };
  if (!p.row_program) return c;
  const RowProgramSpec& r = *p.row_program;
  if (p.tier != 2)
    problem("only a Tier-2 (row reduction) profile has a row program; this profile is Tier " + std::to_string(p.tier));
  if (p.inputs.empty() || p.outputs.size() != 1) {
    problem("a Tier-2 row program has one or more input tensors and one output tensor ([rows, cols] each); the "
            "profile has " + std::to_string(p.inputs.size()) + " input(s) and " + std::to_string(p.outputs.size()) +
            " output(s)");
    return c;
  }
  if (p.inputs.size() > kMaxRowInputs) {
    problem("a Tier-2 row program reads at most " + std::to_string(kMaxRowInputs) + " input tensors; the profile has " +
            std::to_string(p.inputs.size()));
    return c;
  }
  const std::string x = p.inputs[0].name, y = p.outputs[0].name, dy = "d" + y, dx = "d" + x;
  // The inputs after the first: [rows, cols] like x, read per column with it, each with a gradient.
  std::set<std::string> others;
  for (std::size_t i = 1; i < p.inputs.size(); ++i) {
    const std::string& o = p.inputs[i].name;
    if (!identifier(o) || reserved_name(o) || o == x || o == y || o == dy || o == dx || others.count(o) ||
        others.count("d" + o) || o == "d" + x || "d" + o == x || "d" + o == y)
      problem("input '" + o + "' clashes with a reserved, tensor or gradient name");
    others.insert(o);
    c.others.push_back(o);
  }
  // Learnable per-column weights are read per column by every pass (row_program.h). A learnable
  // scalar is a weight of one element: the kernel reads it once per thread and sums its gradient
  // over rows and columns in one fp32 register per thread.
  std::set<std::string> params, weights;
  for (const auto& m : p.module_parameters) params.insert(m.name);
  for (const auto& l : p.learnable_parameters) {
    if (l.shape != "channel" && l.shape != "scalar") {
      problem("learnable parameter '" + l.name + "' has shape '" + l.shape + "': generated Tier-2 kernels take "
              "learnable per-column (channel) weights and scalars");
      continue;
    }
    if (l.shape == "scalar") c.scalar_weights.insert(l.name);
    if (!identifier(l.name) || reserved_name(l.name) || l.name == x || l.name == y || l.name == dy || l.name == dx ||
        params.count(l.name) || weights.count(l.name) || l.name == "d" + x || others.count(l.name) ||
        others.count("d" + l.name))
      problem("learnable parameter '" + l.name + "' clashes with a reserved, tensor or parameter name");
    weights.insert(l.name);
    params.insert(l.name);
    c.weights.push_back(l.name);  // the profile's order: the C ABI's argument order
  }
  for (const std::string& tensor : {x, y})
    if (!identifier(tensor) || reserved_name(tensor))
      problem("the tensor name '" + tensor + "' cannot be used in the generated code; use x and y");
  for (const auto& name : params)
    if (!identifier(name) || reserved_name(name) || name == x || name == y || name == dy || name == dx ||
        (others.count(name) && !weights.count(name)))
      problem("module parameter '" + name + "' clashes with a reserved or tensor name");

  // d<input> names an input's gradient in the generated code: no parameter may take it.
  for (const auto& o : others)
    if (params.count("d" + o)) problem("parameter 'd" + o + "' clashes with the gradient of the input '" + o + "'");

  std::set<std::string> seen;
  auto declare = [&](const RowReduction& red, const std::string& where) {
    if (!identifier(red.name)) {
      problem(where + ": name '" + red.name + "' is not an identifier (letters, digits, '_'; not ending in '_')");
      return;
    }
    if (reserved_name(red.name) || red.name == x || red.name == y || red.name == dy || red.name == dx ||
        params.count(red.name) || others.count(red.name) ||
        std::any_of(others.begin(), others.end(), [&](const std::string& o) { return red.name == "d" + o; }))
      problem(where + ": name '" + red.name + "' is reserved or already a tensor/parameter name");
    else if (seen.count(red.name))
      problem(where + ": name '" + red.name + "' is used twice");
    seen.insert(red.name);
    if (!kOps.count(red.op)) problem(where + ": op '" + red.op + "' is not one of sum, mean, max, min");
  };
  // Parses `text` and checks that it names only `allowed`; nullptr after a problem.
  auto parse = [&](const std::string& text, const std::string& where, const std::set<std::string>& allowed,
                   const std::string& hint) -> Expr {
    if (text.empty()) {
      problem(where + ": the expression is empty");
      return nullptr;
    }
    Expr e;
    try {
      e = parse_expression(text);
    } catch (const std::exception& error) {
      problem(where + ": '" + text + "' does not parse: " + error.what());
      return nullptr;
    }
    std::set<std::string> unknown;
    for (const auto& s : free_symbols(e))
      if (!allowed.count(s)) unknown.insert(s);
    if (!unknown.empty()) {
      problem(where + ": '" + text + "' uses " + join(unknown) + ", not available there (available: " + join(allowed) +
              ")" + hint);
      return nullptr;
    }
    return e;
  };

  if (r.forward_reductions.empty())
    problem("forward.reductions is empty: a Tier-2 op reduces over the row at least once (else it is Tier 1)");
  std::set<std::string> scope = params;
  scope.insert({x, "n"});
  scope.insert(others.begin(), others.end());
  for (std::size_t i = 0; i < r.forward_reductions.size(); ++i) {
    const auto& red = r.forward_reductions[i];
    const std::string where = "forward.reductions[" + std::to_string(i) + "] (" + red.name + ")";
    declare(red, where);
    if (Expr e = parse(red.expression, where, scope, "")) c.forward.push_back({red.name, e});
    scope.insert(red.name);
  }
  c.output = parse(r.output, "forward.output", scope, "");
  c.per_row = per_row_output(p);
  const std::set<std::string> output_reads = c.output ? free_symbols(c.output) : std::set<std::string>{};
  if (c.per_row && std::any_of(output_reads.begin(), output_reads.end(),
                               [&](const std::string& s) { return s == x || others.count(s) > 0; }))
    problem("forward.output '" + r.output + "' uses an input tensor per column, but the output's shape " + p.outputs[0].shape +
            " is one value per row: write it over the row scalars only, or make the output [rows, cols]");

  // The backward sees the upstream gradient, what the forward saved (x, y, and the row statistics
  // backward.uses names: one fp32 value per row each, written by the forward), and the other
  // forward reductions (recomputed from the saved input).
  std::set<std::string> forward_names;
  for (const auto& red : r.forward_reductions) forward_names.insert(red.name);
  if (r.backward_uses.empty()) problem("backward.uses is empty: list what the backward reads (" + x + " and/or " + y + ")");
  std::set<std::string> saved_stats;
  for (const auto& u : r.backward_uses) {
    if (u == x) c.saves_input = true;
    else if (u == y) c.saves_output = true;
    else if (forward_names.count(u)) {
      if (saved_stats.insert(u).second) c.saved_stats.push_back(u);
    } else
      problem("backward.uses: '" + u + "' is neither the input '" + x + "', the output '" + y +
              "' nor a forward reduction (" + join(forward_names) + ") to save per row");
  }
  if (!c.saves_input && !c.saves_output && !c.saved_stats.empty())
    problem("backward.uses: the backward reads the rows of " + x + " or " + y + " besides the saved row statistics (" +
            join(saved_stats) + "); list one of them");
  // The forward's order (the stats' layout per row), whatever the order of backward.uses.
  std::sort(c.saved_stats.begin(), c.saved_stats.end(), [&](const std::string& a, const std::string& b) {
    auto index = [&](const std::string& n) {
      for (std::size_t i = 0; i < r.forward_reductions.size(); ++i)
        if (r.forward_reductions[i].name == n) return i;
      return r.forward_reductions.size();
    };
    return index(a) < index(b);
  });
  if (c.per_row && c.saves_output)
    problem("backward.uses: a per-row output " + y + " determines no column of " + x +
            "; the backward of a per-row output reads " + x);
  std::set<std::string> bscope = params;
  bscope.insert({dy, "n"});
  // Every input tensor reaches the backward (the autograd function saves them all).
  bscope.insert(others.begin(), others.end());
  if (c.saves_input) bscope.insert(x);
  if (c.saves_output) bscope.insert(y);
  bscope.insert(saved_stats.begin(), saved_stats.end());
  if (c.saves_input) bscope.insert(forward_names.begin(), forward_names.end());
  const std::string hint = c.saves_input ? ""
                                         : "; a forward reduction the backward names is saved per row when "
                                           "backward.uses lists it, else recomputed from the saved input (which then "
                                           "needs " + x + " in backward.uses)";
  std::set<std::string> forward_reads;  // the forward reductions the backward's expressions name
  auto note_forward_uses = [&](const Expr& e) {
    if (!e) return;
    for (const auto& s : free_symbols(e))
      if (forward_names.count(s)) forward_reads.insert(s);
  };
  for (std::size_t i = 0; i < r.backward_reductions.size(); ++i) {
    const auto& red = r.backward_reductions[i];
    const std::string where = "backward.reductions[" + std::to_string(i) + "] (" + red.name + ")";
    declare(red, where);
    Expr e = parse(red.expression, where, bscope, hint);
    note_forward_uses(e);
    if (e) c.backward.push_back({red.name, e});
    bscope.insert(red.name);
  }
  c.grad = parse(r.grad_input, "backward.grad_input", bscope, hint);
  note_forward_uses(c.grad);
  std::set<std::string> graded;
  for (std::size_t i = 0; i < r.param_gradients.size(); ++i) {
    const auto& g = r.param_gradients[i];
    const std::string where = "backward.param_gradients[" + std::to_string(i) + "] (" + g.name + ")";
    if (!weights.count(g.name)) {
      problem(where + ": '" + g.name + "' is not a learnable per-column parameter of the profile" +
              (weights.empty() ? std::string(" (it has none)") : " (" + join(weights) + ")"));
      continue;
    }
    if (!graded.insert(g.name).second) problem(where + ": a second gradient for '" + g.name + "'");
    Expr e = parse(g.expression, where, bscope, hint);
    note_forward_uses(e);
    if (e) c.param_grads.push_back({g.name, e});
  }
  for (const auto& w : weights)
    if (!graded.count(w))
      problem("backward.param_gradients: no gradient for the learnable parameter '" + w +
              "' (its contribution per column of one row; dw is its sum over the rows)");
  std::set<std::string> input_graded;
  for (std::size_t i = 0; i < r.input_gradients.size(); ++i) {
    const auto& g = r.input_gradients[i];
    const std::string where = "backward.input_gradients[" + std::to_string(i) + "] (" + g.name + ")";
    if (!others.count(g.name)) {
      problem(where + ": '" + g.name + "' is not one of the inputs after the first" +
              (others.empty() ? std::string(" (the profile has one input; its gradient is grad_input)")
                              : " (" + join(others) + ")"));
      continue;
    }
    if (!input_graded.insert(g.name).second) problem(where + ": a second gradient for '" + g.name + "'");
    Expr e = parse(g.expression, where, bscope, hint);
    note_forward_uses(e);
    if (e) c.input_grads.push_back({g.name, e});
  }
  for (const auto& o : c.others)
    if (!input_graded.count(o))
      problem("backward.input_gradients: no gradient for the input '" + o + "' (d" + o + " per column of one row)");
  if (!c.others.empty() && !c.saves_input)
    problem("backward.uses: an op with several input tensors reads " + x + " in the backward (the generated backward "
            "takes every input), so list " + x);
  if (!weights.empty() && c.saves_output && !c.saves_input)
    problem("backward.uses: an op with learnable weights reads " + x + " in the backward (the weights' gradients "
            "need the normalised input), so list " + x);
  // What the backward recomputes: the forward reductions it reads that are not saved, and the ones
  // those read in turn (a saved statistic ends the chain: entropy saving m and s recomputes nothing).
  std::set<std::string> needed;
  std::vector<std::string> pending(forward_reads.begin(), forward_reads.end());
  std::set<std::string> saved_read;  // saved statistics something in the backward reads
  while (!pending.empty()) {
    const std::string name = pending.back();
    pending.pop_back();
    if (saved_stats.count(name)) {
      saved_read.insert(name);
      continue;
    }
    if (!needed.insert(name).second) continue;
    for (const auto& [fname, e] : c.forward)
      if (fname == name)
        for (const auto& s : free_symbols(e))
          if (forward_names.count(s)) pending.push_back(s);
  }
  for (std::size_t i = 0; i < c.forward.size(); ++i)
    if (needed.count(c.forward[i].first)) c.recompute.push_back(i);
  for (const auto& s : c.saved_stats)
    if (!saved_read.count(s))
      problem("backward.uses: the forward reduction '" + s + "' is saved per row but nothing in the backward reads it; "
              "remove it from backward.uses");
  return c;
}

// A PyTorch expression of `e`: the names of the generated module's _F helpers for functions,
// '**' for powers, Python literals.
std::string python(const Expr& e) {
  const auto& a = e->args;
  switch (e->kind) {
    case Kind::Number: {
      if (std::isinf(e->value)) return e->value > 0 ? "math.inf" : "(-math.inf)";
      char buffer[64];
      std::snprintf(buffer, sizeof(buffer), "%.17g", e->value);
      std::string text = buffer;
      if (text.find_first_of(".en") == std::string::npos) text += ".0";
      return e->value < 0 ? "(" + text + ")" : text;
    }
    case Kind::Symbol: return e->name;
    case Kind::Add: return "(" + python(a[0]) + " + " + python(a[1]) + ")";
    case Kind::Sub: return "(" + python(a[0]) + " - " + python(a[1]) + ")";
    case Kind::Mul: return "(" + python(a[0]) + " * " + python(a[1]) + ")";
    case Kind::Div: return "(" + python(a[0]) + " / " + python(a[1]) + ")";
    case Kind::Pow: return "(" + python(a[0]) + " ** " + python(a[1]) + ")";
    case Kind::Neg: return "(-" + python(a[0]) + ")";
    case Kind::Compare: return "(" + python(a[0]) + " " + e->name + " " + python(a[1]) + ")";
    case Kind::Call: {
      std::string args;
      for (const auto& arg : a) args += (args.empty() ? "" : ", ") + python(arg);
      return "_F." + e->name + "(" + args + ")";
    }
  }
  return "?";
}

std::string without_final_newline(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// The factors of a product (a * b / c, -a): each with whether it divides.
void product_factors(const Expr& e, bool divides, std::vector<std::pair<Expr, bool>>& out) {
  if (e->kind == Kind::Mul) {
    product_factors(e->args[0], divides, out);
    product_factors(e->args[1], divides, out);
  } else if (e->kind == Kind::Div) {
    product_factors(e->args[0], divides, out);
    product_factors(e->args[1], !divides, out);
  } else if (e->kind == Kind::Neg) {
    out.push_back({num(-1), false});
    product_factors(e->args[0], divides, out);
  } else {
    out.push_back({e, divides});
  }
}

// A sum (or mean) over the columns of a product with factors that are one per row is that row
// factor times the sum of the rest: the column loop multiplies only the per-column factors and the
// row factor scales the combined value once (the backward's sum(-0.5 * dy * x / sqrt(s)^3) sums
// dy * x). Returns the per-column part and sets `row_factor` (nullptr when nothing factors out).
Expr factor_row_scale(const Expr& e, const std::function<bool(const Expr&)>& per_row, Expr& row_factor) {
  std::vector<std::pair<Expr, bool>> factors;
  product_factors(e, false, factors);
  Expr row_num = num(1), row_den = num(1), col_num = num(1), col_den = num(1);
  bool any_row = false, any_column = false;
  for (const auto& [factor, divides] : factors) {
    const bool row = per_row(factor);
    any_row = any_row || row;
    any_column = any_column || !row;
    Expr& target = row ? (divides ? row_den : row_num) : (divides ? col_den : col_num);
    target = is_number(target, 1) ? factor : mul(target, factor);
  }
  if (!any_row || !any_column) {
    row_factor = nullptr;
    return e;
  }
  row_factor = simplify(is_number(row_den, 1) ? row_num : div(row_num, row_den));
  if (is_number(row_factor, 1)) {
    row_factor = nullptr;
    return e;
  }
  return simplify(is_number(col_den, 1) ? col_num : div(col_num, col_den));
}

// Splits a pass's per-column expression into values that are one per row -- every maximal
// subexpression free of the per-column tensors, and the reciprocal of a per-row divisor -- and
// what remains per column. The pass computes the row values once, before its column loop: the
// layer norm's rsqrt(var + eps), softmax's 1 / s and the backward's powers of a norm then cost one
// evaluation per row instead of one per element (these kernels are bound by instructions per
// element, not by bytes). a / r becomes a * (1 / r): one more rounding in fp32 (the fp64
// reference keeps a / r and the tolerances cover it), and the 16-bit math policy's division is
// already a reciprocal and a multiply.
class RowHoister {
 public:
  RowHoister(std::set<std::string> column_symbols, std::string prefix)
      : column_(std::move(column_symbols)), prefix_(std::move(prefix)) {}

  Expr run(const Expr& e) { return visit(e); }
  // A named row value holding `e` (even a trivial one), for code outside the column loop.
  std::string named(const Expr& e) {
    for (const auto& [name, value] : values_)
      if (equal(value, e)) return name;
    const std::string name = prefix_ + std::to_string(values_.size()) + "_";
    values_.push_back({name, e});
    return name;
  }
  bool per_row_value(const Expr& e) const { return per_row(e); }
  const std::vector<std::pair<std::string, Expr>>& row_values() const { return values_; }

 private:
  bool per_row(const Expr& e) const {
    for (const auto& s : free_symbols(e))
      if (column_.count(s)) return false;
    return true;
  }
  static bool trivial(const Expr& e) {
    return e->kind == Kind::Number || e->kind == Kind::Symbol ||
           (e->kind == Kind::Neg && (e->args[0]->kind == Kind::Number || e->args[0]->kind == Kind::Symbol));
  }
  Expr hoist(const Expr& e) {
    if (trivial(e)) return e;
    for (const auto& [name, value] : values_)
      if (equal(value, e)) return sym(name);
    const std::string name = prefix_ + std::to_string(values_.size()) + "_";
    values_.push_back({name, e});
    return sym(name);
  }
  Expr visit(const Expr& e) {
    if (per_row(e)) return hoist(e);
    // A product's per-row factors, wherever the simplifier put them (2 * (g * x)), as one value.
    if (e->kind == Kind::Mul || e->kind == Kind::Div || e->kind == Kind::Neg) {
      Expr row_factor;
      const Expr column_part = factor_row_scale(e, [this](const Expr& f) { return per_row(f); }, row_factor);
      if (row_factor && !trivial(row_factor)) return mul(visit_children(column_part), hoist(row_factor));
    }
    if (e->kind == Kind::Div && per_row(e->args[1]) && !is_number(e->args[1]))
      return mul(visit(e->args[0]), hoist(div(num(1), e->args[1])));
    return visit_children(e);
  }
  Expr visit_children(const Expr& e) {
    if (per_row(e)) return hoist(e);
    auto node = std::make_shared<Node>(*e);
    for (auto& a : node->args) a = visit(a);
    return node;
  }

  std::set<std::string> column_;
  std::string prefix_;
  std::vector<std::pair<std::string, Expr>> values_;
};

// `column_symbols`: the tensors read per column in this pass (x, and y and dy unless the output is
// one value per row); every other symbol (parameters, n, earlier reductions) is a row value.
RowPassCode pass(const std::string& name, const std::string& op, const Expr& parsed, const std::string& target,
                 const std::set<std::string>& column_symbols) {
  RowPassCode code;
  code.name = name;
  code.op = op;
  Expr e = simplify(parsed);
  code.expression = to_string(e);
  const std::string indent = "        ";
  RowHoister hoister(column_symbols, name + "_r");
  Expr summed = e;
  if (op == "sum" || op == "mean") {
    Expr row_factor;
    summed = factor_row_scale(e, [&](const Expr& f) { return hoister.per_row_value(f); }, row_factor);
    if (row_factor) {
      code.post_uses = free_symbols(row_factor);
      code.post_scale = name + "_s_";
      code.post_cuda = "float " + code.post_scale + ";  // once per row, after the combine\n{\n" +
                       emit_statements({{code.post_scale, row_factor}}, Dialect::CudaF32, "  ").statements + "}";
    }
  }
  code.column_uses = free_symbols(summed);
  const Expr per_column = hoister.run(summed);
  code.column_value = per_column;
  code.cuda = without_final_newline(emit_statements({{target, per_column}}, Dialect::CudaF32, indent).statements);
  if (!hoister.row_values().empty()) {
    std::string declared;
    for (const auto& [value_name, value] : hoister.row_values()) declared += (declared.empty() ? "" : ", ") + value_name;
    code.row_cuda = "float " + declared + ";  // once per row\n{\n" +
                    emit_statements(hoister.row_values(), Dialect::CudaF32, "  ").statements + "}";
  }
  // The fp64 reference evaluates the expression as written, so the reference tests check the hoisting.
  code.reference = without_final_newline(emit_statements({{target, e}}, Dialect::CppF64, indent).statements);
  code.python = python(e);
  return code;
}

// A row sum of terms scaled by different row factors is the sum of the terms' sums, each scaled
// after the combine: sum(dy * w * r0 - (x - mu) * r1) = r0 * sum(dy * w) - r1 * sum(x - mu).
// The split parts' loops no longer read r0 and r1, so a part can share an earlier pass (LayerNorm's
// r1 = 2 * gvar / n needs a combine first; sum(x - mu) does not). Only when at least one term has
// a row factor that uses a reduction (otherwise nothing moves); parts are named <name>_t<k>.
std::vector<RowPassCode> split_sum(const std::string& name, const std::string& op, const Expr& parsed,
                                   const std::set<std::string>& column_symbols,
                                   const std::set<std::string>& reductions, const std::set<std::string>& taken) {
  const Expr e = simplify(parsed);
  std::vector<std::pair<Expr, bool>> terms;
  if (op == "sum") sum_terms(e, false, terms);
  bool worth = false;
  if (terms.size() > 1 && terms.size() <= 4) {
    RowHoister probe(column_symbols, "");
    for (const auto& [term, negative] : terms) {
      Expr row_factor;
      factor_row_scale(term, [&](const Expr& f) { return probe.per_row_value(f); }, row_factor);
      if (!row_factor) continue;
      for (const auto& s : free_symbols(row_factor)) worth = worth || reductions.count(s) > 0;
    }
  }
  for (std::size_t k = 0; worth && k < terms.size(); ++k) worth = !taken.count(name + "_t" + std::to_string(k));
  if (!worth) return {pass(name, op, parsed, "v_", column_symbols)};
  std::vector<RowPassCode> parts;
  std::string combination;
  for (std::size_t k = 0; k < terms.size(); ++k) {
    const auto& [term, negative] = terms[k];
    const std::string part = name + "_t" + std::to_string(k);
    parts.push_back(pass(part, op, term, "v_", column_symbols));
    combination += (k == 0 ? (negative ? "-" : "") : (negative ? " - " : " + ")) + part;
  }
  parts.back().combined = name;
  parts.back().combination = combination;
  return parts;
}

// The product of `factors` (product_factors' form), simplified.
Expr product_of(const std::vector<std::pair<Expr, bool>>& factors) {
  Expr numerator = num(1), denominator = num(1);
  for (const auto& [factor, divides] : factors) {
    Expr& target = divides ? denominator : numerator;
    target = is_number(target, 1) ? factor : mul(target, factor);
  }
  return simplify(is_number(denominator, 1) ? numerator : div(numerator, denominator));
}

// `e` with the values `row_value` accepts (one per row) brought out of the two places a product
// cannot see them: exp(u + log(v)) = exp(u) * v and exp(u - log(v)) = exp(u) / v (v > 0 wherever
// log(v) is defined: a log-softmax written exp(l - m - log(s))), and (a * b)^k = a^k * b^k,
// (a / b)^k = a^k / b^k for an integer k (a probability squared, (e / s)^2). Other nodes keep
// their form.
Expr separate_row_values(const Expr& e, const std::function<bool(const Expr&)>& row_value) {
  if (e->args.empty()) return e;
  auto node = std::make_shared<Node>(*e);
  for (auto& a : node->args) a = separate_row_values(a, row_value);
  Expr rebuilt = node;
  if (rebuilt->kind == Kind::Call && rebuilt->name == "exp" && rebuilt->args.size() == 1) {
    std::vector<std::pair<Expr, bool>> terms, rest, logs;
    sum_terms(rebuilt->args[0], false, terms);
    for (const auto& t : terms)
      (t.first->kind == Kind::Call && t.first->name == "log" && t.first->args.size() == 1 && row_value(t.first) ? logs
                                                                                                               : rest)
          .push_back(t);
    if (logs.empty()) return rebuilt;
    Expr result = call("exp", {rest.empty() ? num(0) : sum_of(rest)});
    for (const auto& [log_term, negative] : logs)
      result = negative ? div(result, log_term->args[0]) : mul(result, log_term->args[0]);
    return result;
  }
  if (rebuilt->kind == Kind::Pow && (rebuilt->args[0]->kind == Kind::Mul || rebuilt->args[0]->kind == Kind::Div) &&
      rebuilt->args[1]->kind == Kind::Number && rebuilt->args[1]->value == std::round(rebuilt->args[1]->value)) {
    std::vector<std::pair<Expr, bool>> factors;
    product_factors(rebuilt->args[0], false, factors);
    bool any_row = false;
    for (const auto& f : factors) any_row = any_row || row_value(f.first);
    if (!any_row) return rebuilt;
    for (auto& f : factors) f.first = pow(f.first, rebuilt->args[1]);
    return product_of(factors);
  }
  return rebuilt;
}

// The pass a reduction made of `parts` can take by its loops alone: one after the latest pass
// (`depth`) any of them reads (1 when they read none).
int pass_after_loops(const std::vector<RowPassCode>& parts, const std::map<std::string, int>& depth) {
  int at = 1;
  for (const auto& part : parts)
    for (const auto& u : part.column_uses)
      if (auto it = depth.find(u); it != depth.end()) at = std::max(at, it->second + 1);
  return at;
}

// A sum whose column loop waits on the reductions of the pass just before it (the deepest it
// reads), split by linearity so that it does not. Products are distributed over the sums that hold
// a deepest reduction -- sum(c * (f + r)) = sum(c * f) + sum(c * r) -- and each term's factors that
// are one per row move after the combine (pass()'s post_scale); terms whose loops are the same
// are merged, their row factors added. The entropy of a row, sum(e / s * (l - m - log(s))) with
// e = exp(l - m), becomes sum(e * (l - m)) / s - log(s) * sum(e) / s: both loops read only m, so
// they join s's pass -- one pass over the row and one block combine fewer. Within a distributed
// sum only the terms that hold a deepest reduction are taken apart (the shift m stays with l:
// l - m is bounded where l alone is not, so no large sums cancel). The split is kept only when it
// moves the sum to an earlier pass and agrees with the sum in fp64. Row values inside an
// exponential or an integer power are brought out first (separate_row_values). `depth`:
// each earlier reduction's pass (1 for the first). Parts are named <name>_t<k>, the last one
// assigning `name`.
std::vector<RowPassCode> split_by_linearity(const std::string& name, const std::string& op, const Expr& parsed,
                                            const std::set<std::string>& column_symbols,
                                            const std::map<std::string, int>& depth,
                                            const std::set<std::string>& taken) {
  RowPassCode whole = pass(name, op, parsed, "v_", column_symbols);
  if (op != "sum") return {whole};
  int deepest = 0;
  for (const auto& u : whole.column_uses)
    if (auto it = depth.find(u); it != depth.end()) deepest = std::max(deepest, it->second);
  if (deepest == 0) return {whole};
  auto uses_deepest = [&](const Expr& e) {
    for (const auto& u : free_symbols(e))
      if (auto it = depth.find(u); it != depth.end() && it->second == deepest) return true;
    return false;
  };
  auto per_row = [&](const Expr& e) {
    for (const auto& u : free_symbols(e))
      if (column_symbols.count(u)) return false;
    return true;
  };
  // The signed terms, products distributed over the sums that hold a deepest reduction.
  constexpr std::size_t kMostTerms = 12;
  std::vector<std::pair<Expr, bool>> expanded;
  bool too_many = false;
  std::function<void(const Expr&, bool)> expand = [&](const Expr& e, bool negative) {
    if (too_many) return;
    if (e->kind == Kind::Add || e->kind == Kind::Sub || e->kind == Kind::Neg) {
      std::vector<std::pair<Expr, bool>> terms;
      sum_terms(e, negative, terms);
      for (const auto& [t, n] : terms) expand(t, n);
      return;
    }
    std::vector<std::pair<Expr, bool>> factors;
    product_factors(e, false, factors);
    for (std::size_t i = 0; i < factors.size(); ++i) {
      const auto& [factor, divides] = factors[i];
      if (divides || (factor->kind != Kind::Add && factor->kind != Kind::Sub) || !uses_deepest(factor)) continue;
      std::vector<std::pair<Expr, bool>> inner, keep, pieces;
      sum_terms(factor, false, inner);
      for (const auto& t : inner) (uses_deepest(t.first) ? pieces : keep).push_back(t);
      if (!keep.empty()) pieces.insert(pieces.begin(), {sum_of(keep), false});
      for (const auto& [piece, piece_negative] : pieces) {
        auto replaced = factors;
        replaced[i] = {piece, false};
        expand(product_of(replaced), negative != piece_negative);
      }
      return;
    }
    if (expanded.size() == kMostTerms) too_many = true;
    else expanded.push_back({e, negative});
  };
  expand(separate_row_values(simplify(parsed), [&](const Expr& v) { return per_row(v) && uses_deepest(v); }), false);
  if (too_many || expanded.empty()) return {whole};
  // Terms with the same loop merged: their row factors added.
  std::vector<std::pair<Expr, Expr>> merged;  // (per-column part, row factor)
  for (const auto& [term, negative] : expanded) {
    Expr row_factor;
    Expr column_part = per_row(term) ? num(1) : factor_row_scale(term, per_row, row_factor);
    if (per_row(term)) row_factor = term;
    if (!row_factor) row_factor = num(1);
    if (negative) row_factor = neg(row_factor);
    bool found = false;
    for (auto& [column, row] : merged)
      if (equal(column, column_part)) {
        row = add(row, row_factor);
        found = true;
        break;
      }
    if (!found) merged.push_back({column_part, row_factor});
  }
  if (merged.size() > 6) return {whole};
  std::vector<std::pair<Expr, bool>> split;
  for (const auto& [column, row] : merged) split.push_back({simplify(mul(column, simplify(row))), false});
  for (std::size_t k = 0; k < split.size(); ++k)
    if (taken.count(name + "_t" + std::to_string(k))) return {whole};  // a name the program already uses
  // The split is an identity per element; checked in fp64 at a few points away from any kink, so
  // a rewrite the simplifier got wrong keeps the reduction whole instead of changing the kernel.
  {
    const Expr original = simplify(parsed), rebuilt = sum_of(split);
    std::set<std::string> symbols = free_symbols(original);
    for (const auto& u : free_symbols(rebuilt)) symbols.insert(u);
    for (int trial = 0; trial < 4; ++trial) {
      Environment env;
      int k = 0;
      for (const auto& u : symbols) env[u] = 0.35 + 0.23 * ((k++ * 7 + trial * 3) % 11);
      const double want = eval_f64(original, env), got = eval_f64(rebuilt, env);
      if (!std::isfinite(want) || std::fabs(want - got) > 1e-9 * (1.0 + std::fabs(want))) return {whole};
    }
  }
  // The pass a reduction can take: after those its loop reads, not before those its row factor reads.
  auto level = [&](const RowPassCode& code) {
    int at = pass_after_loops({code}, depth);
    for (const auto& u : code.post_uses)
      if (auto it = depth.find(u); it != depth.end()) at = std::max(at, it->second);
    return at;
  };
  std::vector<RowPassCode> parts;
  std::string combination;
  int parts_level = 1;
  for (std::size_t k = 0; k < split.size(); ++k) {
    const std::string part = name + "_t" + std::to_string(k);
    parts.push_back(pass(part, op, split[k].first, "v_", column_symbols));
    parts_level = std::max(parts_level, level(parts.back()));
    combination += (k == 0 ? "" : " + ") + part;
  }
  // Only a split that moves the sum to an earlier pass (LayerNorm's gradient sums already share
  // the variance's pass: taking x - mu apart there would gain nothing and cancel large sums).
  if (parts_level >= level(whole)) return {whole};
  parts.back().combined = name;
  parts.back().combination = combination;
  return parts;
}

// Consecutive reductions in passes: a reduction joins the current pass unless its column loop
// uses a result of that pass (it needs the block combine first) or the pass is full. A row factor
// applied after the combine (post_scale) may use the pass's results: each row's chain of block
// barriers is what these kernels wait on.
std::vector<std::vector<RowPassCode>> passes_of(const std::vector<RowPassCode>& reductions) {
  std::vector<std::vector<RowPassCode>> groups;
  std::set<std::string> in_group;
  for (std::size_t i = 0; i < reductions.size(); ++i) {
    const auto& uses = reductions[i].column_uses;
    const bool depends = std::any_of(in_group.begin(), in_group.end(), [&](const std::string& n) { return uses.count(n) > 0; });
    if (groups.empty() || depends || groups.back().size() == kMaxPassGroup) {
      groups.emplace_back();
      in_group.clear();
    }
    groups.back().push_back(reductions[i]);
    in_group.insert(reductions[i].name);
  }
  return groups;
}

// The forward's passes scheduled as early as each reduction allows: its pass is one after the
// latest pass its column loop reads, and no earlier than the passes its post scale reads (those
// are combined first: earlier in the same pass or in a pass before). Independent statistics then
// share a pass wherever they were written (KL between rows: both maxima, then both sums and the
// divergence's parts -- two passes where taking them in order made four). The parts of one split
// sum share the latest of their passes (the last assigns the whole). Members keep their order, so
// a value is combined before anything in its pass that reads it. Falls back to passes_of when a
// pass would exceed kMaxPassGroup values.
std::vector<std::vector<RowPassCode>> passes_as_early_as_possible(const std::vector<RowPassCode>& sequence) {
  std::map<std::string, int> level;
  std::vector<int> levels(sequence.size(), 1);
  for (std::size_t i = 0; i < sequence.size(); ++i) {
    int at = 1;
    for (const auto& u : sequence[i].column_uses)
      if (auto it = level.find(u); it != level.end()) at = std::max(at, it->second + 1);
    for (const auto& u : sequence[i].post_uses)
      if (auto it = level.find(u); it != level.end()) at = std::max(at, it->second);
    levels[i] = at;
    level[sequence[i].name] = at;
    // A split sum's parts (<name>_t<k>, the last one naming the whole): all at the latest part's pass.
    if (!sequence[i].combined.empty()) {
      std::size_t first = i;
      while (first > 0 && sequence[first - 1].combined.empty() &&
             sequence[first - 1].name.rfind(sequence[i].combined + "_t", 0) == 0)
        --first;
      int latest = 0;
      for (std::size_t k = first; k <= i; ++k) latest = std::max(latest, levels[k]);
      for (std::size_t k = first; k <= i; ++k) {
        levels[k] = latest;
        level[sequence[k].name] = latest;
      }
      level[sequence[i].combined] = latest;
    }
  }
  const int passes = sequence.empty() ? 0 : *std::max_element(levels.begin(), levels.end());
  std::vector<std::vector<RowPassCode>> groups(static_cast<std::size_t>(passes));
  for (std::size_t i = 0; i < sequence.size(); ++i) groups[static_cast<std::size_t>(levels[i] - 1)].push_back(sequence[i]);
  for (const auto& g : groups)
    if (g.empty() || g.size() > kMaxPassGroup) return passes_of(sequence);
  return groups;
}

}  // namespace

bool reserved_in_row_program(const std::string& name) { return reserved_name(name); }

bool per_row_output(const KernelProfile& profile) {
  if (profile.outputs.size() != 1) return false;
  std::string shape;
  for (char ch : profile.outputs[0].shape)
    if (ch != ' ') shape += ch;
  return shape == "[rows]" || shape == "[rows,1]";
}

std::vector<std::string> row_program_problems(const KernelProfile& profile) { return check(profile).problems; }

Tier2Code generate_tier2(const KernelProfile& p) {
  if (!p.row_program) throw std::invalid_argument("profile '" + p.op_name + "' has no row_program");
  Checked c = check(p);
  if (!c.problems.empty()) {
    std::string all;
    for (const auto& problem : c.problems) all += (all.empty() ? "" : "; ") + problem;
    throw std::invalid_argument(all);
  }
  const RowProgramSpec& r = *p.row_program;
  Tier2Code code;
  code.input = p.inputs[0].name;
  code.output = p.outputs[0].name;
  code.saves_input = c.saves_input;
  code.saves_output = c.saves_output;
  code.per_row = c.per_row;
  // Per column: x always; y and dy unless the output is one value per row (then dy is a row value).
  std::set<std::string> columns = {code.input};
  if (!code.per_row) columns.insert({code.output, "d" + code.output});
  columns.insert(c.weights.begin(), c.weights.end());
  columns.insert(c.others.begin(), c.others.end());
  code.weights = c.weights;
  code.scalar_weights = c.scalar_weights;
  code.others = c.others;
  // The kernel's forward sums may be split into parts (split_by_linearity); the fp64 reference and
  // the profile keep the reductions whole (forward_reductions), so the reference tests check the split.
  // Every name the program uses, which a split sum's parts (<name>_t<k>) must not take.
  std::set<std::string> taken = columns;
  for (const auto& [name, e] : c.forward) taken.insert(name);
  for (const auto& [name, e] : c.backward) taken.insert(name);
  for (const auto& m : p.module_parameters) taken.insert(m.name);
  std::vector<std::vector<RowPassCode>> forward_parts;
  std::map<std::string, int> depth;
  for (std::size_t i = 0; i < c.forward.size(); ++i) {
    const std::string& name = c.forward[i].first;
    code.forward_reductions.push_back(pass(name, r.forward_reductions[i].op, c.forward[i].second, "v_", columns));
    forward_parts.push_back(split_by_linearity(name, r.forward_reductions[i].op, c.forward[i].second, columns, depth, taken));
    depth[name] = pass_after_loops(forward_parts.back(), depth);
  }
  std::vector<RowPassCode> forward_sequence;
  for (const auto& parts : forward_parts) forward_sequence.insert(forward_sequence.end(), parts.begin(), parts.end());
  code.forward_output = pass(code.output, "", c.output, code.output, columns);
  for (std::size_t i : c.recompute) code.recomputed.push_back(code.forward_reductions[i]);
  code.saved_stats = c.saved_stats;
  // The fp64 reference has no saved statistics: it recomputes every forward reduction up to the
  // last one the backward reads, saved or not (a prefix: each may use the earlier ones).
  std::size_t reference_prefix = 0;
  for (std::size_t i = 0; i < code.forward_reductions.size(); ++i) {
    const std::string& name = code.forward_reductions[i].name;
    const bool read = std::find(c.saved_stats.begin(), c.saved_stats.end(), name) != c.saved_stats.end() ||
                      std::find(c.recompute.begin(), c.recompute.end(), i) != c.recompute.end();
    if (read) reference_prefix = i + 1;
  }
  code.reference_statistics.assign(code.forward_reductions.begin(), code.forward_reductions.begin() + reference_prefix);
  for (std::size_t i = 0; i < c.backward.size(); ++i)
    code.backward_reductions.push_back(
        pass(c.backward[i].first, r.backward_reductions[i].op, c.backward[i].second, "v_", columns));
  code.grad_input = pass("d" + code.input, "", c.grad, "d" + code.input, columns);
  for (const auto& w : c.weights)
    for (const auto& [name, e] : c.param_grads)
      if (name == w) code.param_grads.push_back(pass("d" + w, "", e, "d" + w, columns));
  for (const auto& o : c.others)
    for (const auto& [name, e] : c.input_grads)
      if (name == o) code.input_grads.push_back(pass("d" + o, "", e, "d" + o, columns));
  code.forward_groups = passes_as_early_as_possible(forward_sequence);
  code.forward_online = fold_max_passes(code.forward_groups);
  // The backward's recomputed statistics and its own reductions form one sequence of passes, so a
  // gradient sum whose loop needs only the mean shares the variance's pass (LayerNorm), and one
  // that needs no statistic shares the first (RMSNorm's sum(dy * w * x) beside sum(x^2)).
  // The kernel's backward sums may be split into parts (split_sum); the fp64 reference keeps the
  // reductions whole (backward_reductions).
  std::vector<RowPassCode> backward_sequence;
  for (std::size_t i : c.recompute)
    backward_sequence.insert(backward_sequence.end(), forward_parts[i].begin(), forward_parts[i].end());
  std::set<std::string> reduction_names;
  std::map<std::string, int> backward_depth;
  for (const auto& r : code.recomputed) {
    reduction_names.insert(r.name);
    backward_depth[r.name] = depth[r.name];
  }
  for (std::size_t i = 0; i < c.backward.size(); ++i) {
    const std::string& name = c.backward[i].first;
    const std::string& op = r.backward_reductions[i].op;
    // First the split that lets the sum's loop skip a pass; else the split that lets its terms
    // share an earlier one (split_sum).
    auto parts = split_by_linearity(name, op, c.backward[i].second, columns, backward_depth, taken);
    if (parts.size() == 1) parts = split_sum(name, op, c.backward[i].second, columns, reduction_names, taken);
    backward_depth[name] = pass_after_loops(parts, backward_depth);
    for (auto& part : parts) backward_sequence.push_back(std::move(part));
    reduction_names.insert(name);
  }
  code.backward_groups = passes_as_early_as_possible(backward_sequence);
  return code;
}

}  // namespace liger::kernel_dev
