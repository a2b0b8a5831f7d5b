/* Cross-entropy loss over logits [rows, vocab] with int64 targets, Liger-Kernel semantics.
 *
 * The forward pass computes the loss AND the gradient of the returned loss with respect to the
 * logits (grad_output = 1), in two passes over each row (online softmax: running max and sum in
 * fp32, then one pass that writes the gradient). The gradient can be written into the logits
 * buffer itself (grad_logits == logits, Liger's memory trick) or into a separate buffer; the
 * backward entry then only scales the stored gradient by the upstream gradient.
 *
 * Per non-ignored row r with target y (x = logits row, after soft-capping when enabled:
 * x_i <- s*tanh(x_i/s)), p = softmax(x), lse = logsumexp(x), w = class weights (1 without),
 * W = sum_i w_i, eps = label_smoothing / vocab, ls = label_smoothing:
 *   loss_r = [ (1-ls)*w_y*(lse - x_y) + eps*(W*lse - sum_i w_i*x_i) ] / D_loss
 *            + lse_square_scale*lse^2 / D_z
 *   z_r    = lse_square_scale*lse^2 / D_z
 *   dloss_r/dx_i = [ (1-ls)*w_y*(p_i - [i==y]) + eps*(W*p_i - w_i) ] / D_loss
 *                  + 2*lse_square_scale*lse*p_i / D_z        (times 1 - tanh^2(x_i/s) with softcap)
 * with D_loss = sum of w_y over non-ignored rows and D_z = number of non-ignored rows for
 * reduction MEAN (so mean divides by the number of non-ignored targets without class weights,
 * and by the summed target weights with them, as torch.nn.functional.cross_entropy and
 * Liger-Kernel do), D_loss = D_z = 1 otherwise. Ignored rows (target == ignore_index) give loss 0
 * and a zero gradient row. A batch whose rows are all ignored gives loss 0 and zero gradients
 * (not NaN). A target outside [0, vocab) that is not ignore_index gives a NaN loss for its row
 * and a zero gradient row (the C ABI cannot raise from the device without synchronising).
 * All arithmetic is fp32 (exp and log included); the target-class gradient is computed once in
 * fp32 and rounded once to the storage type. Losses are fp32.
 */
#ifndef LIGER_KERNELS_CROSS_ENTROPY_H
#define LIGER_KERNELS_CROSS_ENTROPY_H

#include <stddef.h>

#include "liger_kernels/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum liger_reduction {
  LIGER_REDUCTION_MEAN = 0, /* sum of row losses / D (see above); loss and z_loss are [1] */
  LIGER_REDUCTION_SUM = 1,  /* sum of row losses; loss and z_loss are [1] */
  LIGER_REDUCTION_NONE = 2  /* per-row losses; loss and z_loss are [rows] */
} liger_reduction;

typedef struct liger_cross_entropy_options {
  int64_t ignore_index;     /* targets equal to this are ignored; default -100 */
  float label_smoothing;    /* in [0, 1]; default 0 */
  float lse_square_scale;   /* z-loss scale, >= 0; default 0 (off) */
  float softcap;            /* logit soft-capping s*tanh(x/s); 0 = off, else > 0 */
  int32_t reduction;        /* liger_reduction; default LIGER_REDUCTION_MEAN */
  const float* class_weight; /* [vocab] fp32 device pointer, or NULL (all ones) */
  int32_t reserved[4];      /* zero */
} liger_cross_entropy_options;

/* Fills `options` with the defaults (ignore_index -100, everything else off / zero, MEAN).
 * A zero-initialised struct is NOT the default (its ignore_index would be 0): call this first. */
LIGER_API void liger_cross_entropy_options_init(liger_cross_entropy_options* options);

/* Bytes of device workspace liger_cross_entropy_forward needs (a few scalars plus two fp32
 * values per row, 256-byte aligned). The caller allocates it; the op allocates nothing. */
LIGER_API liger_status liger_cross_entropy_workspace_size(int64_t rows, int64_t vocab,
                                                          const liger_cross_entropy_options* options,
                                                          size_t* bytes);

/* Forward (loss) and gradient in one call.
 *  logits       [rows, vocab] of `dtype`, row stride `logits_row_stride` (elements, >= vocab).
 *  targets      [rows] int64, contiguous.
 *  grad_logits  [rows, vocab] of `dtype`, row stride `grad_row_stride`, or NULL (loss only).
 *               May be exactly `logits` with the same stride (in place: the logits are
 *               overwritten by the gradient); any other overlap with `logits` is not allowed.
 *  loss         fp32 device output: [1] for MEAN/SUM, [rows] for NONE.
 *  z_loss       fp32 device output shaped like `loss` (lse_square_scale*lse^2, reduced the same
 *               way), or NULL.
 *  workspace    device memory of at least liger_cross_entropy_workspace_size() bytes.
 *  options      NULL means the defaults.
 *  tunables     NULL or fields read: threads_per_block (32..1024, multiple of 32),
 *               vector_bytes (16, 8, 4 or the element size; 2 is invalid for fp32). Zero fields
 *               take the tuned default (liger_cross_entropy_default_tunables).
 * The gradient written is d(loss output summed over its elements)/d(logits), i.e. for NONE each
 * row holds the gradient of its own loss. Asynchronous on `stream`. */
LIGER_API liger_status liger_cross_entropy_forward(const void* logits, int64_t logits_row_stride,
                                                   const int64_t* targets, void* grad_logits,
                                                   int64_t grad_row_stride, float* loss, float* z_loss,
                                                   int64_t rows, int64_t vocab, liger_dtype dtype,
                                                   const liger_cross_entropy_options* options,
                                                   void* workspace, size_t workspace_bytes,
                                                   const liger_tunables* tunables, liger_stream_t stream);

/* Backward: scales the gradient stored by the forward pass in place by the upstream gradient.
 *  grad_logits  [rows, vocab] of `dtype`, row stride `grad_row_stride` (in/out).
 *  grad_output  fp32 device pointer: [1] (MEAN/SUM: one scalar) when grad_output_per_row == 0,
 *               [rows] (NONE: row r is multiplied by grad_output[r]) when it is 1.
 * Callers that know grad_output == 1 on the host may skip this call (Liger does the same).
 * tunables: threads_per_block, vector_bytes as for the forward. */
LIGER_API liger_status liger_cross_entropy_backward(void* grad_logits, int64_t grad_row_stride, int64_t rows,
                                                    int64_t vocab, liger_dtype dtype, const float* grad_output,
                                                    int32_t grad_output_per_row, const liger_tunables* tunables,
                                                    liger_stream_t stream);

/* The tuned defaults the forward/backward use for this architecture (major*10+minor) and size;
 * rows/cols are rows and vocab. Fills every field this op reads. */
LIGER_API liger_status liger_cross_entropy_default_tunables(int sm_arch, int64_t rows, int64_t cols,
                                                            liger_dtype dtype, liger_tunables* out);

#ifdef __cplusplus
}
#endif

#endif /* LIGER_KERNELS_CROSS_ENTROPY_H */
