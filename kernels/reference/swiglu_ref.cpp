#include "swiglu_ref.h"

#include <cmath>
#include <cstddef>

namespace liger::ref {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }

std::vector<double> swiglu_forward(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> c(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) c[i] = silu(a[i]) * b[i];
  return c;
}

void swiglu_backward(const std::vector<double>& dc, const std::vector<double>& a, const std::vector<double>& b,
                     std::vector<double>& da, std::vector<double>& db) {
  da.assign(a.size(), 0.0);
  db.assign(a.size(), 0.0);
  for (std::size_t i = 0; i < a.size(); ++i) {
    double s = sigmoid(a[i]);
    double silu_a = a[i] * s;
    db[i] = dc[i] * silu_a;
    da[i] = dc[i] * b[i] * (s + silu_a * (1.0 - s));
  }
}

}  // namespace liger::ref
