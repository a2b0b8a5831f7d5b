// RoPE (HF rotate-half) forward/backward: q and k in one launch, arbitrary batch/head/seq strides.
//
// Block = rows_per_block tokens side by side (threadIdx.y), each with `lanes` threads
// (threadIdx.x). A token's lane owns one VEC-wide slot v of the half head dim and a head slot;
// it loads its cos/sin vector once, then rotates head after head (q heads then k heads), with the
// loads of UNROLL (the pipeline_depth tunable) x HPT (the variant's heads per thread) heads in
// flight before it computes. No division per access: lane -> (head slot, v) and token -> (b, t)
// are computed once per thread.
#include "liger_kernels/rope.h"

#include <algorithm>

#include "common/bulk_copy.cuh"
#include "common/cuda_utils.cuh"
#include "common/dtype.cuh"
#include "common/status.h"
#include "rope/tuning.h"

namespace liger::kernels::rope {
namespace {

struct Params {
  const void* x[2];
  void* y[2];
  int64_t x_strides[2][3];
  int64_t y_strides[2][3];
  int64_t heads[2];
  const void* cos;
  const void* sin;
  int64_t cos_batch_stride, cos_seq_stride;
  int cos_broadcast;
  int64_t seq;
  int64_t tokens;
  int half;
  int vpr;  // vectors per half head
  float sign;
  int stages;  // staged kernel: token tiles in flight through shared memory
};

// The register kernel's body; P is the code variant (tuning.h `using Variant = RopeVariant<...>`).
// A step holds IN_FLIGHT heads of the lane (its head slot, then every heads_per_pass-th head):
// UNROLL x HPT of them, all rotated with the lane's one cos/sin vector.
template <typename T, int VEC, int UNROLL, class P>
__device__ __forceinline__ void rope_body(const Params& p) {
  constexpr int IN_FLIGHT = UNROLL * P::heads_per_thread;
  const int64_t token = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const int heads_per_pass = static_cast<int>(blockDim.x) / p.vpr;
  const int lane = static_cast<int>(threadIdx.x);
  if (token >= p.tokens || lane >= heads_per_pass * p.vpr) return;
  const int v = lane % p.vpr;
  const int head_slot = lane / p.vpr;
  const int64_t b = token / p.seq;
  const int64_t t = token - b * p.seq;
  const int64_t col = static_cast<int64_t>(v) * VEC;

  using V = Vec<T, VEC>;
  const int64_t cos_offset = (p.cos_broadcast ? 0 : b * p.cos_batch_stride) + t * p.cos_seq_stride + col;
  const V cv = *reinterpret_cast<const V*>(static_cast<const T*>(p.cos) + cos_offset);
  const V sv = *reinterpret_cast<const V*>(static_cast<const T*>(p.sin) + cos_offset);
  float c[VEC], s[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    c[e] = to_float(cv.values[e]);
    s[e] = p.sign * to_float(sv.values[e]);
  }

  const int64_t total = p.heads[0] + p.heads[1];
  for (int64_t h0 = head_slot; h0 < total; h0 += static_cast<int64_t>(heads_per_pass) * IN_FLIGHT) {
    V x1[IN_FLIGHT], x2[IN_FLIGHT];
    T* out[IN_FLIGHT];
    auto rotate = [&](int u) {
      if (out[u] == nullptr) return;
      V y1, y2;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float a = to_float(x1[u].values[e]);
        const float d = to_float(x2[u].values[e]);
        y1.values[e] = from_float<T>(a * c[e] - d * s[e]);
        y2.values[e] = from_float<T>(d * c[e] + a * s[e]);
      }
      *reinterpret_cast<V*>(out[u]) = y1;
      *reinterpret_cast<V*>(out[u] + p.half) = y2;
    };
#pragma unroll
    for (int u = 0; u < IN_FLIGHT; ++u) {
      const int64_t h = h0 + static_cast<int64_t>(u) * heads_per_pass;
      out[u] = nullptr;
      if (h < total) {
        const int which = h < p.heads[0] ? 0 : 1;
        const int64_t head = which ? h - p.heads[0] : h;
        const int64_t* xs = p.x_strides[which];
        const int64_t* ys = p.y_strides[which];
        const T* in = static_cast<const T*>(p.x[which]) + b * xs[0] + head * xs[1] + t * xs[2] + col;
        out[u] = static_cast<T*>(p.y[which]) + b * ys[0] + head * ys[1] + t * ys[2] + col;
        x1[u] = *reinterpret_cast<const V*>(in);
        x2[u] = *reinterpret_cast<const V*>(in + p.half);
      }
      if constexpr (!P::loads_first) rotate(u);
    }
    if constexpr (P::loads_first) {
#pragma unroll
      for (int u = 0; u < IN_FLIGHT; ++u) rotate(u);
    }
  }
}

template <typename T, int VEC, int UNROLL, class P = ShippedRopeVariant>
__global__ void rope_kernel(Params p) {
  rope_body<T, VEC, UNROLL, P>(p);
}
// The register-capped form (P::min_blocks > 0): at most 1024 threads, MinBlocks of them per SM.
template <typename T, int VEC, int UNROLL, class P>
__global__ void __launch_bounds__(1024, P::min_blocks) rope_capped_kernel(Params p) {
  rope_body<T, VEC, UNROLL, P>(p);
}

// Staged variant (sm_90, the `stages` tunable) for layouts whose heads are contiguous within a
// token (head stride = head_dim, for q and k, in and out: HF's [B, T, H, D] storage): a token's
// q heads and its k heads are then two contiguous rows, which the bulk-copy engine moves whole.
// Thread 0 keeps `stages` tiles of rows_per_block tokens in flight into shared-memory stages
// (an mbarrier phase each); the lanes rotate the stage in place, and thread 0 copies it out with
// bulk stores and refills the stage of the previous tile once its store has read it. The
// register kernel above kept at most two heads per lane in flight, and the sweep showed the op
// bound by exactly that (pipeline_depth 1: 52% of copy, 2: 89%, H100).
// Dynamic shared memory: [stages mbarriers, padded to 16 bytes][stages x rows_per_block x
// (Hq + Hk) x head_dim x sizeof(T)]. P: the code variant; its heads_per_thread heads of a lane
// are read from the stage before the first of them is rotated.
template <typename T, int VEC, class P>
__global__ void rope_staged_kernel(Params p) {
  constexpr int HPT = P::heads_per_thread;
  extern __shared__ __align__(16) unsigned char rope_smem[];
  const int rows = static_cast<int>(blockDim.y);
  const int64_t tiles = (p.tokens + rows - 1) / rows;
  const int64_t stride = gridDim.x;
  const int head_dim = 2 * p.half;
  const int64_t total_heads = p.heads[0] + p.heads[1];
  const uint32_t q_bytes = static_cast<uint32_t>(p.heads[0] * head_dim * sizeof(T));
  const uint32_t k_bytes = static_cast<uint32_t>(p.heads[1] * head_dim * sizeof(T));
  const uint32_t token_bytes = q_bytes + k_bytes;
  const uint32_t stage_bytes = token_bytes * static_cast<uint32_t>(rows);
  uint64_t* bars = reinterpret_cast<uint64_t*>(rope_smem);
  unsigned char* stage_data = rope_smem + (p.stages * 8 + 15) / 16 * 16;
  const bool issuer = threadIdx.x == 0 && threadIdx.y == 0;

  // Global row starts of a token's q and k heads (input or output).
  auto token_rows = [&](int64_t token, bool output, const T*& q, const T*& k) {
    const int64_t b = token / p.seq, t = token - b * p.seq;
    const int64_t (*strides)[3] = output ? p.y_strides : p.x_strides;
    const void* const* base = output ? const_cast<const void* const*>(p.y) : p.x;
    q = p.heads[0] ? static_cast<const T*>(base[0]) + b * strides[0][0] + t * strides[0][2] : nullptr;
    k = p.heads[1] ? static_cast<const T*>(base[1]) + b * strides[1][0] + t * strides[1][2] : nullptr;
  };
  auto tile_tokens = [&](int64_t tile) {
    const int64_t left = p.tokens - tile * rows;
    return static_cast<int>(left < rows ? left : rows);
  };
  auto load = [&](int64_t tile, int stage) {  // thread 0
    const int count = tile_tokens(tile);
    bulk::barrier_expect_bytes(&bars[stage], static_cast<uint32_t>(count) * token_bytes);
    for (int r = 0; r < count; ++r) {
      const T *q, *k;
      token_rows(tile * rows + r, false, q, k);
      unsigned char* dst = stage_data + stage * stage_bytes + r * token_bytes;
      if (q_bytes) bulk::copy_to_shared(dst, q, q_bytes, &bars[stage]);
      if (k_bytes) bulk::copy_to_shared(dst + q_bytes, k, k_bytes, &bars[stage]);
    }
  };
  auto store = [&](int64_t tile, int stage) {  // thread 0
    const int count = tile_tokens(tile);
    for (int r = 0; r < count; ++r) {
      const T *q, *k;
      token_rows(tile * rows + r, true, q, k);
      const unsigned char* src = stage_data + stage * stage_bytes + r * token_bytes;
      if (q_bytes) bulk::copy_to_global(const_cast<T*>(q), src, q_bytes);
      if (k_bytes) bulk::copy_to_global(const_cast<T*>(k), src + q_bytes, k_bytes);
    }
    bulk::commit_group();
  };

  if (issuer) {
    for (int s = 0; s < p.stages; ++s) bulk::barrier_init(&bars[s]);
    bulk::barrier_init_fence();
  }
  __syncthreads();
  if (issuer)
    for (int s = 0; s < p.stages; ++s)
      if (blockIdx.x + s * stride < tiles) load(blockIdx.x + s * stride, s);

  const int heads_per_pass = static_cast<int>(blockDim.x) / p.vpr;
  const int lane = static_cast<int>(threadIdx.x);
  const bool lane_active = lane < heads_per_pass * p.vpr;
  const int v = lane % p.vpr;
  const int head_slot = lane / p.vpr;
  const int col = v * VEC;
  using V = Vec<T, VEC>;

  int stage = 0, previous = -1;
  uint32_t parity = 0;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += stride) {
    const int64_t token = tile * rows + threadIdx.y;
    const bool active = lane_active && token < p.tokens;
    float c[VEC], s[VEC];
    if (active) {  // issued before the wait: the tables are small and L2-resident
      const int64_t b = token / p.seq, t = token - b * p.seq;
      const int64_t cos_offset = (p.cos_broadcast ? 0 : b * p.cos_batch_stride) + t * p.cos_seq_stride + col;
      const V cv = *reinterpret_cast<const V*>(static_cast<const T*>(p.cos) + cos_offset);
      const V sv = *reinterpret_cast<const V*>(static_cast<const T*>(p.sin) + cos_offset);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        c[e] = to_float(cv.values[e]);
        s[e] = p.sign * to_float(sv.values[e]);
      }
    }
    bulk::barrier_wait(&bars[stage], parity);
    if (active) {
      T* heads = reinterpret_cast<T*>(stage_data + stage * stage_bytes + threadIdx.y * token_bytes);
      // Each (head, col) of the tile belongs to one lane, so reading HPT heads before writing
      // any of them back races with nothing.
      for (int64_t h0 = head_slot; h0 < total_heads; h0 += static_cast<int64_t>(heads_per_pass) * HPT) {
        V x1[HPT], x2[HPT];
#pragma unroll
        for (int j = 0; j < HPT; ++j) {
          const int64_t h = h0 + static_cast<int64_t>(j) * heads_per_pass;
          if (h >= total_heads) break;
          const T* x = heads + h * head_dim + col;
          x1[j] = *reinterpret_cast<const V*>(x);
          x2[j] = *reinterpret_cast<const V*>(x + p.half);
        }
#pragma unroll
        for (int j = 0; j < HPT; ++j) {
          const int64_t h = h0 + static_cast<int64_t>(j) * heads_per_pass;
          if (h >= total_heads) break;
          T* x = heads + h * head_dim + col;
          V y1, y2;
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float a = to_float(x1[j].values[e]);
            const float d = to_float(x2[j].values[e]);
            y1.values[e] = from_float<T>(a * c[e] - d * s[e]);
            y2.values[e] = from_float<T>(d * c[e] + a * s[e]);
          }
          *reinterpret_cast<V*>(x) = y1;
          *reinterpret_cast<V*>(x + p.half) = y2;
        }
      }
    }
    bulk::fence_shared_for_copies();
    __syncthreads();
    if (issuer) {
      store(tile, stage);
      // The previous tile's stage is free once its store has read it (this tile's may still be
      // reading): refill it with the tile `stages` iterations after the previous one.
      if (previous >= 0) {
        const int64_t refill = tile - stride + p.stages * stride;
        bulk::wait_group_read<1>();
        if (refill < tiles) load(refill, previous);
      }
    }
    previous = stage;
    if (++stage == p.stages) stage = 0, parity ^= 1u;
  }
  if (issuer) bulk::wait_all_groups();
}

// The register kernel of a code variant (the op's own: tuning.h `Variant`).
template <typename T, int VEC, int UNROLL, class P = Variant>
constexpr void (*register_kernel())(Params) {
  if constexpr (P::min_blocks > 0) return rope_capped_kernel<T, VEC, UNROLL, P>;
  else return rope_kernel<T, VEC, UNROLL, P>;
}

// What kernel-perf's compile check and per-variant ptxas report build (search_spaces.yaml:
// instantiate.address_of): both kernels of the op's variant, so the report shows each; the
// register kernel's address is the value.
template <typename T, int VEC, int UNROLL>
void* variant_unit_kernels() {
  static void* const kernels[] = {reinterpret_cast<void*>(register_kernel<T, VEC, UNROLL, Variant>()),
                                  reinterpret_cast<void*>(rope_staged_kernel<T, VEC, Variant>)};
  return kernels[0];
}

template <typename T, int VEC, class P>
liger_status launch(const Params& p, int lanes, int rows, int heads_in_flight, cudaStream_t stream) {
  const int64_t blocks = (p.tokens + rows - 1) / rows;
  if (blocks > 0x7fffffff) return fail(LIGER_STATUS_UNSUPPORTED_SHAPE, "rope: %lld tokens is too many", static_cast<long long>(p.tokens));
  void (*kernel)(Params) = heads_in_flight == 4 ? register_kernel<T, VEC, 4, P>()
                           : heads_in_flight == 1 ? register_kernel<T, VEC, 1, P>()
                                                  : register_kernel<T, VEC, 2, P>();
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess &&
      lanes * rows > attributes.maxThreadsPerBlock)
    return fail(LIGER_STATUS_INVALID_ARGUMENT,
                "rope: threads_per_block=%d exceeds what this kernel variant can launch (%d; it uses %d registers)",
                lanes * rows, attributes.maxThreadsPerBlock, attributes.numRegs);
  cudaGetLastError();
  kernel<<<static_cast<unsigned>(blocks), dim3(lanes, rows), 0, stream>>>(p);
  return check_launch("rope");
}

// Heads contiguous within each token (head stride = head_dim) for q and k, input and output.
bool heads_contiguous(const Params& p) {
  for (int i = 0; i < 2; ++i)
    if (p.heads[i] != 0 && (p.x_strides[i][1] != 2 * p.half || p.y_strides[i][1] != 2 * p.half)) return false;
  return true;
}

// Launches the staged kernel with as many blocks as the SMs hold (each walks its token tiles).
// `stages_given`: the caller asked for them, so too little shared memory is an error; for the
// default, fewer stages are used (down to none: LIGER_STATUS_UNSUPPORTED_SHAPE tells the caller to
// fall back).
template <typename T, int VEC, class P>
liger_status launch_staged(Params p, int lanes, int rows, int stages, bool stages_given, cudaStream_t stream) {
  void (*kernel)(Params) = rope_staged_kernel<T, VEC, P>;
  const std::size_t token_bytes = static_cast<std::size_t>(p.heads[0] + p.heads[1]) * 2 * p.half * sizeof(T);
  auto smem_for = [&](int n) { return static_cast<std::size_t>((n * 8 + 15) / 16 * 16) + n * rows * token_bytes; };
  int n = 1, smem_limit = 0;
  LIGER_RETURN_IF_ERROR(check_cuda(bulk::stages_that_fit(stages, smem_for, &n, &smem_limit), "rope"));
  if (n < stages && stages_given)
    return fail(LIGER_STATUS_INVALID_ARGUMENT,
                "rope: stages=%d with rows_per_block=%d needs %zu bytes of shared memory per block (%d available); "
                "use fewer stages or rows_per_block", stages, rows, smem_for(stages), smem_limit);
  if (n < 2) return LIGER_STATUS_UNSUPPORTED_SHAPE;
  p.stages = n;
  const std::size_t smem = smem_for(n);
  LIGER_RETURN_IF_ERROR(check_cuda(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)), "rope"));
  int resident = 0;
  LIGER_RETURN_IF_ERROR(
      check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, lanes * rows, smem), "rope"));
  if (resident < 1)
    return fail(LIGER_STATUS_INVALID_ARGUMENT,
                "rope: a block of %d threads with %zu bytes of stages exceeds what one SM holds for this kernel "
                "variant (registers or shared memory); use fewer threads_per_block, rows_per_block or stages",
                lanes * rows, smem);
  const int64_t tiles = (p.tokens + rows - 1) / rows;
  int64_t blocks = static_cast<int64_t>(resident) * std::max(current_sm_count(), 1);
  if (blocks > tiles) blocks = tiles;
  kernel<<<static_cast<unsigned>(blocks), dim3(lanes, rows), smem, stream>>>(p);
  return check_launch("rope");
}

bool vector_fits(const Params& p, int vec, std::size_t elem) {
  if (p.half % vec != 0) return false;
  const std::size_t bytes = static_cast<std::size_t>(vec) * elem;
  if (!is_aligned(p.cos, bytes) || !is_aligned(p.sin, bytes)) return false;
  if (p.cos_batch_stride % vec != 0 || p.cos_seq_stride % vec != 0) return false;
  for (int i = 0; i < 2; ++i) {
    if (p.heads[i] == 0) continue;
    if (!is_aligned(p.x[i], bytes) || !is_aligned(p.y[i], bytes)) return false;
    for (int d = 0; d < 3; ++d)
      if (p.x_strides[i][d] % vec != 0 || p.y_strides[i][d] % vec != 0) return false;
  }
  return true;
}

// P: the code variant (the C entry points use tuning.h's `Variant`; a test build may pass others).
template <class P = Variant>
liger_status run(const void* q, const int64_t q_strides[3], void* q_out, const int64_t q_out_strides[3],
                 int64_t num_q_heads, const void* k, const int64_t k_strides[3], void* k_out,
                 const int64_t k_out_strides[3], int64_t num_kv_heads, const void* cos, const void* sin,
                 int64_t cos_batch, int64_t cos_batch_stride, int64_t cos_seq_stride, int64_t batch, int64_t seq_len,
                 int64_t head_dim, liger_dtype dtype, const liger_tunables* tunables, liger_stream_t stream,
                 bool backward) {
  if (!is_valid_dtype(dtype)) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "rope: dtype %d", static_cast<int>(dtype));
  if (batch < 0 || seq_len < 0 || num_q_heads < 0 || num_kv_heads < 0 || head_dim <= 0)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "rope: negative size or head_dim <= 0");
  if (head_dim % 2 != 0) return fail(LIGER_STATUS_UNSUPPORTED_SHAPE, "rope: head_dim %lld is odd", static_cast<long long>(head_dim));
  const std::size_t elem = dtype_size(dtype);
  int req_threads = 0, req_rows = 0, req_vector = 0, req_depth = 0, req_stages = 0;
  if (tunables) {
    req_threads = tunables->threads_per_block;
    req_rows = tunables->rows_per_block;
    req_vector = tunables->vector_bytes;
    req_depth = tunables->pipeline_depth;
    req_stages = tunables->stages;
    if (req_stages < 0 || req_stages > bulk::kMaxStages)
      return fail(LIGER_STATUS_INVALID_ARGUMENT, "rope: stages=%d (want 0 = default, 1 = off, 2..%d token tiles in flight)",
                  req_stages, bulk::kMaxStages);
    if (req_depth != 0 && req_depth != 1 && req_depth != 2 && req_depth != 4)
      return fail(LIGER_STATUS_INVALID_ARGUMENT, "rope: pipeline_depth=%d (want 0 = default, or heads in flight per lane: 1, 2 or 4)",
                  req_depth);
    if (req_threads != 0 && (req_threads < 32 || req_threads > 1024 || req_threads % 32 != 0))
      return fail(LIGER_STATUS_INVALID_ARGUMENT, "rope: threads_per_block=%d (want 32..1024, multiple of 32)", req_threads);
    if (req_rows != 0 && (req_rows < 1 || req_rows > 32))
      return fail(LIGER_STATUS_INVALID_ARGUMENT, "rope: rows_per_block=%d (want 1..32)", req_rows);
    if (req_vector != 0 && ((req_vector != 16 && req_vector != 8 && req_vector != 4 && req_vector != static_cast<int>(elem)) ||
                            req_vector < static_cast<int>(elem)))
      return fail(LIGER_STATUS_INVALID_ARGUMENT, "rope: vector_bytes=%d (want 16, 8, 4 or the element size %zu)",
                  req_vector, elem);
  }
  if (batch == 0 || seq_len == 0 || num_q_heads + num_kv_heads == 0) return LIGER_STATUS_SUCCESS;
  if (!cos || !sin) return fail(LIGER_STATUS_INVALID_ARGUMENT, "rope: cos or sin is NULL");
  if (cos_batch != 1 && cos_batch != batch)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "rope: cos_batch=%lld (want 1 or batch=%lld)",
                static_cast<long long>(cos_batch), static_cast<long long>(batch));
  if (num_q_heads > 0 && (!q || !q_strides)) return fail(LIGER_STATUS_INVALID_ARGUMENT, "rope: q or q_strides is NULL");
  if (num_kv_heads > 0 && (!k || !k_strides)) return fail(LIGER_STATUS_INVALID_ARGUMENT, "rope: k or k_strides is NULL");

  Params p{};
  p.heads[0] = num_q_heads;
  p.heads[1] = num_kv_heads;
  const void* inputs[2] = {q, k};
  void* outputs[2] = {q_out, k_out};
  const int64_t* in_strides[2] = {q_strides, k_strides};
  const int64_t* out_strides[2] = {q_out_strides, k_out_strides};
  for (int i = 0; i < 2; ++i) {
    if (p.heads[i] == 0) continue;
    p.x[i] = inputs[i];
    p.y[i] = outputs[i] ? outputs[i] : const_cast<void*>(inputs[i]);
    const int64_t* ys = outputs[i] && out_strides[i] ? out_strides[i] : in_strides[i];
    for (int d = 0; d < 3; ++d) {
      p.x_strides[i][d] = in_strides[i][d];
      p.y_strides[i][d] = ys[d];
    }
  }
  p.cos = cos;
  p.sin = sin;
  p.cos_batch_stride = cos_batch_stride;
  p.cos_seq_stride = cos_seq_stride;
  p.cos_broadcast = cos_batch == 1;
  p.seq = seq_len;
  p.tokens = batch * seq_len;
  p.half = static_cast<int>(head_dim / 2);
  p.sign = backward ? -1.0f : 1.0f;

  DeviceGuard guard(num_q_heads > 0 ? q : k);
  int vector_bytes = req_vector ? req_vector : 16;
  if (req_vector) {
    if (!vector_fits(p, vector_bytes / static_cast<int>(elem), elem))
      return fail(LIGER_STATUS_INVALID_ARGUMENT,
                  "rope: vector_bytes=%d not possible (pointer/stride alignment or head_dim/2 not a multiple)", req_vector);
  } else {
    while (vector_bytes > static_cast<int>(elem) && !vector_fits(p, vector_bytes / static_cast<int>(elem), elem))
      vector_bytes /= 2;
    if (vector_bytes < static_cast<int>(elem)) vector_bytes = static_cast<int>(elem);
  }
  const int vec = vector_bytes / static_cast<int>(elem);
  p.vpr = p.half / vec;
  if (p.vpr > 1024) return fail(LIGER_STATUS_UNSUPPORTED_SHAPE, "rope: head_dim %lld too large", static_cast<long long>(head_dim));
  const int64_t lanes_needed = (num_q_heads + num_kv_heads) * p.vpr;
  const int sm_arch = current_sm_arch();
  Config config = default_config(sm_arch, lanes_needed, vector_bytes);
  int rows = req_rows ? req_rows : (req_threads ? 1 : config.rows_per_block);
  int threads = req_threads ? req_threads : (req_rows ? config.threads_per_block / config.rows_per_block * rows : config.threads_per_block);
  if (!req_threads && !req_rows && threads / rows < p.vpr) {  // huge head_dim: one token per block, enough lanes
    rows = 1;
    threads = (p.vpr + 31) / 32 * 32;
  }
  if (threads > 1024 || threads % rows != 0 || threads / rows < p.vpr)
    return fail(LIGER_STATUS_INVALID_ARGUMENT,
                "rope: threads_per_block=%d with rows_per_block=%d gives %d lanes per token; need a divisor "
                "giving >= %d lanes (head_dim/2 / vector elements) and <= 1024 threads",
                threads, rows, threads / std::max(rows, 1), p.vpr);
  const int lanes = threads / rows;
  const int depth = req_depth ? req_depth : config.heads_in_flight;
  const int stages = req_stages ? req_stages : config.stages;
  // Staging moves whole token rows: 16-byte vectors, heads contiguous in each token, sm_90.
  const bool staged = stages > 1 && vector_bytes == 16 && heads_contiguous(p) && bulk::bulk_copy_supported(sm_arch);
  cudaStream_t s = to_cuda(stream);
  liger_status status = LIGER_STATUS_INTERNAL;
#ifndef LIGER_KERNEL_VARIANT_UNIT  // kernel-perf's compile check instantiates one kernel itself
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const int v = vector_bytes / static_cast<int>(sizeof(T));
    if (staged) {
      status = launch_staged<T, 16 / sizeof(T), P>(p, lanes, rows, stages, req_stages != 0, s);
      if (status != LIGER_STATUS_UNSUPPORTED_SHAPE) return;
    }
    if constexpr (sizeof(T) == 4) {
      switch (v) {
        case 4: status = launch<T, 4, P>(p, lanes, rows, depth, s); break;
        case 2: status = launch<T, 2, P>(p, lanes, rows, depth, s); break;
        default: status = launch<T, 1, P>(p, lanes, rows, depth, s); break;
      }
    } else {
      switch (v) {
        case 8: status = launch<T, 8, P>(p, lanes, rows, depth, s); break;
        case 4: status = launch<T, 4, P>(p, lanes, rows, depth, s); break;
        case 2: status = launch<T, 2, P>(p, lanes, rows, depth, s); break;
        default: status = launch<T, 1, P>(p, lanes, rows, depth, s); break;
      }
    }
  });
#endif
  return status;
}

}  // namespace
}  // namespace liger::kernels::rope

// A test build that includes this file whole to run other code variants (tests/kernels/gpu)
// leaves the C ABI to the library.
#ifndef LIGER_ROPE_NO_C_ABI
using namespace liger::kernels;

extern "C" {

liger_status liger_rope_forward(const void* q, const int64_t q_strides[3], void* q_out, const int64_t q_out_strides[3],
                                int64_t num_q_heads, const void* k, const int64_t k_strides[3], void* k_out,
                                const int64_t k_out_strides[3], int64_t num_kv_heads, const void* cos, const void* sin,
                                int64_t cos_batch, int64_t cos_batch_stride, int64_t cos_seq_stride, int64_t batch,
                                int64_t seq_len, int64_t head_dim, liger_dtype dtype, const liger_tunables* tunables,
                                liger_stream_t stream) {
  return rope::run(q, q_strides, q_out, q_out_strides, num_q_heads, k, k_strides, k_out, k_out_strides, num_kv_heads,
                   cos, sin, cos_batch, cos_batch_stride, cos_seq_stride, batch, seq_len, head_dim, dtype, tunables,
                   stream, false);
}

liger_status liger_rope_backward(const void* dq, const int64_t dq_strides[3], void* dq_out,
                                 const int64_t dq_out_strides[3], int64_t num_q_heads, const void* dk,
                                 const int64_t dk_strides[3], void* dk_out, const int64_t dk_out_strides[3],
                                 int64_t num_kv_heads, const void* cos, const void* sin, int64_t cos_batch,
                                 int64_t cos_batch_stride, int64_t cos_seq_stride, int64_t batch, int64_t seq_len,
                                 int64_t head_dim, liger_dtype dtype, const liger_tunables* tunables,
                                 liger_stream_t stream) {
  return rope::run(dq, dq_strides, dq_out, dq_out_strides, num_q_heads, dk, dk_strides, dk_out, dk_out_strides,
                   num_kv_heads, cos, sin, cos_batch, cos_batch_stride, cos_seq_stride, batch, seq_len, head_dim, dtype,
                   tunables, stream, true);
}

liger_status liger_rope_default_tunables(int sm_arch, int64_t rows, int64_t cols, liger_dtype dtype,
                                         liger_tunables* out) {
  if (!out) return fail(LIGER_STATUS_INVALID_ARGUMENT, "rope default tunables: out is NULL");
  if (!is_valid_dtype(dtype)) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "rope: dtype %d", static_cast<int>(dtype));
  if (rows < 0 || cols < 0) return fail(LIGER_STATUS_INVALID_ARGUMENT, "rope default tunables: negative size");
  const int vec = 16 / static_cast<int>(dtype_size(dtype));
  rope::Config config = rope::default_config(sm_arch, cols / 2 / vec, 16);
  *out = liger_tunables{};
  out->threads_per_block = config.threads_per_block;
  out->rows_per_block = config.rows_per_block;
  out->vector_bytes = config.vector_bytes;
  out->pipeline_depth = config.heads_in_flight;
  out->stages = config.stages;
  return LIGER_STATUS_SUCCESS;
}

}  // extern "C"
#endif  // LIGER_ROPE_NO_C_ABI
