/* FusedAddRMSNorm, forward and backward (Liger-Kernel semantics; SPEC section 4).
 *
 *   s = dtype(x + residual)         (returned: the new residual stream)
 *   y = RMSNorm(s)                  (exactly liger_rms_norm_forward on s: casting modes, offset, rstd)
 *
 * Backward: given dy and ds_out (the gradient flowing into the residual output s, may be NULL
 * for zero), ds = RMSNorm_backward_dx(s, dy) + ds_out, and dx = d_residual = ds (the two inputs
 * get the same gradient, so one tensor is written; the caller uses it for both). dweight as in
 * RMSNorm (from s).
 *
 * Layout, tunables, workspace and casting modes: as in rms_norm.h (same fields, same valid
 * values, same defaults table). Aliasing: forward: s may alias x or residual (in-place residual
 * update), y may alias x; backward: dx may alias dy or ds_out (same stride).
 */
#ifndef LIGER_KERNELS_FUSED_ADD_RMS_NORM_H
#define LIGER_KERNELS_FUSED_ADD_RMS_NORM_H

#include <stddef.h>

#include "liger_kernels/common.h"
#include "liger_kernels/rms_norm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Forward. x, residual, y, s: [rows, cols] with their row strides; weight [cols] (weight_dtype);
 * rstd [rows] fp32 or NULL. */
LIGER_API liger_status liger_fused_add_rms_norm_forward(
    const void* x, int64_t x_row_stride, const void* residual, int64_t residual_row_stride, const void* weight,
    liger_dtype weight_dtype, void* y, int64_t y_row_stride, void* s, int64_t s_row_stride, float* rstd,
    int64_t rows, int64_t cols, liger_dtype dtype, const liger_rms_norm_options* options,
    const liger_tunables* tunables, liger_stream_t stream);

/* Backward. dy [rows, cols]; ds_out [rows, cols] or NULL; s: the forward's residual output;
 * rstd as saved; dx [rows, cols] receives the gradient of both x and residual; dweight [cols]
 * or NULL (then workspace may be NULL). */
LIGER_API liger_status liger_fused_add_rms_norm_backward(
    const void* dy, int64_t dy_row_stride, const void* ds_out, int64_t ds_out_row_stride, const void* s,
    int64_t s_row_stride, const void* weight, liger_dtype weight_dtype, const float* rstd, void* dx,
    int64_t dx_row_stride, void* dweight, void* workspace, size_t workspace_bytes, int64_t rows, int64_t cols,
    liger_dtype dtype, const liger_rms_norm_options* options, const liger_tunables* tunables,
    liger_stream_t stream);

LIGER_API liger_status liger_fused_add_rms_norm_backward_workspace_size(int device, int64_t rows, int64_t cols,
                                                                        liger_dtype dtype,
                                                                        const liger_tunables* tunables,
                                                                        size_t* bytes);

LIGER_API liger_status liger_fused_add_rms_norm_default_tunables(int sm_arch, int64_t rows, int64_t cols,
                                                                 liger_dtype dtype, liger_tunables* out);

#ifdef __cplusplus
}
#endif

#endif /* LIGER_KERNELS_FUSED_ADD_RMS_NORM_H */
