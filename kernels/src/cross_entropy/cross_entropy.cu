// Cross-entropy forward (loss + gradient in one call) and backward (scale by grad_output).
//
// One block per row. Pass 1 streams the row once with 16-byte loads and keeps a running max and
// a running sum of exp (online softmax) per thread, in fp32, plus the (weighted) logit sum that
// label smoothing needs; a block reduction merges them. Pass 2 re-reads the row (from L2 for the
// large vocabularies, see tuning.h) and writes the gradient, computing the target-class element
// in fp32 in the same expression (no read-modify-write of a rounded value). exp is ex2.approx
// applied to (x - max) * log2(e): the subtraction is done first so large logits (1e4) lose no
// precision to the scaling.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/cuda_utils.cuh"
#include "common/dtype.cuh"
#include "cross_entropy/ce_internal.h"
#include "cross_entropy/tuning.h"
#include "liger_kernels/cross_entropy.h"

namespace liger::kernels::ce {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// exp(a - b) for the online-softmax rescale; 0 when a is -inf (an empty partial).
__device__ __forceinline__ float rescale(float a, float b) { return a == -INFINITY ? 0.0f : exp2_approx((a - b) * kLog2e); }

struct RowArgs {
  const void* logits;
  int64_t logits_stride;
  void* grad;
  int64_t grad_stride;
  const int64_t* targets;
  const float* weight;
  const void* bias;
  const float* row_scale;
  float* row_loss;
  float* row_z;
  const float* scalars;
  int64_t rows;
  int64_t vocab;
  int64_t ignore_index;
  float label_smoothing;
  float lse_square_scale;
  float softcap;
};

// Elements before the first address aligned to N elements (done one by one).
template <typename T, int N>
__device__ __forceinline__ int64_t row_head(const T* row, int64_t vocab) {
  if constexpr (N == 1) return 0;
  const auto misalign = static_cast<int64_t>((reinterpret_cast<uintptr_t>(row) / sizeof(T)) % N);
  return misalign == 0 ? 0 : (N - misalign < vocab ? N - misalign : vocab);
}

// Visits the elements of one row as a scalar head (up to the first address aligned to the
// vector size), whole vectors, and a scalar tail. `scalar(i)` and `vector(i)` (i = first index
// of N elements) are called by the thread that owns them; the same thread owns the same
// elements in every pass, so an in-place pass 2 only ever overwrites what it has read itself.
template <typename T, int N, typename Scalar, typename Vector>
__device__ __forceinline__ void for_row(const T* row, int64_t vocab, Scalar&& scalar, Vector&& vector) {
  const int64_t head = row_head<T, N>(row, vocab);
  const int64_t vectors = (vocab - head) / N;
  const int64_t tail = head + vectors * N;
  if (static_cast<int64_t>(threadIdx.x) < head) scalar(static_cast<int64_t>(threadIdx.x));
  for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) vector(head + v * N);
  for (int64_t i = tail + threadIdx.x; i < vocab; i += blockDim.x) scalar(i);
}

// for_row with the vectors of a thread taken B at a time: all loads of a batch are issued before
// any is consumed. One 1024-thread block per SM with one 16-byte load in flight per thread is
// 16 KiB per SM, too little to cover HBM latency (the row kernel ran at ~55% of the copy rate).
// Ownership is for_row's (vector v belongs to thread v % blockDim.x), so the in-place pass 2 still
// overwrites only what the same thread has read.
template <typename T, int N, int B, typename Scalar, typename Consume>
__device__ __forceinline__ void for_row_batched(const T* row, int64_t vocab, Scalar&& scalar, Consume&& consume) {
  const int64_t head = row_head<T, N>(row, vocab);
  const int64_t vectors = (vocab - head) / N;
  const int64_t tail = head + vectors * N;
  if (static_cast<int64_t>(threadIdx.x) < head) scalar(static_cast<int64_t>(threadIdx.x));
  const int64_t step = blockDim.x;
  for (int64_t v0 = threadIdx.x; v0 < vectors; v0 += B * step) {
    Vec<T, N> in[B];
#pragma unroll
    for (int u = 0; u < B; ++u)
      if (v0 + u * step < vectors) in[u] = *reinterpret_cast<const Vec<T, N>*>(row + head + (v0 + u * step) * N);
#pragma unroll
    for (int u = 0; u < B; ++u)
      if (v0 + u * step < vectors) consume(in[u], head + (v0 + u * step) * N);
  }
  for (int64_t i = tail + threadIdx.x; i < vocab; i += blockDim.x) scalar(i);
}

template <typename T>
__device__ __forceinline__ float load_logit(const T* row, const T* bias, int64_t i) {
  float v = to_float(row[i]);
  if (bias != nullptr) v += to_float(bias[i]);
  return v;
}

// Block-wide merge of (max, sum of exp(x - max), smoothing sum). Result broadcast to all threads.
__device__ __forceinline__ void block_merge(float& m, float& s, float& sx, float (*shared)[32]) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
    float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
    float sx2 = __shfl_xor_sync(0xffffffffu, sx, offset);
    float mm = fmaxf(m, m2);
    s = s * rescale(m, mm) + s2 * rescale(m2, mm);
    m = mm;
    sx += sx2;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // previous row's readers of `shared` are done
  if (lane == 0) {
    shared[0][warp] = m;
    shared[1][warp] = s;
    shared[2][warp] = sx;
  }
  __syncthreads();
  m = lane < warps ? shared[0][lane] : -INFINITY;
  s = lane < warps ? shared[1][lane] : 0.0f;
  sx = lane < warps ? shared[2][lane] : 0.0f;
  for (int offset = 16; offset > 0; offset >>= 1) {
    float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
    float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
    float sx2 = __shfl_xor_sync(0xffffffffu, sx, offset);
    float mm = fmaxf(m, m2);
    s = s * rescale(m, mm) + s2 * rescale(m2, mm);
    m = mm;
    sx += sx2;
  }
}

// V: the code variant (tuning.h `using Variant = CeVariant<...>;`): two_pass, min_blocks.
template <typename T, int N, int B, class V = ShippedCeVariant>
__global__ void __launch_bounds__(1024, V::min_blocks) ce_rows_kernel(RowArgs a) {
  __shared__ float shared[3][32];
  const bool has_cap = a.softcap > 0.0f;
  const float cap = a.softcap;
  const float inv_cap = has_cap ? 1.0f / a.softcap : 0.0f;
  const bool smooth = a.label_smoothing > 0.0f;
  const float* weight = a.weight;
  const T* bias = static_cast<const T*>(a.bias);
  const float inv_d_loss = a.scalars[0], inv_d_z = a.scalars[1], weight_sum = a.scalars[2];
  const float ls = a.label_smoothing;
  const float eps = ls / static_cast<float>(a.vocab);

  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const T* x = static_cast<const T*>(a.logits) + row * a.logits_stride;
    T* g = a.grad != nullptr ? static_cast<T*>(a.grad) + row * a.grad_stride : nullptr;
    const int64_t y = a.targets[row];
    if (y == a.ignore_index || y < 0 || y >= a.vocab) {
      if (g != nullptr) {
        for_row<T, N>(
            g, a.vocab, [&](int64_t i) { g[i] = from_float<T>(0.0f); },
            [&](int64_t i) {
              Vec<T, N> zero;
#pragma unroll
              for (int k = 0; k < N; ++k) zero.values[k] = from_float<T>(0.0f);
              *reinterpret_cast<Vec<T, N>*>(g + i) = zero;
            });
      }
      if (threadIdx.x == 0) {
        a.row_loss[row] = y == a.ignore_index ? 0.0f : __int_as_float(0x7fc00000);
        if (a.row_z != nullptr) a.row_z[row] = 0.0f;
      }
      continue;
    }
    // The target logit, read before pass 2 may overwrite it (in place).
    float xy = 0.0f;
    if (threadIdx.x == 0) {
      xy = load_logit(x, bias, y);
      if (has_cap) xy = cap * tanhf(xy * inv_cap);
    }

    // Pass 1: online max / sum of exp / smoothing sum.
    float m = -INFINITY, s = 0.0f, sx = 0.0f;
    if constexpr (V::two_pass) {
      // The two-pass variant: the row max (and smoothing sum) first, then the sum of exp against
      // it: no rescaling per vector, one more read of the row (from L2).
      auto logits_of = [&](const Vec<T, N>& in, int64_t i, float* v) {
#pragma unroll
        for (int k = 0; k < N; ++k) {
          v[k] = to_float(in.values[k]);
          if (bias != nullptr) v[k] += to_float(bias[i + k]);
          if (has_cap) v[k] = cap * tanhf(v[k] * inv_cap);
        }
      };
      auto scalar_logit = [&](int64_t i) {
        float v = load_logit(x, bias, i);
        return has_cap ? cap * tanhf(v * inv_cap) : v;
      };
      auto take_max = [&](const float* v, int count, int64_t i0) {
        for (int k = 0; k < count; ++k) m = fmaxf(m, v[k]);
        if (smooth)
          for (int k = 0; k < count; ++k) sx += (weight != nullptr ? weight[i0 + k] : 1.0f) * v[k];
      };
      for_row_batched<T, N, B>(
          x, a.vocab, [&](int64_t i) { const float v = scalar_logit(i); take_max(&v, 1, i); },
          [&](const Vec<T, N>& in, int64_t i) {
            float v[N];
            logits_of(in, i, v);
            take_max(v, N, i);
          });
      block_merge(m, s, sx, shared);  // s is 0 everywhere: the row max and smoothing sum
      auto take_sum = [&](const float* v, int count) {
        for (int k = 0; k < count; ++k) s += exp2_approx((v[k] - m) * kLog2e);
      };
      for_row_batched<T, N, B>(
          x, a.vocab, [&](int64_t i) { const float v = scalar_logit(i); take_sum(&v, 1); },
          [&](const Vec<T, N>& in, int64_t i) {
            float v[N];
            logits_of(in, i, v);
            take_sum(v, N);
          });
      float m_same = m, sx_none = 0.0f;  // every thread holds the row max: only s is merged
      block_merge(m_same, s, sx_none, shared);
    } else {
    auto accumulate = [&](const float* v, int count, int64_t i0) {
      float vmax = v[0];
      for (int k = 1; k < count; ++k) vmax = fmaxf(vmax, v[k]);
      if (vmax > m) {
        s *= rescale(m, vmax);
        m = vmax;
      }
      for (int k = 0; k < count; ++k) s += exp2_approx((v[k] - m) * kLog2e);
      if (smooth) {
        for (int k = 0; k < count; ++k) sx += (weight != nullptr ? weight[i0 + k] : 1.0f) * v[k];
      }
    };
    for_row_batched<T, N, B>(
        x, a.vocab,
        [&](int64_t i) {
          float v = load_logit(x, bias, i);
          if (has_cap) v = cap * tanhf(v * inv_cap);
          accumulate(&v, 1, i);
        },
        [&](const Vec<T, N>& in, int64_t i) {
          float v[N];
#pragma unroll
          for (int k = 0; k < N; ++k) {
            v[k] = to_float(in.values[k]);
            if (bias != nullptr) v[k] += to_float(bias[i + k]);
            if (has_cap) v[k] = cap * tanhf(v[k] * inv_cap);
          }
          accumulate(v, N, i);
        });
    block_merge(m, s, sx, shared);
    }

    const float log_s = logf(s);
    const float lse = m + log_s;
    const float wy = weight != nullptr ? weight[y] : 1.0f;
    const float lambda = a.lse_square_scale;
    if (threadIdx.x == 0) {
      const float z = lambda * lse * lse * inv_d_z;
      // lse - x_y as (m - x_y) + log(s): exact for logits of any magnitude.
      float loss = (1.0f - ls) * wy * ((m - xy) + log_s);
      if (smooth) loss += eps * (weight_sum * lse - sx);
      a.row_loss[row] = loss * inv_d_loss + z;
      if (a.row_z != nullptr) a.row_z[row] = z;
    }
    if (g == nullptr) continue;

    // Pass 2: gradient = A*p_i - B*w_i - C*[i == y], times the softcap chain rule.
    const float rs = a.row_scale != nullptr ? a.row_scale[row] : 1.0f;
    const float coef_a = (((1.0f - ls) * wy + eps * weight_sum) * inv_d_loss + 2.0f * lambda * lse * inv_d_z) * rs;
    const float coef_ap = coef_a / s;  // A / sum: p_i = exp(x_i - m) / s
    const float coef_b = smooth ? eps * inv_d_loss * rs : 0.0f;
    const float coef_c = (1.0f - ls) * wy * inv_d_loss * rs;
    auto gradient = [&](float raw, int64_t i) {
      float v = raw, chain = 1.0f;
      if (has_cap) {
        const float t = tanhf(v * inv_cap);
        v = cap * t;
        chain = 1.0f - t * t;
      }
      float d = coef_ap * exp2_approx((v - m) * kLog2e);
      if (smooth) d -= coef_b * (weight != nullptr ? weight[i] : 1.0f);
      if (i == y) d -= coef_c;
      return d * chain;
    };
    for_row_batched<T, N, B>(
        x, a.vocab, [&](int64_t i) { g[i] = from_float<T>(gradient(load_logit(x, bias, i), i)); },
        [&](const Vec<T, N>& in, int64_t i) {
          Vec<T, N> out;
#pragma unroll
          for (int k = 0; k < N; ++k) {
            float v = to_float(in.values[k]);
            if (bias != nullptr) v += to_float(bias[i + k]);
            out.values[k] = from_float<T>(gradient(v, i + k));
          }
          *reinterpret_cast<Vec<T, N>*>(g + i) = out;
        });
  }
}

// One block: D_loss, D_z (as reciprocals, 0 when empty) and the class-weight sum, accumulated
// in fp64 in a fixed order (deterministic).
__global__ void __launch_bounds__(1024) ce_prepass_kernel(const int64_t* targets, int64_t rows, int64_t vocab,
                                                          int64_t ignore_index, const float* weight, int mean,
                                                          float* scalars) {
  __shared__ double shared[3][32];
  double count = 0.0, target_weight = 0.0, weight_sum = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const int64_t y = targets[r];
    if (y == ignore_index) continue;
    count += 1.0;
    if (y >= 0 && y < vocab) target_weight += weight != nullptr ? static_cast<double>(weight[y]) : 1.0;
  }
  if (weight != nullptr) {
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) weight_sum += weight[i];
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    count += __shfl_xor_sync(0xffffffffu, count, offset);
    target_weight += __shfl_xor_sync(0xffffffffu, target_weight, offset);
    weight_sum += __shfl_xor_sync(0xffffffffu, weight_sum, offset);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) {
    shared[0][warp] = count;
    shared[1][warp] = target_weight;
    shared[2][warp] = weight_sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double c = 0, t = 0, w = 0;
    for (int k = 0; k < warps; ++k) {
      c += shared[0][k];
      t += shared[1][k];
      w += shared[2][k];
    }
    scalars[0] = mean ? (t > 0 ? static_cast<float>(1.0 / t) : 0.0f) : 1.0f;
    scalars[1] = mean ? (c > 0 ? static_cast<float>(1.0 / c) : 0.0f) : 1.0f;
    scalars[2] = weight != nullptr ? static_cast<float>(w) : static_cast<float>(vocab);
    scalars[3] = 0.0f;
  }
}

__global__ void __launch_bounds__(1024) ce_reduce_kernel(const float* row_loss, const float* row_z, int64_t rows,
                                                         float* out, float* z_out) {
  __shared__ double shared[2][32];
  double loss = 0.0, z = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    loss += row_loss[r];
    if (row_z != nullptr) z += row_z[r];
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    loss += __shfl_xor_sync(0xffffffffu, loss, offset);
    z += __shfl_xor_sync(0xffffffffu, z, offset);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) {
    shared[0][warp] = loss;
    shared[1][warp] = z;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double l = 0, zz = 0;
    for (int k = 0; k < warps; ++k) {
      l += shared[0][k];
      zz += shared[1][k];
    }
    out[0] = static_cast<float>(l);
    if (z_out != nullptr && row_z != nullptr) z_out[0] = static_cast<float>(zz);
  }
}

template <typename T, int N>
__global__ void __launch_bounds__(1024) ce_scale_kernel(T* data, int64_t stride, int64_t rows, int64_t cols,
                                                        const float* scale, int per_row) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float f = per_row ? scale[row] : scale[0];
    if (f == 1.0f) continue;
    T* p = data + row * stride;
    for_row<T, N>(
        p, cols, [&](int64_t i) { p[i] = from_float<T>(to_float(p[i]) * f); },
        [&](int64_t i) {
          Vec<T, N> v = *reinterpret_cast<Vec<T, N>*>(p + i);
#pragma unroll
          for (int k = 0; k < N; ++k) v.values[k] = from_float<T>(to_float(v.values[k]) * f);
          *reinterpret_cast<Vec<T, N>*>(p + i) = v;
        });
  }
}

int grid_for_rows(int64_t rows) { return static_cast<int>(rows < 2147483647LL ? rows : 2147483647LL); }

// Calls fn(T{}, std::integral_constant<int, N>{}) for vector_bytes / sizeof(T) elements.
template <typename Fn>
liger_status dispatch_vector(liger_dtype dtype, int vector_bytes, Fn&& fn) {
  liger_status status = LIGER_STATUS_SUCCESS;
  bool known = dispatch_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    const int n = vector_bytes / static_cast<int>(sizeof(T));
    switch (n) {
      case 1: status = fn(T{}, std::integral_constant<int, 1>{}); break;
      case 2: status = fn(T{}, std::integral_constant<int, 2>{}); break;
      case 4: status = fn(T{}, std::integral_constant<int, 4>{}); break;
      case 8:
        if constexpr (sizeof(T) == 2) {
          status = fn(T{}, std::integral_constant<int, 8>{});
        } else {
          status = fail(LIGER_STATUS_INVALID_ARGUMENT, "vector_bytes %d invalid for fp32", vector_bytes);
        }
        break;
      default: status = fail(LIGER_STATUS_INVALID_ARGUMENT, "vector_bytes %d invalid", vector_bytes);
    }
  });
  if (!known) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "cross_entropy: unsupported dtype %d", static_cast<int>(dtype));
  return status;
}

// The vector width actually used: the requested one when every row of both buffers starts at
// the same offset modulo the vector size (so one head/body/tail split serves both), else 1.
int usable_vector_bytes(int vector_bytes, std::size_t elem, const void* a, int64_t a_stride, const void* b,
                        int64_t b_stride) {
  if (b == nullptr || b == a) return vector_bytes;
  const auto vb = static_cast<uintptr_t>(vector_bytes);
  const bool same_offset = reinterpret_cast<uintptr_t>(a) % vb == reinterpret_cast<uintptr_t>(b) % vb;
  const bool same_stride = (static_cast<uint64_t>(a_stride) * elem) % vb == (static_cast<uint64_t>(b_stride) * elem) % vb;
  return same_offset && same_stride ? vector_bytes : static_cast<int>(elem);
}

}  // namespace

liger_status validate_options(const liger_cross_entropy_options& o) {
  if (!(o.label_smoothing >= 0.0f && o.label_smoothing <= 1.0f))
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy: label_smoothing %g outside [0, 1]", o.label_smoothing);
  if (!(o.lse_square_scale >= 0.0f) || !std::isfinite(o.lse_square_scale))
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy: lse_square_scale %g must be finite and >= 0",
                o.lse_square_scale);
  if (!(o.softcap >= 0.0f) || !std::isfinite(o.softcap))
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy: softcap %g must be 0 (off) or > 0", o.softcap);
  if (o.reduction != LIGER_REDUCTION_MEAN && o.reduction != LIGER_REDUCTION_SUM && o.reduction != LIGER_REDUCTION_NONE)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy: unknown reduction %d", o.reduction);
  for (int r : o.reserved)
    if (r != 0) return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy: reserved option fields must be zero");
  return LIGER_STATUS_SUCCESS;
}

liger_status resolve_tunables(const liger_tunables* given, int64_t rows, int64_t vocab, liger_dtype dtype,
                              int* threads, int* vector_bytes, int* loads_in_flight) {
  (void)rows;
  liger_tunables defaults = default_tunables(current_sm_arch(), vocab);
  int t = given != nullptr && given->threads_per_block != 0 ? given->threads_per_block : defaults.threads_per_block;
  int v = given != nullptr && given->vector_bytes != 0 ? given->vector_bytes : defaults.vector_bytes;
  if (t < 32 || t > 1024 || t % 32 != 0)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy: threads_per_block %d must be a multiple of 32 in [32, 1024]", t);
  const int elem = static_cast<int>(dtype_size(dtype));
  if (!(v == 16 || v == 8 || v == 4 || v == 2) || v < elem)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy: vector_bytes %d invalid for a %d-byte dtype", v, elem);
  const int b = given != nullptr && given->pipeline_depth != 0 ? given->pipeline_depth : defaults.pipeline_depth;
  if (b != 1 && b != 2 && b != 4)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy: pipeline_depth %d invalid (vector loads in flight per thread: 1, 2 or 4)", b);
  *threads = t;
  *vector_bytes = v;
  *loads_in_flight = b;
  return LIGER_STATUS_SUCCESS;
}

liger_status launch_prepass(const int64_t* targets, int64_t rows, int64_t vocab, const liger_cross_entropy_options& o,
                            float* scalars, cudaStream_t stream) {
  ce_prepass_kernel<<<1, 1024, 0, stream>>>(targets, rows, vocab, o.ignore_index, o.class_weight,
                                            o.reduction == LIGER_REDUCTION_MEAN ? 1 : 0, scalars);
  return check_launch("ce_prepass_kernel");
}

liger_status launch_rows(const RowLaunch& l, cudaStream_t stream) {
  if (l.rows == 0) return LIGER_STATUS_SUCCESS;
  RowArgs a{l.logits, l.logits_stride, l.grad, l.grad_stride, l.targets, l.options.class_weight, l.bias,
            l.row_scale, l.row_loss, l.row_z, l.scalars, l.rows, l.vocab, l.options.ignore_index,
            l.options.label_smoothing, l.options.lse_square_scale, l.options.softcap};
  const int vb = usable_vector_bytes(l.vector_bytes, dtype_size(l.dtype), l.logits, l.logits_stride, l.grad, l.grad_stride);
#ifdef LIGER_KERNEL_VARIANT_UNIT
  // kernel-perf's code-variant compile check includes this file and instantiates one row kernel
  // itself: the dispatch over every dtype and vector width is left out of that unit.
  (void)a;
  (void)vb;
  (void)stream;
  return LIGER_STATUS_INTERNAL;
#else
  return dispatch_vector(l.dtype, vb, [&](auto zero, auto n) {
    using T = decltype(zero);
    constexpr int kN = decltype(n)::value;
    switch (l.loads_in_flight) {
      case 4: ce_rows_kernel<T, kN, 4, Variant><<<grid_for_rows(l.rows), l.threads, 0, stream>>>(a); break;
      case 2: ce_rows_kernel<T, kN, 2, Variant><<<grid_for_rows(l.rows), l.threads, 0, stream>>>(a); break;
      default: ce_rows_kernel<T, kN, 1, Variant><<<grid_for_rows(l.rows), l.threads, 0, stream>>>(a); break;
    }
    return check_launch("ce_rows_kernel");
  });
#endif
}

liger_status launch_reduce(const float* row_loss, const float* row_z, int64_t rows, float* out, float* z_out,
                           cudaStream_t stream) {
  ce_reduce_kernel<<<1, 1024, 0, stream>>>(row_loss, z_out != nullptr ? row_z : nullptr, rows, out, z_out);
  return check_launch("ce_reduce_kernel");
}

liger_status launch_scale(void* data, int64_t stride, int64_t rows, int64_t cols, liger_dtype dtype, const float* scale,
                          bool per_row, int threads, int vector_bytes, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return LIGER_STATUS_SUCCESS;
  return dispatch_vector(dtype, vector_bytes, [&](auto zero, auto n) {
    using T = decltype(zero);
    ce_scale_kernel<T, decltype(n)::value>
        <<<grid_for_rows(rows), threads, 0, stream>>>(static_cast<T*>(data), stride, rows, cols, scale, per_row ? 1 : 0);
    return check_launch("ce_scale_kernel");
  });
}

}  // namespace liger::kernels::ce

using namespace liger::kernels;

namespace {

std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

std::size_t ce_workspace_bytes(int64_t rows) {
  return align256(ce::kScalarCount * sizeof(float)) + 2 * align256(static_cast<std::size_t>(rows) * sizeof(float));
}

}  // namespace

extern "C" {

LIGER_API void liger_cross_entropy_options_init(liger_cross_entropy_options* options) {
  if (options == nullptr) return;
  *options = liger_cross_entropy_options{};
  options->ignore_index = -100;
  options->reduction = LIGER_REDUCTION_MEAN;
}

LIGER_API liger_status liger_cross_entropy_workspace_size(int64_t rows, int64_t vocab,
                                                          const liger_cross_entropy_options* options, size_t* bytes) {
  (void)options;
  if (bytes == nullptr) return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy_workspace_size: bytes is null");
  if (rows < 0 || vocab <= 0)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy_workspace_size: rows %lld, vocab %lld",
                static_cast<long long>(rows), static_cast<long long>(vocab));
  *bytes = ce_workspace_bytes(rows);
  return LIGER_STATUS_SUCCESS;
}

LIGER_API liger_status liger_cross_entropy_forward(const void* logits, int64_t logits_row_stride,
                                                   const int64_t* targets, void* grad_logits, int64_t grad_row_stride,
                                                   float* loss, float* z_loss, int64_t rows, int64_t vocab,
                                                   liger_dtype dtype, const liger_cross_entropy_options* options,
                                                   void* workspace, size_t workspace_bytes,
                                                   const liger_tunables* tunables, liger_stream_t stream) {
  if (!is_valid_dtype(dtype)) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "cross_entropy_forward: dtype %d", static_cast<int>(dtype));
  if (rows < 0 || vocab <= 0)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy_forward: rows %lld, vocab %lld", static_cast<long long>(rows),
                static_cast<long long>(vocab));
  if (logits_row_stride < vocab || (grad_logits != nullptr && grad_row_stride < vocab))
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy_forward: row stride smaller than vocab");
  if (grad_logits == logits && grad_row_stride != logits_row_stride)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy_forward: in-place gradient needs the logits' stride");
  if (loss == nullptr || workspace == nullptr || (rows > 0 && (logits == nullptr || targets == nullptr)))
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy_forward: null pointer (logits, targets, loss or workspace)");
  if (workspace_bytes < ce_workspace_bytes(rows))
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy_forward: workspace %zu bytes < %zu needed", workspace_bytes,
                ce_workspace_bytes(rows));
  liger_cross_entropy_options o;
  liger_cross_entropy_options_init(&o);
  if (options != nullptr) o = *options;
  LIGER_RETURN_IF_ERROR(ce::validate_options(o));
  DeviceGuard guard(logits != nullptr ? logits : loss);
  int threads = 0, vector_bytes = 0, loads_in_flight = 1;
  LIGER_RETURN_IF_ERROR(ce::resolve_tunables(tunables, rows, vocab, dtype, &threads, &vector_bytes, &loads_in_flight));
  cudaStream_t s = to_cuda(stream);

  auto* base = static_cast<unsigned char*>(workspace);
  float* scalars = reinterpret_cast<float*>(base);
  float* row_loss = reinterpret_cast<float*>(base + align256(ce::kScalarCount * sizeof(float)));
  float* row_z = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(row_loss) +
                                          align256(static_cast<std::size_t>(rows) * sizeof(float)));
  const bool none = o.reduction == LIGER_REDUCTION_NONE;
  LIGER_RETURN_IF_ERROR(ce::launch_prepass(targets, rows, vocab, o, scalars, s));
  ce::RowLaunch l;
  l.logits = logits;
  l.logits_stride = logits_row_stride;
  l.grad = grad_logits;
  l.grad_stride = grad_row_stride;
  l.targets = targets;
  l.row_loss = none ? loss : row_loss;
  l.row_z = none ? z_loss : (z_loss != nullptr ? row_z : nullptr);
  l.scalars = scalars;
  l.rows = rows;
  l.vocab = vocab;
  l.dtype = dtype;
  l.options = o;
  l.threads = threads;
  l.vector_bytes = vector_bytes;
  l.loads_in_flight = loads_in_flight;
  LIGER_RETURN_IF_ERROR(ce::launch_rows(l, s));
  if (!none) LIGER_RETURN_IF_ERROR(ce::launch_reduce(row_loss, row_z, rows, loss, z_loss, s));
  return LIGER_STATUS_SUCCESS;
}

LIGER_API liger_status liger_cross_entropy_backward(void* grad_logits, int64_t grad_row_stride, int64_t rows,
                                                    int64_t vocab, liger_dtype dtype, const float* grad_output,
                                                    int32_t grad_output_per_row, const liger_tunables* tunables,
                                                    liger_stream_t stream) {
  if (!is_valid_dtype(dtype)) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "cross_entropy_backward: dtype %d", static_cast<int>(dtype));
  if (rows < 0 || vocab <= 0 || grad_row_stride < vocab)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy_backward: bad sizes or stride");
  if (grad_output_per_row != 0 && grad_output_per_row != 1)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy_backward: grad_output_per_row must be 0 or 1");
  if (rows > 0 && (grad_logits == nullptr || grad_output == nullptr))
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy_backward: null pointer");
  DeviceGuard guard(grad_logits);
  int threads = 0, vector_bytes = 0, loads_in_flight = 1;
  LIGER_RETURN_IF_ERROR(ce::resolve_tunables(tunables, rows, vocab, dtype, &threads, &vector_bytes, &loads_in_flight));
  return ce::launch_scale(grad_logits, grad_row_stride, rows, vocab, dtype, grad_output, grad_output_per_row == 1, threads,
                          vector_bytes, to_cuda(stream));
}

LIGER_API liger_status liger_cross_entropy_default_tunables(int sm_arch, int64_t rows, int64_t cols, liger_dtype dtype,
                                                            liger_tunables* out) {
  (void)rows;
  if (out == nullptr) return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy_default_tunables: out is null");
  if (!is_valid_dtype(dtype)) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "cross_entropy_default_tunables: dtype");
  if (cols <= 0) return fail(LIGER_STATUS_INVALID_ARGUMENT, "cross_entropy_default_tunables: cols %lld", static_cast<long long>(cols));
  *out = ce::default_tunables(sm_arch, cols);
  return LIGER_STATUS_SUCCESS;
}

}  // extern "C"
