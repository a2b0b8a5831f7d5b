// CPU checks of the fp64 RMSNorm reference: hand-computed values, the dtype rounding helper,
// and finite-difference gradients of the backward against the forward.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "rms_norm_ref.h"

namespace {
using liger::ref::RmsNormConfig;

std::vector<double> random_vector(size_t n, uint64_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& e : v) e = dist(gen);
  return v;
}

double loss(const RmsNormConfig& c, const std::vector<double>& x, const std::vector<double>& w,
            const std::vector<double>& g) {
  std::vector<double> y, rstd;
  liger::ref::rms_norm_forward(c, x, w, y, rstd);
  double l = 0.0;
  for (size_t i = 0; i < y.size(); ++i) l += y[i] * g[i];
  return l;
}

TEST(RmsNormRef, HandComputed) {
  RmsNormConfig c;
  c.rows = 1;
  c.cols = 2;
  c.eps = 0.0;
  c.casting_mode = 1;
  std::vector<double> x = {3.0, 4.0}, w = {1.0, 2.0}, y, rstd;
  liger::ref::rms_norm_forward(c, x, w, y, rstd);
  const double r = 1.0 / std::sqrt(12.5);
  EXPECT_DOUBLE_EQ(rstd[0], r);
  EXPECT_DOUBLE_EQ(y[0], 3.0 * r);
  EXPECT_DOUBLE_EQ(y[1], 8.0 * r);
  c.offset = 1.0;  // Gemma: (1 + w)
  liger::ref::rms_norm_forward(c, x, w, y, rstd);
  EXPECT_DOUBLE_EQ(y[0], 6.0 * r);
  EXPECT_DOUBLE_EQ(y[1], 12.0 * r);
}

TEST(RmsNormRef, RoundToDtype) {
  using liger::ref::round_to_dtype;
  // bf16 has 8 significand bits: one ulp at 1 is 2^-7, so 1 + 2^-8 is a tie.
  EXPECT_EQ(round_to_dtype(1.0 + std::ldexp(1.0, -8), LIGER_DTYPE_BFLOAT16), 1.0);  // tie -> even
  EXPECT_EQ(round_to_dtype(1.0 + 3 * std::ldexp(1.0, -8), LIGER_DTYPE_BFLOAT16), 1.0 + std::ldexp(1.0, -6));
  EXPECT_EQ(round_to_dtype(1.0 + 3 * std::ldexp(1.0, -9), LIGER_DTYPE_BFLOAT16), 1.0 + std::ldexp(1.0, -7));
  EXPECT_EQ(round_to_dtype(1.0 + std::ldexp(1.0, -11), LIGER_DTYPE_FLOAT16), 1.0);
  EXPECT_EQ(round_to_dtype(65519.0, LIGER_DTYPE_FLOAT16), 65504.0);
  EXPECT_TRUE(std::isinf(round_to_dtype(65520.0, LIGER_DTYPE_FLOAT16)));
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -24), LIGER_DTYPE_FLOAT16), std::ldexp(1.0, -24));  // subnormal
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -25), LIGER_DTYPE_FLOAT16), 0.0);                   // tie -> even 0
  EXPECT_EQ(round_to_dtype(0.1, LIGER_DTYPE_FLOAT32), static_cast<double>(0.1f));
  EXPECT_EQ(round_to_dtype(-2.5, LIGER_DTYPE_BFLOAT16), -2.5);
}

TEST(RmsNormRef, LlamaCastsRoundTheNormalisedValue) {
  RmsNormConfig c;
  c.rows = 1;
  c.cols = 3;
  c.casting_mode = 0;
  c.dtype = LIGER_DTYPE_BFLOAT16;
  std::vector<double> x = {1.0, 0.3, -0.7}, w = {1.5, 0.5, 2.0}, y, rstd;
  liger::ref::rms_norm_forward(c, x, w, y, rstd);
  for (int j = 0; j < 3; ++j)
    EXPECT_EQ(y[j], liger::ref::round_to_dtype(x[j] * rstd[0], LIGER_DTYPE_BFLOAT16) * w[j]);
}

struct Case {
  int mode;
  double offset;
  int64_t rows, cols;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  static const char* const names[] = {"llama", "gemma", "none"};
  return std::string(names[info.param.mode]) + "_offset" + std::to_string(static_cast<int>(info.param.offset)) +
         "_" + std::to_string(info.param.rows) + "x" + std::to_string(info.param.cols);
}

class RmsNormRefGradient : public ::testing::TestWithParam<Case> {};

TEST_P(RmsNormRefGradient, FiniteDifferences) {
  const Case p = GetParam();
  RmsNormConfig c;
  c.rows = p.rows;
  c.cols = p.cols;
  c.eps = 1e-5;
  c.offset = p.offset;
  c.casting_mode = p.mode;
  c.model_casts = false;  // exact math so finite differences apply
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    auto x = random_vector(p.rows * p.cols, seed);
    auto w = random_vector(p.cols, seed + 100);
    auto g = random_vector(p.rows * p.cols, seed + 200);
    std::vector<double> y, rstd, dx, dw;
    liger::ref::rms_norm_forward(c, x, w, y, rstd);
    liger::ref::rms_norm_backward(c, g, x, w, rstd, dx, dw);
    const double h = 1e-6;
    for (size_t i = 0; i < x.size(); ++i) {
      auto xp = x, xm = x;
      xp[i] += h;
      xm[i] -= h;
      double fd = (loss(c, xp, w, g) - loss(c, xm, w, g)) / (2 * h);
      EXPECT_NEAR(dx[i], fd, 1e-6 * (1.0 + std::fabs(fd))) << "dx[" << i << "] seed " << seed;
    }
    for (size_t j = 0; j < w.size(); ++j) {
      auto wp = w, wm = w;
      wp[j] += h;
      wm[j] -= h;
      double fd = (loss(c, x, wp, g) - loss(c, x, wm, g)) / (2 * h);
      EXPECT_NEAR(dw[j], fd, 1e-6 * (1.0 + std::fabs(fd))) << "dw[" << j << "] seed " << seed;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, RmsNormRefGradient,
                         ::testing::Values(Case{0, 0.0, 3, 7}, Case{1, 1.0, 2, 5}, Case{2, 0.0, 4, 9},
                                           Case{1, 0.0, 1, 1}, Case{0, 1.0, 2, 16}),
                         case_name);

}  // namespace
