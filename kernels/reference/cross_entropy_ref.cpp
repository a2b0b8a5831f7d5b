#include "cross_entropy_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace liger::ref {

CrossEntropyResult cross_entropy_forward(const std::vector<double>& logits, const std::vector<int64_t>& targets,
                                         int64_t rows, int64_t vocab, const CrossEntropyOptions& options,
                                         const std::vector<double>& row_scale) {
  const bool weighted = !options.class_weight.empty();
  auto weight = [&](int64_t i) { return weighted ? options.class_weight[static_cast<std::size_t>(i)] : 1.0; };
  const double ls = options.label_smoothing;
  const double eps = ls / static_cast<double>(vocab);
  const double lambda = options.lse_square_scale;
  const double cap = options.softcap;

  double weight_sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) weight_sum += weight(i);
  double non_ignored = 0.0, target_weight_sum = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t y = targets[static_cast<std::size_t>(r)];
    if (y == options.ignore_index) continue;
    non_ignored += 1.0;
    if (y >= 0 && y < vocab) target_weight_sum += weight(y);
  }
  double inv_d_loss = 1.0, inv_d_z = 1.0;
  if (options.reduction == Reduction::kMean) {
    inv_d_loss = target_weight_sum > 0 ? 1.0 / target_weight_sum : 0.0;
    inv_d_z = non_ignored > 0 ? 1.0 / non_ignored : 0.0;
  }

  CrossEntropyResult result;
  result.grad.assign(static_cast<std::size_t>(rows * vocab), 0.0);
  result.lse.assign(static_cast<std::size_t>(rows), 0.0);
  std::vector<double> row_loss(static_cast<std::size_t>(rows), 0.0), row_z(static_cast<std::size_t>(rows), 0.0);
  std::vector<double> x(static_cast<std::size_t>(vocab)), t(static_cast<std::size_t>(vocab));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t y = targets[static_cast<std::size_t>(r)];
    if (y == options.ignore_index) continue;
    if (y < 0 || y >= vocab) {
      row_loss[static_cast<std::size_t>(r)] = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    const double* row = &logits[static_cast<std::size_t>(r * vocab)];
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < vocab; ++i) {
      double v = row[i];
      if (cap > 0) {
        t[static_cast<std::size_t>(i)] = std::tanh(v / cap);
        v = cap * t[static_cast<std::size_t>(i)];
      }
      x[static_cast<std::size_t>(i)] = v;
      m = std::max(m, v);
    }
    double s = 0.0, wx = 0.0;
    for (int64_t i = 0; i < vocab; ++i) {
      s += std::exp(x[static_cast<std::size_t>(i)] - m);
      wx += weight(i) * x[static_cast<std::size_t>(i)];
    }
    const double lse = m + std::log(s);
    result.lse[static_cast<std::size_t>(r)] = lse;
    const double wy = weight(y);
    const double xy = x[static_cast<std::size_t>(y)];
    const double z = lambda * lse * lse * inv_d_z;
    row_loss[static_cast<std::size_t>(r)] =
        ((1.0 - ls) * wy * (lse - xy) + eps * (weight_sum * lse - wx)) * inv_d_loss + z;
    row_z[static_cast<std::size_t>(r)] = z;
    const double scale = row_scale.empty() ? 1.0 : row_scale[static_cast<std::size_t>(r)];
    double* g = &result.grad[static_cast<std::size_t>(r * vocab)];
    for (int64_t i = 0; i < vocab; ++i) {
      const double p = std::exp(x[static_cast<std::size_t>(i)] - lse);
      double d = ((1.0 - ls) * wy * (p - (i == y ? 1.0 : 0.0)) + eps * (weight_sum * p - weight(i))) * inv_d_loss +
                 2.0 * lambda * lse * p * inv_d_z;
      if (cap > 0) d *= 1.0 - t[static_cast<std::size_t>(i)] * t[static_cast<std::size_t>(i)];
      g[i] = d * scale;
    }
  }
  if (options.reduction == Reduction::kNone) {
    result.loss = row_loss;
    result.z_loss = row_z;
  } else {
    double total = 0.0, total_z = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      total += row_loss[static_cast<std::size_t>(r)];
      total_z += row_z[static_cast<std::size_t>(r)];
    }
    result.loss = {total};
    result.z_loss = {total_z};
  }
  return result;
}

std::vector<double> cross_entropy_backward(const std::vector<double>& grad, int64_t rows, int64_t vocab,
                                           const std::vector<double>& grad_output, bool per_row) {
  std::vector<double> out(grad.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double g = per_row ? grad_output[static_cast<std::size_t>(r)] : grad_output[0];
    for (int64_t i = 0; i < vocab; ++i) {
      const std::size_t k = static_cast<std::size_t>(r * vocab + i);
      out[k] = grad[k] * g;
    }
  }
  return out;
}

}  // namespace liger::ref
