// Shared plumbing of the PyTorch dispatcher registrations (libliger_torch_ops.so): argument checks
// with the Python bindings' messages and exception types, the dtype mapping, PyTorch's current
// stream, the status -> exception translation and the process-wide tunables that
// liger_kernels.set_tunables() pushes here.
//
// Why C++: a torch.library op implemented in Python costs tens of microseconds of host time per
// call inside a compiled graph (and through the dispatcher in eager mode); these kernels are a few
// microseconds of argument handling, so the norms, GLUs and RoPE stop being host-bound.
#pragma once

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "liger_kernels/common.h"

namespace liger_torch {

// Error messages are assembled here, not by c10::str: with torch 2.11 a message that streamed an
// integer (or t.sizes()) through c10::str crashed the process inside the throw, while plain strings
// did not, so every piece becomes text first.
inline void append_text(std::string& out, const char* text) { out += text; }
inline void append_text(std::string& out, const std::string& text) { out += text; }
inline void append_text(std::string& out, const c10::Device& device) { out += device.str(); }
inline void append_text(std::string& out, at::ScalarType type) { out += c10::toString(type); }
template <typename Integer, typename = std::enable_if_t<std::is_integral_v<Integer>>>
inline void append_text(std::string& out, Integer value) {
  out += std::to_string(value);
}
template <typename... Parts>
std::string message(const Parts&... parts) {
  std::string out;
  (append_text(out, parts), ...);
  return out;
}

// liger_dtype of a tensor; TypeError (as in Python) for dtypes the library does not support.
liger_dtype dtype_of(const at::Tensor& t, const char* op, const char* what = "input");

// ValueError unless `t` is a CUDA tensor on `device` (the first tensor's device when unset).
void check_cuda(const char* op, const char* name, const at::Tensor& t, std::optional<c10::Device>& device);

// TypeError unless `t` has `ref`'s dtype.
void check_same_dtype(const char* op, const char* name, const at::Tensor& t, const at::Tensor& ref);

// A weight may be the input's dtype or float32; returns its liger_dtype.
liger_dtype weight_dtype(const char* op, const at::Tensor& weight, const at::Tensor& x);

// PyTorch's current stream of the tensors' device, as the C ABI's stream type.
inline liger_stream_t stream_of(const c10::Device& device) {
  return reinterpret_cast<liger_stream_t>(c10::cuda::getCurrentCUDAStream(device.index()).stream());
}

// Throws "<function> failed with LIGER_STATUS_<NAME>: <detail>" for a non-success status: the
// Python side turns that text back into LigerKernelError.
void check_status(liger_status status, const char* function);

// The tunables set for `op` from Python (nullptr: the library's tuned defaults). The pointer stays
// valid until the next set for that op; reads are lock-free while nothing was ever set.
const liger_tunables* tunables_for(const char* op, liger_tunables& scratch);

// A shape as Python prints it, "(4, 8)": the bindings' messages quote tuple(t.shape).
std::string shape_str(const at::Tensor& t);

// Rows and columns of a tensor seen as [rows, last dim].
inline std::pair<int64_t, int64_t> rows_cols(const at::Tensor& x) {
  const int64_t cols = x.dim() ? x.size(-1) : 1;
  return {cols ? x.numel() / cols : 0, cols};
}

// Version counters of tensors written in place (what the dispatcher's ADInplaceOrView kernels do
// for ATen's in-place ops; custom ops have none), so autograd still detects later misuse.
void mark_written(const at::Tensor& t);

}  // namespace liger_torch
