#include "fused_add_rms_norm_ref.h"

#include <cstddef>

namespace liger::ref {

void fused_add_rms_norm_forward(const RmsNormConfig& c, const std::vector<double>& x,
                                const std::vector<double>& residual, const std::vector<double>& w,
                                std::vector<double>& y, std::vector<double>& s, std::vector<double>& rstd) {
  s.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    double sum = x[i] + residual[i];
    s[i] = c.model_casts ? round_to_dtype(sum, c.dtype) : sum;
  }
  rms_norm_forward(c, s, w, y, rstd);
}

void fused_add_rms_norm_backward(const RmsNormConfig& c, const std::vector<double>& dy,
                                 const std::vector<double>& ds_out, const std::vector<double>& s,
                                 const std::vector<double>& w, const std::vector<double>& rstd,
                                 std::vector<double>& dx, std::vector<double>& dw) {
  rms_norm_backward(c, dy, s, w, rstd, dx, dw);
  if (!ds_out.empty())
    for (std::size_t i = 0; i < dx.size(); ++i) dx[i] += ds_out[i];
}

}  // namespace liger::ref
