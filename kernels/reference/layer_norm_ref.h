// fp64 CPU reference of LayerNorm (see liger_kernels/layer_norm.h).
#pragma once

#include <cstdint>
#include <vector>

namespace liger::ref {

// b empty: no bias. Outputs y [rows*cols], mean [rows], rstd [rows].
void layer_norm_forward(int64_t rows, int64_t cols, double eps, const std::vector<double>& x,
                        const std::vector<double>& w, const std::vector<double>& b, std::vector<double>& y,
                        std::vector<double>& mean, std::vector<double>& rstd);

// -> dx [rows*cols], dw [cols], db [cols].
void layer_norm_backward(int64_t rows, int64_t cols, const std::vector<double>& dy, const std::vector<double>& x,
                         const std::vector<double>& w, const std::vector<double>& mean,
                         const std::vector<double>& rstd, std::vector<double>& dx, std::vector<double>& dw,
                         std::vector<double>& db);

}  // namespace liger::ref
