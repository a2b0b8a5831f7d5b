// fp64 CPU reference of FusedAddRMSNorm (see liger_kernels/fused_add_rms_norm.h).
#pragma once

#include <vector>

#include "rms_norm_ref.h"

namespace liger::ref {

// s = round(x + residual) (to config.dtype when config.model_casts), y = RMSNorm(s).
void fused_add_rms_norm_forward(const RmsNormConfig& config, const std::vector<double>& x,
                                const std::vector<double>& residual, const std::vector<double>& w,
                                std::vector<double>& y, std::vector<double>& s, std::vector<double>& rstd);

// dx (= d residual) = RMSNorm_backward_dx(s, dy) + ds_out (ds_out empty: zero); dw from s.
void fused_add_rms_norm_backward(const RmsNormConfig& config, const std::vector<double>& dy,
                                 const std::vector<double>& ds_out, const std::vector<double>& s,
                                 const std::vector<double>& w, const std::vector<double>& rstd,
                                 std::vector<double>& dx, std::vector<double>& dw);

}  // namespace liger::ref
