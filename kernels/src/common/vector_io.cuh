// Vector global-memory accesses that stay vectors in the machine code. A struct of __half or
// __nv_bfloat16 (classes with constructors) assigned element by element is stored by nvcc 13 as
// 2-byte stores (seen in the PTX of the first SwiGLU kernel: 52 st.global.u16, no 16-byte store;
// it ran at 54% of copy bandwidth), so stores go through packed 32-bit words and inline PTX.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/dtype.cuh"

namespace liger::kernels {

template <int BYTES>
struct RawBits;
template <>
struct RawBits<2> { using type = unsigned short; };
template <>
struct RawBits<4> { using type = unsigned int; };
template <>
struct RawBits<8> { using type = uint2; };
template <>
struct RawBits<16> { using type = uint4; };

// Loads VEC elements with one access (`p` aligned to sizeof(T) * VEC), kept in storage precision
// (a 16-byte bf16 vector stays in 4 registers until it is used: widening at load time doubled
// the registers of the SwiGLU backward and halved its occupancy).
template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> load_vector(const T* p) {
  constexpr int kBytes = static_cast<int>(sizeof(T)) * VEC;
  static_assert(kBytes <= 16, "one access moves at most 16 bytes");
  using Bits = typename RawBits<kBytes>::type;
  const Bits bits = *reinterpret_cast<const Bits*>(p);
  Vec<T, VEC> out;
  __builtin_memcpy(&out, &bits, kBytes);
  return out;
}

template <typename T>
__device__ __forceinline__ unsigned int pack_pair(float low, float high);
template <>
__device__ __forceinline__ unsigned int pack_pair<__nv_bfloat16>(float low, float high) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  unsigned int word;
  __builtin_memcpy(&word, &pair, 4);
  return word;
}
template <>
__device__ __forceinline__ unsigned int pack_pair<__half>(float low, float high) {
  __half2 pair = __floats2half2_rn(low, high);
  unsigned int word;
  __builtin_memcpy(&word, &pair, 4);
  return word;
}

// Rounds VEC fp32 values to T and stores them with one access (`p` aligned to sizeof(T) * VEC).
template <typename T, int VEC>
__device__ __forceinline__ void store_floats(T* p, const float (&v)[VEC]) {
  if constexpr (VEC == 1) {
    *p = from_float<T>(v[0]);
  } else if constexpr (sizeof(T) == 4) {
    if constexpr (VEC == 4) {
      asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
                   : "memory");
    } else {
      static_assert(VEC == 2, "fp32 vectors are 1, 2 or 4 wide");
      asm volatile("st.global.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(v[0]), "f"(v[1]) : "memory");
    }
  } else {
    if constexpr (VEC == 8) {
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(pack_pair<T>(v[0], v[1])),
                   "r"(pack_pair<T>(v[2], v[3])), "r"(pack_pair<T>(v[4], v[5])), "r"(pack_pair<T>(v[6], v[7]))
                   : "memory");
    } else if constexpr (VEC == 4) {
      asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(pack_pair<T>(v[0], v[1])),
                   "r"(pack_pair<T>(v[2], v[3]))
                   : "memory");
    } else {
      static_assert(VEC == 2, "16-bit vectors are 1, 2, 4 or 8 wide");
      asm volatile("st.global.b32 [%0], %1;" ::"l"(p), "r"(pack_pair<T>(v[0], v[1])) : "memory");
    }
  }
}

}  // namespace liger::kernels
