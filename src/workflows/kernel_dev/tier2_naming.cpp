// Tier 2 offline: the name of a derived row op (tier2_derive.h, tier2_op_name), from what its code
// computes: the row op it is, recognised numerically with its weight/bias/offset variant, else the
// name its author gave it, else the row functions it calls; never a name the library has.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "workflows/kernel_dev/tier2_derive.h"

namespace liger::kernel_dev {

namespace {

// The value of `e` at every column of one row: each row reduction folded to its number first
// (innermost first), then the element-wise rest evaluated per column.
std::vector<double> eval_row(const Expr& e, const std::map<std::string, std::vector<double>>& columns,
                             const Environment& env, std::size_t cols) {
  std::function<Expr(const Expr&)> fold = [&](const Expr& node) -> Expr {
    if (node->kind == Kind::Call && node->args.size() == 1 && node->name == "row_dropped") return fold(node->args[0]);
    std::vector<Expr> args;
    for (const auto& a : node->args) args.push_back(fold(a));
    if (node->kind == Kind::Call && args.size() == 1 && node->name.rfind("row_", 0) == 0) {
      const std::string op = node->name.substr(4);
      double acc = op == "max" || op == "shift" ? -INFINITY : op == "min" ? INFINITY : 0.0;
      for (std::size_t j = 0; j < cols; ++j) {
        Environment at = env;
        for (const auto& [name, values] : columns) at[name] = values[j];
        const double v = eval_f64(args[0], at);
        if (op == "max" || op == "shift") acc = std::max(acc, v);
        else if (op == "min") acc = std::min(acc, v);
        else acc += v;
      }
      return num(op == "mean" ? acc / static_cast<double>(cols) : acc);
    }
    return args.empty() ? node : rebuild(node, args);
  };
  const Expr folded = fold(e);
  std::vector<double> out(cols);
  for (std::size_t j = 0; j < cols; ++j) {
    Environment at = env;
    for (const auto& [name, values] : columns) at[name] = values[j];
    out[j] = eval_f64(folded, at);
  }
  return out;
}

bool close(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t j = 0; j < a.size(); ++j)
    if (!std::isfinite(a[j]) || !(std::fabs(a[j] - b[j]) <= 1e-4 * (1 + std::fabs(b[j])))) return false;
  return true;
}

// The row ops the library's naming knows, with the learnable affine their PyTorch module has
// (nn.RMSNorm: a weight; nn.LayerNorm: a weight and a bias; the rest: none).
struct KnownRowOp {
  std::string name;
  Expr form;  // over x
  std::string canonical;  // "", "weight", "weight_bias"
};

const std::vector<KnownRowOp>& known_row_ops() {
  static const std::vector<KnownRowOp> ops = [] {
    const Expr x = sym("x");
    return std::vector<KnownRowOp>{{"softmax", row_softmax(x), ""},
                                   {"log_softmax", row_log_softmax(x), ""},
                                   {"logsumexp", row_logsumexp(x), ""},
                                   {"l2_normalize", div(x, row_norm(x, 2)), ""},
                                   {"rms_norm", row_rms_norm(x, num(1e-6)), "weight"},
                                   {"layer_norm", row_layer_norm(x, num(1e-5)), "weight_bias"}};
  }();
  return ops;
}

// The suffix of a variant of `op` that is not its canonical affine.
std::string variant_name(const KnownRowOp& op, const std::string& variant) {
  if (variant == op.canonical) return op.name;
  const bool layer = op.name == "layer_norm";
  if (variant.empty()) return op.name + (op.canonical.empty() ? "" : "_no_affine");
  if (variant == "weight") return op.name + (layer ? "_no_bias" : "_weighted");
  if (variant == "offset") return op.name + (layer ? "_offset_no_bias" : "_offset");
  if (variant == "bias") return op.name + "_bias_only";
  if (variant == "weight_bias") return op.name + (op.canonical == "weight" ? "_bias" : "_affine");
  return op.name + (layer ? "_offset" : "_offset_bias");  // offset_bias
}

std::string snake(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    // A word starts at an upper-case letter after a lower-case letter or digit, and at the last
    // capital of an acronym followed by a lower-case letter: LlamaRMSNorm -> llama_rms_norm.
    if (std::isupper(c) && i > 0) {
      const unsigned char before = static_cast<unsigned char>(text[i - 1]);
      const bool next_lower = i + 1 < text.size() && std::islower(static_cast<unsigned char>(text[i + 1]));
      if (std::islower(before) || std::isdigit(before) || (std::isupper(before) && next_lower)) out += '_';
    }
    if (std::isalnum(c)) out += static_cast<char>(std::tolower(c));
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// A function or class name that says what the op is: not a placeholder (f, fn, forward, func2,
// my_module, Model), at least three letters once "my_" and trailing digits are set aside.
bool meaningful(const std::string& name) {
  static const std::set<std::string> generic = {
      "forward", "func", "fn", "fun", "function", "op", "op_snippet", "snippet", "compute", "kernel", "model", "module",
      "lambda", "main", "run", "apply", "net", "network", "layer", "block", "custom", "test", "foo", "bar", "baz",
      "example", "sample", "demo", "impl", "tmp", "temp", "method", "call", "operation", "my", "new", "user"};
  std::string core = name;
  if (core.rfind("my_", 0) == 0) core = core.substr(3);
  while (!core.empty() && (std::isdigit(static_cast<unsigned char>(core.back())) || core.back() == '_')) core.pop_back();
  return core.size() >= 3 && std::isalpha(static_cast<unsigned char>(core[0])) && !generic.count(core);
}

}  // namespace

std::string recognised_row_variant(const Program& program) {
  if (program.inputs.size() != 1) return "";
  std::vector<std::string> weights;
  Environment env;
  for (const auto& p : program.params) {
    if (p.learnable && p.shape == ParamShape::Channel) weights.push_back(p.name);
    else env[p.name] = p.init;
  }
  if (weights.size() > 2) return "";
  constexpr std::size_t cols = 8;
  env["n"] = static_cast<double>(cols);
  std::uint32_t state = 0x9e3779b9u;
  auto uniform = [&](double lo, double hi) {
    state = state * 1664525u + 1013904223u;
    return lo + (hi - lo) * static_cast<double>(state >> 8) / static_cast<double>(1u << 24);
  };
  struct Row {
    std::map<std::string, std::vector<double>> columns;  // x, and the weights as w0, w1
    std::vector<double> y;
  };
  std::vector<Row> rows(3);
  try {
    for (auto& r : rows) {
      for (std::size_t j = 0; j < cols; ++j) {
        r.columns["x"].push_back(uniform(-2, 2));
        for (std::size_t k = 0; k < weights.size(); ++k) r.columns["w" + std::to_string(k)].push_back(uniform(0.5, 1.5) * (k ? -1 : 1));
      }
      std::map<std::string, std::vector<double>> named = {{program.inputs[0], r.columns["x"]}};
      for (std::size_t k = 0; k < weights.size(); ++k) named[weights[k]] = r.columns["w" + std::to_string(k)];
      r.y = eval_row(program.expression, named, env, cols);
      // Only a parameter the output barely depends on (an eps) may sit in a recognised op: a
      // temperature or a scale at its default would otherwise pass for the plain op.
      for (const auto& [name, value] : env) {
        if (name == "n") continue;
        Environment moved = env;
        moved[name] = value == 0 ? 0.5 : value * 2;
        if (!close(eval_row(program.expression, named, moved, cols), r.y)) return "";
      }
    }
    const Expr x = sym("x"), w0 = sym("w0"), w1 = sym("w1");
    for (const auto& op : known_row_ops()) {
      std::vector<std::pair<std::string, Expr>> forms;
      if (weights.empty()) forms = {{"", op.form}};
      if (weights.size() == 1)
        forms = {{"weight", mul(op.form, w0)}, {"offset", mul(op.form, add(num(1), w0))}, {"bias", add(op.form, w0)}};
      if (weights.size() == 2)
        for (const auto& [w, b] : {std::pair{w0, w1}, std::pair{w1, w0}}) {
          forms.push_back({"weight_bias", add(mul(op.form, w), b)});
          forms.push_back({"offset_bias", add(mul(op.form, add(num(1), w)), b)});
        }
      for (const auto& candidate : forms) {
        // A named variable, not a structured binding: clang 14 (the fuzz build) cannot capture one.
        const Expr& form = candidate.second;
        if (std::all_of(rows.begin(), rows.end(),
                        [&](const Row& r) { return close(eval_row(form, r.columns, {}, cols), r.y); }))
          return variant_name(op, candidate.first);
      }
    }
  } catch (const std::exception&) {
    return "";  // a form outside the evaluator (it cannot be one of the known ops)
  }
  return "";
}

std::string tier2_op_name(const Program& program, const std::string& source_name, const KnowledgeBase& knowledge,
                          std::vector<std::string>& notes, const std::string& callees) {
  const std::string recognised = recognised_row_variant(program);
  std::string op = meaningful(snake(source_name)) ? snake(source_name) : recognised;
  std::string called = callees;
  if (called.empty()) {
    // An expression has no callee left: its reductions say what it computes (mean, sum, amax, ...).
    static const std::map<std::string, std::string> reductions = {
        {"row_sum", "sum"}, {"row_mean", "mean"}, {"row_max", "amax"}, {"row_min", "amin"}};
    std::vector<std::string> seen;
    std::function<void(const Expr&)> walk = [&](const Expr& e) {
      for (const auto& a : e->args) walk(a);
      auto it = e->kind == Kind::Call ? reductions.find(e->name) : reductions.end();
      if (it != reductions.end() && std::find(seen.begin(), seen.end(), it->second) == seen.end() && seen.size() < 3)
        seen.push_back(it->second);
    };
    walk(program.expression);
    for (const auto& s : seen) called += (called.empty() ? "" : "_") + s;
  }
  if (op.empty() && !called.empty()) op = called + "_custom";
  if (op.empty()) {
    std::uint32_t h = 2166136261u;  // FNV-1a of the expression: the same op gets the same name
    for (unsigned char c : to_string(program.expression)) h = (h ^ c) * 16777619u;
    char buffer[16];
    std::snprintf(buffer, sizeof(buffer), "%08x", h);
    op = std::string("row_") + buffer;
  }
  auto library_has = [&](const std::string& name) {
    return std::find(knowledge.tiers.kernels.begin(), knowledge.tiers.kernels.end(), name) != knowledge.tiers.kernels.end();
  };
  if (library_has(op)) {
    const std::string taken = op;
    // The variant's own name when the recognised op differs from the library's form (rms_norm
    // without its weight: rms_norm_no_affine), else _custom until the name is free.
    if (!recognised.empty() && recognised != op) op = recognised;
    while (library_has(op)) op += "_custom";
    notes.push_back("the library already has an op named '" + taken + "'; this one is '" + op + "' (--name picks another)");
  }
  return op;
}

}  // namespace liger::kernel_dev
