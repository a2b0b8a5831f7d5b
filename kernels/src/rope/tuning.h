// Tuned defaults of RoPE. One block handles `rows_per_block` tokens side by side; the lanes of a
// token (threads_per_block / rows_per_block) share its vector slots: (q + k heads) x (head_dim/2 /
// VEC). A lane loads its cos/sin vector once per token and rotates the slot in `slots / lanes` heads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace liger::kernels::rope {

// Code variants of the RoPE kernels (kernel-perf's code knobs).
// LoadsFirst: 1 = the loads of every head in flight are issued before the first rotation (shipped),
//   0 = each head is rotated and stored right after its loads (register kernel).
// MinBlocks: __launch_bounds__(1024, MinBlocks) register cap of the register kernel (0 = no
//   bounds, as shipped).
// HeadsPerThread (HPT): heads each lane holds per unrolled slot, all rotated with the one cos/sin
//   vector the lane loaded for its token. The register kernel issues the loads of
//   pipeline_depth x HPT heads before it rotates (up to 16, where the pipeline_depth tunable stops
//   at 4); the staged kernel reads HPT heads of its shared-memory tile before rotating them.
//   Heads are still dealt to lanes round-robin (head_slot, + lanes' head slots, ...), so every
//   lane rotates the same heads as with HPT = 1, only more of them at once: a lane's last step
//   with fewer heads left than HPT x depth, a q/k boundary inside a step and any head count are
//   handled per head. With LoadsFirst = 0 the register kernel rotates each head right after its
//   loads, so HPT only lengthens its step. 1 = the kernels as before the knob (shipped).
template <int LoadsFirst, int MinBlocks, int HeadsPerThread>
struct RopeVariant {
  static_assert(LoadsFirst == 0 || LoadsFirst == 1, "LoadsFirst is 0 or 1");
  static_assert(MinBlocks >= 0 && MinBlocks <= 2, "MinBlocks is 0, 1 or 2");
  static_assert(HeadsPerThread == 1 || HeadsPerThread == 2 || HeadsPerThread == 4, "HeadsPerThread is 1, 2 or 4");
  static constexpr bool loads_first = LoadsFirst != 0;
  static constexpr int min_blocks = MinBlocks;
  static constexpr int heads_per_thread = HeadsPerThread;
};
using ShippedRopeVariant = RopeVariant<1, 0, 1>;
// kernel-perf's code-variant strategies rewrite this line; <1, 0, 1> is the shipped kernel.
using Variant = RopeVariant<1, 0, 1>;

struct Config {
  int threads_per_block;
  int rows_per_block;
  int vector_bytes;
  int heads_in_flight;  // pipeline_depth: heads whose loads a lane issues before computing (1, 2, 4)
  int stages;           // token tiles in flight through shared memory (staged kernel; 1 = off)
};

struct TuningRow {
  int sm_arch;           // 80 or 90 (others use the 90 row)
  int lane_cap;          // lanes per token at most
  int slots_per_lane;    // target slots (heads) each lane rotates: its loads in flight
  int min_threads;       // tokens are packed side by side until a block has this many threads
  int heads_in_flight;   // pipeline_depth default
  int stages;            // stages default (sm_90, heads contiguous in a token)
};

inline constexpr TuningRow kTuning[] = {
    // bf16 q 4x32x4096x128 + k 8 heads (320 slots), forward, H200 sweep (2026-11-21, lanes x tokens
    // per block): 64 x 2 99.0 us (5 slots per lane), 80 x 2 100.9 (4), 48 x 2 103.0 (6.7),
    // 128 x 1 107.3 (2.5), 160 x 1 108.1 (2), 256 x 1 159.8. Lanes that rotate several heads each
    // reuse their cos/sin registers and keep loads in flight; two tokens per block beat one.
    // sm_90 stages: token tiles through shared memory when heads are contiguous in a token (HF's
    // layout). H100 sweep 2026-11-21, same shape: 3 stages 122.7 us (64 lanes x 2 tokens), 4 124.8,
    // unstaged 126.3. Stages hold a tile that is being computed or stored, so 3 keeps 2 in flight.
    {80, 256, 5, 128, 2, 1},
    {90, 256, 5, 128, 2, 3},
};

// slots: heads * (head_dim/2) / VEC for the vector width the launcher picked.
// Lanes: among multiples of 32 up to the cap that divide `slots` (every lane rotates the same
// number of heads, none idles in a last partial pass), the one whose slots per lane is nearest the
// target (ties: more lanes). No such divisor: all slots at once when they fit the cap, else the cap.
inline Config default_config(int sm_arch, int64_t slots, int vector_bytes) {
  const int arch = sm_arch >= 80 && sm_arch < 90 ? 80 : 90;
  TuningRow row = kTuning[1];
  for (const auto& r : kTuning)
    if (r.sm_arch == arch) row = r;
  slots = std::max<int64_t>(slots, 1);
  int64_t lanes = 0;
  for (int64_t candidate = 32; candidate <= row.lane_cap; candidate += 32) {
    if (slots % candidate != 0) continue;
    const int64_t per_lane = slots / candidate;
    if (lanes == 0 || std::llabs(per_lane - row.slots_per_lane) <= std::llabs(slots / lanes - row.slots_per_lane))
      lanes = candidate;
  }
  if (lanes == 0) lanes = std::min<int64_t>((slots + 31) / 32 * 32, row.lane_cap);
  int rows = static_cast<int>(std::max<int64_t>(1, row.min_threads / lanes));
  rows = std::min(rows, 32);
  return {static_cast<int>(lanes) * rows, rows, vector_bytes, row.heads_in_flight, row.stages};
}

}  // namespace liger::kernels::rope
