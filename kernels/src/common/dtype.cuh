// Element types, fp32 conversion and dtype dispatch. Every kernel loads its storage type,
// computes in fp32 and stores back, so the conversions live here once.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "liger_kernels/common.h"

namespace liger::kernels {

template <typename T>
__device__ __forceinline__ float to_float(T value);
template <>
__device__ __forceinline__ float to_float<float>(float value) { return value; }
template <>
__device__ __forceinline__ float to_float<__half>(__half value) { return __half2float(value); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 value) { return __bfloat162float(value); }

template <typename T>
__device__ __forceinline__ T from_float(float value);
template <>
__device__ __forceinline__ float from_float<float>(float value) { return value; }
template <>
__device__ __forceinline__ __half from_float<__half>(float value) { return __float2half_rn(value); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float value) { return __float2bfloat16_rn(value); }

inline std::size_t dtype_size(liger_dtype dtype) { return dtype == LIGER_DTYPE_FLOAT32 ? 4 : 2; }

inline bool is_valid_dtype(liger_dtype dtype) {
  return dtype == LIGER_DTYPE_FLOAT32 || dtype == LIGER_DTYPE_FLOAT16 || dtype == LIGER_DTYPE_BFLOAT16;
}

// N elements of T moved as one aligned access (16 bytes for N = 16 / sizeof(T)).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T values[N];
};

// Calls `fn(T{})` with T the storage type for `dtype`; returns false for an unknown dtype.
template <typename Fn>
bool dispatch_dtype(liger_dtype dtype, Fn&& fn) {
  switch (dtype) {
    case LIGER_DTYPE_FLOAT32: fn(float{}); return true;
    case LIGER_DTYPE_FLOAT16: fn(__half{}); return true;
    case LIGER_DTYPE_BFLOAT16: fn(__nv_bfloat16{}); return true;
  }
  return false;
}

}  // namespace liger::kernels
