// RMSNorm, FusedAddRMSNorm and LayerNorm launches for the dispatcher (CUDA), with the argument
// rules of liger_kernels/ops/norms.py: inputs made contiguous, outputs allocated like them, fp32
// rstd/mean per row, the weight-gradient workspace from PyTorch's caching allocator.
#include <torch/library.h>

#include <tuple>

#include "liger_kernels/fused_add_rms_norm.h"
#include "liger_kernels/layer_norm.h"
#include "liger_kernels/rms_norm.h"
#include "torch_ops.h"

namespace liger_torch {
namespace {

liger_rms_norm_options rms_options(double eps, double offset, int64_t casting_mode) {
  liger_rms_norm_options o{};
  o.eps = static_cast<float>(eps);
  o.offset = static_cast<float>(offset);
  o.casting_mode = static_cast<int32_t>(casting_mode);
  return o;
}

void check_weight_shape(const char* op, const at::Tensor& weight, int64_t cols) {
  TORCH_CHECK_VALUE(weight.dim() == 1 && weight.size(0) == cols, message("liger ", op, ": weight shape ", shape_str(weight),
                    " must be (", cols, ",)"));
}

void check_has_rows(const char* op, const at::Tensor& x) {
  TORCH_CHECK_VALUE(x.dim() >= 1, message("liger ", op, ": input must have at least one dimension"));
}

at::Tensor row_floats(const at::Tensor& like, int64_t rows) { return at::empty({rows}, like.options().dtype(at::kFloat)); }

at::Tensor weight_grad(const at::Tensor& weight, bool needed) {
  return needed ? at::empty_like(weight) : at::empty({0}, weight.options());
}

// A byte workspace of `bytes` from the caching allocator (undefined when none is needed).
at::Tensor workspace(size_t bytes, const at::Tensor& like) {
  if (bytes == 0) return at::Tensor();
  return at::empty({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte));
}

void* data_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// ---------------------------------------------------------------- RMSNorm
std::tuple<at::Tensor, at::Tensor> rms_norm_fwd(const at::Tensor& x_in, const at::Tensor& weight_in, double eps,
                                                double offset, int64_t casting_mode, bool /*in_place*/) {
  constexpr const char* op = "rms_norm";
  std::optional<c10::Device> device;
  check_cuda(op, "x", x_in, device);
  check_cuda(op, "weight", weight_in, device);
  check_has_rows(op, x_in);
  const at::Tensor x = x_in.contiguous();
  const at::Tensor weight = weight_in.contiguous();
  auto [rows, cols] = rows_cols(x);
  check_weight_shape(op, weight, cols);
  const liger_dtype wdt = weight_dtype(op, weight, x);
  const liger_dtype dt = dtype_of(x, op);
  c10::cuda::CUDAGuard guard(*device);
  at::Tensor y = at::empty_like(x);
  at::Tensor rstd = row_floats(x, rows);
  const liger_rms_norm_options options = rms_options(eps, offset, casting_mode);
  liger_tunables scratch;
  check_status(liger_rms_norm_forward(x.data_ptr(), cols, weight.data_ptr(), wdt, y.data_ptr(), cols,
                                      rstd.data_ptr<float>(), rows, cols, dt, &options, tunables_for(op, scratch),
                                      stream_of(*device)),
               "liger_rms_norm_forward");
  return {y, rstd};
}

at::Tensor rms_backward_into(const at::Tensor& dy, const at::Tensor& dx, const at::Tensor& x_in,
                             const at::Tensor& weight, const at::Tensor& rstd, double eps, double offset,
                             int64_t casting_mode, bool need_dw) {
  constexpr const char* op = "rms_norm";
  std::optional<c10::Device> device;
  check_cuda(op, "x", x_in, device);
  check_cuda(op, "dy", dy, device);
  check_cuda(op, "weight", weight, device);
  check_cuda(op, "rstd", rstd, device);
  check_has_rows(op, x_in);
  const at::Tensor x = x_in.contiguous();
  auto [rows, cols] = rows_cols(x);
  check_weight_shape(op, weight, cols);
  const liger_dtype dt = dtype_of(x, op);
  const liger_dtype wdt = weight_dtype(op, weight, x);
  c10::cuda::CUDAGuard guard(*device);
  at::Tensor dw = weight_grad(weight, need_dw);
  liger_tunables scratch;
  const liger_tunables* tun = tunables_for(op, scratch);
  size_t ws_bytes = 0;
  if (need_dw) {
    check_status(liger_rms_norm_backward_workspace_size(device->index(), rows, cols, dt, tun, &ws_bytes),
                 "liger_rms_norm_backward_workspace_size");
  }
  at::Tensor ws = workspace(ws_bytes, x);
  const liger_rms_norm_options options = rms_options(eps, offset, casting_mode);
  check_status(liger_rms_norm_backward(dy.data_ptr(), cols, x.data_ptr(), cols, weight.data_ptr(), wdt,
                                       rstd.data_ptr<float>(), dx.data_ptr(), cols, need_dw ? dw.data_ptr() : nullptr,
                                       data_or_null(ws), ws_bytes, rows, cols, dt, &options, tun, stream_of(*device)),
               "liger_rms_norm_backward");
  return dw;
}

std::tuple<at::Tensor, at::Tensor> rms_norm_bwd(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& weight,
                                                const at::Tensor& rstd, double eps, double offset,
                                                int64_t casting_mode, bool need_dw) {
  const at::Tensor dy_c = dy.contiguous();
  at::Tensor dx = at::empty(x.sizes(), x.options());
  at::Tensor dw = rms_backward_into(dy_c, dx, x, weight, rstd, eps, offset, casting_mode, need_dw);
  return {dx, dw};
}

at::Tensor rms_norm_bwd_inplace(at::Tensor& dy, const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& rstd, double eps, double offset, int64_t casting_mode, bool need_dw) {
  TORCH_CHECK_VALUE(dy.is_contiguous(), message("liger rms_norm: the in-place backward needs a contiguous gradient"));
  at::Tensor dw = rms_backward_into(dy, dy, x, weight, rstd, eps, offset, casting_mode, need_dw);
  mark_written(dy);
  return dw;
}

// ---------------------------------------------------------------- FusedAddRMSNorm
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_add_rms_norm_fwd(const at::Tensor& x_in,
                                                                      const at::Tensor& residual_in,
                                                                      const at::Tensor& weight_in, double eps,
                                                                      double offset, int64_t casting_mode,
                                                                      bool /*in_place*/) {
  constexpr const char* op = "fused_add_rms_norm";
  std::optional<c10::Device> device;
  check_cuda(op, "x", x_in, device);
  check_cuda(op, "residual", residual_in, device);
  check_cuda(op, "weight", weight_in, device);
  check_has_rows(op, x_in);
  TORCH_CHECK_VALUE(residual_in.sizes() == x_in.sizes(), message("liger ", op, ": residual shape ", shape_str(residual_in),
                    " != input shape ", shape_str(x_in)));
  check_same_dtype(op, "residual", residual_in, x_in);
  const at::Tensor x = x_in.contiguous();
  const at::Tensor residual = residual_in.contiguous();
  const at::Tensor weight = weight_in.contiguous();
  auto [rows, cols] = rows_cols(x);
  check_weight_shape(op, weight, cols);
  const liger_dtype wdt = weight_dtype(op, weight, x);
  const liger_dtype dt = dtype_of(x, op);
  c10::cuda::CUDAGuard guard(*device);
  at::Tensor y = at::empty_like(x);
  at::Tensor s = at::empty_like(x);
  at::Tensor rstd = row_floats(x, rows);
  const liger_rms_norm_options options = rms_options(eps, offset, casting_mode);
  liger_tunables scratch;
  check_status(liger_fused_add_rms_norm_forward(x.data_ptr(), cols, residual.data_ptr(), cols, weight.data_ptr(), wdt,
                                                y.data_ptr(), cols, s.data_ptr(), cols, rstd.data_ptr<float>(), rows,
                                                cols, dt, &options, tunables_for(op, scratch), stream_of(*device)),
               "liger_fused_add_rms_norm_forward");
  return {y, s, rstd};
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm_bwd(const at::Tensor& dy_in,
                                                          const std::optional<at::Tensor>& ds_out_in,
                                                          const at::Tensor& s_in, const at::Tensor& weight,
                                                          const at::Tensor& rstd, double eps, double offset,
                                                          int64_t casting_mode, bool need_dw) {
  constexpr const char* op = "fused_add_rms_norm";
  std::optional<c10::Device> device;
  check_cuda(op, "s", s_in, device);
  check_cuda(op, "dy", dy_in, device);
  check_cuda(op, "weight", weight, device);
  check_cuda(op, "rstd", rstd, device);
  check_has_rows(op, s_in);
  const at::Tensor s = s_in.contiguous();
  const at::Tensor dy = dy_in.contiguous();
  at::Tensor ds_out;
  if (ds_out_in.has_value() && ds_out_in->defined()) {
    check_cuda(op, "ds_out", *ds_out_in, device);
    ds_out = ds_out_in->contiguous();
  }
  auto [rows, cols] = rows_cols(s);
  check_weight_shape(op, weight, cols);
  const liger_dtype dt = dtype_of(s, op);
  const liger_dtype wdt = weight_dtype(op, weight, s);
  c10::cuda::CUDAGuard guard(*device);
  at::Tensor dx = at::empty_like(s);
  at::Tensor dw = weight_grad(weight, need_dw);
  liger_tunables scratch;
  const liger_tunables* tun = tunables_for(op, scratch);
  size_t ws_bytes = 0;
  if (need_dw) {
    check_status(liger_fused_add_rms_norm_backward_workspace_size(device->index(), rows, cols, dt, tun, &ws_bytes),
                 "liger_fused_add_rms_norm_backward_workspace_size");
  }
  at::Tensor ws = workspace(ws_bytes, s);
  const liger_rms_norm_options options = rms_options(eps, offset, casting_mode);
  check_status(liger_fused_add_rms_norm_backward(dy.data_ptr(), cols, data_or_null(ds_out), cols, s.data_ptr(), cols,
                                                 weight.data_ptr(), wdt, rstd.data_ptr<float>(), dx.data_ptr(), cols,
                                                 need_dw ? dw.data_ptr() : nullptr, data_or_null(ws), ws_bytes, rows,
                                                 cols, dt, &options, tun, stream_of(*device)),
               "liger_fused_add_rms_norm_backward");
  return {dx, dw};
}

// ---------------------------------------------------------------- LayerNorm
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_fwd(const at::Tensor& x_in, const at::Tensor& weight_in,
                                                              const std::optional<at::Tensor>& bias_in, double eps) {
  constexpr const char* op = "layer_norm";
  std::optional<c10::Device> device;
  check_cuda(op, "x", x_in, device);
  check_cuda(op, "weight", weight_in, device);
  const bool has_bias = bias_in.has_value() && bias_in->defined();
  if (has_bias) check_cuda(op, "bias", *bias_in, device);
  check_has_rows(op, x_in);
  const at::Tensor x = x_in.contiguous();
  const at::Tensor weight = weight_in.contiguous();
  auto [rows, cols] = rows_cols(x);
  check_weight_shape(op, weight, cols);
  at::Tensor bias;
  if (has_bias) {
    bias = bias_in->contiguous();
    TORCH_CHECK_VALUE(bias.dim() == 1 && bias.size(0) == cols && bias.scalar_type() == weight.scalar_type(), message("liger ",
                      op, ": bias must have shape (", cols, ",) and the weight's dtype ", weight.scalar_type()));
  }
  const liger_dtype wdt = weight_dtype(op, weight, x);
  const liger_dtype dt = dtype_of(x, op);
  c10::cuda::CUDAGuard guard(*device);
  at::Tensor y = at::empty_like(x);
  at::Tensor mean = row_floats(x, rows);
  at::Tensor rstd = row_floats(x, rows);
  liger_layer_norm_options options{};
  options.eps = static_cast<float>(eps);
  liger_tunables scratch;
  check_status(liger_layer_norm_forward(x.data_ptr(), cols, weight.data_ptr(), data_or_null(bias), wdt, y.data_ptr(),
                                        cols, mean.data_ptr<float>(), rstd.data_ptr<float>(), rows, cols, dt, &options,
                                        tunables_for(op, scratch), stream_of(*device)),
               "liger_layer_norm_forward");
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_bwd(const at::Tensor& dy_in, const at::Tensor& x_in,
                                                              const at::Tensor& weight, const at::Tensor& mean,
                                                              const at::Tensor& rstd, bool need_dw, bool need_db) {
  constexpr const char* op = "layer_norm";
  std::optional<c10::Device> device;
  check_cuda(op, "x", x_in, device);
  check_cuda(op, "dy", dy_in, device);
  check_cuda(op, "weight", weight, device);
  check_cuda(op, "mean", mean, device);
  check_cuda(op, "rstd", rstd, device);
  check_has_rows(op, x_in);
  const at::Tensor x = x_in.contiguous();
  const at::Tensor dy = dy_in.contiguous();
  auto [rows, cols] = rows_cols(x);
  check_weight_shape(op, weight, cols);
  const liger_dtype dt = dtype_of(x, op);
  const liger_dtype wdt = weight_dtype(op, weight, x);
  c10::cuda::CUDAGuard guard(*device);
  at::Tensor dx = at::empty_like(x);
  at::Tensor dw = weight_grad(weight, need_dw);
  at::Tensor db = weight_grad(weight, need_db);
  liger_tunables scratch;
  const liger_tunables* tun = tunables_for(op, scratch);
  size_t ws_bytes = 0;
  if (need_dw || need_db) {
    check_status(liger_layer_norm_backward_workspace_size(device->index(), rows, cols, dt, need_db ? 1 : 0, tun,
                                                          &ws_bytes),
                 "liger_layer_norm_backward_workspace_size");
  }
  at::Tensor ws = workspace(ws_bytes, x);
  check_status(liger_layer_norm_backward(dy.data_ptr(), cols, x.data_ptr(), cols, weight.data_ptr(), wdt,
                                         mean.data_ptr<float>(), rstd.data_ptr<float>(), dx.data_ptr(), cols,
                                         need_dw ? dw.data_ptr() : nullptr, need_db ? db.data_ptr() : nullptr,
                                         data_or_null(ws), ws_bytes, rows, cols, dt, tun, stream_of(*device)),
               "liger_layer_norm_backward");
  return {dx, dw, db};
}

}  // namespace
}  // namespace liger_torch

// CPU too: a CPU tensor then gets the bindings' "runs on CUDA tensors only" error instead of the
// dispatcher's "could not run ... with arguments from the 'CPU' backend".
#define LIGER_NORM_IMPLS(m)                                                  \
  m.impl("rms_norm_fwd", &liger_torch::rms_norm_fwd);                         \
  m.impl("rms_norm_bwd", &liger_torch::rms_norm_bwd);                         \
  m.impl("rms_norm_bwd_inplace", &liger_torch::rms_norm_bwd_inplace);         \
  m.impl("fused_add_rms_norm_fwd", &liger_torch::fused_add_rms_norm_fwd);     \
  m.impl("fused_add_rms_norm_bwd", &liger_torch::fused_add_rms_norm_bwd);     \
  m.impl("layer_norm_fwd", &liger_torch::layer_norm_fwd);                     \
  m.impl("layer_norm_bwd", &liger_torch::layer_norm_bwd)

TORCH_LIBRARY_IMPL(liger, CUDA, m) { LIGER_NORM_IMPLS(m); }
TORCH_LIBRARY_IMPL(liger, CPU, m) { LIGER_NORM_IMPLS(m); }
