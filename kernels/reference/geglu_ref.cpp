#include "geglu_ref.h"

#include <cmath>
#include <cstddef>

namespace liger::ref {
namespace {
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kCubic = 0.044715;
}  // namespace

double gelu_tanh(double x) {
  double inner = kSqrt2OverPi * (x + kCubic * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(inner));
}

double gelu_tanh_derivative(double x) {
  double inner = kSqrt2OverPi * (x + kCubic * x * x * x);
  double t = std::tanh(inner);
  double d_inner = kSqrt2OverPi * (1.0 + 3.0 * kCubic * x * x);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner;
}

std::vector<double> geglu_forward(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> c(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) c[i] = gelu_tanh(a[i]) * b[i];
  return c;
}

void geglu_backward(const std::vector<double>& dc, const std::vector<double>& a, const std::vector<double>& b,
                    std::vector<double>& da, std::vector<double>& db) {
  da.assign(a.size(), 0.0);
  db.assign(a.size(), 0.0);
  for (std::size_t i = 0; i < a.size(); ++i) {
    db[i] = dc[i] * gelu_tanh(a[i]);
    da[i] = dc[i] * b[i] * gelu_tanh_derivative(a[i]);
  }
}

}  // namespace liger::ref
