#include "layer_norm_ref.h"

#include <cmath>
#include <cstddef>

namespace liger::ref {

void layer_norm_forward(int64_t rows, int64_t cols, double eps, const std::vector<double>& x,
                        const std::vector<double>& w, const std::vector<double>& b, std::vector<double>& y,
                        std::vector<double>& mean, std::vector<double>& rstd) {
  y.assign(static_cast<std::size_t>(rows * cols), 0.0);
  mean.assign(static_cast<std::size_t>(rows), 0.0);
  rstd.assign(static_cast<std::size_t>(rows), 0.0);
  const double n = static_cast<double>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * cols;
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) sum += xr[j];
    double mu = sum / n;
    double var = 0.0;
    for (int64_t j = 0; j < cols; ++j) var += (xr[j] - mu) * (xr[j] - mu);
    double rs = 1.0 / std::sqrt(var / n + eps);
    mean[r] = mu;
    rstd[r] = rs;
    for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = (xr[j] - mu) * rs * w[j] + (b.empty() ? 0.0 : b[j]);
  }
}

void layer_norm_backward(int64_t rows, int64_t cols, const std::vector<double>& dy, const std::vector<double>& x,
                         const std::vector<double>& w, const std::vector<double>& mean,
                         const std::vector<double>& rstd, std::vector<double>& dx, std::vector<double>& dw,
                         std::vector<double>& db) {
  dx.assign(static_cast<std::size_t>(rows * cols), 0.0);
  dw.assign(static_cast<std::size_t>(cols), 0.0);
  db.assign(static_cast<std::size_t>(cols), 0.0);
  const double n = static_cast<double>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * cols;
    const double* dyr = dy.data() + r * cols;
    double c1 = 0.0, c2 = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      double xhat = (xr[j] - mean[r]) * rstd[r];
      double g = w[j] * dyr[j];
      c1 += xhat * g;
      c2 += g;
    }
    c1 /= n;
    c2 /= n;
    for (int64_t j = 0; j < cols; ++j) {
      double xhat = (xr[j] - mean[r]) * rstd[r];
      double g = w[j] * dyr[j];
      dx[r * cols + j] = (g - (xhat * c1 + c2)) * rstd[r];
      dw[j] += dyr[j] * xhat;
      db[j] += dyr[j];
    }
  }
}

}  // namespace liger::ref
