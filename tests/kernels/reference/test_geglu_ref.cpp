// The fp64 GeGLU (tanh GELU) reference: hand-computed values and central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "geglu_ref.h"

namespace {

TEST(GeGLUReference, HandComputedValues) {
  // gelu_tanh(1) = 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715)) = 0.8411919906082768.
  EXPECT_NEAR(liger::ref::gelu_tanh(1.0), 0.8411919906082768, 1e-14);
  EXPECT_NEAR(liger::ref::gelu_tanh(0.0), 0.0, 1e-16);
  // gelu_tanh(-1) = -1 + gelu_tanh(1) (odd part): -0.15880800939172324.
  EXPECT_NEAR(liger::ref::gelu_tanh(-1.0), -0.15880800939172324, 1e-14);
  EXPECT_NEAR(liger::ref::gelu_tanh_derivative(0.0), 0.5, 1e-16);
  auto c = liger::ref::geglu_forward({1.0, 0.0}, {2.0, 5.0});
  EXPECT_NEAR(c[0], 2.0 * 0.8411919906082768, 1e-14);
  EXPECT_NEAR(c[1], 0.0, 1e-16);
}

TEST(GeGLUReference, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 2.0);
  const int n = 200;
  std::vector<double> a(n), b(n), dc(n);
  for (int i = 0; i < n; ++i) a[i] = normal(rng), b[i] = normal(rng), dc[i] = normal(rng);
  std::vector<double> da, db;
  liger::ref::geglu_backward(dc, a, b, da, db);
  const double h = 1e-6;
  for (int i = 0; i < n; ++i) {
    auto c_of = [&](double ai, double bi) { return dc[i] * liger::ref::geglu_forward({ai}, {bi})[0]; };
    double fd_a = (c_of(a[i] + h, b[i]) - c_of(a[i] - h, b[i])) / (2 * h);
    double fd_b = (c_of(a[i], b[i] + h) - c_of(a[i], b[i] - h)) / (2 * h);
    EXPECT_NEAR(da[i], fd_a, 1e-6 * (1 + std::fabs(fd_a))) << "i=" << i << " a=" << a[i];
    EXPECT_NEAR(db[i], fd_b, 1e-6 * (1 + std::fabs(fd_b))) << "i=" << i;
  }
}

}  // namespace
