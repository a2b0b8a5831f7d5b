// CPU checks of the fp64 LayerNorm reference: hand-computed values and finite-difference
// gradients for x, weight and bias.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "layer_norm_ref.h"

namespace {

std::vector<double> random_vector(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-2.0, 2.0);
  std::vector<double> v(n);
  for (auto& e : v) e = dist(gen);
  return v;
}

TEST(LayerNormRef, HandComputed) {
  std::vector<double> x = {1.0, 3.0}, w = {2.0, 1.0}, b = {0.5, -0.5}, y, mean, rstd;
  liger::ref::layer_norm_forward(1, 2, 0.0, x, w, b, y, mean, rstd);
  EXPECT_DOUBLE_EQ(mean[0], 2.0);
  EXPECT_DOUBLE_EQ(rstd[0], 1.0);  // var = 1
  EXPECT_DOUBLE_EQ(y[0], -2.0 + 0.5);
  EXPECT_DOUBLE_EQ(y[1], 1.0 - 0.5);
  liger::ref::layer_norm_forward(1, 2, 0.0, x, w, {}, y, mean, rstd);  // no bias
  EXPECT_DOUBLE_EQ(y[0], -2.0);
}

TEST(LayerNormRef, FiniteDifferences) {
  for (int64_t cols : {1, 2, 7, 16}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const int64_t rows = 3;
      auto x = random_vector(rows * cols, seed), w = random_vector(cols, seed + 10);
      auto b = random_vector(cols, seed + 20), g = random_vector(rows * cols, seed + 30);
      const double eps = 1e-5;
      auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww, const std::vector<double>& bb) {
        std::vector<double> y, m, r;
        liger::ref::layer_norm_forward(rows, cols, eps, xx, ww, bb, y, m, r);
        double l = 0;
        for (size_t i = 0; i < y.size(); ++i) l += y[i] * g[i];
        return l;
      };
      std::vector<double> y, mean, rstd, dx, dw, db;
      liger::ref::layer_norm_forward(rows, cols, eps, x, w, b, y, mean, rstd);
      liger::ref::layer_norm_backward(rows, cols, g, x, w, mean, rstd, dx, dw, db);
      const double h = 1e-6;
      // cols == 1 is degenerate (y = b): dx must be 0 and finite differences agree.
      for (size_t i = 0; i < x.size(); ++i) {
        auto xp = x, xm = x;
        xp[i] += h;
        xm[i] -= h;
        double fd = (loss(xp, w, b) - loss(xm, w, b)) / (2 * h);
        EXPECT_NEAR(dx[i], fd, 2e-6 * (1 + std::fabs(fd))) << "cols " << cols << " dx[" << i << "]";
      }
      for (int64_t j = 0; j < cols; ++j) {
        auto wp = w, wm = w, bp = b, bm = b;
        wp[j] += h;
        wm[j] -= h;
        bp[j] += h;
        bm[j] -= h;
        EXPECT_NEAR(dw[j], (loss(x, wp, b) - loss(x, wm, b)) / (2 * h), 2e-6 * (1 + std::fabs(dw[j])));
        EXPECT_NEAR(db[j], (loss(x, w, bp) - loss(x, w, bm)) / (2 * h), 2e-6 * (1 + std::fabs(db[j])));
      }
    }
  }
}

}  // namespace
