// RoPE (rotate-half) launches for the dispatcher (CUDA), with the rules of
// liger_kernels/ops/rope.py: q [B, Hq, T, D] and k [B, Hk, T, D] as any strided views with a
// contiguous last dimension (no copy for HF's transposed projections), outputs in the inputs'
// layout (empty_like), cos/sin (1 or B, T, >= D/2) converted to q's dtype.
#include <torch/library.h>

#include <array>
#include <tuple>

#include "liger_kernels/rope.h"
#include "torch_ops.h"

namespace liger_torch {
namespace {

constexpr const char* kOp = "rope";

at::Tensor last_dim_contiguous(const at::Tensor& t) {
  return (t.stride(-1) == 1 || t.size(-1) == 1) ? t : t.contiguous();
}

std::array<int64_t, 3> leading_strides(const at::Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

struct CosSin {
  at::Tensor cos, sin;
  int64_t batch = 1, batch_stride = 0, seq_stride = 0;
};

CosSin prepare_cos_sin(at::Tensor cos, at::Tensor sin, int64_t batch, int64_t seq, int64_t head_dim,
                       at::ScalarType dtype) {
  if (cos.dim() == 2) {
    cos = cos.unsqueeze(0);
    sin = sin.unsqueeze(0);
  }
  TORCH_CHECK_VALUE(cos.dim() == 3 && cos.sizes() == sin.sizes(), message("liger ", kOp,
                    ": cos and sin must both be (1 or B, T, D); got ", shape_str(cos), ", ", shape_str(sin)));
  TORCH_CHECK_VALUE((cos.size(0) == 1 || cos.size(0) == batch) && cos.size(1) == seq && cos.size(2) >= head_dim / 2, message("liger ", kOp, ": cos/sin shape ", shape_str(cos), " does not fit q/k with B=", batch, ", T=", seq,
                    ", D=", head_dim));
  CosSin out;
  out.cos = cos.to(dtype);
  out.sin = sin.to(dtype);
  if (out.cos.strides() != out.sin.strides() || out.cos.stride(-1) != 1) {
    out.cos = out.cos.contiguous();
    out.sin = out.sin.contiguous();
  }
  out.batch = out.cos.size(0);
  out.batch_stride = out.cos.size(0) > 1 ? out.cos.stride(0) : 0;
  out.seq_stride = out.cos.stride(1);
  return out;
}

using RopeFn = liger_status (*)(const void*, const int64_t*, void*, const int64_t*, int64_t, const void*,
                                const int64_t*, void*, const int64_t*, int64_t, const void*, const void*, int64_t,
                                int64_t, int64_t, int64_t, int64_t, int64_t, liger_dtype, const liger_tunables*,
                                liger_stream_t);

std::tuple<at::Tensor, at::Tensor> launch(RopeFn fn, const char* fn_name, const at::Tensor& q_in,
                                          const at::Tensor& k_in, const at::Tensor& cos_in, const at::Tensor& sin_in) {
  std::optional<c10::Device> device;
  check_cuda(kOp, "q", q_in, device);
  check_cuda(kOp, "k", k_in, device);
  check_cuda(kOp, "cos", cos_in, device);
  check_cuda(kOp, "sin", sin_in, device);
  TORCH_CHECK_VALUE(q_in.dim() == 4 && k_in.dim() == 4, message("liger ", kOp, ": q and k must be [B, H, T, D]; got ",
                    shape_str(q_in), " and ", shape_str(k_in)));
  const int64_t batch = q_in.size(0), q_heads = q_in.size(1), seq = q_in.size(2), head_dim = q_in.size(3);
  TORCH_CHECK_VALUE(k_in.size(0) == batch && k_in.size(2) == seq && k_in.size(3) == head_dim, message("liger ", kOp, ": k ",
                    shape_str(k_in), " does not match q ", shape_str(q_in), " in B, T, D"));
  check_same_dtype(kOp, "k", k_in, q_in);
  const liger_dtype dt = dtype_of(q_in, kOp);
  const at::Tensor q = last_dim_contiguous(q_in);
  const at::Tensor k = last_dim_contiguous(k_in);
  const CosSin cs = prepare_cos_sin(cos_in, sin_in, batch, seq, head_dim, q.scalar_type());
  c10::cuda::CUDAGuard guard(*device);
  // The inputs' layout (as PyTorch's element-wise ops give): with heads contiguous within a token
  // on both sides, the library moves whole token rows through shared memory.
  at::Tensor q_out = at::empty_like(q);
  at::Tensor k_out = at::empty_like(k);
  const int64_t k_heads = k.size(1);
  const auto qs = leading_strides(q), qos = leading_strides(q_out), ks = leading_strides(k),
             kos = leading_strides(k_out);
  liger_tunables scratch;
  check_status(fn(q.data_ptr(), qs.data(), q_out.data_ptr(), qos.data(), q_heads, k_heads ? k.data_ptr() : nullptr,
                  ks.data(), k_heads ? k_out.data_ptr() : nullptr, kos.data(), k_heads, cs.cos.data_ptr(),
                  cs.sin.data_ptr(), cs.batch, cs.batch_stride, cs.seq_stride, batch, seq, head_dim, dt,
                  tunables_for(kOp, scratch), stream_of(*device)),
               fn_name);
  return {q_out, k_out};
}

std::tuple<at::Tensor, at::Tensor> rope_fwd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                            const at::Tensor& sin) {
  return launch(&liger_rope_forward, "liger_rope_forward", q, k, cos, sin);
}

std::tuple<at::Tensor, at::Tensor> rope_bwd(const at::Tensor& dq, const at::Tensor& dk, const at::Tensor& cos,
                                            const at::Tensor& sin) {
  return launch(&liger_rope_backward, "liger_rope_backward", dq, dk, cos, sin);
}

}  // namespace
}  // namespace liger_torch

TORCH_LIBRARY_IMPL(liger, CUDA, m) {
  m.impl("rope_fwd", &liger_torch::rope_fwd);
  m.impl("rope_bwd", &liger_torch::rope_bwd);
}
TORCH_LIBRARY_IMPL(liger, CPU, m) {
  m.impl("rope_fwd", &liger_torch::rope_fwd);
  m.impl("rope_bwd", &liger_torch::rope_bwd);
}
