// Tuned defaults of RMSNorm per architecture and size class (see norm_common/norm_tuning.h for
// what the columns mean). Measured on H100 (sm90); sm80 shares the values until measured.
#pragma once

#include "norm_common/norm_tuning.h"

namespace liger::kernels::rms_norm_tuning {

using norm::TuningRow;
using norm::TuningTable;

// max_cols, vectors/thread (backward; forward too unless the last column is set), min_threads,
// blocks/SM (backward grid), pipeline_depth (backward: 1 no prefetch, 2 prefetch the next tile),
// forward vectors/thread (0 = the same), stages (backward row tiles in flight through shared
// memory, sm_90; 0 = off)
inline constexpr TuningRow kSm80[] = {{1024, 2, 256, 2, 2, 4}, {4096, 2, 512, 1, 2, 4}, {8192, 2, 512, 1, 2, 4}, {1 << 30, 2, 512, 1, 2, 4}};
// sm90 4096 row: backward one row of 512 threads (one vector each), two blocks per SM (2026-11-21 H100
// sweep, benchmarks/tunable_sweep.py: 74.9% of copy vs 60.1% for 2 rows x 256 threads, 1 block/SM).
// Staged backward, stages per size class (2026-11-21 H100 sweeps, bf16, backward us for 1 = unstaged
// / 2 / 3 / 4 stages): 16384x1024 59.6 / 49.9 / 47.6 / 46.7; 16384x4096 175.0 / 162.4 / 168.6 /
// 170.6; 8192x8192 228.5 / 163.7 / 168.3 / 168.9; 4096x16384 247.0 / 195.0 / 182.5 / (4 do not
// fit shared memory).
inline constexpr TuningRow kSm90[] = {
    {1024, 2, 256, 2, 2, 4, 4}, {4096, 1, 512, 2, 2, 4, 2}, {8192, 2, 512, 1, 2, 4, 2}, {1 << 30, 2, 512, 1, 2, 4, 3}};
inline constexpr TuningTable kTables[] = {{80, kSm80, 4}, {90, kSm90, 4}};
inline constexpr int kTableCount = 2;

// Code variant of the backward (norm_common/norm_variant.h): DwFirst, CacheFp32, MinBlocks.
// kernel-perf's code-variant strategies rewrite this line; <0, 0, 0> is the shipped kernel.
using BwdVariant = norm::BwdVariant<0, 0, 0>;

}  // namespace liger::kernels::rms_norm_tuning
