// Hopper's bulk-copy engine (cp.async.bulk, sm_90) for memory-bound kernels that stage whole rows
// in shared memory: one thread issues a row's copy, an mbarrier counts the bytes that arrived, and
// every thread waits on the barrier's phase. A block keeps several rows in flight this way without
// spending registers on them: the register prefetch of the norm backwards and RoPE's heads in
// flight held one tile ahead at most (64 registers per thread), short of what Little's law asks of
// an SM at full HBM3 bandwidth (about 3 TB/s x ~2 us of loaded latency / 132 SMs = ~45 KB).
//
// Compiled to real instructions for sm_90 and later only; on older targets the functions trap,
// and the launchers never choose the staged kernels there (`bulk_copy_supported`).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace liger::kernels::bulk {

// Host side: the staged kernels need compute capability 9.0 or later.
inline bool bulk_copy_supported(int sm_arch) { return sm_arch >= 90; }

// Most stages a launcher accepts (the `stages` tunable).
constexpr int kMaxStages = 8;

// How many of `wanted` stages fit the current device's opt-in shared memory per block, where
// `bytes(n)` is a block's dynamic shared memory with n stages: `wanted` trimmed down one at a
// time (1 = none fit). `*limit` gets the device's limit, for the caller's error message.
template <typename BytesFn>
inline cudaError_t stages_that_fit(int wanted, BytesFn&& bytes, int* fit, int* limit) {
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error == cudaSuccess) error = cudaDeviceGetAttribute(limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (error != cudaSuccess) return error;
  int n = wanted;
  while (n > 1 && bytes(n) > static_cast<std::size_t>(*limit)) --n;
  *fit = n;
  return cudaSuccess;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define LIGER_BULK_COPY_AVAILABLE 1
#else
#define LIGER_BULK_COPY_AVAILABLE 0
#endif

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One thread initialises each barrier (one expected arrival: the issuing thread's), then the
// block synchronises before anyone waits on it or a copy signals it.
__device__ __forceinline__ void barrier_init(uint64_t* bar) {
#if LIGER_BULK_COPY_AVAILABLE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(bar)) : "memory");
#else
  __trap();
#endif
}

// Makes the initialised barriers visible to the copy engine (the async proxy).
__device__ __forceinline__ void barrier_init_fence() {
#if LIGER_BULK_COPY_AVAILABLE
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#else
  __trap();
#endif
}

// The issuing thread's arrival, announcing how many bytes the phase's copies will deliver; the
// phase completes when all of them have landed.
__device__ __forceinline__ void barrier_expect_bytes(uint64_t* bar, uint32_t bytes) {
#if LIGER_BULK_COPY_AVAILABLE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}

// Waits until the barrier's phase with this parity (0, 1, 0, ... per reuse) has completed.
__device__ __forceinline__ void barrier_wait(uint64_t* bar, uint32_t parity) {
#if LIGER_BULK_COPY_AVAILABLE
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_AGAIN:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_AGAIN;\n"
      "}\n" ::"r"(smem_address(bar)),
      "r"(parity)
      : "memory");
#else
  __trap();
#endif
}

// Global -> shared copy of `bytes` (a multiple of 16; both addresses 16-byte aligned), counted
// on `bar`.
__device__ __forceinline__ void copy_to_shared(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
#if LIGER_BULK_COPY_AVAILABLE
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_address(dst)),
               "l"(src), "r"(bytes), "r"(smem_address(bar))
               : "memory");
#else
  __trap();
#endif
}

// Shared -> global copy of `bytes` (same alignment rules), part of the issuing thread's current
// bulk group.
__device__ __forceinline__ void copy_to_global(void* dst, const void* src, uint32_t bytes) {
#if LIGER_BULK_COPY_AVAILABLE
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_address(src)),
               "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void commit_group() {
#if LIGER_BULK_COPY_AVAILABLE
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#else
  __trap();
#endif
}

// Waits until at most PENDING of the issuing thread's committed groups still read shared memory
// (their source may be overwritten after this).
template <int PENDING>
__device__ __forceinline__ void wait_group_read() {
#if LIGER_BULK_COPY_AVAILABLE
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(PENDING) : "memory");
#else
  __trap();
#endif
}

// Waits until all of the issuing thread's groups have completed (their writes are visible).
__device__ __forceinline__ void wait_all_groups() {
#if LIGER_BULK_COPY_AVAILABLE
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#else
  __trap();
#endif
}

// Orders this thread's ordinary shared-memory writes before copy-engine reads that follow a
// block barrier.
__device__ __forceinline__ void fence_shared_for_copies() {
#if LIGER_BULK_COPY_AVAILABLE
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#else
  __trap();
#endif
}

}  // namespace liger::kernels::bulk
