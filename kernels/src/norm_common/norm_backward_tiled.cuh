// Device code of the norm backwards that keep row tiles in flight, for rows that fit one register
// chunk: the software-pipelined kernel (pipeline_depth 2, the next tile's loads issued into a
// second register buffer) and the kernel staged through shared memory by the bulk-copy engine
// (sm_90, the `stages` tunable). They share the row functions and parameters of norm_kernels.cuh.
#pragma once

#include "norm_common/norm_kernels.cuh"

namespace liger::kernels::norm {

// ------------------------------------------------------------------------------------------
// Backward, software-pipelined (pipeline_depth 2), for rows that fit one chunk
// (nvec <= NV * blockDim.x; the launcher guarantees it). The loads of the block's NEXT row tile
// (x, dy, ds, rstd, mean) are issued into a second register buffer before the current tile's
// sums, block reduction and dx stores, so the SM keeps a tile of loads in flight while it
// reduces (the unpipelined kernel has none in flight then). Loads into registers do not wait at
// bar.sync: the first use of the buffer does. The weight stays in registers across tiles when
// it takes at most 8 registers (otherwise it is re-read, from L1, per tile: 16 more registers
// spill the 4-vectors-per-thread shapes).
// Registers the pipelined kernel's data needs: two tile buffers plus the dW (and dB)
// accumulators. From 96 (of the 128 a 512-thread block gets) ptxas spills (sm_90, nvcc 13:
// RMSNorm bf16 at 4 vectors per thread spilled ~460 bytes); the launcher runs those shapes
// unpipelined (16-bit activations at 4 vectors per thread, any norm).
template <Kind K, typename T, int VEC, int NV>
constexpr bool pipelined_backward_fits() {
  constexpr int tensors = K == Kind::kAddRms ? 3 : 2;
  constexpr int buffers = 2 * tensors * NV * VEC * static_cast<int>(sizeof(T)) / 4;
  constexpr int accumulators = (K == Kind::kLayer ? 2 : 1) * NV * VEC;
  return buffers + accumulators < 96;
}

template <Kind K, typename T, int VEC, int NV>
struct BwdTile {
  Vec<T, VEC> x[NV], dy[NV];
  Vec<T, VEC> ds[K == Kind::kAddRms ? NV : 1];
  float rstd, mean;
};

// Shapes of one 16-byte vector per thread are compiled for two 512-thread blocks per SM (64
// registers): left to ptxas, LayerNorm's took 84 (two tiles, dW and dB accumulators, the kept
// weight) and ran one block per SM, i.e. one row tile in flight (45% of copy against 59% unpipelined
// on the H100). At 64 it does not spill.
template <typename T, int VEC, int NV>
constexpr int pipelined_min_blocks() {
  return NV * VEC * static_cast<int>(sizeof(T)) <= 16 ? 2 : 1;
}

template <Kind K, typename T, typename TW, int VEC, int NV, class P = ShippedBwdVariant>
__global__ void __launch_bounds__(kMaxBackwardThreads, (bwd_min_blocks<P>(pipelined_min_blocks<T, VEC, NV>())))
    norm_backward_pipelined_kernel(BwdParams p) {
  extern __shared__ float smem[];
  constexpr bool kAdd = K == Kind::kAddRms;
  constexpr bool kLayer = K == Kind::kLayer;
  // FusedAdd (three tile buffers) and LayerNorm (two accumulators, the mean) re-read the weight
  // from L1 instead: kept, LayerNorm's 64-register shape spilled (sm_90, nvcc 13).
  constexpr bool kKeepW = !kAdd && !kLayer && NV * VEC * sizeof(TW) <= 32;
  const int tx = blockDim.x, rpb = blockDim.y;
  const int nvec = p.cols / VEC;
  const int64_t tiles = (p.rows + rpb - 1) / rpb;
  const int64_t stride = gridDim.x;
  const TW* w = static_cast<const TW*>(p.w);
  const bool has_ds = kAdd && p.ds != nullptr;
  const bool want_dw = p.dw_partial != nullptr;
  const bool want_db = kLayer && p.db_partial != nullptr;

  Vec<TW, VEC> wreg[kKeepW ? NV : 1];
  if constexpr (kKeepW) {
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int v = k * tx + threadIdx.x;
      if (v < nvec) wreg[k] = load_vec<TW, VEC>(w + v * VEC);
    }
  }
  // Only called for v < nvec.
  auto weight = [&](int k, int v) -> Vec<TW, VEC> {
    if constexpr (kKeepW) {
      return wreg[k];
    } else {
      return load_vec<TW, VEC>(w + v * VEC);
    }
  };

  // Issues the loads of `tile` (zeros past the last tile and for rows past the end).
  auto load_tile = [&](int64_t tile, BwdTile<K, T, VEC, NV>& b) {
    const int64_t row = tile * rpb + threadIdx.y;
    const bool active = tile < tiles && row < p.rows;
    b.rstd = active ? p.rstd[row] : 0.f;
    b.mean = (kLayer && active) ? p.mean[row] : 0.f;
    const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
    const T* dy = static_cast<const T*>(p.dy) + row * p.dy_stride;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int v = k * tx + threadIdx.x;
      if (active && v < nvec) {
        b.x[k] = load_vec<T, VEC>(x + v * VEC);
        b.dy[k] = load_vec<T, VEC>(dy + v * VEC);
        if constexpr (kAdd) {
          if (has_ds) b.ds[k] = load_vec<T, VEC>(static_cast<const T*>(p.ds) + row * p.ds_stride + v * VEC);
        }
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) b.x[k].values[e] = b.dy[k].values[e] = from_float<T>(0.f);
      }
    }
  };

  float dw_acc[NV][VEC];
  float db_acc[NV][VEC];
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int e = 0; e < VEC; ++e) dw_acc[k][e] = db_acc[k][e] = 0.f;
  auto accumulate = [&](int k, int e, int, float dw_term, float db_term) {
    dw_acc[k][e] += dw_term;
    db_acc[k][e] += db_term;
  };

  BwdTile<K, T, VEC, NV> cur;
  load_tile(blockIdx.x, cur);
  int buffer = 0;  // alternates between consecutive row reductions (see row_sum)
  for (int64_t tile = blockIdx.x; tile < tiles; tile += stride) {
    BwdTile<K, T, VEC, NV> nxt;
    load_tile(tile + stride, nxt);  // in flight during this tile's reduction and stores

    const int64_t row = tile * rpb + threadIdx.y;
    const float rstd = cur.rstd, mean = cur.mean;
    float sums[2] = {0.f, 0.f};
    BwdRowCache<P, VEC, NV> cache;
    backward_row_sums<K, T, TW, VEC, NV, P>(cur.x, cur.dy, weight, 0, nvec, mean, rstd, p.offset, sums, cache);
    reduce_backward_sums<K>(sums, smem, buffer);
    buffer ^= 1;
    if (row < p.rows) {
      T* dx = static_cast<T*>(p.dx) + row * p.dx_stride;
      backward_row_outputs<K, T, TW, VEC, NV, P>(cur.x, cur.dy, has_ds, [&](int k, int) { return cur.ds[k]; },
                                                 weight, 0, nvec, mean, rstd, sums, p, dx, accumulate, cache, true);
    }
    cur = nxt;
  }

  float* dw_row = want_dw ? p.dw_partial + static_cast<int64_t>(blockIdx.x) * p.cols : nullptr;
  float* db_row = want_db ? p.db_partial + static_cast<int64_t>(blockIdx.x) * p.cols : nullptr;
  if (want_dw) store_partial_row<NV, VEC>(dw_acc, dw_row, p.cols, smem);
  if (want_db) store_partial_row<NV, VEC>(db_acc, db_row, p.cols, smem);
}

// ------------------------------------------------------------------------------------------
// Backward, staged through shared memory by the bulk-copy engine (sm_90; the `stages` tunable),
// for rows that fit one chunk and take 16-byte vectors (the launcher guarantees both). Thread 0
// keeps `stages` row tiles (x, dy, ds) in flight: each lands in its own shared-memory stage and
// completes an mbarrier phase; after a tile's row reduction (a block barrier every thread reaches
// after reading its vectors of the stage) thread 0 refills that stage with the tile `stages`
// iterations ahead. The registers the prefetching kernel spent on its one tile ahead hold the
// weight instead.
// Dynamic shared memory: [reductions / partial rows: stage_offset bytes][stages mbarriers,
// padded to 16 bytes][stages x rpb x tensors x cols x sizeof(T)].
template <Kind K, typename T, typename TW, int VEC, int NV, class P = ShippedBwdVariant>
__global__ void __launch_bounds__(kMaxBackwardThreads, (bwd_min_blocks<P>(pipelined_min_blocks<T, VEC, NV>())))
    norm_backward_staged_kernel(BwdParams p) {
  extern __shared__ float smem[];
  constexpr bool kAdd = K == Kind::kAddRms;
  constexpr bool kLayer = K == Kind::kLayer;
  constexpr bool kKeepW = NV * VEC * sizeof(TW) <= 32;
  const int tx = blockDim.x, rpb = blockDim.y;
  const int nvec = p.cols / VEC;
  const int64_t tiles = (p.rows + rpb - 1) / rpb;
  const int64_t stride = gridDim.x;
  const TW* w = static_cast<const TW*>(p.w);
  const bool has_ds = kAdd && p.ds != nullptr;
  const bool want_dw = p.dw_partial != nullptr;
  const bool want_db = kLayer && p.db_partial != nullptr;
  const bool issuer = threadIdx.x == 0 && threadIdx.y == 0;

  uint64_t* bars = reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(smem) + p.stage_offset);
  char* stage_data = reinterpret_cast<char*>(bars) + (p.stages * 8 + 15) / 16 * 16;
  const uint32_t row_bytes = static_cast<uint32_t>(p.cols) * sizeof(T);
  const int tensors = has_ds ? 3 : 2;
  const uint32_t stage_bytes = static_cast<uint32_t>(rpb * tensors) * row_bytes;
  // Row y's tensor i of a stage.
  auto staged_row = [&](int stage, int y, int i) -> T* {
    return reinterpret_cast<T*>(stage_data + stage * stage_bytes + static_cast<uint32_t>(y * tensors + i) * row_bytes);
  };
  // Thread 0: the copies of `tile` into `stage` (rows past the end are not copied: nobody reads them).
  auto issue = [&](int64_t tile, int stage) {
    const int64_t first = tile * rpb;
    const int64_t count = p.rows - first < rpb ? p.rows - first : rpb;
    bulk::barrier_expect_bytes(&bars[stage], static_cast<uint32_t>(count * tensors) * row_bytes);
    for (int y = 0; y < count; ++y) {
      const int64_t row = first + y;
      bulk::copy_to_shared(staged_row(stage, y, 0), static_cast<const T*>(p.x) + row * p.x_stride, row_bytes, &bars[stage]);
      bulk::copy_to_shared(staged_row(stage, y, 1), static_cast<const T*>(p.dy) + row * p.dy_stride, row_bytes, &bars[stage]);
      if (has_ds)
        bulk::copy_to_shared(staged_row(stage, y, 2), static_cast<const T*>(p.ds) + row * p.ds_stride, row_bytes,
                             &bars[stage]);
    }
  };

  if (issuer) {
    for (int s = 0; s < p.stages; ++s) bulk::barrier_init(&bars[s]);
    bulk::barrier_init_fence();
  }
  __syncthreads();
  if (issuer) {
    for (int s = 0; s < p.stages; ++s) {
      const int64_t tile = blockIdx.x + s * stride;
      if (tile < tiles) issue(tile, s);
    }
  }

  Vec<TW, VEC> wreg[kKeepW ? NV : 1];
  if constexpr (kKeepW) {
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int v = k * tx + threadIdx.x;
      if (v < nvec) wreg[k] = load_vec<TW, VEC>(w + v * VEC);
    }
  }
  auto weight = [&](int k, int v) -> Vec<TW, VEC> {
    if constexpr (kKeepW) {
      return wreg[k];
    } else {
      return load_vec<TW, VEC>(w + v * VEC);
    }
  };

  float dw_acc[NV][VEC];
  float db_acc[NV][VEC];
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int e = 0; e < VEC; ++e) dw_acc[k][e] = db_acc[k][e] = 0.f;
  auto accumulate = [&](int k, int e, int, float dw_term, float db_term) {
    dw_acc[k][e] += dw_term;
    db_acc[k][e] += db_term;
  };

  // rstd / mean are 4 bytes a row: read one tile ahead into registers.
  auto row_stats = [&](int64_t tile, float& rstd, float& mean) {
    const int64_t row = tile * rpb + threadIdx.y;
    const bool active = tile < tiles && row < p.rows;
    rstd = active ? p.rstd[row] : 0.f;
    mean = (kLayer && active) ? p.mean[row] : 0.f;
  };
  float next_rstd, next_mean;
  row_stats(blockIdx.x, next_rstd, next_mean);

  int buffer = 0;  // alternates between consecutive row reductions (see row_sum)
  int stage = 0;
  uint32_t parity = 0;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += stride) {
    const float rstd = next_rstd, mean = next_mean;
    row_stats(tile + stride, next_rstd, next_mean);
    const int64_t row = tile * rpb + threadIdx.y;
    const bool active = row < p.rows;

    bulk::barrier_wait(&bars[stage], parity);
    Vec<T, VEC> xv[NV], dyv[NV], dsv[kAdd ? NV : 1];
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int v = k * tx + threadIdx.x;
      if (active && v < nvec) {
        xv[k] = load_vec<T, VEC>(staged_row(stage, threadIdx.y, 0) + v * VEC);
        dyv[k] = load_vec<T, VEC>(staged_row(stage, threadIdx.y, 1) + v * VEC);
        if constexpr (kAdd) {
          if (has_ds) dsv[k] = load_vec<T, VEC>(staged_row(stage, threadIdx.y, 2) + v * VEC);
        }
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) xv[k].values[e] = dyv[k].values[e] = from_float<T>(0.f);
      }
    }

    float sums[2] = {0.f, 0.f};
    BwdRowCache<P, VEC, NV> cache;
    backward_row_sums<K, T, TW, VEC, NV, P>(xv, dyv, weight, 0, nvec, mean, rstd, p.offset, sums, cache);
    reduce_backward_sums<K>(sums, smem, buffer);
    buffer ^= 1;
    // Every thread has read its vectors of the stage: row_sum passed a block barrier when a row
    // spans several warps; rows of one warp need one here.
    if (tx <= 32) __syncthreads();
    if (issuer && tile + p.stages * stride < tiles) issue(tile + p.stages * stride, stage);
    if (++stage == p.stages) stage = 0, parity ^= 1u;

    if (active) {
      T* dx = static_cast<T*>(p.dx) + row * p.dx_stride;
      backward_row_outputs<K, T, TW, VEC, NV, P>(xv, dyv, has_ds, [&](int k, int) { return dsv[k]; }, weight, 0,
                                                 nvec, mean, rstd, sums, p, dx, accumulate, cache, true);
    }
  }

  float* dw_row = want_dw ? p.dw_partial + static_cast<int64_t>(blockIdx.x) * p.cols : nullptr;
  float* db_row = want_db ? p.db_partial + static_cast<int64_t>(blockIdx.x) * p.cols : nullptr;
  if (want_dw) store_partial_row<NV, VEC>(dw_acc, dw_row, p.cols, smem);
  if (want_db) store_partial_row<NV, VEC>(db_acc, db_row, p.cols, smem);
}

}  // namespace liger::kernels::norm
