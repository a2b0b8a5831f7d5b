/* RMSNorm, forward and backward (Liger-Kernel semantics; SPEC section 4).
 *
 *   rstd = 1 / sqrt(mean(x^2) + eps)            (fp32 accumulation, saved per row in fp32)
 *   y    = x * rstd * (offset + w)
 *
 * Casting modes (where the result is rounded to the activation dtype `dtype`):
 *   LLAMA: statistics in fp32; n = dtype(x * rstd) is rounded to the activation dtype before the
 *          weight multiply; y = dtype(n * (offset + w)) with the product in fp32.
 *   GEMMA: everything in fp32, y = dtype(x * rstd * (offset + w)).
 *   NONE:  "compute in the activation dtype" with fp32 accumulation: r = dtype(rstd) (also what is
 *          saved), n = dtype(x * r), y = dtype(n * dtype(offset + w)).
 * For fp32 activations the three modes give the same result.
 *
 * Backward (every mode, fp32 math): m = dy * (offset + w);
 *   dx = rstd * m - rstd^3 / cols * sum(m * x) * x
 *   dw = sum over rows of dy * n, with n = dtype(x * rstd) in LLAMA mode and x * rstd otherwise.
 *
 * Tensors are 2-D [rows, cols], row-major with a row stride in elements (>= cols) for x, y, dy,
 * dx; weight and dweight are contiguous [cols] in `weight_dtype` (the activation dtype or fp32,
 * so fp32 master weights with bf16 activations work); rstd is contiguous [rows] fp32.
 *
 * Tunables read (zero = tuned default from liger_rms_norm_default_tunables):
 *   threads_per_block: 32..1024, a multiple of 32.
 *   rows_per_block:    rows handled together by one block; must divide threads_per_block, and
 *                      threads_per_row = threads_per_block / rows_per_block must be a power of
 *                      two <= 32 or a multiple of 32. Each row is spread over threads_per_row
 *                      threads holding it in registers (x read once); rows longer than
 *                      8 vectors per thread are processed in chunks (x re-read from L2).
 *   vector_bytes:      16 (16-byte vector loads; needs cols, row strides and every pointer to be
 *                      multiples of 16 bytes, else INVALID_ARGUMENT) or the element size (scalar
 *                      path, any layout). Other values: INVALID_ARGUMENT. Default: 16 when the
 *                      layout allows it, else scalar.
 *   reduction_blocks:  backward only: blocks of the persistent grid, each accumulating a fp32
 *                      partial dweight row in registers; 1..65535; default: the SM count
 *                      (capped by the number of row groups). Sets the workspace size.
 * Other fields are ignored.
 *
 * Workspace (backward, caller-provided, the library never allocates): query its size with
 * liger_rms_norm_backward_workspace_size using the same rows, cols and tunables and the device
 * the tensors live on; dweight == NULL needs none. Alignment: 16 bytes.
 */
#ifndef LIGER_KERNELS_RMS_NORM_H
#define LIGER_KERNELS_RMS_NORM_H

#include <stddef.h>

#include "liger_kernels/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum liger_rms_norm_casting {
  LIGER_RMS_NORM_CASTING_LLAMA = 0,
  LIGER_RMS_NORM_CASTING_GEMMA = 1,
  LIGER_RMS_NORM_CASTING_NONE = 2
} liger_rms_norm_casting;

typedef struct liger_rms_norm_options {
  float eps;            /* > 0 not required, >= 0 required; Liger default 1e-6 */
  float offset;         /* 0 (Llama) or 1 (Gemma); any finite value accepted */
  int32_t casting_mode; /* liger_rms_norm_casting */
  int32_t reserved;     /* zero */
} liger_rms_norm_options;

/* Forward. x [rows, cols] (x_row_stride), weight [cols] (weight_dtype), y [rows, cols]
 * (y_row_stride), rstd [rows] fp32 or NULL (not saved, e.g. inference). y may alias x (same
 * pointer and stride: in place). rows >= 0 (0: no launch), 1 <= cols <= 2^20. */
LIGER_API liger_status liger_rms_norm_forward(const void* x, int64_t x_row_stride, const void* weight,
                                              liger_dtype weight_dtype, void* y, int64_t y_row_stride, float* rstd,
                                              int64_t rows, int64_t cols, liger_dtype dtype,
                                              const liger_rms_norm_options* options,
                                              const liger_tunables* tunables, liger_stream_t stream);

/* Backward. dy, x [rows, cols] with their strides, weight [cols], rstd [rows] fp32 as saved by
 * the forward; dx [rows, cols] (dx_row_stride) may alias dy (in place, same stride); dweight
 * [cols] in weight_dtype or NULL (no weight gradient; then workspace may be NULL). dweight is
 * overwritten, not accumulated. */
LIGER_API liger_status liger_rms_norm_backward(const void* dy, int64_t dy_row_stride, const void* x,
                                               int64_t x_row_stride, const void* weight, liger_dtype weight_dtype,
                                               const float* rstd, void* dx, int64_t dx_row_stride, void* dweight,
                                               void* workspace, size_t workspace_bytes, int64_t rows, int64_t cols,
                                               liger_dtype dtype, const liger_rms_norm_options* options,
                                               const liger_tunables* tunables, liger_stream_t stream);

/* Bytes of workspace liger_rms_norm_backward needs for these sizes and tunables on `device`
 * (-1: the current device). */
LIGER_API liger_status liger_rms_norm_backward_workspace_size(int device, int64_t rows, int64_t cols,
                                                              liger_dtype dtype, const liger_tunables* tunables,
                                                              size_t* bytes);

/* The tuned defaults for an architecture (major*10+minor; unknown archs use sm90's rows) and size. */
LIGER_API liger_status liger_rms_norm_default_tunables(int sm_arch, int64_t rows, int64_t cols, liger_dtype dtype,
                                                       liger_tunables* out);

#ifdef __cplusplus
}
#endif

#endif /* LIGER_KERNELS_RMS_NORM_H */
