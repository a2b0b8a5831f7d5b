/* Fused linear + cross-entropy (the LM head and its loss) without materialising the whole
 * [tokens, vocab] logits: rows are processed in chunks of `chunk_rows` tokens;
 *   logits_c = input_c @ weight^T (+ bias)            (cuBLAS, fp32 accumulate)
 *   loss rows and dlogits_c in place                   (the cross-entropy kernel, all options)
 *   grad_input_c  = dlogits_c @ weight                  (cuBLAS)
 *   grad_weight  += dlogits_c^T @ input_c               (cuBLAS, beta = 1 after the first chunk)
 *   grad_bias    += column sums of dlogits_c            (cuBLAS GEMV against a ones vector)
 * The forward computes the gradients too (Liger-Kernel's design); the backward entry only
 * scales them by the upstream gradient. Semantics of the loss and the gradient: exactly those of
 * liger_cross_entropy_forward (cross_entropy.h) applied to logits = input @ weight^T + bias,
 * including ignore_index, label smoothing, z-loss, soft-capping, class weights and reductions.
 *
 * reduction NONE and per-token gradients: a per-row upstream gradient cannot be applied to
 * grad_weight after the fact, so the forward takes an optional `row_grad_scale` [tokens]:
 * when given, the gradients written are those of sum_r row_grad_scale[r] * loss_r. An autograd
 * binding for NONE runs the forward without gradients, then recomputes with
 * row_grad_scale = grad_output in its backward.
 *
 * Memory: no allocation inside the call. The caller passes a workspace of
 * liger_fused_linear_cross_entropy_workspace_size() bytes holding one logits chunk
 * (chunk_rows x vocab of `dtype`), per-row fp32 losses, a small fp32 scratch and the cuBLAS
 * workspace (32 MiB, handed to cuBLAS with cublasSetWorkspace so cuBLAS allocates nothing).
 * cuBLAS: one handle per device, created lazily on first use, cached for the life of the
 * process, guarded by a mutex for the duration of a call (thread-safe); the stream is set on it
 * every call.
 */
#ifndef LIGER_KERNELS_FUSED_LINEAR_CROSS_ENTROPY_H
#define LIGER_KERNELS_FUSED_LINEAR_CROSS_ENTROPY_H

#include <stddef.h>

#include "liger_kernels/common.h"
#include "liger_kernels/cross_entropy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Workspace bytes for a call with these sizes, dtype, options and tunables (chunk_rows matters;
 * pass the same tunables to the forward). */
LIGER_API liger_status liger_fused_linear_cross_entropy_workspace_size(int64_t tokens, int64_t hidden,
                                                                       int64_t vocab, liger_dtype dtype,
                                                                       const liger_cross_entropy_options* options,
                                                                       const liger_tunables* tunables,
                                                                       size_t* bytes);

/* Loss and (optionally) gradients.
 *  input        [tokens, hidden] of `dtype`, row stride input_row_stride (>= hidden).
 *  weight       [vocab, hidden] of `dtype`, row stride weight_row_stride (>= hidden).
 *  bias         [vocab] of `dtype`, or NULL.
 *  targets      [tokens] int64, contiguous.
 *  row_grad_scale [tokens] fp32 device, or NULL (= all ones); see above.
 *  loss, z_loss as for liger_cross_entropy_forward ([1] or [tokens] fp32; z_loss may be NULL).
 *  grad_input   [tokens, hidden] of `dtype`, row stride grad_input_row_stride, or NULL.
 *  grad_weight  [vocab, hidden] contiguous, of grad_weight_dtype (`dtype`, or FLOAT32 for an fp32
 *               weight gradient: accumulation across chunks then happens in fp32), or NULL.
 *               Overwritten (not accumulated into).
 *  grad_bias    [vocab] of grad_bias_dtype (`dtype` or FLOAT32), or NULL (must be NULL without
 *               bias). Accumulated in fp32 in every case, converted at the end.
 *  No output may alias an input. Gradients are those of the loss output summed over its
 *  elements (grad_output = 1), times row_grad_scale when given.
 *  tunables     chunk_rows (> 0; default from the tuning table), threads_per_block and
 *               vector_bytes of the cross-entropy kernel (as in cross_entropy.h).
 * Returns LIGER_STATUS_CUBLAS_ERROR if a cuBLAS call fails. */
LIGER_API liger_status liger_fused_linear_cross_entropy_forward(
    const void* input, int64_t input_row_stride, const void* weight, int64_t weight_row_stride, const void* bias,
    const int64_t* targets, const float* row_grad_scale, float* loss, float* z_loss, void* grad_input,
    int64_t grad_input_row_stride, void* grad_weight, liger_dtype grad_weight_dtype, void* grad_bias,
    liger_dtype grad_bias_dtype, int64_t tokens, int64_t hidden, int64_t vocab, liger_dtype dtype,
    const liger_cross_entropy_options* options, void* workspace, size_t workspace_bytes,
    const liger_tunables* tunables, liger_stream_t stream);

/* Backward for MEAN/SUM: multiplies each non-NULL gradient in place by the scalar
 * grad_output[0] (fp32 device pointer). Shapes and dtypes as passed to the forward. Callers that
 * know grad_output == 1 on the host may skip the call. */
LIGER_API liger_status liger_fused_linear_cross_entropy_backward(const float* grad_output, void* grad_input,
                                                                 int64_t grad_input_row_stride, int64_t tokens,
                                                                 int64_t hidden, void* grad_weight,
                                                                 liger_dtype grad_weight_dtype, int64_t vocab,
                                                                 void* grad_bias, liger_dtype grad_bias_dtype,
                                                                 liger_dtype dtype, liger_stream_t stream);

/* Tuned defaults: rows = tokens, cols = vocab. Fills chunk_rows, threads_per_block and
 * vector_bytes. */
LIGER_API liger_status liger_fused_linear_cross_entropy_default_tunables(int sm_arch, int64_t rows, int64_t cols,
                                                                         liger_dtype dtype, liger_tunables* out);

#ifdef __cplusplus
}
#endif

#endif /* LIGER_KERNELS_FUSED_LINEAR_CROSS_ENTROPY_H */
