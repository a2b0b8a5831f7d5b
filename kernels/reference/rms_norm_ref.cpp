#include "rms_norm_ref.h"

#include <cmath>
#include <limits>

namespace liger::ref {
namespace {
// Rounds to a binary format with `precision` significand bits and minimum normal exponent
// `min_exponent` (value = m * 2^e, 0.5 <= m < 1 as frexp gives), overflowing above `max_value`.
double round_format(double value, int precision, int min_exponent, double max_value) {
  if (!std::isfinite(value) || value == 0.0) return value;
  int exponent = 0;
  std::frexp(value, &exponent);  // |value| = m * 2^exponent, m in [0.5, 1)
  int effective = exponent < min_exponent ? min_exponent : exponent;
  double scale = std::ldexp(1.0, precision - effective);
  double rounded = std::nearbyint(value * scale) / scale;  // default rounding: to nearest even
  if (std::fabs(rounded) > max_value) return std::copysign(std::numeric_limits<double>::infinity(), value);
  return rounded;
}
}  // namespace

double round_to_dtype(double value, liger_dtype dtype) {
  switch (dtype) {
    case LIGER_DTYPE_FLOAT32: return static_cast<double>(static_cast<float>(value));
    case LIGER_DTYPE_FLOAT16: return round_format(value, 11, -13, 65504.0);
    case LIGER_DTYPE_BFLOAT16: return round_format(value, 8, -125, 3.3895313892515355e38);
  }
  return value;
}

void rms_norm_forward(const RmsNormConfig& c, const std::vector<double>& x, const std::vector<double>& w,
                      std::vector<double>& y, std::vector<double>& rstd) {
  auto q = [&](double v) { return c.model_casts ? round_to_dtype(v, c.dtype) : v; };
  y.assign(static_cast<std::size_t>(c.rows * c.cols), 0.0);
  rstd.assign(static_cast<std::size_t>(c.rows), 0.0);
  for (int64_t r = 0; r < c.rows; ++r) {
    const double* xr = x.data() + r * c.cols;
    double sum = 0.0;
    for (int64_t j = 0; j < c.cols; ++j) sum += xr[j] * xr[j];
    double rs = 1.0 / std::sqrt(sum / static_cast<double>(c.cols) + c.eps);
    if (c.casting_mode == 2) rs = q(rs);  // NONE: rstd lives in the activation dtype
    rstd[r] = rs;
    for (int64_t j = 0; j < c.cols; ++j) {
      double out;
      if (c.casting_mode == 0) {  // LLAMA
        out = q(xr[j] * rs) * (c.offset + w[j]);
      } else if (c.casting_mode == 1) {  // GEMMA
        out = xr[j] * rs * (c.offset + w[j]);
      } else {  // NONE
        out = q(xr[j] * rs) * q(c.offset + w[j]);
      }
      y[r * c.cols + j] = out;
    }
  }
}

void rms_norm_backward(const RmsNormConfig& c, const std::vector<double>& dy, const std::vector<double>& x,
                       const std::vector<double>& w, const std::vector<double>& rstd, std::vector<double>& dx,
                       std::vector<double>& dw) {
  auto q = [&](double v) { return c.model_casts ? round_to_dtype(v, c.dtype) : v; };
  dx.assign(static_cast<std::size_t>(c.rows * c.cols), 0.0);
  dw.assign(static_cast<std::size_t>(c.cols), 0.0);
  const double n = static_cast<double>(c.cols);
  for (int64_t r = 0; r < c.rows; ++r) {
    const double* xr = x.data() + r * c.cols;
    const double* dyr = dy.data() + r * c.cols;
    const double rs = rstd[r];
    double dot = 0.0;
    for (int64_t j = 0; j < c.cols; ++j) dot += dyr[j] * (w[j] + c.offset) * xr[j];
    for (int64_t j = 0; j < c.cols; ++j) {
      double m = dyr[j] * (w[j] + c.offset);
      dx[r * c.cols + j] = rs * m - rs * rs * rs / n * dot * xr[j];
      double normed = c.casting_mode == 0 ? q(xr[j] * rs) : xr[j] * rs;
      dw[j] += dyr[j] * normed;
    }
  }
}

}  // namespace liger::ref
