// Device code shared by the norm ops: one forward and one backward kernel template, specialised
// by Kind (RMSNorm, FusedAddRMSNorm, LayerNorm), storage type T, weight type TW, vector width
// VEC (elements per access: 16 bytes or 1) and NV (vectors held per thread).
//
// Mapping: a block is blockDim.x threads per row (tx) x blockDim.y rows (rpb). Thread
// threadIdx.x of a row owns vectors v = c*NV*tx + k*tx + threadIdx.x (chunk c, slot k), so the
// accesses of a warp are contiguous. When the row fits one chunk (the tuned case) it stays in
// registers: x is read once. Longer rows are processed in chunks and re-read (from L2).
// The backward keeps each thread's weight-gradient partial sums in registers across every row
// the block handles (persistent grid), then reduces the block's rows through shared memory into
// one fp32 partial row per block; a small kernel sums those partial rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/bulk_copy.cuh"
#include "common/dtype.cuh"
#include "norm_common/norm_variant.h"

namespace liger::kernels::norm {

enum class Kind { kRms, kAddRms, kLayer };
enum Casting { kLlama = 0, kGemma = 1, kNone = 2 };

struct FwdParams {
  const void* x;
  int64_t x_stride;
  const void* r;  // FusedAddRMSNorm: residual
  int64_t r_stride;
  const void* w;
  const void* b;  // LayerNorm bias or nullptr
  void* y;
  int64_t y_stride;
  void* s;  // FusedAddRMSNorm: residual output
  int64_t s_stride;
  float* mean;  // LayerNorm, nullable
  float* rstd;  // nullable
  int64_t rows;
  int cols;
  float eps;
  float offset;
  int mode;
};

struct BwdParams {
  const void* dy;
  int64_t dy_stride;
  const void* ds;  // FusedAddRMSNorm: gradient of the residual output, nullable
  int64_t ds_stride;
  const void* x;  // RMSNorm/LayerNorm: x; FusedAddRMSNorm: s
  int64_t x_stride;
  const void* w;
  const float* mean;
  const float* rstd;
  void* dx;
  int64_t dx_stride;
  float* dw_partial;  // [gridDim.x, cols] or nullptr
  float* db_partial;  // [gridDim.x, cols] or nullptr (LayerNorm)
  int64_t rows;
  int cols;
  float offset;
  int mode;
  int stages;        // staged kernel: row tiles in flight through shared memory
  int stage_offset;  // staged kernel: bytes of dynamic shared memory before the mbarriers
};

template <typename T>
__device__ __forceinline__ float round_to(float v) {
  return to_float<T>(from_float<T>(v));
}

// Vector loads and stores through plain integer types: a struct of __half / __nv_bfloat16
// (classes with constructors) is otherwise copied element by element, i.e. 2-byte accesses.
template <int BYTES>
struct BitsOf;
template <>
struct BitsOf<2> { using type = unsigned short; };
template <>
struct BitsOf<4> { using type = unsigned int; };
template <>
struct BitsOf<8> { using type = uint2; };
template <>
struct BitsOf<16> { using type = uint4; };

template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> load_vec(const T* p) {
  constexpr int kBytes = static_cast<int>(sizeof(T)) * VEC;
  Vec<T, VEC> out;
  if constexpr (kBytes <= 16) {
    using B = typename BitsOf<kBytes>::type;
    const B bits = *reinterpret_cast<const B*>(p);
    __builtin_memcpy(&out, &bits, kBytes);
  } else {
    static_assert(kBytes % 16 == 0, "vector size");
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      const uint4 bits = reinterpret_cast<const uint4*>(p)[i];
      __builtin_memcpy(reinterpret_cast<char*>(&out) + 16 * i, &bits, 16);
    }
  }
  return out;
}
template <typename T>
__device__ __forceinline__ unsigned int pack2(float a, float b);
template <>
__device__ __forceinline__ unsigned int pack2<__nv_bfloat16>(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<unsigned int*>(&h);
}
template <>
__device__ __forceinline__ unsigned int pack2<__half>(float a, float b) {
  __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<unsigned int*>(&h);
}

// Rounds VEC floats to T and stores them as one access (16 bytes, or one element).
template <typename T, int VEC>
__device__ __forceinline__ void store_floats(T* p, const float (&v)[VEC]) {
  if constexpr (VEC == 1) {
    *p = from_float<T>(v[0]);
  } else if constexpr (sizeof(T) == 4) {
    static_assert(VEC == 4, "fp32 vectors are 4 wide");
    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
                 : "memory");
  } else {
    static_assert(VEC == 8, "16-bit vectors are 8 wide");
    // Inline PTX: nvcc 13 splits a plain uint4 store built this way into four 4-byte stores.
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(pack2<T>(v[0], v[1])),
                 "r"(pack2<T>(v[2], v[3])), "r"(pack2<T>(v[4], v[5])), "r"(pack2<T>(v[6], v[7]))
                 : "memory");
  }
}

// Shared-memory staging of the cross-warp row reductions: two alternating buffers of
// [blockDim.y][32 warps][values]. A reduction writes one buffer and reads it after the barrier;
// the next reduction writes the other buffer, and a later one can only reach the first buffer
// again after passing the intermediate reduction's barrier, which every thread reaches only after
// its reads. So one barrier per reduction instead of two.
constexpr int kRowReductionBuffers = 2;

template <int VALUES>
__device__ __forceinline__ float* row_reduction_buffer(float* smem, int buffer) {
  return smem + (static_cast<int>(buffer * blockDim.y) + static_cast<int>(threadIdx.y)) * 32 * VALUES;
}

// Sums N values over the tx threads of each row; every thread of the row gets the same totals.
// Called by every thread of the block (uniformly), since it may synchronise the block; callers
// alternate `buffer` (0, 1) between consecutive reductions.
// smem: kRowReductionBuffers * blockDim.y * 32 * N floats.
template <int N>
__device__ __forceinline__ void row_sum(float (&v)[N], float* smem, int buffer) {
  const int tx = blockDim.x;
  const int width = tx < 32 ? tx : 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    if (offset < width) {
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] += __shfl_xor_sync(0xffffffffu, v[i], offset);
    }
  }
  if (tx > 32) {
    const int warps = tx >> 5, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float* row_smem = row_reduction_buffer<N>(smem, buffer);  // [N][32]
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < N; ++i) row_smem[i * 32 + warp] = v[i];
    }
    __syncthreads();
    // Each warp sums the per-warp partials with one load per lane and a butterfly (identical on
    // every lane: each step adds the same two numbers on both sides), not a serial chain of
    // `warps` dependent shared loads per thread, whose short-scoreboard stalls led the LayerNorm
    // backward's (ncu, H100). With the single barrier: LayerNorm backward 225 -> 195 us, RMSNorm
    // 179 -> 172 us (16384 x 4096 bf16, H100, 2026-11-21).
#pragma unroll
    for (int i = 0; i < N; ++i) {
      float total = lane < warps ? row_smem[i * 32 + lane] : 0.f;
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) total += __shfl_xor_sync(0xffffffffu, total, offset);
      v[i] = total;
    }
  }
}

// Chan et al.'s combination of (count, mean, M2) partial statistics: a = a (+) b.
// The weight nb / nt is a ratio of small integer counts: the approximate division (2 ulp, exact for
// the equal counts of full rows) replaces the IEEE one: ~20 instructions per combine, and a row
// of LayerNorm's forward runs up to 9 combines on its critical path.
__device__ __forceinline__ void welford_combine(float& n, float& m, float& m2, float nb, float mb, float m2b) {
  const float nt = n + nb;
  if (nt > 0.f) {
    const float delta = mb - m;
    const float fb = __fdividef(nb, nt);
    m += delta * fb;
    m2 += m2b + delta * delta * n * fb;
  }
  n = nt;
}

// Combines the (count, mean, M2) of the tx threads of each row in ONE reduction (one barrier
// instead of the two of mean-then-variance); every thread of the row gets identical totals (each
// pair is combined lower lane first on both sides). Buffers as row_sum's:
// smem: kRowReductionBuffers * blockDim.y * 32 * 3 floats.
__device__ __forceinline__ void row_welford(float& n, float& m, float& m2, float* smem, int buffer) {
  const int tx = blockDim.x;
  const int width = tx < 32 ? tx : 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    if (offset < width) {
      float on = __shfl_xor_sync(0xffffffffu, n, offset);
      float om = __shfl_xor_sync(0xffffffffu, m, offset);
      float om2 = __shfl_xor_sync(0xffffffffu, m2, offset);
      if (threadIdx.x & offset) {  // the partner is the lower lane: combine partner (+) own
        float t;
        t = n, n = on, on = t;
        t = m, m = om, om = t;
        t = m2, m2 = om2, om2 = t;
      }
      welford_combine(n, m, m2, on, om, om2);
    }
  }
  if (tx > 32) {
    const int warps = tx >> 5, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float* row_smem = row_reduction_buffer<3>(smem, buffer);
    if (lane == 0) {
      row_smem[warp * 3 + 0] = n;
      row_smem[warp * 3 + 1] = m;
      row_smem[warp * 3 + 2] = m2;
    }
    __syncthreads();
    n = row_smem[0];
    m = row_smem[1];
    m2 = row_smem[2];
    for (int w = 1; w < warps; ++w) welford_combine(n, m, m2, row_smem[w * 3], row_smem[w * 3 + 1], row_smem[w * 3 + 2]);
  }
}

// ------------------------------------------------------------------------------------------
// Forward.
// Register cap: with up to 64 bytes of the row per thread the forward is compiled for 64
// registers (two 512-thread blocks, or one of 1024, per SM: the non-persistent forward lives on
// occupancy; LayerNorm's 4-vector shape was 65 without it); larger NV is left to ptxas.
template <typename T, int VEC, int NV>
constexpr bool forward_capped() {
  return NV * VEC * static_cast<int>(sizeof(T)) <= 64;
}

template <Kind K, typename T, typename TW, int VEC, int NV>
__device__ __forceinline__ void norm_forward_body(const FwdParams& p);

template <Kind K, typename T, typename TW, int VEC, int NV>
__global__ void norm_forward_kernel(FwdParams p) {
  norm_forward_body<K, T, TW, VEC, NV>(p);
}
template <Kind K, typename T, typename TW, int VEC, int NV>
__global__ void __launch_bounds__(1024) norm_forward_capped_kernel(FwdParams p) {
  norm_forward_body<K, T, TW, VEC, NV>(p);
}

template <Kind K, typename T, typename TW, int VEC, int NV>
__device__ __forceinline__ void norm_forward_body(const FwdParams& p) {
  extern __shared__ float smem[];
  const int tx = blockDim.x, rpb = blockDim.y;
  const int nvec = p.cols / VEC;
  const int chunk = NV * tx;
  const int chunks = (nvec + chunk - 1) / chunk;
  const int64_t tiles = (p.rows + rpb - 1) / rpb;
  const float inv_cols = 1.f / static_cast<float>(p.cols);
  const TW* w = static_cast<const TW*>(p.w);
  const TW* b = static_cast<const TW*>(p.b);
  int buffer = 0;  // alternates between consecutive row reductions (see row_sum)

  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t row = tile * rpb + threadIdx.y;
    const bool active = row < p.rows;
    const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
    const T* r = static_cast<const T*>(p.r) + row * p.r_stride;
    T* s = static_cast<T*>(p.s) + row * p.s_stride;
    T* y = static_cast<T*>(p.y) + row * p.y_stride;

    Vec<T, VEC> xv[NV];
    // Loads chunk c into xv (zeros outside the row). FusedAddRMSNorm: the first pass forms
    // s = x + residual (rounded to T) and stores it; later passes re-read s.
    auto load = [&](int c, bool first) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int v = c * chunk + k * tx + threadIdx.x;
        if (active && v < nvec) {
          if constexpr (K == Kind::kAddRms) {
            if (first) {
              Vec<T, VEC> a = load_vec<T, VEC>(x + v * VEC), bb = load_vec<T, VEC>(r + v * VEC);
              float sum[VEC];
#pragma unroll
              for (int e = 0; e < VEC; ++e) {
                sum[e] = to_float(a.values[e]) + to_float(bb.values[e]);
                xv[k].values[e] = from_float<T>(sum[e]);
              }
              store_floats<T, VEC>(s + v * VEC, sum);
            } else {
              xv[k] = load_vec<T, VEC>(s + v * VEC);
            }
          } else {
            xv[k] = load_vec<T, VEC>(x + v * VEC);
          }
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) xv[k].values[e] = from_float<T>(0.f);
        }
      }
    };

    float stat[1] = {0.f};
    for (int c = 0; c < chunks; ++c) {
      load(c, true);
#pragma unroll
      for (int k = 0; k < NV; ++k)
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float xf = to_float(xv[k].values[e]);
          stat[0] += (K == Kind::kLayer) ? xf : xf * xf;
        }
    }

    float mean = 0.f, rstd;
    if (K == Kind::kLayer && chunks == 1) {
      // Row held in registers: this thread's count, mean and M2 (exact two passes over its
      // registers), then one combined reduction.
      float n = 0.f;
#pragma unroll
      for (int k = 0; k < NV; ++k)
        if (k * tx + static_cast<int>(threadIdx.x) < nvec) n += static_cast<float>(VEC);
      float m = n > 0.f ? __fdividef(stat[0], n) : 0.f, m2 = 0.f;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k * tx + static_cast<int>(threadIdx.x) >= nvec) continue;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float d = to_float(xv[k].values[e]) - m;
          m2 += d * d;
        }
      }
      row_welford(n, m, m2, smem, buffer);
      buffer ^= 1;
      mean = m;
      rstd = rsqrtf(m2 * inv_cols + p.eps);
    } else if constexpr (K == Kind::kLayer) {
      row_sum<1>(stat, smem, buffer);
      buffer ^= 1;
      mean = stat[0] * inv_cols;
      float var[1] = {0.f};
      for (int c = 0; c < chunks; ++c) {
        if (chunks > 1) load(c, false);
#pragma unroll
        for (int k = 0; k < NV; ++k) {
          const int v = c * chunk + k * tx + threadIdx.x;
          if (v < nvec) {
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
              const float d = to_float(xv[k].values[e]) - mean;
              var[0] += d * d;
            }
          }
        }
      }
      row_sum<1>(var, smem, buffer);
      buffer ^= 1;
      rstd = rsqrtf(var[0] * inv_cols + p.eps);
    } else {
      row_sum<1>(stat, smem, buffer);
      buffer ^= 1;
      rstd = rsqrtf(stat[0] * inv_cols + p.eps);
      if (p.mode == kNone) rstd = round_to<T>(rstd);
    }
    if (active && threadIdx.x == 0) {
      if (p.rstd) p.rstd[row] = rstd;
      if constexpr (K == Kind::kLayer) {
        if (p.mean) p.mean[row] = mean;
      }
    }

    for (int c = 0; c < chunks; ++c) {
      if (chunks > 1) load(c, false);
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int v = c * chunk + k * tx + threadIdx.x;
        if (!active || v >= nvec) continue;
        const Vec<TW, VEC> wv = load_vec<TW, VEC>(w + v * VEC);
        float out[VEC];
        if constexpr (K == Kind::kLayer) {
          Vec<TW, VEC> bv;
          if (b) bv = load_vec<TW, VEC>(b + v * VEC);
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            float o = (to_float(xv[k].values[e]) - mean) * rstd * to_float(wv.values[e]);
            if (b) o += to_float(bv.values[e]);
            out[e] = o;
          }
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float xf = to_float(xv[k].values[e]);
            const float wf = p.offset + to_float(wv.values[e]);
            float o;
            if (p.mode == kGemma) {
              o = xf * rstd * wf;
            } else if (p.mode == kLlama) {
              o = round_to<T>(xf * rstd) * wf;
            } else {
              o = round_to<T>(xf * rstd) * round_to<T>(wf);
            }
            out[e] = o;
          }
        }
        store_floats<T, VEC>(y + v * VEC, out);
      }
    }
  }
}

// ------------------------------------------------------------------------------------------
// Backward helpers: the block's rows are summed through shared memory into one partial row.
// out[0..VEC) += terms[0..VEC), 16 bytes at a time when VEC allows (out is then 16-byte aligned:
// partial rows start at multiples of cols floats in a 16-byte aligned workspace, and a vector
// width above 1 means cols is a multiple of it).
template <int VEC>
__device__ __forceinline__ void add_to_row(float* out, const float (&terms)[VEC]) {
  if constexpr (VEC % 4 == 0) {
#pragma unroll
    for (int q = 0; q < VEC / 4; ++q) {
      float4 row = reinterpret_cast<float4*>(out)[q];
      row.x += terms[4 * q];
      row.y += terms[4 * q + 1];
      row.z += terms[4 * q + 2];
      row.w += terms[4 * q + 3];
      reinterpret_cast<float4*>(out)[q] = row;
    }
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) out[e] += terms[e];
  }
}

// smem: blockDim.x * blockDim.y * VEC floats. Called uniformly by the whole block.
template <int NV, int VEC>
__device__ __forceinline__ void store_partial_row(const float (&acc)[NV][VEC], float* out, int cols, float* smem) {
  const int tx = blockDim.x, rpb = blockDim.y;
  if (rpb == 1) {
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int v = k * tx + threadIdx.x;
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        if (v * VEC + e < cols) out[v * VEC + e] = acc[k][e];
    }
    return;
  }
  const int tid = threadIdx.y * tx + threadIdx.x, nthreads = tx * rpb;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    __syncthreads();
#pragma unroll
    for (int e = 0; e < VEC; ++e) smem[(threadIdx.y * tx + threadIdx.x) * VEC + e] = acc[k][e];
    __syncthreads();
    for (int i = tid; i < tx * VEC; i += nthreads) {
      float total = 0.f;
      for (int yy = 0; yy < rpb; ++yy) total += smem[yy * tx * VEC + i];
      const int col = k * tx * VEC + i;
      if (col < cols) out[col] = total;
    }
  }
}

// One row's part of the backward, shared by every backward kernel. The thread's vectors are slots
// k = 0..NV-1 of a chunk starting at vector `first_vector`: slot k is the row's vector
// v = first_vector + k * blockDim.x + threadIdx.x. `weight(k, v)` gives the weight vector.
// Adds the row sums that precede the block reduction: RMS sum(dy * (w + offset) * x); LayerNorm
// sum(xhat * g), sum(g) with g = w * dy.
// A CacheFp32 variant (norm_variant.h) also keeps each element's fp32 values in `cache`.
template <Kind K, typename T, typename TW, int VEC, int NV, class P, typename WeightFn>
__device__ __forceinline__ void backward_row_sums(const Vec<T, VEC> (&xv)[NV], const Vec<T, VEC> (&dyv)[NV],
                                                  WeightFn&& weight, int first_vector, int nvec, float mean,
                                                  float rstd, float offset, float (&sums)[2],
                                                  BwdRowCache<P, VEC, NV>& cache) {
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int v = first_vector + k * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
    if (v >= nvec) continue;
    const Vec<TW, VEC> wv = weight(k, v);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float xf = to_float(xv[k].values[e]), dyf = to_float(dyv[k].values[e]);
      if constexpr (P::cache_fp32) {
        if constexpr (K == Kind::kLayer) {
          const float xhat = (xf - mean) * rstd, g = to_float(wv.values[e]) * dyf;
          sums[0] += xhat * g;
          sums[1] += g;
          cache.a[k][e] = xhat;
          cache.g[k][e] = g;
        } else {
          const float m = dyf * (to_float(wv.values[e]) + offset);
          sums[0] += m * xf;
          cache.a[k][e] = xf;
          cache.g[k][e] = m;
        }
        cache.dy[k][e] = dyf;
      } else if constexpr (K == Kind::kLayer) {
        const float g = to_float(wv.values[e]) * dyf;
        sums[0] += (xf - mean) * rstd * g;
        sums[1] += g;
      } else {
        sums[0] += dyf * (to_float(wv.values[e]) + offset) * xf;
      }
    }
  }
}

// The block reduction of backward_row_sums' values (LayerNorm two, the RMS norms one).
template <Kind K>
__device__ __forceinline__ void reduce_backward_sums(float (&sums)[2], float* smem, int buffer) {
  if constexpr (K == Kind::kLayer) {
    row_sum<2>(sums, smem, buffer);
  } else {
    float s1[1] = {sums[0]};
    row_sum<1>(s1, smem, buffer);
    sums[0] = s1[0];
  }
}

// backward_row_outputs of a non-shipped variant (norm_variant.h): the same arithmetic, with the
// dW term first (DwFirst) and/or the first pass's fp32 values read back (CacheFp32).
template <Kind K, typename T, typename TW, int VEC, int NV, class P, typename DsFn, typename WeightFn,
          typename AccumulateFn>
__device__ __forceinline__ void backward_row_outputs_variant(
    const Vec<T, VEC> (&xv)[NV], const Vec<T, VEC> (&dyv)[NV], bool has_ds, DsFn&& ds, WeightFn&& weight,
    int first_vector, int nvec, float mean, float rstd, const float (&sums)[2], const BwdParams& p, T* dx,
    AccumulateFn&& accumulate, const BwdRowCache<P, VEC, NV>& cache, bool cached) {
  const float inv_cols = 1.f / static_cast<float>(p.cols);
  const float c1 = sums[0] * inv_cols, c2 = sums[1] * inv_cols;
  const float rms_coef = rstd * rstd * rstd * sums[0] * inv_cols;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int v = first_vector + k * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
    if (v >= nvec) continue;
    const bool from_cache = P::cache_fp32 && cached;
    Vec<TW, VEC> wv;
    if (!from_cache) wv = weight(k, v);
    Vec<T, VEC> dsv;
    if constexpr (K == Kind::kAddRms) {
      if (has_ds) dsv = ds(k, v);
    }
    float out[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      float a, g, dyf;  // x̂ / x, w·dy / dy·(w + offset), dy
      if (from_cache) {
        a = cache.a[k][e];
        g = cache.g[k][e];
        dyf = cache.dy[k][e];
      } else {
        const float xf = to_float(xv[k].values[e]);
        dyf = to_float(dyv[k].values[e]);
        if constexpr (K == Kind::kLayer) {
          a = (xf - mean) * rstd;
          g = to_float(wv.values[e]) * dyf;
        } else {
          a = xf;
          g = dyf * (to_float(wv.values[e]) + p.offset);
        }
      }
      float dw_term, db_term = 0.f;
      if constexpr (K == Kind::kLayer) {
        dw_term = dyf * a;
        db_term = dyf;
      } else {
        const float n = p.mode == kLlama ? round_to<T>(a * rstd) : a * rstd;
        dw_term = dyf * n;
      }
      if constexpr (P::dw_first) accumulate(k, e, v, dw_term, db_term);
      if constexpr (K == Kind::kLayer) {
        out[e] = (g - (a * c1 + c2)) * rstd;
      } else {
        float dxf = rstd * g - rms_coef * a;
        if constexpr (K == Kind::kAddRms) {
          if (has_ds) dxf += to_float(dsv.values[e]);
        }
        out[e] = dxf;
      }
      if constexpr (!P::dw_first) accumulate(k, e, v, dw_term, db_term);
    }
    store_floats<T, VEC>(dx + v * VEC, out);
  }
}

// dx of the row's slots (stored) and their weight-gradient terms, from the reduced sums.
// `ds(k, v)`: FusedAddRMSNorm's gradient of the residual output (called when has_ds);
// `accumulate(k, e, v, dw_term, db_term)` takes each element's dW (and LayerNorm's dB) term.
// `cached`: a CacheFp32 variant's `cache` holds this chunk's values (false for chunked rows,
// whose first pass ran over every chunk before this one).
template <Kind K, typename T, typename TW, int VEC, int NV, class P, typename DsFn, typename WeightFn,
          typename AccumulateFn>
__device__ __forceinline__ void backward_row_outputs(const Vec<T, VEC> (&xv)[NV], const Vec<T, VEC> (&dyv)[NV],
                                                     bool has_ds, DsFn&& ds, WeightFn&& weight, int first_vector,
                                                     int nvec, float mean, float rstd, const float (&sums)[2],
                                                     const BwdParams& p, T* dx, AccumulateFn&& accumulate,
                                                     const BwdRowCache<P, VEC, NV>& cache, bool cached) {
  if constexpr (P::cache_fp32 || P::dw_first) {
    backward_row_outputs_variant<K, T, TW, VEC, NV, P>(xv, dyv, has_ds, ds, weight, first_vector, nvec, mean, rstd,
                                                       sums, p, dx, accumulate, cache, cached);
    return;
  }
  const float inv_cols = 1.f / static_cast<float>(p.cols);
  const float c1 = sums[0] * inv_cols, c2 = sums[1] * inv_cols;
  const float rms_coef = rstd * rstd * rstd * sums[0] * inv_cols;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int v = first_vector + k * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
    if (v >= nvec) continue;
    const Vec<TW, VEC> wv = weight(k, v);
    Vec<T, VEC> dsv;
    if constexpr (K == Kind::kAddRms) {
      if (has_ds) dsv = ds(k, v);
    }
    float out[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float xf = to_float(xv[k].values[e]), dyf = to_float(dyv[k].values[e]);
      if constexpr (K == Kind::kLayer) {
        const float xhat = (xf - mean) * rstd;
        const float g = to_float(wv.values[e]) * dyf;
        out[e] = (g - (xhat * c1 + c2)) * rstd;
        accumulate(k, e, v, dyf * xhat, dyf);
      } else {
        const float m = dyf * (to_float(wv.values[e]) + p.offset);
        float dxf = rstd * m - rms_coef * xf;
        if constexpr (K == Kind::kAddRms) {
          if (has_ds) dxf += to_float(dsv.values[e]);
        }
        out[e] = dxf;
        const float n = p.mode == kLlama ? round_to<T>(xf * rstd) : xf * rstd;
        accumulate(k, e, v, dyf * n, 0.f);
      }
    }
    store_floats<T, VEC>(dx + v * VEC, out);
  }
}

// At most 512 threads per block, so the register-held rows (x, dy, the weight-gradient
// accumulators) get up to 128 registers per thread without spilling.
constexpr int kMaxBackwardThreads = 512;

template <Kind K, typename T, typename TW, int VEC, int NV, class P = ShippedBwdVariant>
__global__ void __launch_bounds__(kMaxBackwardThreads, (bwd_min_blocks<P>(0))) norm_backward_kernel(BwdParams p) {
  extern __shared__ float smem[];
  const int tx = blockDim.x, rpb = blockDim.y;
  const int nvec = p.cols / VEC;
  const int chunk = NV * tx;
  const int chunks = (nvec + chunk - 1) / chunk;
  const int64_t tiles = (p.rows + rpb - 1) / rpb;
  const TW* w = static_cast<const TW*>(p.w);
  const bool want_dw = p.dw_partial != nullptr;
  const bool want_db = (K == Kind::kLayer) && p.db_partial != nullptr;
  float* dw_row = want_dw ? p.dw_partial + static_cast<int64_t>(blockIdx.x) * p.cols : nullptr;
  float* db_row = want_db ? p.db_partial + static_cast<int64_t>(blockIdx.x) * p.cols : nullptr;
  const bool private_columns = chunks > 1 && rpb == 1;

  float dw_acc[NV][VEC];
  float db_acc[NV][VEC];
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int e = 0; e < VEC; ++e) dw_acc[k][e] = db_acc[k][e] = 0.f;

  // Adds chunk c's collected terms to the thread's own columns of the partial rows, then clears them.
  auto flush_chunk = [&](int c) {
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int v = c * chunk + k * tx + threadIdx.x;
      if (v < nvec) {
        if (want_dw) add_to_row<VEC>(dw_row + v * VEC, dw_acc[k]);
        if (want_db) add_to_row<VEC>(db_row + v * VEC, db_acc[k]);
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) dw_acc[k][e] = db_acc[k][e] = 0.f;
    }
  };

  int buffer = 0;  // alternates between consecutive row reductions (see row_sum)
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t row = tile * rpb + threadIdx.y;
    const bool active = row < p.rows;
    const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
    const T* dy = static_cast<const T*>(p.dy) + row * p.dy_stride;
    T* dx = static_cast<T*>(p.dx) + row * p.dx_stride;
    const float rstd = active ? p.rstd[row] : 0.f;
    const float mean = (K == Kind::kLayer && active) ? p.mean[row] : 0.f;

    Vec<T, VEC> xv[NV], dyv[NV];
    auto load = [&](int c) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int v = c * chunk + k * tx + threadIdx.x;
        if (active && v < nvec) {
          xv[k] = load_vec<T, VEC>(x + v * VEC);
          dyv[k] = load_vec<T, VEC>(dy + v * VEC);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) xv[k].values[e] = dyv[k].values[e] = from_float<T>(0.f);
        }
      }
    };

    auto weight = [&](int, int v) { return load_vec<TW, VEC>(w + v * VEC); };
    auto ds = [&](int, int v) { return load_vec<T, VEC>(static_cast<const T*>(p.ds) + row * p.ds_stride + v * VEC); };
    // Rows of one chunk keep their dW (dB) terms in registers. Chunked rows with one row per block
    // also collect one chunk's terms in those registers, then add them to the block's zeroed
    // partial row (flush_chunk): every column of that row belongs to one thread, so no atomics.
    // (Per-element atomics made 4096x32768 bf16 backwards run at 6-12% of copy.) Chunked rows of
    // several rows per block (a tunables choice) share columns between threads: atomics.
    auto accumulate = [&](int k, int e, int v, float dw_term, float db_term) {
      if (chunks == 1 || private_columns) {
        dw_acc[k][e] += dw_term;
        db_acc[k][e] += db_term;
      } else {
        const int col = v * VEC + e;
        if (want_dw) atomicAdd(dw_row + col, dw_term);
        if (want_db) atomicAdd(db_row + col, db_term);
      }
    };

    // Pass 1: the row sums.
    float sums[2] = {0.f, 0.f};
    BwdRowCache<P, VEC, NV> cache;
    for (int c = 0; c < chunks; ++c) {
      load(c);
      backward_row_sums<K, T, TW, VEC, NV, P>(xv, dyv, weight, c * chunk, nvec, mean, rstd, p.offset, sums, cache);
    }
    row_sum<2>(sums, smem, buffer);
    buffer ^= 1;

    // Pass 2: dx and the weight-gradient terms.
    if (active) {
      for (int c = 0; c < chunks; ++c) {
        if (chunks > 1) load(c);
        backward_row_outputs<K, T, TW, VEC, NV, P>(xv, dyv, p.ds != nullptr, ds, weight, c * chunk, nvec, mean, rstd,
                                                   sums, p, dx, accumulate, cache, chunks == 1);
        if (private_columns) flush_chunk(c);
      }
    }
  }

  if (chunks == 1) {
    if (want_dw) store_partial_row<NV, VEC>(dw_acc, dw_row, p.cols, smem);
    if (want_db) store_partial_row<NV, VEC>(db_acc, db_row, p.cols, smem);
  }
}

// Partial-row sums of up to two gradients (dW, dB): partial[i] is [blocks, cols] fp32, out[i] is
// [cols] in the weight dtype.
struct PartialSums {
  const float* partial[2];
  void* out[2];
  int blocks;
  int cols;
};

// Sums the partial rows of gradient blockIdx.y. Block (32, 16).
template <typename TW>
__global__ void reduce_partials_kernel(PartialSums s) {
  __shared__ float sm[16][33];
  const float* partial = s.partial[blockIdx.y];
  const int col = blockIdx.x * 32 + threadIdx.x;
  float total = 0.f;
  if (col < s.cols)
    for (int b = threadIdx.y; b < s.blocks; b += 16) total += partial[static_cast<int64_t>(b) * s.cols + col];
  sm[threadIdx.y][threadIdx.x] = total;
  __syncthreads();
  if (threadIdx.y == 0) {
    for (int yy = 1; yy < 16; ++yy) total += sm[yy][threadIdx.x];
    if (col < s.cols) static_cast<TW*>(s.out[blockIdx.y])[col] = from_float<TW>(total);
  }
}

}  // namespace liger::kernels::norm
