// GeGLU forward/backward entry points (kernel in elementwise_common/glu.cuh).
#include "liger_kernels/geglu.h"

#include "elementwise_common/glu.cuh"
#include "geglu/tuning.h"

using namespace liger::kernels;

extern "C" {

liger_status liger_geglu_forward(const void* a, int64_t a_row_stride, const void* b, int64_t b_row_stride, void* c,
                                  int64_t c_row_stride, int64_t rows, int64_t cols, liger_dtype dtype,
                                  const liger_tunables* tunables, liger_stream_t stream) {
  glu::Params p{};
  p.a = a;
  p.b = b;
  p.out0 = c;
  p.a_stride = a_row_stride;
  p.b_stride = b_row_stride;
  p.out0_stride = c_row_stride;
  p.rows = rows;
  p.cols = cols;
  return glu::run<glu::GeluTanh, false, geglu::Variant>(p, dtype, tunables, stream, geglu::default_config);
}

liger_status liger_geglu_backward(const void* dc, int64_t dc_row_stride, const void* a, int64_t a_row_stride,
                                   const void* b, int64_t b_row_stride, void* da, int64_t da_row_stride, void* db,
                                   int64_t db_row_stride, int64_t rows, int64_t cols, int32_t in_place,
                                   liger_dtype dtype, const liger_tunables* tunables, liger_stream_t stream) {
  if (in_place && (da != nullptr || db != nullptr))
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "geglu backward: in_place requires da == NULL and db == NULL");
  glu::Params p{};
  p.dc = dc;
  p.a = a;
  p.b = b;
  p.out0 = in_place ? const_cast<void*>(a) : da;
  p.out1 = in_place ? const_cast<void*>(b) : db;
  p.dc_stride = dc_row_stride;
  p.a_stride = a_row_stride;
  p.b_stride = b_row_stride;
  p.out0_stride = in_place ? a_row_stride : da_row_stride;
  p.out1_stride = in_place ? b_row_stride : db_row_stride;
  p.rows = rows;
  p.cols = cols;
  return glu::run<glu::GeluTanh, true, geglu::Variant>(p, dtype, tunables, stream, geglu::default_config);
}

liger_status liger_geglu_default_tunables(int sm_arch, int64_t rows, int64_t cols, liger_dtype dtype,
                                           liger_tunables* out) {
  if (!out) return fail(LIGER_STATUS_INVALID_ARGUMENT, "geglu default tunables: out is NULL");
  if (!is_valid_dtype(dtype)) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "geglu: dtype %d", static_cast<int>(dtype));
  if (rows < 0 || cols < 0) return fail(LIGER_STATUS_INVALID_ARGUMENT, "geglu default tunables: negative size");
  glu::Config config = geglu::default_config(sm_arch, rows * cols, dtype);
  *out = liger_tunables{};
  out->threads_per_block = config.threads_per_block;
  out->vector_bytes = config.vector_bytes;
  return LIGER_STATUS_SUCCESS;
}

}  // extern "C"
