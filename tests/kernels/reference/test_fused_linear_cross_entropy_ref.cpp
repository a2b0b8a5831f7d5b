// CPU checks of the fp64 fused linear cross-entropy reference: agreement with the plain
// cross-entropy reference on explicitly computed logits, and central finite differences of the
// loss with respect to input, weight and bias.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "fused_linear_cross_entropy_ref.h"

namespace {

using liger::ref::CrossEntropyOptions;
using liger::ref::Reduction;

std::vector<double> randn(std::size_t n, uint64_t seed, double scale) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d(0.0, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

TEST(FusedLinearCrossEntropyRef, AgreesWithCrossEntropyOnLogits) {
  const int64_t T = 3, H = 4, V = 5;
  auto x = randn(T * H, 1, 1.0), w = randn(V * H, 2, 0.5), b = randn(V, 3, 0.1);
  std::vector<int64_t> y = {1, 4, -100};
  CrossEntropyOptions o;
  auto f = liger::ref::fused_linear_cross_entropy_forward(x, w, b, y, T, H, V, o);
  std::vector<double> logits(T * V);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t v = 0; v < V; ++v) {
      double a = b[v];
      for (int64_t h = 0; h < H; ++h) a += x[r * H + h] * w[v * H + h];
      logits[r * V + v] = a;
    }
  auto c = liger::ref::cross_entropy_forward(logits, y, T, V, o);
  EXPECT_NEAR(f.loss[0], c.loss[0], 1e-14);
  for (int64_t h = 0; h < H; ++h) EXPECT_EQ(f.grad_input[2 * H + h], 0.0);  // ignored row
}

class FusedLinearCrossEntropyRefFd : public ::testing::TestWithParam<int> {};

TEST_P(FusedLinearCrossEntropyRefFd, GradientsMatchFiniteDifferences) {
  const int variant = GetParam();
  const int64_t T = 4, H = 3, V = 6;
  auto x = randn(T * H, 10 + variant, 1.0), w = randn(V * H, 20 + variant, 0.7), b = randn(V, 30 + variant, 0.3);
  std::vector<int64_t> y = {0, 5, -100, 2};
  CrossEntropyOptions o;
  std::vector<double> row_scale;
  if (variant == 1) {
    o.label_smoothing = 0.1;
    o.lse_square_scale = 1e-2;
    o.softcap = 3.0;
    o.class_weight = {1.0, 0.5, 2.0, 1.5, 0.7, 1.2};
  }
  if (variant == 2) {
    o.reduction = Reduction::kNone;
    row_scale = {1.0, -0.5, 3.0, 2.0};
  }
  auto loss_of = [&](const std::vector<double>& xx, const std::vector<double>& ww, const std::vector<double>& bb) {
    auto r = liger::ref::fused_linear_cross_entropy_forward(xx, ww, bb, y, T, H, V, o);
    double s = 0.0;
    for (std::size_t i = 0; i < r.loss.size(); ++i) s += r.loss[i] * (row_scale.empty() ? 1.0 : row_scale[i]);
    return s;
  };
  auto base = liger::ref::fused_linear_cross_entropy_forward(x, w, b, y, T, H, V, o, row_scale);
  const double h = 1e-6;
  auto check = [&](std::vector<double>& param, const std::vector<double>& grad, const char* what) {
    for (std::size_t k = 0; k < param.size(); ++k) {
      double saved = param[k];
      param[k] = saved + h;
      double fp = loss_of(x, w, b);
      param[k] = saved - h;
      double fm = loss_of(x, w, b);
      param[k] = saved;
      ASSERT_NEAR(grad[k], (fp - fm) / (2 * h), 2e-7) << what << " element " << k;
    }
  };
  check(x, base.grad_input, "grad_input");
  check(w, base.grad_weight, "grad_weight");
  check(b, base.grad_bias, "grad_bias");
}

std::string variant_name(const ::testing::TestParamInfo<int>& info) {
  static const char* names[] = {"mean_plain", "mean_all_options", "none_row_scaled"};
  return names[info.param];
}

INSTANTIATE_TEST_SUITE_P(Variants, FusedLinearCrossEntropyRefFd, ::testing::Values(0, 1, 2), variant_name);

}  // namespace
