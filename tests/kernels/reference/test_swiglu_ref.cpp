// The fp64 SwiGLU reference: hand-computed values and central finite differences of the forward
// against the analytic backward.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "swiglu_ref.h"

namespace {

TEST(SwiGLUReference, HandComputedValues) {
  // silu(0) = 0; silu(1) = 1/(1+e^-1) = 0.7310585786300049; silu(-2) = -2/(1+e^2) = -0.2384058440442351.
  auto c = liger::ref::swiglu_forward({0.0, 1.0, -2.0}, {3.0, 2.0, -1.5});
  EXPECT_NEAR(c[0], 0.0, 1e-15);
  EXPECT_NEAR(c[1], 2.0 * 0.7310585786300049, 1e-14);
  EXPECT_NEAR(c[2], -1.5 * -0.2384058440442351, 1e-14);
  // d silu/da at 0 = 0.5: da = dc * b * 0.5.
  std::vector<double> da, db;
  liger::ref::swiglu_backward({2.0}, {0.0}, {3.0}, da, db);
  EXPECT_NEAR(da[0], 3.0, 1e-15);
  EXPECT_NEAR(db[0], 0.0, 1e-15);
}

TEST(SwiGLUReference, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal(0.0, 2.0);
  const int n = 200;
  std::vector<double> a(n), b(n), dc(n);
  for (int i = 0; i < n; ++i) a[i] = normal(rng), b[i] = normal(rng), dc[i] = normal(rng);
  std::vector<double> da, db;
  liger::ref::swiglu_backward(dc, a, b, da, db);
  const double h = 1e-6;
  for (int i = 0; i < n; ++i) {
    // L = sum(dc * c); dL/da_i and dL/db_i by central differences of element i.
    auto c_of = [&](double ai, double bi) { return dc[i] * liger::ref::swiglu_forward({ai}, {bi})[0]; };
    double fd_a = (c_of(a[i] + h, b[i]) - c_of(a[i] - h, b[i])) / (2 * h);
    double fd_b = (c_of(a[i], b[i] + h) - c_of(a[i], b[i] - h)) / (2 * h);
    EXPECT_NEAR(da[i], fd_a, 1e-6 * (1 + std::fabs(fd_a))) << "i=" << i << " a=" << a[i];
    EXPECT_NEAR(db[i], fd_b, 1e-6 * (1 + std::fabs(fd_b))) << "i=" << i;
  }
}

TEST(SwiGLUReference, ExtremesStayFinite) {
  auto c = liger::ref::swiglu_forward({-800.0, 800.0}, {1.0, 1.0});
  EXPECT_NEAR(c[0], 0.0, 1e-300);
  EXPECT_DOUBLE_EQ(c[1], 800.0);
}

}  // namespace
