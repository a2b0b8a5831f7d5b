#include "rope_ref.h"

#include <cstddef>

namespace liger::ref {

std::vector<double> rope_apply(const std::vector<double>& x, int64_t batch, int64_t heads, int64_t seq,
                               int64_t head_dim, const std::vector<double>& cos, const std::vector<double>& sin,
                               int64_t cos_batch, bool backward) {
  std::vector<double> y(x.size());
  const int64_t half = head_dim / 2;
  const double sign = backward ? -1.0 : 1.0;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t cb = cos_batch == 1 ? 0 : b;
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < seq; ++t) {
        const std::size_t row = static_cast<std::size_t>(((b * heads + h) * seq + t) * head_dim);
        const std::size_t crow = static_cast<std::size_t>((cb * seq + t) * head_dim);
        for (int64_t i = 0; i < half; ++i) {
          const double c = cos[crow + i];
          const double s = sign * sin[crow + i];
          const double x1 = x[row + i];
          const double x2 = x[row + half + i];
          y[row + i] = x1 * c - x2 * s;
          y[row + half + i] = x2 * c + x1 * s;
        }
      }
    }
  }
  return y;
}

}  // namespace liger::ref
