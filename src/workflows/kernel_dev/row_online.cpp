// Online passes: a row max folded into the pass of the sums that are taken relative to it.
//
// A row program that shifts by its max before exponentiating (softmax, log-softmax, logsumexp,
// entropy, KL of softmaxes) reads the row once for the max and again for the sums of exp(u - m)
// and friends. On an H200 (bf16, 2026-11-28, .gpu microbenchmark of session 27) the second read is
// what keeps those forwards at 50-64% of copy: a block per row leaves its loads idle across the
// max's block combine, and the re-read row is not reliably in L1. Keeping each thread's sums
// relative to its own running max and rescaling them when the max grows (the online softmax)
// makes it one pass: 63.5 -> 72.7% of copy at 4096 columns, 50 -> 88% at 32768, 42 -> 74% at
// 128256 with the same block shape.
//
// The rule is general, not a list of ops: a sum folds in when the symbolic derivative of its
// per-column value V with respect to the max m says how V moves when m does. Writing
// d = m_old - m_new (<= 0, as the running max only grows):
//
//   dV/dm = -V           V = exp(-m) g(x)              V_new = exp(d) * V_old
//   dV/dm = -V - W,      V = exp(-m) (g(x) - m h(x))   V_new = exp(d) * (V_old + d * W_old)
//     with dW/dm = -W                                  W_new = exp(d) * W_old
//   dV/dm = -W,          V = g(x) - m h(x)             V_new = V_old + d * W_old
//     with dW/dm = 0                                   W_new = W_old
//
// (exp(u - m) * (u - m) of the entropy is the second form with W = exp(u - m)). Each identity is
// checked by evaluating both sides at random points in fp64, never by the shape of the formula, so
// any spelling the simplifier produces is recognised, and anything else (a sum that does not
// scale with exp(-m), a max written into a per-row value before the loop) keeps its own pass.
#include <algorithm>
#include <cmath>
#include <random>
#include <regex>

#include "workflows/kernel_dev/row_program.h"

namespace liger::kernel_dev {

namespace {

// Whether e is zero everywhere it is defined, judged at random points: every free symbol drawn
// from [0.3, 1.7] (inside the domain of log, sqrt and division of the common formulas; a point
// where either side is not finite is skipped). Needs 6 defined points, all within a relative
// 1e-9 of `scale` there.
bool zero_everywhere(const Expr& e, const Expr& scale) {
  std::mt19937_64 rng(20261128);
  std::uniform_real_distribution<double> draw(0.3, 1.7);
  std::set<std::string> symbols = free_symbols(e);
  for (const auto& s : free_symbols(scale)) symbols.insert(s);
  int defined = 0;
  for (int attempt = 0; attempt < 24 && defined < 6; ++attempt) {
    Environment env;
    for (const auto& s : symbols) env[s] = draw(rng);
    double value = 0, size = 0;
    try {
      value = eval_f64(e, env);
      size = eval_f64(scale, env);
    } catch (const std::exception&) {
      return false;  // a function the evaluator does not know: do not guess
    }
    if (!std::isfinite(value) || !std::isfinite(size)) continue;
    if (std::fabs(value) > 1e-9 * (1.0 + std::fabs(size))) return false;
    ++defined;
  }
  return defined >= 6;
}

bool mentions(const std::string& code, const std::string& name) {
  return std::regex_search(code, std::regex("\\b" + name + "\\b"));
}

}  // namespace

bool same_row_value(const Expr& a, const Expr& b) {
  return equal(a, b) || zero_everywhere(simplify(sub(a, b)), a);
}

std::optional<OnlineRescale> online_rescale(const Expr& value, const std::string& stat) {
  if (!free_symbols(value).count(stat)) return std::nullopt;  // a sum that never sees the max
  const Expr dv = derivative(value, stat);
  // Scaling with exp(-m): dV/dm = -V - W with dW/dm = -W (W = 0 allowed).
  const Expr rest = simplify(add(dv, value));  // -W
  if (zero_everywhere(rest, value)) return OnlineRescale{true, std::nullopt};
  const Expr w = simplify(neg(rest));
  if (zero_everywhere(simplify(add(derivative(w, stat), w)), w)) return OnlineRescale{true, w};
  // Linear in m, no exponential: dV/dm = -W with dW/dm = 0 (KL's (q - mq) - (p - mp) term in mp).
  if (zero_everywhere(dv, value)) return std::nullopt;  // does not depend on m after all
  const Expr linear = simplify(neg(dv));
  if (zero_everywhere(derivative(linear, stat), linear)) return OnlineRescale{false, linear};
  return std::nullopt;
}

std::optional<OnlinePlan> plan_online_pass(const std::vector<Expr>& values, const std::vector<std::string>& stats,
                                           std::size_t max_values) {
  OnlinePlan plan;
  std::vector<Expr> all = values;
  // How value k moves with stat s; fails when it reads s but moves some other way. Appends each
  // shift's W that no value already is (or is the negation of), so a W found for one max is then
  // checked against the others too: repeated until nothing is appended.
  auto classify = [&](std::size_t k, const std::string& stat, OnlinePlan::Update& out) -> int {
    if (!free_symbols(all[k]).count(stat)) return 0;
    const auto how = online_rescale(all[k], stat);
    if (!how) return zero_everywhere(derivative(all[k], stat), all[k]) ? 0 : -1;
    out = OnlinePlan::Update{k, how->scales, std::nullopt, 1.0};
    if (!how->shift) return 1;
    for (std::size_t j = 0; j < all.size(); ++j) {
      if (same_row_value(all[j], *how->shift)) { out.shift_by = j; return 1; }
      if (same_row_value(all[j], neg(*how->shift))) { out.shift_by = j; out.shift_sign = -1.0; return 1; }
    }
    all.push_back(*how->shift);
    out.shift_by = all.size() - 1;
    return 1;
  };
  for (int round = 0; round < 4; ++round) {
    const std::size_t before = all.size();
    plan.updates.assign(stats.size(), {});
    for (std::size_t si = 0; si < stats.size(); ++si) {
      std::vector<OnlinePlan::Update> shifts, scales;
      for (std::size_t k = 0; k < all.size(); ++k) {
        if (all.size() > max_values) return std::nullopt;
        OnlinePlan::Update u;
        const int got = classify(k, stats[si], u);
        if (got < 0) return std::nullopt;
        if (got == 0) continue;
        (u.shift_by ? shifts : scales).push_back(u);
      }
      // A shift reads its W before W itself is scaled.
      plan.updates[si] = shifts;
      plan.updates[si].insert(plan.updates[si].end(), scales.begin(), scales.end());
    }
    if (all.size() == before) {
      plan.extra.assign(all.begin() + static_cast<std::ptrdiff_t>(values.size()), all.end());
      return plan;
    }
  }
  return std::nullopt;
}

std::string online_rescale_cuda(const OnlinePlan& plan, const std::vector<std::string>& stats) {
  std::string out;
  for (std::size_t mi = 0; mi < stats.size(); ++mi) {
    const std::string& stat = stats[mi];
    const std::string to = "to_[" + std::to_string(mi) + "]";
    std::string updates;
    for (const auto& u : plan.updates[mi]) {
      const std::string acc = "acc" + std::to_string(u.value) + "_";
      std::string moved = acc;
      if (u.shift_by) moved += std::string(u.shift_sign < 0 ? " - " : " + ") + "d_ * acc" + std::to_string(*u.shift_by) + "_";
      if (u.scales) moved = u.shift_by ? "r_ * (" + moved + ")" : "r_ * " + acc;
      updates += "            " + acc + " = " + moved + ";\n";
    }
    out += "        if (" + to + " > " + stat + ") {\n"
           "          if (" + stat + " != kNoMax) {  // before any finite value every sum is still 0\n"
           "            [[maybe_unused]] const float d_ = " + stat + " - " + to + ";\n"
           "            [[maybe_unused]] const float r_ = M::exp(d_);\n" +
           updates +
           "          }\n"
           "          " + stat + " = " + to + ";\n"
           "        }\n";
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::vector<std::vector<RowPassCode>> fold_max_passes(std::vector<std::vector<RowPassCode>>& groups) {
  std::vector<std::vector<RowPassCode>> folded(groups.size());
  for (std::size_t i = 0; i + 1 < groups.size(); ++i) {
    const auto& maxima = groups[i];
    const auto& sums = groups[i + 1];
    if (maxima.empty() || !folded[i].empty()) continue;
    const bool plain_maxima = std::all_of(maxima.begin(), maxima.end(), [](const RowPassCode& r) {
      return r.op == "max" && r.column_value && r.row_cuda.empty() && r.post_scale.empty() && r.combined.empty();
    });
    if (!plain_maxima) continue;
    // Every sum of the next pass must move with every folded max as online_rescale describes; the
    // values it computes once per row before its loop must not read a max (unknown until the end).
    bool foldable = !sums.empty();
    std::vector<Expr> values;
    std::vector<std::string> stats;
    for (const auto& m : maxima) stats.push_back(m.name);
    for (const auto& r : sums) {
      if ((r.op != "sum" && r.op != "mean") || !r.column_value) foldable = false;
      for (const auto& m : maxima)
        if (!r.row_cuda.empty() && mentions(r.row_cuda, m.name)) foldable = false;
      if (foldable && std::none_of(values.begin(), values.end(), [&](const Expr& v) { return equal(v, r.column_value); }))
        values.push_back(r.column_value);
    }
    // A folded max whose own value reads another folded max would depend on the pass itself.
    for (const auto& m : maxima)
      for (const auto& other : maxima)
        if (free_symbols(m.column_value).count(other.name)) foldable = false;
    if (!foldable || !plan_online_pass(values, stats, kMaxPassGroup)) continue;
    folded[i + 1] = maxima;
    groups[i].clear();
  }
  // Drop the emptied max passes (and their empty fold lists) together, keeping the pairs aligned.
  std::vector<std::vector<RowPassCode>> kept_groups, kept_folded;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (groups[i].empty()) continue;
    kept_groups.push_back(std::move(groups[i]));
    kept_folded.push_back(std::move(folded[i]));
  }
  groups = std::move(kept_groups);
  return kept_folded;
}

}  // namespace liger::kernel_dev
