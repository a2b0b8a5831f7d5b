// The PyTorch translator's row reductions (pytorch_detail.h, row_function): torch./F./tensor-method
// reductions over the last dimension lowered to the IR's row reductions (tier2_derive.h).
#include <algorithm>
#include <cmath>

#include "workflows/kernel_dev/pytorch_detail.h"
#include "workflows/kernel_dev/tier2_derive.h"

namespace liger::kernel_dev::torch_detail {

namespace {

struct Signature {
  std::vector<std::string> positional;  // after the input
};

// PyTorch's signatures (the parameters this translation reads; others are refused by name).
const std::map<std::string, Signature>& signatures() {
  static const std::map<std::string, Signature> table = {
      {"sum", {{"dim", "keepdim", "dtype"}}},
      {"mean", {{"dim", "keepdim", "dtype"}}},
      {"amax", {{"dim", "keepdim"}}},
      {"amin", {{"dim", "keepdim"}}},
      {"max", {{"dim", "keepdim"}}},
      {"min", {{"dim", "keepdim"}}},
      {"logsumexp", {{"dim", "keepdim"}}},
      {"norm", {{"p", "dim", "keepdim", "dtype"}}},
      {"linalg.norm", {{"ord", "dim", "keepdim", "dtype"}}},
      {"linalg.vector_norm", {{"ord", "dim", "keepdim", "dtype"}}},
      {"var", {{"dim", "unbiased", "keepdim", "correction"}}},
      {"std", {{"dim", "unbiased", "keepdim", "correction"}}},
      // (var, mean) / (std, mean) of the same row: a tuple indexed or unpacked.
      {"var_mean", {{"dim", "unbiased", "keepdim", "correction"}}},
      {"std_mean", {{"dim", "unbiased", "keepdim", "correction"}}},
      {"softmax", {{"dim", "_stacklevel", "dtype"}}},
      {"log_softmax", {{"dim", "_stacklevel", "dtype"}}},
      {"softmin", {{"dim", "_stacklevel", "dtype"}}},
      {"normalize", {{"p", "dim", "eps", "out"}}},
      // The second operand is a tensor of the first's shape: a row program of two inputs.
      {"cosine_similarity", {{"x2", "dim", "eps"}}},
      {"pairwise_distance", {{"x2", "p", "eps", "keepdim"}}},
      // elementwise_affine: the nn.LayerNorm / nn.RMSNorm module's constructor argument.
      {"rms_norm", {{"normalized_shape", "weight", "eps", "elementwise_affine"}}},
      {"layer_norm", {{"normalized_shape", "weight", "bias", "eps", "elementwise_affine"}}},
  };
  return table;
}

}  // namespace

std::optional<double> constant(const Value& v) {
  if (v.type == Value::Tuple && v.items.size() == 1) return constant(v.items[0]);
  if (v.type != Value::Tensor) return std::nullopt;
  Expr e = simplify(v.expr);
  if (!is_number(e)) return std::nullopt;
  return e->value;
}

// A dim counted from the rank (x.ndim - 1, x.dim() - 2) as the negative dim it is (-1, -2).
std::optional<double> dim_value(const Value& v) {
  if (v.type == Value::Tensor && free_symbols(v.expr).count(kRankSymbol)) {
    // rank + offset: the same offset at any rank.
    const Expr at0 = simplify(substitute(v.expr, {{kRankSymbol, num(0)}}));
    const Expr at8 = simplify(substitute(v.expr, {{kRankSymbol, num(8)}}));
    if (is_number(at0) && is_number(at8) && at8->value - at0->value == 8) return at0->value;
    return std::nullopt;
  }
  return constant(v);
}


std::optional<Value> row_function(const std::string& f, const std::string& fn, const std::vector<Arg>& all,
                                  std::vector<std::string>& notes, const std::map<std::string, double>& fixed,
                                  std::map<std::string, double>& column_roles) {
  if (f == "size") {  // x.size(-1): the row length
    if (all.size() == 2 && all[1].keyword.empty() && constant(all[1].value) == -1.0) return tensor(sym("n"));
    throw Reject{fn + "(): only size(-1), the row length n, is translated", 0};
  }
  auto sig = signatures().find(f);
  if (sig == signatures().end()) return std::nullopt;
  // Bind: the first positional (or `input`) is the tensor, then the signature's names.
  Expr input;
  std::map<std::string, Value> bound;
  std::size_t positional = 0;
  for (const auto& a : all) {
    if (a.keyword == "input" || a.keyword == "x1" || (a.keyword.empty() && !input && positional == 0)) {
      if (a.value.type != Value::Tensor) throw Reject{fn + "() needs a tensor argument", 0};
      input = a.value.expr;
      if (a.keyword.empty()) positional = 1;
      continue;
    }
    std::string key = a.keyword;
    if (key.empty()) {
      if (positional - 1 >= sig->second.positional.size()) throw Reject{fn + "(): too many arguments", 0};
      key = sig->second.positional[positional++ - 1];
    } else if (std::find(sig->second.positional.begin(), sig->second.positional.end(), key) ==
               sig->second.positional.end()) {
      throw Reject{fn + "(): unsupported argument '" + key + "'", 0};
    }
    bound[key] = a.value;
  }
  // A dim or flag given by a parameter with a number (def f(x, dim=-1): x.sum(dim)) is that number:
  // it selects the reduction, it is not a value the kernel reads.
  for (const char* key : {"dim", "keepdim", "unbiased", "correction", "p", "ord"}) {
    auto it = bound.find(key);
    if (it == bound.end() || it->second.type != Value::Tensor) continue;
    std::map<std::string, Expr> values;
    for (const auto& name : free_symbols(it->second.expr))
      if (auto f = fixed.find(name); f != fixed.end()) values[name] = num(f->second);
    if (!values.empty()) it->second.expr = simplify(substitute(it->second.expr, values));
  }
  if (!input) throw Reject{fn + "() needs a tensor argument", 0};

  // max/min: a reduction with a dim (a dim given positionally is an integer; a tensor or a float
  // there is torch.maximum's `other`, handled element-wise).
  if (f == "max" || f == "min") {
    auto d = bound.find("dim");
    if (d == bound.end()) return std::nullopt;
    auto value = dim_value(d->second);
    if (d->second.type == Value::Tensor && (!value || *value != std::floor(*value) || *value >= 0) &&
        !std::any_of(all.begin(), all.end(), [](const Arg& a) { return a.keyword == "dim"; }))
      return std::nullopt;
  }
  auto flag = [&](const char* key, bool fallback) {
    auto it = bound.find(key);
    if (it == bound.end()) return fallback;
    auto value = constant(it->second);
    if (!value) throw Reject{fn + "(): " + key + " must be True or False", 0};
    return *value != 0;
  };
  auto number = [&](const char* key, double fallback) {
    auto it = bound.find(key);
    if (it == bound.end() || it->second.type == Value::None) return fallback;
    if (it->second.type == Value::String) {
      if (it->second.text == "fro") return 2.0;
      throw Reject{fn + "(): " + key + "='" + it->second.text + "' is not supported (use a number)", 0};
    }
    auto value = constant(it->second);
    if (!value) throw Reject{fn + "(): " + key + " must be a number", 0};
    return *value;
  };
  auto tensor_or = [&](const char* key, Expr fallback) -> Expr {
    auto it = bound.find(key);
    if (it == bound.end() || it->second.type == Value::None) return fallback;
    if (it->second.type != Value::Tensor) throw Reject{fn + "(): " + key + " must be a number", 0};
    return it->second.expr;
  };
  const bool norm_layer = f == "rms_norm" || f == "layer_norm";
  if (!norm_layer) {
    // pairwise_distance always reduces the last dimension (it has no dim argument).
    if (f == "pairwise_distance") bound["dim"] = tensor(num(-1));
    auto d = bound.find("dim");
    const std::string default_dim = f == "normalize" || f == "cosine_similarity" ? "1" : "";
    if (d == bound.end() || d->second.type == Value::None) {
      if (default_dim.empty())
        throw Reject{fn + "() without dim reduces the whole tensor (or uses an implicit dim); pass dim=-1 for a "
                          "reduction over the last dimension (the row)",
                     2};
      throw Reject{fn + "() reduces over dim=1 by default, the last dimension only for 2-D input; pass dim=-1", 2};
    }
    auto value = dim_value(d->second);
    if (!value || *value != -1) {
      // A positive dim is the last one only for a tensor of that rank + 1, which the code does not
      // say: dim=1 on 2-D logits is the row, on [batch, seq, hidden] it is not.
      const std::string rank_hint =
          value && *value > 0 && *value == std::floor(*value)
              ? "; dim=" + std::to_string(static_cast<long>(*value)) + " is the last dimension only of a " +
                    std::to_string(static_cast<long>(*value) + 1) + "-D input: write dim=-1 if that is what is meant"
              : "";
      throw Reject{fn + "(): dim must be -1; the Tier-2 row program is a reduction over the last (contiguous) "
                        "dimension only (move the reduced dimension last, or reduce with dim=-1)" + rank_hint,
                   2};
    }
  }
  if (bound.count("dtype")) notes.push_back(fn + "(dtype=...) dropped: the kernel accumulates in fp32");
  const bool keepdim = flag("keepdim", false);
  auto reduced = [&](Expr e) { return tensor(keepdim ? e : row_dropped(e)); };

  if (f == "sum" || f == "mean") return reduced(row_reduce(f, input));
  // max/min with a dim return (values, indices): `.values` or `[0]` reads the values.
  if (f == "amax") return reduced(row_reduce("max", input));
  if (f == "amin") return reduced(row_reduce("min", input));
  if (f == "max" || f == "min") return max_result(reduced(row_reduce(f, input)));
  if (f == "logsumexp") return reduced(row_logsumexp(input));
  if (f == "norm" || f == "linalg.norm" || f == "linalg.vector_norm")
    return reduced(row_norm(input, number(f == "norm" ? "p" : "ord", 2)));
  if (f == "var" || f == "std" || f == "var_mean" || f == "std_mean") {
    double correction = bound.count("correction") ? number("correction", 1) : (flag("unbiased", true) ? 1 : 0);
    Expr v = row_var(input, correction);
    const Value spread = reduced(f.rfind("std", 0) == 0 ? call("sqrt", {v}) : v);
    if (f == "var" || f == "std") return spread;
    Value pair;
    pair.type = Value::Tuple;
    pair.items = {spread, reduced(row_reduce("mean", input))};
    pair.text = f;
    return pair;
  }
  if (f == "softmax") return tensor(row_softmax(input));
  if (f == "softmin") return tensor(row_softmax(neg(input)));
  if (f == "log_softmax") return tensor(row_log_softmax(input));
  if (f == "normalize") return tensor(row_normalize(input, number("p", 2), tensor_or("eps", num(1e-12))));
  if (f == "pairwise_distance") {
    // ||x1 - x2 + eps||_p over the last dimension (eps added to the difference, as PyTorch does).
    const Expr other = tensor_or("x2", nullptr);
    if (!other) throw Reject{fn + "() needs the second tensor x2", 0};
    return reduced(row_norm(add(sub(input, other), tensor_or("eps", num(1e-6))), number("p", 2)));
  }
  if (f == "cosine_similarity") {
    // PyTorch divides each operand by its norm clamped to eps (the clamp outside autograd, which
    // only matters for a row of norm below eps), then sums the product; the result drops the dim.
    const Expr other = tensor_or("x2", nullptr);
    if (!other) throw Reject{fn + "() needs the second tensor x2", 0};
    const Expr eps = tensor_or("eps", num(1e-8));
    auto unit = [&](const Expr& v) { return div(v, call("max", {row_norm(v, 2), eps})); };
    return tensor(row_dropped(row_reduce("sum", mul(unit(input), unit(other)))));
  }
  // F.rms_norm / F.layer_norm: normalized_shape is the last dimension (a one-element shape).
  auto shape = bound.find("normalized_shape");
  if (shape == bound.end()) throw Reject{fn + "() needs normalized_shape (the last dimension)", 0};
  if (shape->second.type == Value::Tuple && shape->second.items.size() != 1)
    throw Reject{fn + "(): normalized_shape has " + std::to_string(shape->second.items.size()) +
                     " dimensions; the Tier-2 row program normalises over the last dimension only",
                 2};
  // A weight and bias (per-column tensors: the module's learnable parameters) scale and shift the
  // normalised row; the Tier-2 derivation gives their gradients (sums over rows).
  auto affine = [&](Expr normalised) {
    for (const char* name : {"weight", "bias"}) {
      auto it = bound.find(name);
      if (it == bound.end() || it->second.type == Value::None) continue;
      if (it->second.type != Value::Tensor) throw Reject{fn + "(): " + name + " must be a tensor", 0};
      const bool weight = std::string(name) == "weight";
      // PyTorch takes these as [normalized_shape]: a name passed here is one value per column,
      // whatever it is called (def f(x, g, b): F.layer_norm(x, x.shape[-1:], g, b)).
      if (it->second.expr->kind == Kind::Symbol) column_roles[it->second.expr->name] = weight ? 1.0 : 0.0;
      normalised = weight ? mul(normalised, it->second.expr) : add(normalised, it->second.expr);
    }
    return tensor(normalised);
  };
  if (flag("elementwise_affine", false))
    throw Reject{fn + " built inside forward has fresh learnable parameters on every call: build it once in "
                      "__init__ (self.norm = nn." + std::string(f == "rms_norm" ? "RMSNorm" : "LayerNorm") +
                      "(d)) so its weight is a parameter of the op, or pass elementwise_affine=False",
                 2};
  if (f == "rms_norm") {
    if (!bound.count("eps") || bound.at("eps").type == Value::None)
      notes.push_back(fn + "(eps=None) uses torch.finfo(dtype).eps; taken as the fp32 value 1.1920929e-07");
    return affine(row_rms_norm(input, tensor_or("eps", num(1.1920928955078125e-07))));
  }
  return affine(row_layer_norm(input, tensor_or("eps", num(1e-5))));
}

Value max_result(const Value& values) {
  Value tuple;
  tuple.type = Value::Tuple;
  tuple.items = {values, Value{}};  // (values, indices): indices are not translated
  tuple.text = "max";
  return tuple;
}

}  // namespace liger::kernel_dev::torch_detail
