// Tuned defaults of SwiGLU (and GeGLU, which shares the kernel): rows per architecture and size
// class. Element-wise and memory-bound: 16-byte vectors, several vectors per tensor in flight per
// thread; sm_90's large sizes launch one block per tile (blocks_per_sm 0), the others a
// grid-stride loop over 2048 resident threads per SM. Small problems use smaller blocks so
// more SMs get work.
#pragma once

#include <cstdint>

#include "elementwise_common/glu.cuh"

namespace liger::kernels::swiglu {

struct TuningRow {
  int sm_arch;           // 80 or 90 (others use the 90 rows)
  int64_t max_elements;  // size class: rows*cols up to this (inclusive)
  glu::Config config;
};

inline constexpr TuningRow kTuning[] = {
    {80, int64_t{1} << 20, {128, 16, 16}},
    {80, INT64_MAX, {256, 16, 8}},
    {90, int64_t{1} << 20, {128, 16, 16}},
    // One tile per 128-thread block, no grid-stride loop: H200 A/B (2026-11-25, bf16 16384x14336)
    // fwd 349.6 -> 327.2 us, bwd 596.4 -> 544.4 us against 256 threads x 8 resident blocks.
    {90, INT64_MAX, {128, 16, 0}},
};

// Code variant of the kernel (elementwise_common/glu.cuh GluVariant): FwdUnroll, BwdUnroll,
// LoadsFirst. kernel-perf's code-variant strategies rewrite this line; <4, 2, 1> is shipped.
using Variant = glu::GluVariant<4, 2, 1>;

inline glu::Config default_config(int sm_arch, int64_t elements, liger_dtype /*dtype*/) {
  const int arch = sm_arch >= 80 && sm_arch < 90 ? 80 : 90;
  for (const auto& row : kTuning) {
    if (row.sm_arch == arch && elements <= row.max_elements) return row.config;
  }
  return {256, 16, 8};
}

}  // namespace liger::kernels::swiglu
