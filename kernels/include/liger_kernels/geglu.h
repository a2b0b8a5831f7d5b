/* GeGLU: c = gelu_tanh(a) * b, gelu_tanh(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) in fp32 (Liger-Kernel semantics).
 *
 * Layout: a, b, c (and dc, da, db) are [rows, cols] matrices with the last dimension contiguous
 * and a row stride in elements (>= cols) per tensor, so a and b may be the two halves of one fused
 * gate_up tensor [rows, 2*cols] (a = base, b = base + cols, both with row stride 2*cols).
 * All tensors share `dtype` (fp32, fp16 or bf16); arithmetic is fp32, one rounding at the store.
 *
 * Tunables read (NULL or zero fields = tuned default for the device and size, see
 * liger_geglu_default_tunables):
 *   threads_per_block: 64..1024, a multiple of 32 (a kernel variant whose register use cannot
 *     launch that many threads gives LIGER_STATUS_INVALID_ARGUMENT with the reason);
 *   vector_bytes: 16, 8, 4, or the element size (2 for fp16/bf16, 4 for fp32) = scalar accesses.
 *     An explicit value that the pointers' alignment or the row strides do not allow gives
 *     LIGER_STATUS_INVALID_ARGUMENT (never a silent fallback); the default picks the widest allowed.
 *   Other fields are ignored.
 * rows == 0 or cols == 0 is a successful no-op. Launches on the device owning `a`.
 */
#ifndef LIGER_KERNELS_GEGLU_H
#define LIGER_KERNELS_GEGLU_H

#include "liger_kernels/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* c = gelu_tanh(a) * b. c must not overlap a or b (unless c == a or c == b exactly, with equal strides:
 * element-wise in place is allowed). */
LIGER_API liger_status liger_geglu_forward(const void* a, int64_t a_row_stride, const void* b, int64_t b_row_stride,
                                            void* c, int64_t c_row_stride, int64_t rows, int64_t cols,
                                            liger_dtype dtype, const liger_tunables* tunables,
                                            liger_stream_t stream);

/* Backward from dc, recomputing gelu_tanh(a) from a (nothing else is saved):
 *   db = dc * gelu_tanh(a);  da = dc * b * gelu_tanh'(a) (analytic derivative, fp32).
 * in_place == 0: writes da (da_row_stride) and db (db_row_stride); they must not partially overlap
 *   a, b or dc (exact aliasing element-for-element, same pointer and stride, is allowed).
 * in_place != 0: writes da into a's buffer and db into b's buffer (Liger's memory saving); da and
 *   db must then be NULL and their strides are ignored. */
LIGER_API liger_status liger_geglu_backward(const void* dc, int64_t dc_row_stride, const void* a,
                                             int64_t a_row_stride, const void* b, int64_t b_row_stride, void* da,
                                             int64_t da_row_stride, void* db, int64_t db_row_stride, int64_t rows,
                                             int64_t cols, int32_t in_place, liger_dtype dtype,
                                             const liger_tunables* tunables, liger_stream_t stream);

/* The tuned defaults this library uses for (sm_arch, rows, cols, dtype), sm_arch as major*10+minor
 * (80, 90, ...; unknown archs use the sm90 rows). Fills every field the op reads. */
LIGER_API liger_status liger_geglu_default_tunables(int sm_arch, int64_t rows, int64_t cols, liger_dtype dtype,
                                                     liger_tunables* out);

#ifdef __cplusplus
}
#endif

#endif /* LIGER_KERNELS_GEGLU_H */
