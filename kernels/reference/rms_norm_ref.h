// fp64 CPU reference of RMSNorm (see liger_kernels/rms_norm.h for the semantics).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "liger_kernels/common.h"

namespace liger::ref {

// Rounds `value` to the nearest value representable in `dtype` (round to nearest even, fp16
// overflow to inf, subnormals kept). Used to model the casts a casting mode prescribes.
double round_to_dtype(double value, liger_dtype dtype);

struct RmsNormConfig {
  int64_t rows = 0, cols = 0;
  double eps = 1e-6;
  double offset = 0.0;
  int casting_mode = 0;              // liger_rms_norm_casting
  liger_dtype dtype = LIGER_DTYPE_FLOAT32;  // activation dtype: where intermediate casts round to
  bool model_casts = true;           // false: no intermediate rounding (exact math, for gradient checks)
};

// x [rows*cols], w [cols] -> y [rows*cols], rstd [rows] (the value the kernel saves).
void rms_norm_forward(const RmsNormConfig& config, const std::vector<double>& x, const std::vector<double>& w,
                      std::vector<double>& y, std::vector<double>& rstd);

// dy, x [rows*cols], w [cols], rstd [rows] -> dx [rows*cols], dw [cols].
void rms_norm_backward(const RmsNormConfig& config, const std::vector<double>& dy, const std::vector<double>& x,
                       const std::vector<double>& w, const std::vector<double>& rstd, std::vector<double>& dx,
                       std::vector<double>& dw);

}  // namespace liger::ref
