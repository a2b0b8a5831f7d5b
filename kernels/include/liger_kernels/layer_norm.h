/* LayerNorm, forward and backward (Liger-Kernel semantics; SPEC section 4).
 *
 *   mean = sum(x) / cols, var = sum((x - mean)^2) / cols (biased), rstd = 1 / sqrt(var + eps)
 *   y    = (x - mean) * rstd * w + b            (fp32 math, one rounding to dtype at the end)
 * Backward (fp32): xhat = (x - mean) * rstd, g = w * dy, c1 = mean(xhat * g), c2 = mean(g),
 *   dx = (g - (xhat * c1 + c2)) * rstd;  dw = sum_rows dy * xhat;  db = sum_rows dy.
 *
 * Layout: x, y, dy, dx [rows, cols] with row strides in elements; weight, bias, dweight, dbias
 * contiguous [cols] in `weight_dtype` (activation dtype or fp32); mean, rstd [rows] fp32.
 * bias may be NULL (no bias). y may alias x; dx may alias dy.
 *
 * Tunables: the same fields, valid values and defaults table as rms_norm.h. Workspace: caller
 * provided, size from liger_layer_norm_backward_workspace_size (holds reduction_blocks rows of
 * fp32 partials for dweight and, when dbias is requested, as many for dbias).
 */
#ifndef LIGER_KERNELS_LAYER_NORM_H
#define LIGER_KERNELS_LAYER_NORM_H

#include <stddef.h>

#include "liger_kernels/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct liger_layer_norm_options {
  float eps;            /* >= 0; PyTorch default 1e-5 */
  int32_t reserved[3];  /* zero */
} liger_layer_norm_options;

/* Forward. mean and rstd: [rows] fp32, each may be NULL (not saved). */
LIGER_API liger_status liger_layer_norm_forward(const void* x, int64_t x_row_stride, const void* weight,
                                                const void* bias, liger_dtype weight_dtype, void* y,
                                                int64_t y_row_stride, float* mean, float* rstd, int64_t rows,
                                                int64_t cols, liger_dtype dtype,
                                                const liger_layer_norm_options* options,
                                                const liger_tunables* tunables, liger_stream_t stream);

/* Backward. mean, rstd as saved by the forward (required). dweight and dbias [cols] in
 * weight_dtype, each may be NULL; workspace may be NULL when both are. Outputs are
 * overwritten, not accumulated. */
LIGER_API liger_status liger_layer_norm_backward(const void* dy, int64_t dy_row_stride, const void* x,
                                                 int64_t x_row_stride, const void* weight, liger_dtype weight_dtype,
                                                 const float* mean, const float* rstd, void* dx,
                                                 int64_t dx_row_stride, void* dweight, void* dbias, void* workspace,
                                                 size_t workspace_bytes, int64_t rows, int64_t cols,
                                                 liger_dtype dtype, const liger_tunables* tunables,
                                                 liger_stream_t stream);

/* with_bias: whether dbias will be requested (doubles the partial sums). */
LIGER_API liger_status liger_layer_norm_backward_workspace_size(int device, int64_t rows, int64_t cols,
                                                                liger_dtype dtype, int with_bias,
                                                                const liger_tunables* tunables, size_t* bytes);

LIGER_API liger_status liger_layer_norm_default_tunables(int sm_arch, int64_t rows, int64_t cols, liger_dtype dtype,
                                                         liger_tunables* out);

#ifdef __cplusplus
}
#endif

#endif /* LIGER_KERNELS_LAYER_NORM_H */
