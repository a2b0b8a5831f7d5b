// FusedAddRMSNorm: C entry points over the shared norm kernels (norm_common/).
#include "liger_kernels/fused_add_rms_norm.h"

#include "fused_add_rms_norm/tuning.h"
#include "norm_common/norm_launch.cuh"

namespace liger::kernels::norm {
liger_status check_rms_options(const char* op, const liger_rms_norm_options* options, liger_rms_norm_options* out);
}

using namespace liger::kernels;
using namespace liger::kernels::norm;
namespace tuning = liger::kernels::fused_add_rms_norm_tuning;

extern "C" {

liger_status liger_fused_add_rms_norm_default_tunables(int sm_arch, int64_t rows, int64_t cols, liger_dtype dtype,
                                                       liger_tunables* out) {
  constexpr const char* op = "liger_fused_add_rms_norm_default_tunables";
  if (!out) return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: out is NULL", op);
  if (!is_valid_dtype(dtype)) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "%s: unknown dtype", op);
  LIGER_RETURN_IF_ERROR(check_sizes(op, rows, cols));
  fill_defaults(pick_row(tuning::kTables, tuning::kTableCount, sm_arch, cols), cols, dtype, out);
  return LIGER_STATUS_SUCCESS;
}

liger_status liger_fused_add_rms_norm_forward(const void* x, int64_t x_row_stride, const void* residual,
                                              int64_t residual_row_stride, const void* weight,
                                              liger_dtype weight_dtype, void* y, int64_t y_row_stride, void* s,
                                              int64_t s_row_stride, float* rstd, int64_t rows, int64_t cols,
                                              liger_dtype dtype, const liger_rms_norm_options* options,
                                              const liger_tunables* tunables, liger_stream_t stream) {
  constexpr const char* op = "liger_fused_add_rms_norm_forward";
  LIGER_RETURN_IF_ERROR(check_dtypes(op, dtype, weight_dtype));
  LIGER_RETURN_IF_ERROR(check_sizes(op, rows, cols));
  if (!x || !residual || !weight || !y || !s)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: x, residual, weight, y and s must not be NULL", op);
  LIGER_RETURN_IF_ERROR(check_stride(op, "x", x_row_stride, cols));
  LIGER_RETURN_IF_ERROR(check_stride(op, "residual", residual_row_stride, cols));
  LIGER_RETURN_IF_ERROR(check_stride(op, "y", y_row_stride, cols));
  LIGER_RETURN_IF_ERROR(check_stride(op, "s", s_row_stride, cols));
  liger_rms_norm_options o;
  LIGER_RETURN_IF_ERROR(check_rms_options(op, options, &o));
  DeviceGuard guard(x);
  const int vec = 16 / static_cast<int>(dtype_size(dtype));
  const int wvec_bytes = 16 * static_cast<int>(dtype_size(weight_dtype) / dtype_size(dtype));
  const bool vector_ok = layout_allows_vectors(cols, vec,
                                               {{x, x_row_stride, 16},
                                                {residual, residual_row_stride, 16},
                                                {y, y_row_stride, 16},
                                                {s, s_row_stride, 16},
                                                {weight, 0, wvec_bytes}});
  Resolved r;
  LIGER_RETURN_IF_ERROR(resolve(op, tunables, tuning::kTables, tuning::kTableCount, current_sm_arch(),
                                current_sm_count(), rows, cols, dtype, vector_ok, false, &r));
  FwdParams p{};
  p.x = x;
  p.x_stride = x_row_stride;
  p.r = residual;
  p.r_stride = residual_row_stride;
  p.w = weight;
  p.y = y;
  p.y_stride = y_row_stride;
  p.s = s;
  p.s_stride = s_row_stride;
  p.rstd = rstd;
  p.rows = rows;
  p.cols = static_cast<int>(cols);
  p.eps = o.eps;
  p.offset = o.offset;
  p.mode = o.casting_mode;
  return launch_forward<Kind::kAddRms>(op, p, dtype, weight_dtype, r, to_cuda(stream));
}

liger_status liger_fused_add_rms_norm_backward_workspace_size(int device, int64_t rows, int64_t cols,
                                                              liger_dtype dtype, const liger_tunables* tunables,
                                                              size_t* bytes) {
  constexpr const char* op = "liger_fused_add_rms_norm_backward_workspace_size";
  if (!bytes) return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: bytes is NULL", op);
  if (!is_valid_dtype(dtype)) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "%s: unknown dtype", op);
  LIGER_RETURN_IF_ERROR(check_sizes(op, rows, cols));
  Resolved r;
  const int vec = 16 / static_cast<int>(dtype_size(dtype));
  LIGER_RETURN_IF_ERROR(resolve(op, tunables, tuning::kTables, tuning::kTableCount, sm_arch_of(device),
                                sm_count_of(device), rows, cols, dtype, cols % vec == 0, true, &r));
  *bytes = rows == 0 ? 0 : static_cast<size_t>(r.reduction_blocks) * static_cast<size_t>(cols) * sizeof(float);
  return LIGER_STATUS_SUCCESS;
}

liger_status liger_fused_add_rms_norm_backward(const void* dy, int64_t dy_row_stride, const void* ds_out,
                                               int64_t ds_out_row_stride, const void* s, int64_t s_row_stride,
                                               const void* weight, liger_dtype weight_dtype, const float* rstd,
                                               void* dx, int64_t dx_row_stride, void* dweight, void* workspace,
                                               size_t workspace_bytes, int64_t rows, int64_t cols, liger_dtype dtype,
                                               const liger_rms_norm_options* options, const liger_tunables* tunables,
                                               liger_stream_t stream) {
  constexpr const char* op = "liger_fused_add_rms_norm_backward";
  LIGER_RETURN_IF_ERROR(check_dtypes(op, dtype, weight_dtype));
  LIGER_RETURN_IF_ERROR(check_sizes(op, rows, cols));
  if (!dy || !s || !weight || !rstd || !dx)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: dy, s, weight, rstd and dx must not be NULL", op);
  LIGER_RETURN_IF_ERROR(check_stride(op, "dy", dy_row_stride, cols));
  LIGER_RETURN_IF_ERROR(check_stride(op, "s", s_row_stride, cols));
  LIGER_RETURN_IF_ERROR(check_stride(op, "dx", dx_row_stride, cols));
  if (ds_out) LIGER_RETURN_IF_ERROR(check_stride(op, "ds_out", ds_out_row_stride, cols));
  if ((dx == dy && dx_row_stride != dy_row_stride) || (ds_out && dx == ds_out && dx_row_stride != ds_out_row_stride))
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: in-place dx needs the aliased tensor's row stride", op);
  liger_rms_norm_options o;
  LIGER_RETURN_IF_ERROR(check_rms_options(op, options, &o));
  DeviceGuard guard(dy);
  const int vec = 16 / static_cast<int>(dtype_size(dtype));
  const int wvec_bytes = 16 * static_cast<int>(dtype_size(weight_dtype) / dtype_size(dtype));
  const bool vector_ok = layout_allows_vectors(cols, vec,
                                               {{dy, dy_row_stride, 16},
                                                {ds_out, ds_out ? ds_out_row_stride : 0, 16},
                                                {s, s_row_stride, 16},
                                                {dx, dx_row_stride, 16},
                                                {weight, 0, wvec_bytes}});
  Resolved r;
  LIGER_RETURN_IF_ERROR(resolve(op, tunables, tuning::kTables, tuning::kTableCount, current_sm_arch(),
                                current_sm_count(), rows, cols, dtype, vector_ok, true, &r));
  const size_t need = static_cast<size_t>(r.reduction_blocks) * static_cast<size_t>(cols) * sizeof(float);
  if (dweight && rows > 0) {
    if (!workspace || workspace_bytes < need)
      return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: workspace of %zu bytes given, %zu needed", op,
                  workspace ? workspace_bytes : size_t{0}, need);
    if (!is_aligned(workspace, 16)) return fail(LIGER_STATUS_INVALID_ARGUMENT, "%s: workspace not 16-byte aligned", op);
  }
  BwdParams p{};
  p.dy = dy;
  p.dy_stride = dy_row_stride;
  p.ds = ds_out;
  p.ds_stride = ds_out_row_stride;
  p.x = s;
  p.x_stride = s_row_stride;
  p.w = weight;
  p.rstd = rstd;
  p.dx = dx;
  p.dx_stride = dx_row_stride;
  p.dw_partial = dweight ? static_cast<float*>(workspace) : nullptr;
  p.rows = rows;
  p.cols = static_cast<int>(cols);
  p.offset = o.offset;
  p.mode = o.casting_mode;
  return launch_backward<Kind::kAddRms, fused_add_rms_norm_tuning::BwdVariant>(op, p, dtype, weight_dtype, r,
                                                   dweight, nullptr, to_cuda(stream));
}

}  // extern "C"
