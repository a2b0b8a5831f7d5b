// Tuned-defaults machinery shared by the norm ops (RMSNorm, FusedAddRMSNorm, LayerNorm). Each
// op's tuning.h holds its own table (per architecture and size class); this file turns a table
// row into concrete launch shapes.
#pragma once

#include <cstdint>

#include "liger_kernels/common.h"
#include "norm_common/norm_variant.h"

namespace liger::kernels::norm {

// One row of a defaults table.
struct TuningRow {
  int32_t max_cols;            // size class: the row applies to cols <= max_cols (last row: any)
  int32_t vectors_per_thread;  // target vectors each thread holds (sets threads_per_row)
  int32_t min_threads;         // rows are packed into a block until it has this many threads
  int32_t blocks_per_sm;       // backward persistent grid: reduction_blocks = this x SM count
  int32_t pipeline_depth;      // backward: 1 = no prefetch, 2 = prefetch the next row tile (0 = 1)
  int32_t fwd_vectors_per_thread;  // forward's target vectors per thread (0 = vectors_per_thread)
  int32_t stages = 0;  // backward: row tiles in flight through shared memory (sm_90; 0 or 1 = off)
};

inline int fwd_vectors_of(const TuningRow& row) {
  return row.fwd_vectors_per_thread > 0 ? row.fwd_vectors_per_thread : row.vectors_per_thread;
}

struct TuningTable {
  int sm_arch;  // 80, 90
  const TuningRow* rows;
  int count;
};

inline int next_pow2(int v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

// threads per row for `nvec` vectors and a target of `per_thread` vectors each: a power of two
// up to 32, else a multiple of 32, at most `cap`.
inline int threads_per_row_for(int64_t nvec, int per_thread, int cap) {
  int64_t raw = (nvec + per_thread - 1) / per_thread;
  if (raw <= 32) return next_pow2(static_cast<int>(raw < 1 ? 1 : raw));
  int64_t rounded = (raw + 31) / 32 * 32;
  return static_cast<int>(rounded > cap ? cap : rounded);
}

inline const TuningRow& pick_row(const TuningTable* tables, int table_count, int sm_arch, int64_t cols) {
  const TuningTable* table = &tables[table_count - 1];  // last table: sm90, the fallback
  for (int i = 0; i < table_count; ++i)
    if (tables[i].sm_arch == (sm_arch >= 90 ? 90 : (sm_arch >= 80 ? 80 : 90))) table = &tables[i];
  for (int i = 0; i < table->count; ++i)
    if (cols <= table->rows[i].max_cols) return table->rows[i];
  return table->rows[table->count - 1];
}

// Largest threads per row the defaults use (the backward keeps <= 512 threads per block so its
// register-held rows fit).
constexpr int kMaxThreadsPerRow = 512;

// Fills `out` from a table row. vector_bytes: 16 when cols allows it (the launcher still checks
// pointers and strides), else the element size. reduction_blocks = 0: blocks_per_sm x SM count,
// resolved at launch on the tensors' device.
// When the forward and the backward default to different block shapes (fwd_vectors_per_thread),
// one struct cannot hold both: threads_per_block and rows_per_block are left 0 (= each pass's
// tuned default); an explicit shape applies to both passes.
inline void fill_defaults(const TuningRow& row, int64_t cols, liger_dtype dtype, liger_tunables* out) {
  const int elem = dtype == LIGER_DTYPE_FLOAT32 ? 4 : 2;
  const int vec = 16 / elem;
  const bool vector_ok = cols % vec == 0;
  const int64_t nvec = vector_ok ? cols / vec : cols;
  const int tx = threads_per_row_for(nvec, row.vectors_per_thread, kMaxThreadsPerRow);
  const int fwd_tx = threads_per_row_for(nvec, fwd_vectors_of(row), kMaxThreadsPerRow);
  int rpb = row.min_threads / tx;
  if (rpb < 1) rpb = 1;
  *out = liger_tunables{};
  if (fwd_tx == tx) {
    out->threads_per_block = tx * rpb;
    out->rows_per_block = rpb;
  }
  out->vector_bytes = vector_ok ? 16 : elem;
  out->reduction_blocks = 0;
  out->pipeline_depth = row.pipeline_depth > 0 ? row.pipeline_depth : 1;
  out->stages = row.stages > 0 ? row.stages : 1;
}

}  // namespace liger::kernels::norm
