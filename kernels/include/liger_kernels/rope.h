/* RoPE, HF rotate-half (Liger-Kernel semantics), q and k rotated in ONE launch.
 *
 * q: [batch, num_q_heads, seq_len, head_dim], k: [batch, num_kv_heads, seq_len, head_dim], any
 * batch/head/seq strides (in elements, given as {batch_stride, head_stride, seq_stride}), the last
 * dimension contiguous. HF passes q/k as [B, H, T, D] views of [B, T, H, D] storage, i.e. strides
 * {T*H*D, D, H*D}; contiguous [B, H, T, D] is {H*T*D, T*D, D}.
 * cos, sin: [cos_batch, seq_len, >= head_dim/2] with the last dimension contiguous, seq stride
 * `cos_seq_stride` and batch stride `cos_batch_stride` (elements; shared by cos and sin);
 * cos_batch is 1 (broadcast over the batch) or `batch`. As in Liger, only the first head_dim/2
 * entries of each cos/sin row are read (HF's tables duplicate the two halves):
 *   y[:h] = x[:h] * cos[:h] - x[h:] * sin[:h],   y[h:] = x[h:] * cos[:h] + x[:h] * sin[:h],  h = D/2.
 * All tensors (cos and sin too) have `dtype`; arithmetic is fp32, one rounding at the store.
 *
 * Outputs: q_out/k_out with their own strides (q_out_strides may be NULL = same as q's). Passing
 * q_out == NULL (resp. k_out == NULL) rotates q (k) IN PLACE, as Liger does. An output that is
 * not NULL must not partially overlap its input (q_out == q with equal strides is in place too).
 * num_kv_heads == 0 (k and k_out NULL) rotates q only.
 * head_dim must be even (else LIGER_STATUS_UNSUPPORTED_SHAPE).
 *
 * Tunables read (NULL or zero fields = tuned default, see liger_rope_default_tunables):
 *   threads_per_block: 32..1024, multiple of 32, divisible by rows_per_block, and
 *     threads_per_block / rows_per_block >= head_dim / 2 / (vector_bytes / element size);
 *   rows_per_block: tokens (b, t) one block rotates side by side, 1..32;
 *   vector_bytes: 16, 8, 4 or the element size; an explicit value that the alignment of the
 *     pointers/strides or head_dim/2 does not allow gives LIGER_STATUS_INVALID_ARGUMENT;
 *   pipeline_depth: heads whose loads a lane issues before it computes (1, 2 or 4).
 * Launches on the device owning q.
 */
#ifndef LIGER_KERNELS_ROPE_H
#define LIGER_KERNELS_ROPE_H

#include "liger_kernels/common.h"

#ifdef __cplusplus
extern "C" {
#endif

LIGER_API liger_status liger_rope_forward(const void* q, const int64_t q_strides[3], void* q_out,
                                          const int64_t q_out_strides[3], int64_t num_q_heads, const void* k,
                                          const int64_t k_strides[3], void* k_out, const int64_t k_out_strides[3],
                                          int64_t num_kv_heads, const void* cos, const void* sin, int64_t cos_batch,
                                          int64_t cos_batch_stride, int64_t cos_seq_stride, int64_t batch,
                                          int64_t seq_len, int64_t head_dim, liger_dtype dtype,
                                          const liger_tunables* tunables, liger_stream_t stream);

/* Backward: dq, dk (same layout rules as q, k) rotated with -sin, i.e. the transpose of the
 * forward rotation; in place when dq_out / dk_out are NULL. */
LIGER_API liger_status liger_rope_backward(const void* dq, const int64_t dq_strides[3], void* dq_out,
                                           const int64_t dq_out_strides[3], int64_t num_q_heads, const void* dk,
                                           const int64_t dk_strides[3], void* dk_out, const int64_t dk_out_strides[3],
                                           int64_t num_kv_heads, const void* cos, const void* sin, int64_t cos_batch,
                                           int64_t cos_batch_stride, int64_t cos_seq_stride, int64_t batch,
                                           int64_t seq_len, int64_t head_dim, liger_dtype dtype,
                                           const liger_tunables* tunables, liger_stream_t stream);

/* Tuned defaults for (sm_arch, rows = batch*seq_len tokens, cols = (num_q_heads + num_kv_heads) *
 * head_dim, dtype), assuming 16-byte-aligned tensors: fills threads_per_block, rows_per_block,
 * vector_bytes (what the launcher uses when no tunables are given and vectors of 16 bytes fit). */
LIGER_API liger_status liger_rope_default_tunables(int sm_arch, int64_t rows, int64_t cols, liger_dtype dtype,
                                                   liger_tunables* out);

#ifdef __cplusplus
}
#endif

#endif /* LIGER_KERNELS_ROPE_H */
