// RoPE with a chosen heads_per_thread code variant, beside the library's C ABI (which runs the
// variant tuning.h selects). rope_variants.cu compiles the op's own launcher and kernels into the
// test binary once per value, so the GPU tests cover every variant kernel-perf may write into the
// tuning header without rebuilding the library.
#pragma once

#include "liger_kernels/rope.h"

namespace liger::test {

// The values of RopeVariant's HeadsPerThread (skills/kernel_perf/search_spaces.yaml lists the same).
inline constexpr int kRopeHeadsPerThread[] = {1, 2, 4};

// liger_rope_forward (backward = false) or liger_rope_backward, same arguments, run with
// RopeVariant<tuning.h's LoadsFirst, its MinBlocks, heads_per_thread>. heads_per_thread outside
// kRopeHeadsPerThread: LIGER_STATUS_INVALID_ARGUMENT.
liger_status rope_variant(int heads_per_thread, bool backward, const void* q, const int64_t q_strides[3], void* q_out,
                          const int64_t q_out_strides[3], int64_t num_q_heads, const void* k,
                          const int64_t k_strides[3], void* k_out, const int64_t k_out_strides[3],
                          int64_t num_kv_heads, const void* cos, const void* sin, int64_t cos_batch,
                          int64_t cos_batch_stride, int64_t cos_seq_stride, int64_t batch, int64_t seq_len,
                          int64_t head_dim, liger_dtype dtype, const liger_tunables* tunables, liger_stream_t stream);

// The detail of the last failure of rope_variant on this thread (the library's liger_last_error
// does not see it: the launcher compiled here records into its own copy).
const char* rope_variant_last_error();

}  // namespace liger::test
