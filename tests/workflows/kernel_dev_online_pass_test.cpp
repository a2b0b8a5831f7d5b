// Online passes (row_online.cpp): a row max folds into the pass of the sums taken relative to it.
// The update rule of each sum comes from its derivative in the max; these tests check the
// classification, and then run the plan the generated kernel runs -- chunked, with several
// threads' partial states moved to the row's max before they are added -- in fp64 against the
// two-pass sums, for formulas of the project's ops and for forms no op of it has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "workflows/kernel_dev/expr.h"
#include "workflows/kernel_dev/row_program.h"

#include "kernel_dev_family.h"

namespace kd = liger::kernel_dev;

namespace {

using liger::testing::family::analyse;

kd::Expr parse(const std::string& text) { return kd::parse_expression(text); }

// One thread's state of an online pass: the running max of each stat and the accumulators.
struct State {
  std::vector<double> max;
  std::vector<double> acc;
};

constexpr double kNoMax = -std::numeric_limits<float>::max();

void move_to(State& s, const kd::OnlinePlan& plan, const std::vector<double>& to) {
  for (std::size_t i = 0; i < to.size(); ++i) {
    if (!(to[i] > s.max[i])) continue;
    if (s.max[i] != kNoMax) {
      const double d = s.max[i] - to[i], r = std::exp(d);
      for (const auto& u : plan.updates[i]) {
        double moved = s.acc[u.value];
        if (u.shift_by) moved += u.shift_sign * d * s.acc[*u.shift_by];
        s.acc[u.value] = u.scales ? r * moved : moved;
      }
    }
    s.max[i] = to[i];
  }
}

// Columns as environments (one value per input symbol); `maxima` the expressions whose row max
// each stat is; `values` the sums. Returns the largest relative difference from the two-pass sums.
double online_against_two_pass(const std::vector<kd::Environment>& columns, const std::vector<std::string>& stats,
                               const std::vector<kd::Expr>& maxima, const std::vector<kd::Expr>& values,
                               std::size_t threads, std::size_t chunk) {
  const auto plan = kd::plan_online_pass(values, stats, kd::kMaxPassGroup);
  if (!plan) return std::numeric_limits<double>::infinity();
  std::vector<kd::Expr> all = values;
  all.insert(all.end(), plan->extra.begin(), plan->extra.end());
  auto env_with = [&](kd::Environment env, const std::vector<double>& max) {
    for (std::size_t i = 0; i < stats.size(); ++i) env[stats[i]] = max[i];
    return env;
  };
  // Thread t takes chunks t, t + threads, ... as the kernel's sweep does.
  std::vector<State> state(threads, State{std::vector<double>(stats.size(), kNoMax), std::vector<double>(all.size(), 0.0)});
  for (std::size_t c0 = 0, k = 0; c0 < columns.size(); c0 += chunk, ++k) {
    State& s = state[k % threads];
    std::vector<double> chunk_max(stats.size(), kNoMax);
    const std::size_t end = std::min(columns.size(), c0 + chunk);
    for (std::size_t c = c0; c < end; ++c)
      for (std::size_t i = 0; i < stats.size(); ++i) chunk_max[i] = std::max(chunk_max[i], kd::eval_f64(maxima[i], columns[c]));
    move_to(s, *plan, chunk_max);
    for (std::size_t c = c0; c < end; ++c)
      for (std::size_t j = 0; j < all.size(); ++j) s.acc[j] += kd::eval_f64(all[j], env_with(columns[c], s.max));
  }
  std::vector<double> row_max(stats.size(), kNoMax);
  for (const auto& s : state)
    for (std::size_t i = 0; i < stats.size(); ++i) row_max[i] = std::max(row_max[i], s.max[i]);
  std::vector<double> online(all.size(), 0.0);
  for (auto& s : state) {
    move_to(s, *plan, row_max);
    for (std::size_t j = 0; j < all.size(); ++j) online[j] += s.acc[j];
  }
  double worst = 0;
  for (std::size_t j = 0; j < values.size(); ++j) {
    double two_pass = 0;
    for (const auto& col : columns) two_pass += kd::eval_f64(values[j], env_with(col, row_max));
    worst = std::max(worst, std::fabs(online[j] - two_pass) / (1e-12 + std::fabs(two_pass)));
  }
  return worst;
}

std::vector<kd::Environment> random_columns(const std::vector<std::string>& inputs, std::size_t n, unsigned seed,
                                            double scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> draw(0.0, scale);
  std::vector<kd::Environment> cols(n);
  for (std::size_t c = 0; c < n; ++c)
    for (const auto& name : inputs) cols[c][name] = draw(rng) + (c % 97 == 0 ? 3.0 * scale : 0.0);  // late maxima
  return cols;
}

}  // namespace

TEST(KernelDevOnlinePass, EachSumIsClassifiedByItsDerivativeInTheMax) {
  // exp(u - m): scales with exp(d), no shift.
  auto a = kd::online_rescale(parse("exp(x - m)"), "m");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->scales);
  EXPECT_FALSE(a->shift);
  // exp(u - m) * (u - m): scales, shifted by exp(u - m) (the entropy's term).
  auto b = kd::online_rescale(parse("exp(x - m) * (x - m)"), "m");
  ASSERT_TRUE(b && b->shift);
  EXPECT_TRUE(b->scales);
  EXPECT_TRUE(kd::same_row_value(*b->shift, parse("exp(x - m)")));
  // Any spelling of the same function: exp(x) / exp(m) * w.
  auto c = kd::online_rescale(parse("exp(x) / exp(m) * w"), "m");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->scales);
  EXPECT_FALSE(c->shift);
  // Linear in the max with no exponential (KL's term in the other input's max): a shift alone.
  auto d = kd::online_rescale(parse("exp(q - mq) * (q - mq - p + mp)"), "mp");
  ASSERT_TRUE(d && d->shift);
  EXPECT_FALSE(d->scales);
  // Not one of the forms: exp(2 (x - m)) scales as exp(2d); (x - m)^2 shifts by a term in m; a
  // sum that never reads the max has no update.
  EXPECT_FALSE(kd::online_rescale(parse("exp(2 * (x - m))"), "m"));
  EXPECT_FALSE(kd::online_rescale(parse("(x - m) ^ 2"), "m"));
  EXPECT_FALSE(kd::online_rescale(parse("exp(x - m) * (x - m) ^ 2"), "m"));
  EXPECT_FALSE(kd::online_rescale(parse("exp(x)"), "m"));
}

TEST(KernelDevOnlinePass, PlannedUpdatesMatchTheTwoPassSums) {
  // Chunks of 8 over 4 "threads", the row's maxima late in it (every running max grows several
  // times), the partial states moved to the row's max before they are added: as the kernel does.
  struct Case {
    const char* what;
    std::vector<std::string> inputs, stats, maxima, values;
  };
  const std::vector<Case> cases = {
      {"softmax / logsumexp", {"x"}, {"m"}, {"x"}, {"exp(x - m)"}},
      {"entropy", {"x"}, {"m"}, {"x"}, {"exp(x - m)", "exp(x - m) * (x - m)"}},
      {"entropy, the W not among the sums", {"x"}, {"m"}, {"x"}, {"exp(x - m) * (x - m)"}},
      {"temperature softmax", {"x"}, {"m"}, {"x / 2"}, {"exp(x / 2 - m)"}},
      {"KL of two softmaxes", {"p", "q"}, {"mq", "mp"}, {"q", "p"},
       {"exp(q - mq)", "exp(p - mp)", "exp(q - mq) * (q - mq - p + mp)"}},
      {"weighted entropy (no op of the project)", {"x", "w"}, {"m"}, {"x"},
       {"w * exp(x - m) * (x - m + 3)", "exp(x - m) * w"}},
      {"a linear shift only", {"x"}, {"m"}, {"x"}, {"x - m"}},
  };
  for (const auto& k : cases) {
    std::vector<kd::Expr> maxima, values;
    for (const auto& m : k.maxima) maxima.push_back(parse(m));
    for (const auto& v : k.values) values.push_back(parse(v));
    for (unsigned seed : {1u, 2u, 3u}) {
      const auto cols = random_columns(k.inputs, 301, seed, 2.5);
      EXPECT_LT(online_against_two_pass(cols, k.stats, maxima, values, 4, 8), 1e-10) << k.what << " seed " << seed;
    }
  }
  // A sum that does not move with the max this way has no plan (the pass is not folded).
  EXPECT_FALSE(kd::plan_online_pass({parse("exp(x - m) * (x - m) ^ 2")}, {"m"}, kd::kMaxPassGroup));
  EXPECT_FALSE(kd::plan_online_pass({parse("exp(2 * (x - m))")}, {"m"}, kd::kMaxPassGroup));
}

TEST(KernelDevOnlinePass, OnlyMaxPassesWhoseSumsMoveWithThemFold) {
  // Folded: logsumexp, log-softmax, the row entropy (one pass each instead of two).
  for (const char* source : {"def f(x): return torch.logsumexp(x, dim=-1)", "def f(x): return F.log_softmax(x, dim=-1)",
                             "def f(x): return torch.softmax(x / 0.7, dim=-1)"}) {
    const auto code = kd::generate_tier2(analyse(source));
    ASSERT_EQ(code.forward_online.size(), code.forward_groups.size()) << source;
    EXPECT_FALSE(code.forward_online[0].empty()) << source;
  }
  // Not folded: no max (LayerNorm); a max that only divides (max-abs scaling); a sum of the softmax
  // squared (exp(2 (x - m)) scales as exp(2d)).
  for (const char* source : {"def f(x): return F.layer_norm(x, x.shape[-1:])",
                             "def f(x): return x / x.abs().amax(-1, keepdim=True)",
                             "def tsallis(x):\n    p = torch.softmax(x, -1)\n    return 1 - (p ** 2).sum(-1)"}) {
    const auto code = kd::generate_tier2(analyse(source));
    ASSERT_EQ(code.forward_online.size(), code.forward_groups.size()) << source;
    for (const auto& maxima : code.forward_online) EXPECT_TRUE(maxima.empty()) << source;
  }
}
