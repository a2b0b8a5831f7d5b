// Internal interface of the cross-entropy row kernel, shared with the fused linear
// cross-entropy (which runs it on each logits chunk). Not part of the C ABI.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "liger_kernels/cross_entropy.h"

namespace liger::kernels::ce {

// Device scalars written by launch_prepass: [0] 1/D_loss, [1] 1/D_z, [2] sum of class weights
// (vocab without weights), [3] unused.
constexpr int kScalarCount = 4;

struct RowLaunch {
  const void* logits = nullptr;
  int64_t logits_stride = 0;
  void* grad = nullptr;  // may equal logits (in place) or be null (loss only)
  int64_t grad_stride = 0;
  const int64_t* targets = nullptr;  // [rows], already offset to the first row
  const void* bias = nullptr;        // [vocab] of dtype, added to every logit; may be null
  const float* row_scale = nullptr;  // [rows] gradient multipliers; may be null
  float* row_loss = nullptr;         // [rows]
  float* row_z = nullptr;            // [rows] or null
  const float* scalars = nullptr;    // from launch_prepass
  int64_t rows = 0;
  int64_t vocab = 0;
  liger_dtype dtype = LIGER_DTYPE_FLOAT32;
  liger_cross_entropy_options options{};
  int threads = 0;       // resolved tunables
  int vector_bytes = 0;
  int loads_in_flight = 1;  // vector loads per thread issued before any is consumed (1, 2 or 4)
};

liger_status validate_options(const liger_cross_entropy_options& options);
// Resolves zero fields from the table and validates the rest (threads_per_block, vector_bytes,
// pipeline_depth = vector loads in flight per thread).
liger_status resolve_tunables(const liger_tunables* given, int64_t rows, int64_t vocab, liger_dtype dtype,
                              int* threads, int* vector_bytes, int* loads_in_flight);
liger_status launch_prepass(const int64_t* targets, int64_t rows, int64_t vocab,
                            const liger_cross_entropy_options& options, float* scalars, cudaStream_t stream);
liger_status launch_rows(const RowLaunch& launch, cudaStream_t stream);
// Sums row values (fixed order, fp64) into out[0] (and z_out[0] when both are non-null).
liger_status launch_reduce(const float* row_loss, const float* row_z, int64_t rows, float* out, float* z_out,
                           cudaStream_t stream);
// Multiplies rows of `data` by scale[0] or scale[row]; a block whose factor is exactly 1 returns
// without touching memory.
liger_status launch_scale(void* data, int64_t stride, int64_t rows, int64_t cols, liger_dtype dtype,
                          const float* scale, bool per_row, int threads, int vector_bytes, cudaStream_t stream);

}  // namespace liger::kernels::ce
