// The fp64 RoPE reference: a hand-computed rotation, norm preservation, backward = inverse
// rotation = transpose (checked as the adjoint: <R x, y> == <x, R^T y>), and batch broadcast.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "rope_ref.h"

namespace {

std::vector<double> normal_vector(std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

// cos/sin tables as HF builds them: angle = t * base^(-2i/D), halves duplicated.
void tables(int64_t cos_batch, int64_t seq, int64_t dim, std::vector<double>& cos, std::vector<double>& sin) {
  cos.assign(cos_batch * seq * dim, 0.0);
  sin.assign(cos_batch * seq * dim, 0.0);
  for (int64_t b = 0; b < cos_batch; ++b)
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t i = 0; i < dim; ++i) {
        double angle = (t + 3 * b) * std::pow(10000.0, -2.0 * (i % (dim / 2)) / dim);
        cos[(b * seq + t) * dim + i] = std::cos(angle);
        sin[(b * seq + t) * dim + i] = std::sin(angle);
      }
}

TEST(RopeReference, HandComputedRotation) {
  // D = 2: y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin.
  const double c = std::cos(0.3), s = std::sin(0.3);
  auto y = liger::ref::rope_forward({1.0, 2.0}, 1, 1, 1, 2, {c, c}, {s, s}, 1);
  EXPECT_NEAR(y[0], 1.0 * c - 2.0 * s, 1e-15);
  EXPECT_NEAR(y[1], 2.0 * c + 1.0 * s, 1e-15);
  auto back = liger::ref::rope_backward(y, 1, 1, 1, 2, {c, c}, {s, s}, 1);
  EXPECT_NEAR(back[0], 1.0, 1e-15);
  EXPECT_NEAR(back[1], 2.0, 1e-15);
}

TEST(RopeReference, BackwardIsAdjointAndNormPreserved) {
  const int64_t batch = 2, heads = 3, seq = 5, dim = 8;
  for (int64_t cos_batch : {int64_t{1}, batch}) {
    std::vector<double> cos, sin;
    tables(cos_batch, seq, dim, cos, sin);
    auto x = normal_vector(batch * heads * seq * dim, 1), g = normal_vector(batch * heads * seq * dim, 2);
    auto y = liger::ref::rope_forward(x, batch, heads, seq, dim, cos, sin, cos_batch);
    auto dx = liger::ref::rope_backward(g, batch, heads, seq, dim, cos, sin, cos_batch);
    double lhs = 0, rhs = 0, nx = 0, ny = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      lhs += y[i] * g[i];
      rhs += x[i] * dx[i];
      nx += x[i] * x[i];
      ny += y[i] * y[i];
    }
    EXPECT_NEAR(lhs, rhs, 1e-10 * (1 + std::fabs(lhs))) << "backward is the transpose of forward";
    EXPECT_NEAR(nx, ny, 1e-10 * nx) << "rotation preserves the norm";
  }
}

TEST(RopeReference, FiniteDifferenceGradient) {
  const int64_t batch = 1, heads = 2, seq = 3, dim = 6;
  std::vector<double> cos, sin;
  tables(1, seq, dim, cos, sin);
  auto x = normal_vector(batch * heads * seq * dim, 3), g = normal_vector(batch * heads * seq * dim, 4);
  auto dx = liger::ref::rope_backward(g, batch, heads, seq, dim, cos, sin, 1);
  const double h = 1e-6;
  for (std::size_t i = 0; i < x.size(); ++i) {
    auto loss = [&](double delta) {
      auto xp = x;
      xp[i] += delta;
      auto y = liger::ref::rope_forward(xp, batch, heads, seq, dim, cos, sin, 1);
      double l = 0;
      for (std::size_t j = 0; j < y.size(); ++j) l += y[j] * g[j];
      return l;
    };
    EXPECT_NEAR(dx[i], (loss(h) - loss(-h)) / (2 * h), 1e-7) << "i=" << i;
  }
}

TEST(RopeReference, BatchBroadcastUsesRowZero) {
  const int64_t batch = 2, heads = 1, seq = 2, dim = 4;
  std::vector<double> cos, sin;
  tables(1, seq, dim, cos, sin);
  auto x = normal_vector(batch * heads * seq * dim, 5);
  auto y = liger::ref::rope_forward(x, batch, heads, seq, dim, cos, sin, 1);
  // Batch 1 of a broadcast table equals batch 0's rotation applied to batch 1's input.
  std::vector<double> x1(x.begin() + seq * dim, x.end());
  auto y1 = liger::ref::rope_forward(x1, 1, heads, seq, dim, cos, sin, 1);
  for (std::size_t i = 0; i < y1.size(); ++i) EXPECT_DOUBLE_EQ(y[seq * dim + i], y1[i]);
}

}  // namespace
