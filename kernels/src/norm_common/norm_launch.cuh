// Host side shared by the norm ops: tunables resolution and validation, dtype / vector / NV
// dispatch, launches of the forward, backward and partial-sum reduction kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "common/cuda_utils.cuh"
#include "common/dtype.cuh"
#include "common/status.h"
#include "norm_common/norm_backward_tiled.cuh"
#include "norm_common/norm_kernels.cuh"
#include "norm_common/norm_tuning.h"

namespace liger::kernels::norm {

constexpr int64_t kMaxCols = int64_t{1} << 20;

struct Resolved {
  bool vector = false;  // 16-byte accesses
  int vec = 1;          // elements per access
  int tx = 0, rpb = 0;  // threads per row, rows per block
  int nv = 0;           // vectors per thread per chunk (a template value)
  int pipeline = 1;     // backward: 1 no prefetch, 2 prefetch the next row tile (rows of one chunk)
  int stages = 1;       // backward: row tiles in flight through shared memory (> 1: staged kernel)
  bool stages_given = false;  // by the caller: an error when they do not fit shared memory
  int64_t reduction_blocks = 0;
  bool reduction_blocks_given = false;  // by the caller: launched as given, even past one wave
  int sm_count = 0;
  int sm_arch = 0;
};

struct TensorRef {
  const void* ptr;
  int64_t stride;  // elements; 0 for 1-D tensors
  int bytes_per_vector;
};

inline bool layout_allows_vectors(int64_t cols, int vec, std::initializer_list<TensorRef> tensors) {
  if (cols % vec != 0) return false;
  for (const TensorRef& t : tensors) {
    if (t.ptr == nullptr) continue;
    if (!is_aligned(t.ptr, static_cast<std::size_t>(t.bytes_per_vector))) return false;
    if (t.stride % vec != 0) return false;
  }
  return true;
}

inline liger_status check_dtypes(const char* op, liger_dtype dtype, liger_dtype weight_dtype) {
  if (!is_valid_dtype(dtype)) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "%s: unknown dtype %d", op, static_cast<int>(dtype));
  if (weight_dtype != dtype && weight_dtype != LIGER_DTYPE_FLOAT32)
    return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "%s: weight dtype %s with activations %s (supported: the same, or float32)",
                op, liger_dtype_name(weight_dtype), liger_dtype_name(dtype));
  return LIGER_STATUS_SUCCESS;
}

inline liger_status check_sizes(const char* op, int64_t rows, int64_t cols) {
  if (rows < 0) return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: rows %lld < 0", op, static_cast<long long>(rows));
  if (cols < 1 || cols > kMaxCols)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: cols %lld outside 1..%lld", op, static_cast<long long>(cols),
                static_cast<long long>(kMaxCols));
  return LIGER_STATUS_SUCCESS;
}

inline liger_status check_stride(const char* op, const char* name, int64_t stride, int64_t cols) {
  if (stride < cols)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: %s row stride %lld < cols %lld", op, name,
                static_cast<long long>(stride), static_cast<long long>(cols));
  return LIGER_STATUS_SUCCESS;
}

inline int sm_count_of(int device) {
  int count = 0;
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

inline int sm_arch_of(int device) {
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return major * 10 + minor;
}

// NV values instantiated: forward {1,2,4,8} (vector) / {8} (scalar); backward {1,2,4} / {4}.
inline int pick_nv(int64_t nvec, int tx, bool vector, bool backward) {
  const int64_t need = (nvec + tx - 1) / tx;
  if (!vector) return backward ? 4 : 8;
  const int max_nv = backward ? 4 : 8;
  int nv = 1;
  while (nv < need && nv < max_nv) nv <<= 1;
  return nv;
}

// Resolves the tunables (zero = default) against the table; INVALID_ARGUMENT for bad values.
// `layout_vector_ok`: pointers, strides and cols allow 16-byte accesses.
inline liger_status resolve(const char* op, const liger_tunables* t, const TuningTable* tables, int table_count,
                            int sm_arch, int sm_count, int64_t rows, int64_t cols, liger_dtype dtype,
                            bool layout_vector_ok, bool backward, Resolved* out) {
  liger_tunables user = t ? *t : liger_tunables{};
  const int elem = static_cast<int>(dtype_size(dtype));
  Resolved r;
  if (user.vector_bytes == 0) {
    r.vector = layout_vector_ok;
  } else if (user.vector_bytes == 16) {
    if (!layout_vector_ok)
      return fail(LIGER_STATUS_INVALID_ARGUMENT,
                  "%s: vector_bytes=16 needs cols, row strides and pointers to be multiples of 16 bytes", op);
    r.vector = true;
  } else if (user.vector_bytes == elem) {
    r.vector = false;
  } else {
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: vector_bytes=%d invalid (valid: 0, 16, %d)", op,
                user.vector_bytes, elem);
  }
  r.vec = r.vector ? 16 / elem : 1;
  const int64_t nvec = cols / r.vec;

  const TuningRow& row = pick_row(tables, table_count, sm_arch, cols);
  const int d_tx =
      threads_per_row_for(nvec, backward ? row.vectors_per_thread : fwd_vectors_of(row), kMaxThreadsPerRow);
  const int d_rpb = row.min_threads / d_tx < 1 ? 1 : row.min_threads / d_tx;

  if (user.threads_per_block < 0 || user.threads_per_block > 1024 || user.threads_per_block % 32 != 0)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: threads_per_block=%d invalid (0 or 32..1024, multiple of 32)", op,
                user.threads_per_block);
  if (user.rows_per_block < 0)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: rows_per_block=%d invalid", op, user.rows_per_block);
  int tpb, rpb;
  if (user.threads_per_block && user.rows_per_block) {
    tpb = user.threads_per_block;
    rpb = user.rows_per_block;
  } else if (user.threads_per_block) {
    tpb = user.threads_per_block;
    rpb = tpb / d_tx < 1 ? 1 : tpb / d_tx;
  } else if (user.rows_per_block) {
    rpb = user.rows_per_block;
    tpb = d_tx * rpb;
    if (tpb < 32) tpb = 32;
    if (tpb > 1024)
      return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: rows_per_block=%d needs %d threads per block (> 1024)", op, rpb,
                  tpb);
  } else {
    tpb = d_tx * d_rpb;
    rpb = d_rpb;
  }
  if (rpb < 1 || tpb % rpb != 0)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: rows_per_block=%d does not divide threads_per_block=%d", op, rpb,
                tpb);
  const int tx = tpb / rpb;
  const bool tx_ok = (tx <= 32 && (tx & (tx - 1)) == 0) || (tx > 32 && tx % 32 == 0);
  if (!tx_ok)
    return fail(LIGER_STATUS_INVALID_ARGUMENT,
                "%s: threads per row = threads_per_block/rows_per_block = %d must be a power of two <= 32 or a "
                "multiple of 32", op, tx);
  if (backward && tpb > kMaxBackwardThreads)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: threads_per_block=%d: the backward takes at most %d", op, tpb,
                kMaxBackwardThreads);
  r.tx = tx;
  r.rpb = rpb;
  r.nv = pick_nv(nvec, tx, r.vector, backward);

  if (user.reduction_blocks < 0 || user.reduction_blocks > 65535)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: reduction_blocks=%d invalid (0 or 1..65535)", op,
                user.reduction_blocks);
  r.sm_count = sm_count > 0 ? sm_count : 1;
  int64_t rb = user.reduction_blocks ? user.reduction_blocks : static_cast<int64_t>(row.blocks_per_sm) * r.sm_count;
  if (rb > rows) rb = rows;
  if (rb < 1) rb = 1;
  r.reduction_blocks = rb;
  r.reduction_blocks_given = user.reduction_blocks != 0;
  if (user.pipeline_depth < 0 || user.pipeline_depth > 2)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: pipeline_depth=%d invalid (0 default, 1 no prefetch, 2 prefetch)",
                op, user.pipeline_depth);
  r.pipeline = user.pipeline_depth ? user.pipeline_depth : (row.pipeline_depth > 0 ? row.pipeline_depth : 1);
  if (user.stages < 0 || user.stages > bulk::kMaxStages)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: stages=%d invalid (0 default, 1 off, 2..%d row tiles in flight)", op,
                user.stages, bulk::kMaxStages);
  r.stages = user.stages ? user.stages : (row.stages > 0 ? row.stages : 1);
  r.stages_given = user.stages != 0;
  r.sm_arch = sm_arch;
  *out = r;
  return LIGER_STATUS_SUCCESS;
}

using FwdKernel = void (*)(FwdParams);
using BwdKernel = void (*)(BwdParams);

template <Kind K, typename T, typename TW, int VEC, int NV>
FwdKernel forward_kernel_of() {
  if constexpr (forward_capped<T, VEC, NV>()) return norm_forward_capped_kernel<K, T, TW, VEC, NV>;
  else return norm_forward_kernel<K, T, TW, VEC, NV>;
}

template <Kind K, typename T, typename TW>
FwdKernel forward_kernel_for(bool vector, int nv) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  if (!vector) return forward_kernel_of<K, T, TW, 1, 8>();
  switch (nv) {
    case 1: return forward_kernel_of<K, T, TW, V, 1>();
    case 2: return forward_kernel_of<K, T, TW, V, 2>();
    case 4: return forward_kernel_of<K, T, TW, V, 4>();
    default: return forward_kernel_of<K, T, TW, V, 8>();
  }
}

template <Kind K, typename T, typename TW, class P>
BwdKernel backward_kernel_for(bool vector, int nv, bool pipelined) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  if (pipelined) {  // shapes whose two buffers do not fit the registers run unpipelined
    if (!vector) return norm_backward_pipelined_kernel<K, T, TW, 1, 4, P>;
    switch (nv) {
      case 1: return norm_backward_pipelined_kernel<K, T, TW, V, 1, P>;
      case 2: return norm_backward_pipelined_kernel<K, T, TW, V, 2, P>;
      default:
        if constexpr (pipelined_backward_fits<K, T, V, 4>()) return norm_backward_pipelined_kernel<K, T, TW, V, 4, P>;
        else return norm_backward_kernel<K, T, TW, V, 4, P>;
    }
  }
  if (!vector) return norm_backward_kernel<K, T, TW, 1, 4, P>;
  switch (nv) {
    case 1: return norm_backward_kernel<K, T, TW, V, 1, P>;
    case 2: return norm_backward_kernel<K, T, TW, V, 2, P>;
    default: return norm_backward_kernel<K, T, TW, V, 4, P>;
  }
}

// The staged kernel for 16-byte vectors and `nv` vectors per thread.
template <Kind K, typename T, typename TW, class P>
BwdKernel staged_backward_kernel_for(int nv) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  switch (nv) {
    case 1: return norm_backward_staged_kernel<K, T, TW, V, 1, P>;
    case 2: return norm_backward_staged_kernel<K, T, TW, V, 2, P>;
    default: return norm_backward_staged_kernel<K, T, TW, V, 4, P>;
  }
}

// Calls fn(T{}, TW{}) for the supported (activation, weight) dtype pairs.
template <typename Fn>
bool dispatch_pair(liger_dtype dtype, liger_dtype weight_dtype, Fn&& fn) {
  const bool same = dtype == weight_dtype;
  switch (dtype) {
    case LIGER_DTYPE_FLOAT32: fn(float{}, float{}); return true;
    case LIGER_DTYPE_FLOAT16:
      if (same) fn(__half{}, __half{}); else fn(__half{}, float{});
      return true;
    case LIGER_DTYPE_BFLOAT16:
      if (same) fn(__nv_bfloat16{}, __nv_bfloat16{}); else fn(__nv_bfloat16{}, float{});
      return true;
  }
  return false;
}

// `resident` (optional): how many such blocks one SM holds at once.
inline liger_status check_fits(const char* op, const void* kernel, int threads, std::size_t smem,
                               int* resident = nullptr) {
  int blocks = 0;
  cudaError_t error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem);
  if (error != cudaSuccess) return check_cuda(error, op);
  if (blocks < 1)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: a block of %d threads does not fit on an SM with this kernel's "
                "registers; use fewer threads_per_block", op, threads);
  if (resident) *resident = blocks;
  return LIGER_STATUS_SUCCESS;
}

template <Kind K>
liger_status launch_forward(const char* op, const FwdParams& p, liger_dtype dtype, liger_dtype weight_dtype,
                            const Resolved& r, cudaStream_t stream) {
  if (p.rows == 0) return LIGER_STATUS_SUCCESS;
  liger_status status = LIGER_STATUS_SUCCESS;
  dispatch_pair(dtype, weight_dtype, [&](auto t, auto tw) {
    using T = decltype(t);
    using TW = decltype(tw);
    FwdKernel kernel = forward_kernel_for<K, T, TW>(r.vector, r.nv);
    const dim3 block(r.tx, r.rpb);
    // Cross-warp row sums need shared memory only when a row spans several warps (3 floats per
    // warp: LayerNorm's count, mean, M2; two alternating buffers, see row_sum).
    const std::size_t smem =
        r.tx > 32 ? static_cast<std::size_t>(kRowReductionBuffers) * r.rpb * 32 * 3 * sizeof(float) : 0;
    status = check_fits(op, reinterpret_cast<const void*>(kernel), r.tx * r.rpb, smem);
    if (status != LIGER_STATUS_SUCCESS) return;
    int64_t tiles = (p.rows + r.rpb - 1) / r.rpb;
    const int64_t max_grid = 2147483647;
    const unsigned grid = static_cast<unsigned>(tiles < max_grid ? tiles : max_grid);
    kernel<<<grid, block, smem, stream>>>(p);
    status = check_launch(op);
  });
  return status;
}

// Launches the backward and, when partial rows are requested, the reduction into dw / db.
// P: the backward's code variant (norm_variant.h; each op's tuning.h names it).
template <Kind K, class P = ShippedBwdVariant>
liger_status launch_backward(const char* op, BwdParams p, liger_dtype dtype, liger_dtype weight_dtype,
                             const Resolved& r, void* dweight, void* dbias, cudaStream_t stream) {
  if (p.rows == 0) {
    // No rows: the weight gradients are zero.
    const std::size_t bytes = static_cast<std::size_t>(p.cols) * dtype_size(weight_dtype);
    if (dweight) LIGER_RETURN_IF_ERROR(check_cuda(cudaMemsetAsync(dweight, 0, bytes, stream), op));
    if (dbias) LIGER_RETURN_IF_ERROR(check_cuda(cudaMemsetAsync(dbias, 0, bytes, stream), op));
    return LIGER_STATUS_SUCCESS;
  }
  liger_status status = LIGER_STATUS_SUCCESS;
  dispatch_pair(dtype, weight_dtype, [&](auto t, auto tw) {
    using T = decltype(t);
    using TW = decltype(tw);
    const int64_t nvec = p.cols / r.vec;
    const int64_t chunks = (nvec + static_cast<int64_t>(r.nv) * r.tx - 1) / (static_cast<int64_t>(r.nv) * r.tx);
    const dim3 block(r.tx, r.rpb);
    const int threads = r.tx * r.rpb;
    std::size_t smem =
        r.tx > 32 ? static_cast<std::size_t>(kRowReductionBuffers) * r.rpb * 32 * 2 * sizeof(float) : 0;
    const std::size_t partial_smem = r.rpb > 1 ? static_cast<std::size_t>(threads) * r.vec * sizeof(float) : 0;
    if (partial_smem > smem) smem = partial_smem;
    smem = (smem + 15) / 16 * 16;
    // The staged and the pipelined kernels hold whole rows: rows longer than one chunk run
    // unpipelined. Staging also needs 16-byte rows and the bulk-copy engine (sm_90).
    BwdKernel kernel = nullptr;
    p.stages = 1;
    if (r.stages > 1 && r.vector && chunks == 1 && bulk::bulk_copy_supported(r.sm_arch)) {
      const int tensors = p.ds ? 3 : 2;
      const std::size_t stage_bytes = static_cast<std::size_t>(r.rpb) * tensors * p.cols * sizeof(T);
      auto staged_smem = [&](int n) { return smem + (n * 8 + 15) / 16 * 16 + n * stage_bytes; };
      int stages = 1, smem_limit = 0;
      status = check_cuda(bulk::stages_that_fit(r.stages, staged_smem, &stages, &smem_limit), op);
      if (status != LIGER_STATUS_SUCCESS) return;
      if (stages < r.stages && r.stages_given) {
        status = fail(LIGER_STATUS_INVALID_ARGUMENT,
                      "%s: stages=%d needs %zu bytes of shared memory per block (%d available); use fewer stages or "
                      "rows_per_block", op, r.stages, staged_smem(r.stages), smem_limit);
        return;
      }
      if (stages > 1) {
        kernel = staged_backward_kernel_for<K, T, TW, P>(r.nv);
        p.stages = stages;
        p.stage_offset = static_cast<int>(smem);
        smem = staged_smem(stages);
        status = check_cuda(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
                            op);
        if (status != LIGER_STATUS_SUCCESS) return;
      }
    }
    if (kernel == nullptr) kernel = backward_kernel_for<K, T, TW, P>(r.vector, r.nv, r.pipeline == 2 && chunks == 1);
    int resident = 0;
    status = check_fits(op, reinterpret_cast<const void*>(kernel), threads, smem, &resident);
    if (status != LIGER_STATUS_SUCCESS) return;
    // The grid is persistent: each block walks its rows with one set of weight-gradient
    // accumulators. A default grid larger than what the SMs hold at once runs as a second wave that
    // only starts when the first has finished all its rows (LayerNorm's pipelined kernel at 84
    // registers held one 512-thread block per SM, not the table's two: 45% of copy instead of 59%).
    // The workspace, sized for the table's grid, is large enough for the smaller one.
    int64_t blocks = r.reduction_blocks;
    if (!r.reduction_blocks_given && blocks > static_cast<int64_t>(resident) * r.sm_count)
      blocks = static_cast<int64_t>(resident) * r.sm_count;
    const std::size_t partial_bytes = static_cast<std::size_t>(blocks) * p.cols * sizeof(float);
    if (chunks > 1) {  // chunked rows add their terms to zeroed partial rows
      if (p.dw_partial) {
        status = check_cuda(cudaMemsetAsync(p.dw_partial, 0, partial_bytes, stream), op);
        if (status != LIGER_STATUS_SUCCESS) return;
      }
      if (p.db_partial) {
        status = check_cuda(cudaMemsetAsync(p.db_partial, 0, partial_bytes, stream), op);
        if (status != LIGER_STATUS_SUCCESS) return;
      }
    }
    kernel<<<static_cast<unsigned>(blocks), block, smem, stream>>>(p);
    status = check_launch(op);
    if (status != LIGER_STATUS_SUCCESS) return;
    // dW and dB partial rows are summed by one launch (blockIdx.y picks the gradient).
    PartialSums sums{};
    int targets = 0;
    if (p.dw_partial) sums.partial[targets] = p.dw_partial, sums.out[targets++] = dweight;
    if (p.db_partial) sums.partial[targets] = p.db_partial, sums.out[targets++] = dbias;
    if (targets > 0) {
      sums.blocks = static_cast<int>(blocks);
      sums.cols = p.cols;
      const dim3 rgrid(static_cast<unsigned>((p.cols + 31) / 32), static_cast<unsigned>(targets));
      reduce_partials_kernel<TW><<<rgrid, dim3(32, 16), 0, stream>>>(sums);
      status = check_launch(op);
    }
  });
  return status;
}

}  // namespace liger::kernels::norm
