// The RoPE launcher and kernels compiled into the GPU test binary once per heads_per_thread
// value (see rope_variants.h). rope.cu is included whole: its kernels and launcher have internal
// linkage, and LIGER_ROPE_NO_C_ABI leaves the exported entry points to the library.
#define LIGER_ROPE_NO_C_ABI 1
#include "rope/rope.cu"

#include <cstdarg>
#include <cstdio>
#include <string>

#include "rope_variants.h"

namespace liger::kernels {
namespace {
thread_local std::string g_variant_error;
}

// rope.cu reports failures through fail(), whose definition is internal to the library (hidden
// visibility): the copy compiled here keeps the message for rope_variant_last_error().
liger_status fail(liger_status status, const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  g_variant_error = std::string(liger_status_string(status)) + ": " + buffer;
  return status;
}

}  // namespace liger::kernels

namespace liger::test {

namespace {

using kernels::rope::Variant;

template <int HPT>
using TestVariant = kernels::rope::RopeVariant<Variant::loads_first ? 1 : 0, Variant::min_blocks, HPT>;

}  // namespace

liger_status rope_variant(int heads_per_thread, bool backward, const void* q, const int64_t q_strides[3], void* q_out,
                          const int64_t q_out_strides[3], int64_t num_q_heads, const void* k,
                          const int64_t k_strides[3], void* k_out, const int64_t k_out_strides[3],
                          int64_t num_kv_heads, const void* cos, const void* sin, int64_t cos_batch,
                          int64_t cos_batch_stride, int64_t cos_seq_stride, int64_t batch, int64_t seq_len,
                          int64_t head_dim, liger_dtype dtype, const liger_tunables* tunables, liger_stream_t stream) {
  kernels::g_variant_error.clear();
  auto run = [&](auto variant) {
    using P = decltype(variant);
    return kernels::rope::run<P>(q, q_strides, q_out, q_out_strides, num_q_heads, k, k_strides, k_out, k_out_strides,
                                 num_kv_heads, cos, sin, cos_batch, cos_batch_stride, cos_seq_stride, batch, seq_len,
                                 head_dim, dtype, tunables, stream, backward);
  };
  switch (heads_per_thread) {
    case 1: return run(TestVariant<1>{});
    case 2: return run(TestVariant<2>{});
    case 4: return run(TestVariant<4>{});
    default:
      return kernels::fail(LIGER_STATUS_INVALID_ARGUMENT, "rope variant: heads_per_thread=%d (want 1, 2 or 4)",
                           heads_per_thread);
  }
}

const char* rope_variant_last_error() { return kernels::g_variant_error.c_str(); }

}  // namespace liger::test
