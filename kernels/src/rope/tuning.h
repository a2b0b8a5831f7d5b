// Tuned defaults of RoPE. One block handles `rows_per_block` tokens side by side; the lanes of a
// token (threads_per_block / rows_per_block) cover its (q + k heads) x (head_dim/2 / VEC) vector
// slots once where possible, so each thread loads its cos/sin vector once per token and rotates
// one head (or a few). Rows: per architecture; the size class is the lanes a token needs.
#pragma once

#include <algorithm>
#include <cstdint>

namespace liger::kernels::rope {

struct Config {
  int threads_per_block;
  int rows_per_block;
  int vector_bytes;
};

struct TuningRow {
  int sm_arch;         // 80 or 90 (others use the 90 rows)
  int max_lanes;       // lanes one token needs ((heads * head_dim/2) / VEC), rounded up to 32
  int lane_cap;        // lanes per token at most (the rest loop over heads)
  int min_threads;     // tokens are packed side by side until a block has this many threads
};

inline constexpr TuningRow kTuning[] = {
    // H100 bf16 q 4x32x4096x128 + k 8 heads, full fwd+bwd: 512 lanes 336 us, 256 lanes 358 us,
    // 128 lanes 266 us (each thread rotates 2-3 heads with loads in flight): cap at 128.
    {80, 1 << 30, 128, 128},
    {90, 1 << 30, 128, 128},
};

// lanes_needed: heads * (head_dim/2) / VEC for the vector width the launcher picked.
inline Config default_config(int sm_arch, int64_t lanes_needed, int vector_bytes) {
  const int arch = sm_arch >= 80 && sm_arch < 90 ? 80 : 90;
  TuningRow row = kTuning[1];
  for (const auto& r : kTuning)
    if (r.sm_arch == arch && lanes_needed <= r.max_lanes) {
      row = r;
      break;
    }
  int64_t lanes = (std::max<int64_t>(lanes_needed, 1) + 31) / 32 * 32;
  lanes = std::min<int64_t>(lanes, row.lane_cap);
  int rows = static_cast<int>(std::max<int64_t>(1, row.min_threads / lanes));
  rows = std::min(rows, 32);
  return {static_cast<int>(lanes) * rows, rows, vector_bytes};
}

}  // namespace liger::kernels::rope
