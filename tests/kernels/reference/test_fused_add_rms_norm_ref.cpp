// CPU checks of the fp64 FusedAddRMSNorm reference: s = x + residual, y = RMSNorm(s); finite
// differences of L = sum(y * g) + sum(s * h) against the backward (dx = d residual).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "fused_add_rms_norm_ref.h"

namespace {
using liger::ref::RmsNormConfig;

std::vector<double> random_vector(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-2.0, 2.0);
  std::vector<double> v(n);
  for (auto& e : v) e = dist(gen);
  return v;
}

TEST(FusedAddRmsNormRef, HandComputed) {
  RmsNormConfig c;
  c.rows = 1;
  c.cols = 2;
  c.eps = 0.0;
  c.casting_mode = 1;
  std::vector<double> x = {1.0, 3.0}, r = {2.0, 1.0}, w = {1.0, 1.0}, y, s, rstd;
  liger::ref::fused_add_rms_norm_forward(c, x, r, w, y, s, rstd);
  EXPECT_EQ(s[0], 3.0);
  EXPECT_EQ(s[1], 4.0);
  EXPECT_DOUBLE_EQ(y[0], 3.0 / std::sqrt(12.5));
  EXPECT_DOUBLE_EQ(y[1], 4.0 / std::sqrt(12.5));
}

TEST(FusedAddRmsNormRef, SumRoundsToActivationDtype) {
  RmsNormConfig c;
  c.rows = 1;
  c.cols = 1;
  c.dtype = LIGER_DTYPE_BFLOAT16;
  std::vector<double> x = {1.0}, r = {std::ldexp(1.0, -9)}, w = {1.0}, y, s, rstd;
  liger::ref::fused_add_rms_norm_forward(c, x, r, w, y, s, rstd);
  EXPECT_EQ(s[0], 1.0);
}

class FusedAddRmsNormRefGradient : public ::testing::TestWithParam<int> {};

TEST_P(FusedAddRmsNormRefGradient, FiniteDifferences) {
  RmsNormConfig c;
  c.rows = 3;
  c.cols = 6;
  c.eps = 1e-5;
  c.casting_mode = GetParam();
  c.offset = GetParam() == 1 ? 1.0 : 0.0;
  c.model_casts = false;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    auto x = random_vector(18, seed), r = random_vector(18, seed + 10), w = random_vector(6, seed + 20);
    auto g = random_vector(18, seed + 30), h_out = random_vector(18, seed + 40);
    auto loss = [&](const std::vector<double>& xx, const std::vector<double>& rr, const std::vector<double>& ww) {
      std::vector<double> y, s, rstd;
      liger::ref::fused_add_rms_norm_forward(c, xx, rr, ww, y, s, rstd);
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += y[i] * g[i] + s[i] * h_out[i];
      return l;
    };
    std::vector<double> y, s, rstd, dx, dw;
    liger::ref::fused_add_rms_norm_forward(c, x, r, w, y, s, rstd);
    liger::ref::fused_add_rms_norm_backward(c, g, h_out, s, w, rstd, dx, dw);
    const double h = 1e-6;
    for (size_t i = 0; i < x.size(); ++i) {
      auto xp = x, xm = x, rp = r, rm = r;
      xp[i] += h;
      xm[i] -= h;
      rp[i] += h;
      rm[i] -= h;
      EXPECT_NEAR(dx[i], (loss(xp, r, w) - loss(xm, r, w)) / (2 * h), 1e-6 * (1 + std::fabs(dx[i])));
      EXPECT_NEAR(dx[i], (loss(x, rp, w) - loss(x, rm, w)) / (2 * h), 1e-6 * (1 + std::fabs(dx[i])));
    }
    for (size_t j = 0; j < w.size(); ++j) {
      auto wp = w, wm = w;
      wp[j] += h;
      wm[j] -= h;
      EXPECT_NEAR(dw[j], (loss(x, r, wp) - loss(x, r, wm)) / (2 * h), 1e-6 * (1 + std::fabs(dw[j])));
    }
    // Without ds_out the residual gradient is the norm's alone.
    std::vector<double> dx0, dw0;
    liger::ref::fused_add_rms_norm_backward(c, g, {}, s, w, rstd, dx0, dw0);
    for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx0[i] + h_out[i], dx[i], 1e-12);
  }
}

std::string mode_name(const ::testing::TestParamInfo<int>& info) {
  static const char* const names[] = {"llama", "gemma", "none"};
  return names[info.param];
}

INSTANTIATE_TEST_SUITE_P(Modes, FusedAddRmsNormRefGradient, ::testing::Values(0, 1, 2), mode_name);

}  // namespace
