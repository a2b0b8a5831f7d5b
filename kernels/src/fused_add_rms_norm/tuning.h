// Tuned defaults of FusedAddRMSNorm per architecture and size class (see norm_common/norm_tuning.h for
// what the columns mean). Measured on H100 (sm90); sm80 shares the values until measured.
#pragma once

#include "norm_common/norm_tuning.h"

namespace liger::kernels::fused_add_rms_norm_tuning {

using norm::TuningRow;
using norm::TuningTable;

// max_cols, vectors/thread (backward; forward too unless the last column is set), min_threads,
// blocks/SM (backward grid), pipeline_depth (backward: 1 no prefetch, 2 prefetch the next tile),
// forward vectors/thread (0 = the same), stages (backward row tiles in flight through shared
// memory, sm_90; 0 = off)
inline constexpr TuningRow kSm80[] = {{1024, 2, 256, 2, 2, 0}, {4096, 2, 512, 1, 2, 0}, {8192, 2, 512, 1, 2, 0}, {1 << 30, 2, 512, 1, 2, 0}};
// sm90 4096 row: backward one row of 512 threads, two blocks per SM, no prefetch (2026-11-21 H100 sweep:
// 77.4% of copy vs 68.0%). Staged backward (2026-11-21 H100 sweeps, bf16): at 16384x4096 no gain
// for three tensors (3 stages 221.9 us, 2 232.8, 4 231.0, unstaged 222.4): off; at 8192x8192 2
// stages 229.7, 3 236.2, 4 255.6, unstaged 257.7. Other classes not measured (no benchmark shape).
inline constexpr TuningRow kSm90[] = {
    {1024, 2, 256, 2, 2, 0}, {4096, 1, 512, 2, 1, 2}, {8192, 2, 512, 1, 2, 0, 2}, {1 << 30, 2, 512, 1, 2, 0}};
inline constexpr TuningTable kTables[] = {{80, kSm80, 4}, {90, kSm90, 4}};
inline constexpr int kTableCount = 2;

// Code variant of the backward (norm_common/norm_variant.h): DwFirst, CacheFp32, MinBlocks.
// kernel-perf's code-variant strategies rewrite this line; <0, 0, 0> is the shipped kernel.
using BwdVariant = norm::BwdVariant<0, 0, 0>;

}  // namespace liger::kernels::fused_add_rms_norm_tuning
