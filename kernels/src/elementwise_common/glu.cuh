// Shared device code and launcher of the gated element-wise ops (SwiGLU, GeGLU):
//   forward  c = act(a) * b
//   backward db = dc * act(a), da = dc * b * act'(a)
// on [rows, cols] tensors with a row stride each (last dimension contiguous).
//
// Kernel: a grid-stride loop over tiles; a tile is (row, a run of threads*VEC*UNROLL columns).
// Each thread issues UNROLL independent VEC-wide loads per tensor before it computes, so several
// 16-byte loads per tensor are in flight; row/tile bookkeeping is incremental (no division per
// access). The last partial vector of a row is done element by element by the thread that owns
// it. Contiguous tensors are collapsed to one long row so the tail exists at most once.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "common/cuda_utils.cuh"
#include "common/dtype.cuh"
#include "common/status.h"
#include "common/vector_io.cuh"

namespace liger::kernels::glu {

// ---------------------------------------------------------------------------------------------
// Activations (fp32). The kernels are memory-bound only if they issue few instructions per
// element (H100: ~13 bytes per SM cycle), so exp and reciprocal use the MUFU approximations
// (ex2.approx, rcp.approx: ~1-2 ulp in fp32, far inside the fp32 test tolerance of 1e-5) instead
// of the IEEE-rounded sequences (__frcp_rn, 1.0f / x), which cost ~10 instructions each.
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

struct Silu {
  static constexpr const char* kName = "swiglu";
  // 1 / (1 + e^-x): exact limits (e^-x = inf -> 0; e^-x = 0 -> 1).
  // rcp.approx as in GeGLU: on H100 (bf16 16384x14336, 16-byte stores) GeGLU's forward with it
  // ran at 97.9% of copy bandwidth against 86.5% for this op with the IEEE reciprocal.
  __device__ __forceinline__ static float sigmoid(float x) { return rcp_approx(1.0f + __expf(-x)); }
  __device__ __forceinline__ static float forward(float x) { return x * sigmoid(x); }
  // act(x) and act'(x) together.
  __device__ __forceinline__ static void both(float x, float& act, float& grad) {
    float s = sigmoid(x);
    act = x * s;
    grad = s + act * (1.0f - s);
  }
};

struct GeluTanh {
  static constexpr const char* kName = "geglu";
  static constexpr float kSqrt2OverPi = 0.7978845608028654f;
  static constexpr float kCubic = 0.044715f;
  // tanh(z) = 1 - 2 / (exp(2z) + 1): exact limits at +-inf, absolute error ~1e-7 (what gelu
  // needs: tanh enters only through 1 + t and 1 - t^2).
  __device__ __forceinline__ static float tanh_fast(float z) { return 1.0f - 2.0f * rcp_approx(__expf(2.0f * z) + 1.0f); }
  __device__ __forceinline__ static float forward(float x) {
    float t = tanh_fast(kSqrt2OverPi * (x + kCubic * x * x * x));
    return 0.5f * x * (1.0f + t);
  }
  __device__ __forceinline__ static void both(float x, float& act, float& grad) {
    float x2 = x * x;
    float t = tanh_fast(kSqrt2OverPi * x * (1.0f + kCubic * x2));
    act = 0.5f * x * (1.0f + t);
    grad = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * (kSqrt2OverPi * (1.0f + 3.0f * kCubic * x2));
  }
};

// ---------------------------------------------------------------------------------------------
struct Params {
  const void* dc;
  const void* a;
  const void* b;
  void* out0;  // forward: c; backward: da
  void* out1;  // backward: db
  int64_t dc_stride, a_stride, b_stride, out0_stride, out1_stride;
  int64_t rows, cols;
  int64_t tiles_per_row;
  int64_t grid_row_step, grid_col_step;  // gridDim.x = grid_row_step * tiles_per_row + grid_col_step
};

// Code variants (kernel-perf's code knobs; each op's tuning.h names one with
// `using Variant = glu::GluVariant<...>;`):
//   FwdUnroll / BwdUnroll: vectors per tensor each thread loads per tile (bytes in flight);
//   LoadsFirst: 1 = every load of the tile is issued before the first use (shipped), 0 = each
//               vector is computed and stored right after its loads (fewer live registers).
template <int FwdUnroll, int BwdUnroll, int LoadsFirst>
struct GluVariant {
  static_assert(FwdUnroll == 1 || FwdUnroll == 2 || FwdUnroll == 4 || FwdUnroll == 8, "FwdUnroll: 1, 2, 4 or 8");
  static_assert(BwdUnroll == 1 || BwdUnroll == 2 || BwdUnroll == 4, "BwdUnroll: 1, 2 or 4");
  static_assert(LoadsFirst == 0 || LoadsFirst == 1, "LoadsFirst is 0 or 1");
  static constexpr int fwd_unroll = FwdUnroll;
  static constexpr int bwd_unroll = BwdUnroll;
  static constexpr bool loads_first = LoadsFirst != 0;
};

// Vectors per tensor in flight per thread. The backward holds three inputs, so it unrolls less:
// at 4 its bf16 variant needed ~157 registers (one 256-thread block per SM).
using ShippedGluVariant = GluVariant<4, 2, 1>;

template <class V, bool BACKWARD>
constexpr int kUnroll = BACKWARD ? V::bwd_unroll : V::fwd_unroll;

template <typename T, int VEC, class Act, bool BACKWARD, class V = ShippedGluVariant>
__global__ void glu_kernel(Params p) {
  constexpr int UNROLL = kUnroll<V, BACKWARD>;
  const T* dc = static_cast<const T*>(p.dc);
  const T* a = static_cast<const T*>(p.a);
  const T* b = static_cast<const T*>(p.b);
  T* out0 = static_cast<T*>(p.out0);
  T* out1 = static_cast<T*>(p.out1);
  const int64_t tile_cols = static_cast<int64_t>(blockDim.x) * VEC * UNROLL;

  int64_t row = blockIdx.x / p.tiles_per_row;
  int64_t tile = blockIdx.x - row * p.tiles_per_row;
  while (row < p.rows) {
    const int64_t col0 = tile * tile_cols + static_cast<int64_t>(threadIdx.x) * VEC;
    const T* a_row = a + row * p.a_stride;
    const T* b_row = b + row * p.b_stride;
    const T* dc_row = BACKWARD ? dc + row * p.dc_stride : nullptr;
    T* o0_row = out0 + row * p.out0_stride;
    T* o1_row = BACKWARD ? out1 + row * p.out1_stride : nullptr;

    // V::loads_first: every load is issued before the first use.
    Vec<T, VEC> av[UNROLL], bv[UNROLL], dv[BACKWARD ? UNROLL : 1];
    auto compute = [&](int j) {
      const int64_t col = col0 + static_cast<int64_t>(j) * blockDim.x * VEC;
      if (col + VEC <= p.cols) {
        if constexpr (!BACKWARD) {
          float c[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e) c[e] = Act::forward(to_float(av[j].values[e])) * to_float(bv[j].values[e]);
          store_floats<T, VEC>(o0_row + col, c);
        } else {
          float da[VEC], db[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            float act, grad;
            Act::both(to_float(av[j].values[e]), act, grad);
            const float d = to_float(dv[j].values[e]);
            db[e] = d * act;
            da[e] = d * to_float(bv[j].values[e]) * grad;
          }
          store_floats<T, VEC>(o0_row + col, da);
          store_floats<T, VEC>(o1_row + col, db);
        }
      } else if (VEC > 1 && col < p.cols) {
        // The row's last partial vector: element by element.
        for (int64_t c = col; c < p.cols; ++c) {
          const float x = to_float(a_row[c]);
          const float y = to_float(b_row[c]);
          if constexpr (!BACKWARD) {
            o0_row[c] = from_float<T>(Act::forward(x) * y);
          } else {
            const float d = to_float(dc_row[c]);
            float act, grad;
            Act::both(x, act, grad);
            o1_row[c] = from_float<T>(d * act);
            o0_row[c] = from_float<T>(d * y * grad);
          }
        }
      }
    };
#pragma unroll
    for (int j = 0; j < UNROLL; ++j) {
      const int64_t col = col0 + static_cast<int64_t>(j) * blockDim.x * VEC;
      if (col + VEC <= p.cols) {
        av[j] = load_vector<T, VEC>(a_row + col);
        bv[j] = load_vector<T, VEC>(b_row + col);
        if constexpr (BACKWARD) dv[j] = load_vector<T, VEC>(dc_row + col);
      }
      if constexpr (!V::loads_first) compute(j);
    }
    if constexpr (V::loads_first) {
#pragma unroll
      for (int j = 0; j < UNROLL; ++j) compute(j);
    }
    tile += p.grid_col_step;
    row += p.grid_row_step;
    if (tile >= p.tiles_per_row) {
      tile -= p.tiles_per_row;
      ++row;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.
struct Config {
  int threads_per_block;
  int vector_bytes;
  int blocks_per_sm;
};

inline bool aligned_for(const Params& p, bool backward, int vec_elems, std::size_t elem_bytes) {
  const std::size_t bytes = static_cast<std::size_t>(vec_elems) * elem_bytes;
  const bool multi_row = p.rows > 1;
  auto ok = [&](const void* ptr, int64_t stride) {
    return is_aligned(ptr, bytes) && (!multi_row || stride % vec_elems == 0);
  };
  bool result = ok(p.a, p.a_stride) && ok(p.b, p.b_stride) && ok(p.out0, p.out0_stride);
  if (backward) result = result && ok(p.dc, p.dc_stride) && ok(p.out1, p.out1_stride);
  return result;
}

template <typename T, int VEC, class Act, bool BACKWARD, class V>
liger_status launch_vec(Params p, int threads, int blocks_per_sm, cudaStream_t stream) {
  constexpr auto kernel = glu_kernel<T, VEC, Act, BACKWARD, V>;
  const int64_t tile_cols = static_cast<int64_t>(threads) * VEC * kUnroll<V, BACKWARD>;
  p.tiles_per_row = (p.cols + tile_cols - 1) / tile_cols;
  const int64_t tiles = p.rows * p.tiles_per_row;
  // blocks_per_sm == 0: one tile per block (no grid-stride loop), the grid covers every tile.
  const int64_t max_grid =
      blocks_per_sm > 0 ? static_cast<int64_t>(std::max(1, current_sm_count())) * blocks_per_sm : tiles;
  const int64_t grid = std::max<int64_t>(1, std::min(tiles, max_grid));
  p.grid_row_step = grid / p.tiles_per_row;
  p.grid_col_step = grid % p.tiles_per_row;
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess &&
      threads > attributes.maxThreadsPerBlock)
    return fail(LIGER_STATUS_INVALID_ARGUMENT,
                "%s: threads_per_block=%d exceeds what this kernel variant can launch (%d; it uses %d registers)",
                Act::kName, threads, attributes.maxThreadsPerBlock, attributes.numRegs);
  cudaGetLastError();
  kernel<<<static_cast<unsigned>(grid), threads, 0, stream>>>(p);
  return check_launch(Act::kName);
}

// `tuned` is the op's table lookup: fills Config defaults for (sm_arch, elements, dtype).
// V: the code variant (GluVariant).
template <class Act, bool BACKWARD, class V, typename DefaultsFn>
liger_status run(Params p, liger_dtype dtype, const liger_tunables* tunables, liger_stream_t stream,
                 DefaultsFn&& defaults) {
  if (!is_valid_dtype(dtype)) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "%s: dtype %d", Act::kName, static_cast<int>(dtype));
  if (p.rows < 0 || p.cols < 0) return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: negative size", Act::kName);
  const std::size_t elem = dtype_size(dtype);
  int req_threads = 0, req_vector = 0;
  if (tunables) {
    req_threads = tunables->threads_per_block;
    req_vector = tunables->vector_bytes;
    if (req_threads != 0 && (req_threads < 64 || req_threads > 1024 || req_threads % 32 != 0))
      return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: threads_per_block=%d (want 64..1024, multiple of 32)",
                  Act::kName, req_threads);
    if (req_vector != 0 && req_vector != 16 && req_vector != 8 && req_vector != 4 &&
        req_vector != static_cast<int>(elem))
      return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: vector_bytes=%d (want 16, 8, 4 or the element size %zu)",
                  Act::kName, req_vector, elem);
    if (req_vector != 0 && req_vector < static_cast<int>(elem))
      return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: vector_bytes=%d below the element size %zu", Act::kName,
                  req_vector, elem);
  }
  if (p.rows == 0 || p.cols == 0) return LIGER_STATUS_SUCCESS;
  if (!p.a || !p.b || !p.out0 || (BACKWARD && (!p.dc || !p.out1)))
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: null pointer", Act::kName);
  if (p.rows > 1) {
    if (p.a_stride < p.cols || p.b_stride < p.cols || p.out0_stride < p.cols ||
        (BACKWARD && (p.dc_stride < p.cols || p.out1_stride < p.cols)))
      return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: a row stride is smaller than cols=%lld", Act::kName,
                  static_cast<long long>(p.cols));
  }

  DeviceGuard guard(p.a);
  // Collapse contiguous tensors into one long row.
  const bool contiguous = p.a_stride == p.cols && p.b_stride == p.cols && p.out0_stride == p.cols &&
                          (!BACKWARD || (p.dc_stride == p.cols && p.out1_stride == p.cols));
  if (contiguous && p.rows > 1) {
    p.cols *= p.rows;
    p.rows = 1;
  }

  Config config = defaults(current_sm_arch(), p.rows * p.cols, dtype);
  const int threads = req_threads ? req_threads : config.threads_per_block;
  int vector_bytes = req_vector ? req_vector : config.vector_bytes;
  if (req_vector) {
    if (!aligned_for(p, BACKWARD, vector_bytes / static_cast<int>(elem), elem))
      return fail(LIGER_STATUS_INVALID_ARGUMENT,
                  "%s: vector_bytes=%d not possible: a pointer or row stride is not a multiple of %d bytes",
                  Act::kName, vector_bytes, vector_bytes);
  } else {
    while (vector_bytes > static_cast<int>(elem) &&
           !aligned_for(p, BACKWARD, vector_bytes / static_cast<int>(elem), elem))
      vector_bytes /= 2;
    if (vector_bytes < static_cast<int>(elem)) vector_bytes = static_cast<int>(elem);
  }
  int blocks_per_sm = config.blocks_per_sm > 0 ? std::max(1, config.blocks_per_sm * config.threads_per_block / threads) : 0;
  // A/B knob for the grid shape on the GPU machine (not a tunable: the tuned table decides).
  if (const char* env = std::getenv("LIGER_GLU_BLOCKS_PER_SM"); env && *env) blocks_per_sm = std::atoi(env);
  cudaStream_t s = to_cuda(stream);

  liger_status status = LIGER_STATUS_INTERNAL;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const int vec = vector_bytes / static_cast<int>(sizeof(T));
    if constexpr (sizeof(T) == 4) {
      switch (vec) {
        case 4: status = launch_vec<T, 4, Act, BACKWARD, V>(p, threads, blocks_per_sm, s); break;
        case 2: status = launch_vec<T, 2, Act, BACKWARD, V>(p, threads, blocks_per_sm, s); break;
        default: status = launch_vec<T, 1, Act, BACKWARD, V>(p, threads, blocks_per_sm, s); break;
      }
    } else {
      switch (vec) {
        case 8: status = launch_vec<T, 8, Act, BACKWARD, V>(p, threads, blocks_per_sm, s); break;
        case 4: status = launch_vec<T, 4, Act, BACKWARD, V>(p, threads, blocks_per_sm, s); break;
        case 2: status = launch_vec<T, 2, Act, BACKWARD, V>(p, threads, blocks_per_sm, s); break;
        default: status = launch_vec<T, 1, Act, BACKWARD, V>(p, threads, blocks_per_sm, s); break;
      }
    }
  });
  return status;
}

}  // namespace liger::kernels::glu
