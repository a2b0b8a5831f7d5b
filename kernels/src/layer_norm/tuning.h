// Tuned defaults of LayerNorm per architecture and size class (see norm_common/norm_tuning.h for
// what the columns mean). Measured on H100 (sm90); sm80 shares the values until measured.
#pragma once

#include "norm_common/norm_tuning.h"

namespace liger::kernels::layer_norm_tuning {

using norm::TuningRow;
using norm::TuningTable;

// max_cols, vectors/thread (backward; forward too unless the last column is set), min_threads,
// blocks/SM (backward grid), pipeline_depth (backward: 1 no prefetch, 2 prefetch the next tile),
// forward vectors/thread (0 = the same), stages (backward row tiles in flight through shared
// memory, sm_90; 0 = off)
inline constexpr TuningRow kSm80[] = {{1024, 2, 256, 2, 2, 4}, {4096, 2, 512, 1, 2, 4}, {8192, 2, 512, 1, 2, 4}, {1 << 30, 2, 512, 1, 2, 4}};
// sm90 4096 row (2026-11-21 H100 sweeps, after the prefetching backward was held to 64 registers
// for one vector per thread, the persistent grid to what the SMs hold, and the row reductions to one
// barrier): backward one 512-thread row per block (one vector per thread), two blocks per SM:
// 194.9 us (69% of copy) against 210.5 for 256 threads with two vectors each; prefetch measured
// equal (195.4) while it spilled, and is on now that the weight is re-read from L1 (no spill).
// Forward one 128-thread row per block (four vectors per thread): 98.5 us (91%) against 102.4 for
// four rows per 512-thread block.
// Backward staged through shared memory (2026-11-21 H100 sweeps, bf16): 16384x4096 (512 threads)
// 4 stages 168.0 us (80% of copy), 3 171.7, 2 174.7, 6 191.2 (fewer blocks resident), unstaged
// 194.3; 8192x8192 3 stages 170.9, 4 171.4, 2 179.0, unstaged 251.9. The 1024 and larger classes
// are not measured for LayerNorm yet (no benchmark shape) and stay unstaged.
inline constexpr TuningRow kSm90[] = {
    {1024, 2, 256, 2, 2, 4}, {4096, 1, 128, 2, 2, 4, 4}, {8192, 2, 512, 1, 2, 4, 3}, {1 << 30, 2, 512, 1, 2, 4}};
inline constexpr TuningTable kTables[] = {{80, kSm80, 4}, {90, kSm90, 4}};
inline constexpr int kTableCount = 2;

// Code variant of the backward (norm_common/norm_variant.h): DwFirst, CacheFp32, MinBlocks.
// kernel-perf's code-variant strategies rewrite this line; <0, 0, 0> is the shipped kernel.
using BwdVariant = norm::BwdVariant<0, 0, 0>;

}  // namespace liger::kernels::layer_norm_tuning
