// Tuned defaults of the fused linear cross-entropy: the chunk of rows per GEMM/CE round, from a
// memory budget for the live logits chunk (the only vocab-sized buffer), plus the cross-entropy
// kernel's launch shape (cross_entropy/tuning.h). Larger chunks keep the dW GEMM (K = chunk)
// efficient and cut its read-modify-write passes over the weight gradient (one per chunk); the
// budget bounds the transient memory.
#pragma once

#include <cstdint>

#include "cross_entropy/tuning.h"
#include "liger_kernels/common.h"

namespace liger::kernels::flce {

// Bytes the logits chunk may take, per architecture (sm80 cards have 40/80 GB).
inline constexpr int64_t kSm90ChunkBudgetBytes = int64_t{512} << 20;
inline constexpr int64_t kSm80ChunkBudgetBytes = int64_t{256} << 20;
inline constexpr int64_t kMinChunkRows = 64;
inline constexpr int64_t kMaxChunkRows = 8192;

inline int64_t padded_vocab(int64_t vocab) { return (vocab + 7) / 8 * 8; }

inline liger_tunables default_tunables(int sm_arch, int64_t tokens, int64_t vocab, int64_t elem_bytes) {
  liger_tunables t = ce::default_tunables(sm_arch, vocab);
  const int64_t budget = sm_arch >= 80 && sm_arch < 90 ? kSm80ChunkBudgetBytes : kSm90ChunkBudgetBytes;
  int64_t rows = budget / (padded_vocab(vocab) * elem_bytes);
  rows = rows / 64 * 64;
  if (rows < kMinChunkRows) rows = kMinChunkRows;
  if (rows > kMaxChunkRows) rows = kMaxChunkRows;
  (void)tokens;
  t.chunk_rows = static_cast<int32_t>(rows);
  return t;
}

}  // namespace liger::kernels::flce
