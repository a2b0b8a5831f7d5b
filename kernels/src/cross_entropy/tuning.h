// Tuned launch defaults of the cross-entropy kernel, per architecture and vocab size class.
// One block handles one row; the block size grows with the vocab so every thread keeps several
// 16-byte loads in flight, and for the largest vocabularies one 1024-thread block per SM keeps the
// rows in flight (132 x 256 KiB for bf16 x 128256 on H100) inside L2, so the second (gradient)
// pass over each row re-reads it from L2 rather than DRAM.
#pragma once

#include <cstdint>

#include "liger_kernels/common.h"

namespace liger::kernels::ce {

struct TuningRow {
  int64_t max_vocab;  // this row applies up to this vocab size
  int32_t threads_per_block;
  int32_t vector_bytes;
  int32_t loads_in_flight;  // the pipeline_depth tunable: vector loads per thread issued together
};

// sm90 (H100/H200) table; sm80 uses the same shape classes (measured only on sm90 so far). The
// 32768 row's 4 loads in flight are kernel-perf's win from these defaults on an H100 (2026-11-27:
// vocab 32000 1.023x, confirmed by 5 interleaved A/B rounds; a de-tuned start converged to it too).
inline constexpr TuningRow kSm90Table[] = {
    {256, 64, 16, 1}, {2048, 128, 16, 1}, {8192, 256, 16, 2}, {32768, 512, 16, 4}, {INT64_MAX, 1024, 16, 2},
};
inline constexpr TuningRow kSm80Table[] = {
    {256, 64, 16, 1}, {2048, 128, 16, 1}, {8192, 256, 16, 2}, {32768, 512, 16, 2}, {INT64_MAX, 1024, 16, 2},
};

// Code variants of the row kernel (kernel-perf's code knobs). TwoPass: 1 = the row max, then the
// sum of exp in a second read (no per-vector rescale), 0 = one online pass (shipped).
// MinBlocks: __launch_bounds__(1024, MinBlocks) register cap (0 = none beyond 1024 threads).
template <int TwoPass, int MinBlocks>
struct CeVariant {
  static_assert(TwoPass == 0 || TwoPass == 1, "TwoPass is 0 or 1");
  static_assert(MinBlocks >= 0 && MinBlocks <= 2, "MinBlocks is 0, 1 or 2");
  static constexpr bool two_pass = TwoPass != 0;
  static constexpr int min_blocks = MinBlocks;
};
using ShippedCeVariant = CeVariant<0, 0>;
// kernel-perf's code-variant strategies rewrite this line; <0, 0> is the shipped kernel.
using Variant = CeVariant<0, 0>;

inline liger_tunables default_tunables(int sm_arch, int64_t vocab) {
  const TuningRow* table = sm_arch >= 80 && sm_arch < 90 ? kSm80Table : kSm90Table;
  liger_tunables t{};
  for (int i = 0;; ++i) {
    if (vocab <= table[i].max_vocab) {
      t.threads_per_block = table[i].threads_per_block;
      t.vector_bytes = table[i].vector_bytes;
      t.pipeline_depth = table[i].loads_in_flight;
      break;
    }
  }
  return t;
}

}  // namespace liger::kernels::ce
