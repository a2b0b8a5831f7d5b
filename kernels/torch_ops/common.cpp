// The schemas of the C++-registered liger ops (one place, so the Python fallback in
// liger_kernels/ops/*.py and these stay comparable) and the shared plumbing of torch_ops.h.
#include "torch_ops.h"

#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "liger_kernels/common.h"

namespace liger_torch {

liger_dtype dtype_of(const at::Tensor& t, const char* op, const char* what) {
  switch (t.scalar_type()) {
    case at::kFloat: return LIGER_DTYPE_FLOAT32;
    case at::kHalf: return LIGER_DTYPE_FLOAT16;
    case at::kBFloat16: return LIGER_DTYPE_BFLOAT16;
    default:
      TORCH_CHECK_TYPE(false, message("liger ", op, ": ", what, " has dtype ", t.scalar_type(),
                       "; supported: float32, float16, bfloat16"));
  }
  return LIGER_DTYPE_FLOAT32;  // unreachable
}

void check_cuda(const char* op, const char* name, const at::Tensor& t, std::optional<c10::Device>& device) {
  TORCH_CHECK_VALUE(t.is_cuda(), message("liger ", op, ": ", name, " is on ", t.device(),
                    "; liger_kernels runs on CUDA tensors only"));
  if (!device) {
    device = t.device();
  } else {
    TORCH_CHECK_VALUE(t.device() == *device, message("liger ", op, ": ", name, " is on ", t.device(),
                      " but the other tensors are on ", *device));
  }
}

void check_same_dtype(const char* op, const char* name, const at::Tensor& t, const at::Tensor& ref) {
  TORCH_CHECK_TYPE(t.scalar_type() == ref.scalar_type(), message("liger ", op, ": ", name, " has dtype ", t.scalar_type(),
                   ", expected ", ref.scalar_type(), " (same as the input)"));
}

liger_dtype weight_dtype(const char* op, const at::Tensor& weight, const at::Tensor& x) {
  TORCH_CHECK_TYPE(weight.scalar_type() == x.scalar_type() || weight.scalar_type() == at::kFloat, message("liger ", op,
                   ": weight dtype ", weight.scalar_type(), " must be the input's (", x.scalar_type(), ") or float32"));
  return dtype_of(weight, op, "weight");
}

std::string shape_str(const at::Tensor& t) {
  std::string out = "(";
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i) out += ", ";
    out += std::to_string(t.size(i));
  }
  out += t.dim() == 1 ? ",)" : ")";
  return out;
}

void check_status(liger_status status, const char* function) {
  if (status == LIGER_STATUS_SUCCESS) return;
  // The enum's names, as liger_kernels._lib.STATUS_NAMES spells them.
  static const char* const names[] = {"SUCCESS",      "INVALID_ARGUMENT", "UNSUPPORTED_DTYPE", "UNSUPPORTED_SHAPE",
                                      "CUDA_ERROR",   "OUT_OF_MEMORY",    "CUBLAS_ERROR",      "INTERNAL"};
  const int index = static_cast<int>(status);
  const char* name = (index >= 0 && index < 8) ? names[index] : "INTERNAL";
  const char* detail = liger_last_error();
  TORCH_CHECK(false, message(function, " failed with LIGER_STATUS_", name, ": ", (detail && *detail) ? detail : "(no detail)"));
}

namespace {

struct TunablesStore {
  std::atomic<bool> any{false};
  std::mutex lock;
  std::unordered_map<std::string, liger_tunables> by_op;
};

TunablesStore& store() {
  static TunablesStore instance;
  return instance;
}

}  // namespace

const liger_tunables* tunables_for(const char* op, liger_tunables& scratch) {
  TunablesStore& s = store();
  if (!s.any.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> guard(s.lock);
  auto found = s.by_op.find(op);
  if (found == s.by_op.end()) return nullptr;
  scratch = found->second;
  return &scratch;
}

void mark_written(const at::Tensor& t) {
  if (t.defined() && !t.is_inference()) t.unsafeGetTensorImpl()->bump_version();
}

}  // namespace liger_torch

// Called by liger_kernels._lib.set_tunables through ctypes: `tunables` NULL clears the op's entry.
extern "C" __attribute__((visibility("default"))) int liger_torch_ops_set_tunables(const char* op,
                                                                                  const liger_tunables* tunables) {
  if (op == nullptr) return 1;
  auto& s = liger_torch::store();
  std::lock_guard<std::mutex> guard(s.lock);
  if (tunables == nullptr) {
    s.by_op.erase(op);
  } else {
    s.by_op[op] = *tunables;
  }
  s.any.store(!s.by_op.empty(), std::memory_order_release);
  return 0;
}

// The schemas mirror what torch.library.custom_op infers from the Python fallbacks' signatures
// (float -> float, a mutated argument -> Tensor(aN!); int stays int, which a C++ int64_t
// kernel needs), so callers, fake
// implementations and compiled graphs see the same ops whichever implementation is loaded.
TORCH_LIBRARY_FRAGMENT(liger, m) {
  m.def("rms_norm_fwd(Tensor x, Tensor weight, float eps, float offset, int casting_mode, bool in_place) "
        "-> (Tensor, Tensor)");
  m.def("rms_norm_bwd(Tensor dy, Tensor x, Tensor weight, Tensor rstd, float eps, float offset, "
        "int casting_mode, bool need_dw) -> (Tensor, Tensor)");
  m.def("rms_norm_bwd_inplace(Tensor(a0!) dy, Tensor x, Tensor weight, Tensor rstd, float eps, float offset, "
        "int casting_mode, bool need_dw) -> Tensor");
  m.def("fused_add_rms_norm_fwd(Tensor x, Tensor residual, Tensor weight, float eps, float offset, "
        "int casting_mode, bool in_place) -> (Tensor, Tensor, Tensor)");
  m.def("fused_add_rms_norm_bwd(Tensor dy, Tensor? ds_out, Tensor s, Tensor weight, Tensor rstd, float eps, "
        "float offset, int casting_mode, bool need_dw) -> (Tensor, Tensor)");
  m.def("layer_norm_fwd(Tensor x, Tensor weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)");
  m.def("layer_norm_bwd(Tensor dy, Tensor x, Tensor weight, Tensor mean, Tensor rstd, bool need_dw, "
        "bool need_db) -> (Tensor, Tensor, Tensor)");
  m.def("glu_fwd(Tensor a, Tensor b, str kind, bool in_place_backward) -> Tensor");
  m.def("glu_bwd(Tensor dc, Tensor a, Tensor b, str kind) -> (Tensor, Tensor)");
  m.def("glu_bwd_inplace(Tensor dc, Tensor(a0!) a, Tensor(a1!) b, str kind) -> ()");
  m.def("rope_fwd(Tensor q, Tensor k, Tensor cos, Tensor sin) -> (Tensor, Tensor)");
  m.def("rope_bwd(Tensor dq, Tensor dk, Tensor cos, Tensor sin) -> (Tensor, Tensor)");
}
