// SwiGLU / GeGLU launches for the dispatcher (CUDA), with the rules of liger_kernels/ops/glu.py:
// a and b of one shape and dtype, made contiguous; c, da, db allocated like a; the in-place
// backward writes da into a and db into b.
#include <torch/library.h>

#include <string_view>
#include <tuple>

#include "liger_kernels/geglu.h"
#include "liger_kernels/swiglu.h"
#include "torch_ops.h"

namespace liger_torch {
namespace {

using ForwardFn = liger_status (*)(const void*, int64_t, const void*, int64_t, void*, int64_t, int64_t, int64_t,
                                   liger_dtype, const liger_tunables*, liger_stream_t);
using BackwardFn = liger_status (*)(const void*, int64_t, const void*, int64_t, const void*, int64_t, void*, int64_t,
                                    void*, int64_t, int64_t, int64_t, int32_t, liger_dtype, const liger_tunables*,
                                    liger_stream_t);

struct Kind {
  const char* name;  // also the op name its tunables are set under
  ForwardFn forward;
  BackwardFn backward;
  const char* forward_name;
  const char* backward_name;
};

const Kind& kind_of(c10::string_view kind) {
  static const Kind swiglu{"swiglu", &liger_swiglu_forward, &liger_swiglu_backward, "liger_swiglu_forward",
                           "liger_swiglu_backward"};
  static const Kind geglu{"geglu", &liger_geglu_forward, &liger_geglu_backward, "liger_geglu_forward",
                          "liger_geglu_backward"};
  if (kind == "swiglu") return swiglu;
  if (kind == "geglu") return geglu;
  TORCH_CHECK_VALUE(false, message("liger glu: kind must be \"swiglu\" or \"geglu\", got \"", std::string(kind), "\""));
  return swiglu;  // unreachable
}

struct Checked {
  c10::Device device;
  liger_dtype dtype;
};

Checked check_pair(const char* op, const at::Tensor& a, const at::Tensor& b) {
  std::optional<c10::Device> device;
  check_cuda(op, "a", a, device);
  check_cuda(op, "b", b, device);
  TORCH_CHECK_VALUE(a.sizes() == b.sizes(), message("liger ", op, ": a ", shape_str(a), " and b ", shape_str(b),
                    " must have the same shape"));
  check_same_dtype(op, "b", b, a);
  return {*device, dtype_of(a, op)};
}

at::Tensor glu_fwd(const at::Tensor& a_in, const at::Tensor& b_in, c10::string_view kind_name,
                   bool /*in_place_backward*/) {
  const Kind& kind = kind_of(kind_name);
  const Checked c = check_pair(kind.name, a_in, b_in);
  const at::Tensor a = a_in.contiguous();
  const at::Tensor b = b_in.contiguous();
  auto [rows, cols] = rows_cols(a);
  c10::cuda::CUDAGuard guard(c.device);
  at::Tensor out = at::empty_like(a);
  liger_tunables scratch;
  check_status(kind.forward(a.data_ptr(), cols, b.data_ptr(), cols, out.data_ptr(), cols, rows, cols, c.dtype,
                            tunables_for(kind.name, scratch), stream_of(c.device)),
               kind.forward_name);
  return out;
}

void launch_backward(const Kind& kind, const Checked& c, const at::Tensor& dc, const at::Tensor& a,
                     const at::Tensor& b, void* da, void* db, bool in_place) {
  auto [rows, cols] = rows_cols(a);
  liger_tunables scratch;
  check_status(kind.backward(dc.data_ptr(), cols, a.data_ptr(), cols, b.data_ptr(), cols, da, cols, db, cols, rows,
                             cols, in_place ? 1 : 0, c.dtype, tunables_for(kind.name, scratch), stream_of(c.device)),
               kind.backward_name);
}

std::tuple<at::Tensor, at::Tensor> glu_bwd(const at::Tensor& dc_in, const at::Tensor& a_in, const at::Tensor& b_in,
                                           c10::string_view kind_name) {
  const Kind& kind = kind_of(kind_name);
  const Checked c = check_pair(kind.name, a_in, b_in);
  std::optional<c10::Device> device = c.device;
  check_cuda(kind.name, "dc", dc_in, device);
  TORCH_CHECK_VALUE(dc_in.sizes() == a_in.sizes(), message("liger ", kind.name, ": dc ", shape_str(dc_in),
                    " must have a's shape ", shape_str(a_in)));
  const at::Tensor dc = dc_in.contiguous();
  const at::Tensor a = a_in.contiguous();
  const at::Tensor b = b_in.contiguous();
  c10::cuda::CUDAGuard guard(c.device);
  at::Tensor da = at::empty_like(a);
  at::Tensor db = at::empty_like(b);
  launch_backward(kind, c, dc, a, b, da.data_ptr(), db.data_ptr(), false);
  return {da, db};
}

void glu_bwd_inplace(const at::Tensor& dc_in, at::Tensor& a, at::Tensor& b, c10::string_view kind_name) {
  const Kind& kind = kind_of(kind_name);
  const Checked c = check_pair(kind.name, a, b);
  std::optional<c10::Device> device = c.device;
  check_cuda(kind.name, "dc", dc_in, device);
  TORCH_CHECK_VALUE(dc_in.sizes() == a.sizes(), message("liger ", kind.name, ": dc ", shape_str(dc_in), " must have a's shape ",
                    shape_str(a)));
  // The results land in a's and b's own storage: a copy would silently drop them.
  TORCH_CHECK_VALUE(a.is_contiguous() && b.is_contiguous(), message("liger ", kind.name,
                    ": the in-place backward needs contiguous a and b"));
  const at::Tensor dc = dc_in.contiguous();
  c10::cuda::CUDAGuard guard(c.device);
  launch_backward(kind, c, dc, a, b, nullptr, nullptr, true);
  mark_written(a);
  mark_written(b);
}

}  // namespace
}  // namespace liger_torch

#define LIGER_GLU_IMPLS(m)                                       \
  m.impl("glu_fwd", &liger_torch::glu_fwd);                       \
  m.impl("glu_bwd", &liger_torch::glu_bwd);                       \
  m.impl("glu_bwd_inplace", &liger_torch::glu_bwd_inplace)

TORCH_LIBRARY_IMPL(liger, CUDA, m) { LIGER_GLU_IMPLS(m); }
TORCH_LIBRARY_IMPL(liger, CPU, m) { LIGER_GLU_IMPLS(m); }
