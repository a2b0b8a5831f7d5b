// Fused linear cross-entropy: chunked lm-head GEMM (cuBLAS) + the cross-entropy row kernel
// (cross_entropy/ce_internal.h) writing dlogits in place + the two gradient GEMMs and a GEMV
// for the bias gradient. See the public header for the contract.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

#include "common/cuda_utils.cuh"
#include "common/dtype.cuh"
#include "cross_entropy/ce_internal.h"
#include "fused_linear_cross_entropy/tuning.h"
#include "liger_kernels/fused_linear_cross_entropy.h"

namespace liger::kernels::flce {
namespace {

constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;
constexpr int kMaxDevices = 64;

std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// One cuBLAS handle per device, created on first use and kept for the process lifetime (never
// destroyed: destroying at exit can run after the driver has shut down). The mutex is held for a
// whole call, so concurrent callers on one device serialise their (asynchronous) enqueueing.
struct HandleSlot {
  std::mutex mutex;
  cublasHandle_t handle = nullptr;
};
HandleSlot g_slots[kMaxDevices];

const char* cublas_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS error";
  }
}

#define FLCE_CUBLAS(expr)                                                                   \
  do {                                                                                      \
    cublasStatus_t flce_status_ = (expr);                                                   \
    if (flce_status_ != CUBLAS_STATUS_SUCCESS)                                              \
      return fail(LIGER_STATUS_CUBLAS_ERROR, "fused_linear_cross_entropy: %s -> %s", #expr, \
                  ::liger::kernels::flce::cublas_name(flce_status_));                                               \
  } while (0)

cudaDataType_t cuda_type(liger_dtype d) {
  switch (d) {
    case LIGER_DTYPE_FLOAT16: return CUDA_R_16F;
    case LIGER_DTYPE_BFLOAT16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

template <typename T>
__global__ void fill_ones_kernel(T* data, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    data[i] = from_float<T>(1.0f);
}

template <typename T>
__global__ void convert_kernel(const float* in, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = from_float<T>(in[i]);
}

int blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return static_cast<int>(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

struct Layout {
  int64_t chunk = 0, ldl = 0;
  std::size_t scalars = 0, row_loss = 0, row_z = 0, ones = 0, bias_acc = 0, cublas = 0, logits = 0, total = 0;
};

Layout make_layout(int64_t tokens, int64_t vocab, liger_dtype dtype, int64_t chunk_rows) {
  Layout l;
  l.chunk = chunk_rows < tokens ? chunk_rows : tokens;
  if (l.chunk < 1) l.chunk = 1;
  l.ldl = padded_vocab(vocab);
  const std::size_t elem = dtype_size(dtype);
  std::size_t off = 0;
  auto take = [&](std::size_t bytes) {
    std::size_t at = off;
    off += align256(bytes);
    return at;
  };
  l.scalars = take(ce::kScalarCount * sizeof(float));
  l.row_loss = take(static_cast<std::size_t>(tokens) * sizeof(float));
  l.row_z = take(static_cast<std::size_t>(tokens) * sizeof(float));
  l.ones = take(static_cast<std::size_t>(l.chunk) * elem);
  l.bias_acc = take(static_cast<std::size_t>(vocab) * sizeof(float));
  l.cublas = take(kCublasWorkspaceBytes);
  l.logits = take(static_cast<std::size_t>(l.chunk) * static_cast<std::size_t>(l.ldl) * elem);
  l.total = off;
  return l;
}

liger_status resolve(const liger_tunables* given, int64_t tokens, int64_t vocab, liger_dtype dtype, int sm_arch,
                     int64_t* chunk_rows) {
  liger_tunables d = default_tunables(sm_arch, tokens, vocab, static_cast<int64_t>(dtype_size(dtype)));
  int64_t c = given != nullptr && given->chunk_rows != 0 ? given->chunk_rows : d.chunk_rows;
  if (c <= 0) return fail(LIGER_STATUS_INVALID_ARGUMENT, "fused_linear_cross_entropy: chunk_rows %lld must be > 0", static_cast<long long>(c));
  *chunk_rows = c;
  return LIGER_STATUS_SUCCESS;
}

int current_arch_for_sizes() { return current_sm_arch(); }

}  // namespace
}  // namespace liger::kernels::flce

using namespace liger::kernels;

extern "C" {

LIGER_API liger_status liger_fused_linear_cross_entropy_workspace_size(int64_t tokens, int64_t hidden, int64_t vocab,
                                                                       liger_dtype dtype,
                                                                       const liger_cross_entropy_options* options,
                                                                       const liger_tunables* tunables, size_t* bytes) {
  (void)options;
  if (bytes == nullptr) return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_workspace_size: bytes is null");
  if (!is_valid_dtype(dtype)) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "flce_workspace_size: dtype %d", static_cast<int>(dtype));
  if (tokens < 0 || hidden <= 0 || vocab <= 0) return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_workspace_size: bad sizes");
  int64_t chunk = 0;
  LIGER_RETURN_IF_ERROR(flce::resolve(tunables, tokens, vocab, dtype, flce::current_arch_for_sizes(), &chunk));
  *bytes = flce::make_layout(tokens, vocab, dtype, chunk).total;
  return LIGER_STATUS_SUCCESS;
}

LIGER_API liger_status liger_fused_linear_cross_entropy_forward(
    const void* input, int64_t input_row_stride, const void* weight, int64_t weight_row_stride, const void* bias,
    const int64_t* targets, const float* row_grad_scale, float* loss, float* z_loss, void* grad_input,
    int64_t grad_input_row_stride, void* grad_weight, liger_dtype grad_weight_dtype, void* grad_bias,
    liger_dtype grad_bias_dtype, int64_t tokens, int64_t hidden, int64_t vocab, liger_dtype dtype,
    const liger_cross_entropy_options* options, void* workspace, size_t workspace_bytes, const liger_tunables* tunables,
    liger_stream_t stream) {
  if (!is_valid_dtype(dtype)) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "flce_forward: dtype %d", static_cast<int>(dtype));
  if (tokens < 0 || hidden <= 0 || vocab <= 0 || hidden > INT32_MAX || vocab > INT32_MAX)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_forward: bad sizes tokens %lld hidden %lld vocab %lld",
                static_cast<long long>(tokens), static_cast<long long>(hidden), static_cast<long long>(vocab));
  if (input_row_stride < hidden || weight_row_stride < hidden || (grad_input != nullptr && grad_input_row_stride < hidden))
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_forward: row stride smaller than hidden");
  if (input_row_stride > INT32_MAX || weight_row_stride > INT32_MAX || grad_input_row_stride > INT32_MAX)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_forward: row stride too large for cuBLAS");
  if (input == nullptr || weight == nullptr || targets == nullptr || loss == nullptr || workspace == nullptr)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_forward: null pointer (input, weight, targets, loss or workspace)");
  if (grad_bias != nullptr && bias == nullptr)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_forward: grad_bias given without bias");
  if (grad_weight != nullptr && grad_weight_dtype != dtype && grad_weight_dtype != LIGER_DTYPE_FLOAT32)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_forward: grad_weight_dtype must be the input dtype or FLOAT32");
  if (grad_bias != nullptr && grad_bias_dtype != dtype && grad_bias_dtype != LIGER_DTYPE_FLOAT32)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_forward: grad_bias_dtype must be the input dtype or FLOAT32");
  liger_cross_entropy_options o;
  liger_cross_entropy_options_init(&o);
  if (options != nullptr) o = *options;
  LIGER_RETURN_IF_ERROR(ce::validate_options(o));

  DeviceGuard guard(input);
  int device = 0;
  LIGER_RETURN_IF_ERROR(check_cuda(cudaGetDevice(&device), "cudaGetDevice"));
  if (device < 0 || device >= flce::kMaxDevices) return fail(LIGER_STATUS_INTERNAL, "flce_forward: device %d", device);
  int64_t chunk_rows = 0;
  LIGER_RETURN_IF_ERROR(flce::resolve(tunables, tokens, vocab, dtype, current_sm_arch(), &chunk_rows));
  int threads = 0, vector_bytes = 0, loads_in_flight = 1;
  LIGER_RETURN_IF_ERROR(
      ce::resolve_tunables(tunables, flce::kMinChunkRows, vocab, dtype, &threads, &vector_bytes, &loads_in_flight));
  const flce::Layout lay = flce::make_layout(tokens, vocab, dtype, chunk_rows);
  if (workspace_bytes < lay.total)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_forward: workspace %zu bytes < %zu needed", workspace_bytes, lay.total);
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0)
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_forward: workspace must be 256-byte aligned");

  cudaStream_t s = to_cuda(stream);
  auto* ws = static_cast<unsigned char*>(workspace);
  float* scalars = reinterpret_cast<float*>(ws + lay.scalars);
  float* row_loss = reinterpret_cast<float*>(ws + lay.row_loss);
  float* row_z = reinterpret_cast<float*>(ws + lay.row_z);
  void* ones = ws + lay.ones;
  float* bias_acc = reinterpret_cast<float*>(ws + lay.bias_acc);
  void* logits = ws + lay.logits;
  const std::size_t elem = dtype_size(dtype);
  const bool none = o.reduction == LIGER_REDUCTION_NONE;
  const bool want_grad = grad_input != nullptr || grad_weight != nullptr || grad_bias != nullptr;
  float* bias_out32 = grad_bias_dtype == LIGER_DTYPE_FLOAT32 ? static_cast<float*>(grad_bias) : bias_acc;

  if (tokens == 0) {
    if (grad_weight != nullptr)
      LIGER_RETURN_IF_ERROR(check_cuda(
          cudaMemsetAsync(grad_weight, 0, static_cast<std::size_t>(vocab * hidden) * dtype_size(grad_weight_dtype), s),
          "cudaMemsetAsync"));
    if (grad_bias != nullptr)
      LIGER_RETURN_IF_ERROR(check_cuda(
          cudaMemsetAsync(grad_bias, 0, static_cast<std::size_t>(vocab) * dtype_size(grad_bias_dtype), s), "cudaMemsetAsync"));
    if (!none) LIGER_RETURN_IF_ERROR(ce::launch_reduce(row_loss, row_z, 0, loss, z_loss, s));
    return LIGER_STATUS_SUCCESS;
  }

  flce::HandleSlot& slot = flce::g_slots[device];
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (slot.handle == nullptr) FLCE_CUBLAS(cublasCreate(&slot.handle));
  cublasHandle_t h = slot.handle;
  FLCE_CUBLAS(cublasSetStream(h, s));
  FLCE_CUBLAS(cublasSetWorkspace(h, ws + lay.cublas, flce::kCublasWorkspaceBytes));
  FLCE_CUBLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));

  LIGER_RETURN_IF_ERROR(ce::launch_prepass(targets, tokens, vocab, o, scalars, s));
  if (grad_bias != nullptr) {
    dispatch_dtype(dtype, [&](auto zero) {
      using T = decltype(zero);
      flce::fill_ones_kernel<T><<<flce::blocks_for(lay.chunk), 256, 0, s>>>(static_cast<T*>(ones), lay.chunk);
    });
    LIGER_RETURN_IF_ERROR(check_launch("fill_ones_kernel"));
  }

  const cudaDataType_t t_in = flce::cuda_type(dtype);
  const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  const float one = 1.0f, zero = 0.0f;
  const int V = static_cast<int>(vocab), H = static_cast<int>(hidden), ldl = static_cast<int>(lay.ldl);
  const int ldx = static_cast<int>(input_row_stride), ldw = static_cast<int>(weight_row_stride);
  for (int64_t c0 = 0; c0 < tokens; c0 += lay.chunk) {
    const int n = static_cast<int>(tokens - c0 < lay.chunk ? tokens - c0 : lay.chunk);
    const bool first = c0 == 0;
    const void* x_c = static_cast<const unsigned char*>(input) + static_cast<std::size_t>(c0 * input_row_stride) * elem;
    // logits (col-major V x n, ld ldl) = W^T (V x H) * X_c (H x n)
    FLCE_CUBLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, V, n, H, &one, weight, t_in, ldw, x_c, t_in, ldx, &zero, logits,
                             t_in, ldl, compute, CUBLAS_GEMM_DEFAULT));
    ce::RowLaunch rl;
    rl.logits = logits;
    rl.logits_stride = lay.ldl;
    rl.grad = want_grad ? logits : nullptr;
    rl.grad_stride = lay.ldl;
    rl.targets = targets + c0;
    rl.bias = bias;
    rl.row_scale = row_grad_scale != nullptr ? row_grad_scale + c0 : nullptr;
    rl.row_loss = (none ? loss : row_loss) + c0;
    rl.row_z = none ? (z_loss != nullptr ? z_loss + c0 : nullptr) : (z_loss != nullptr ? row_z + c0 : nullptr);
    rl.scalars = scalars;
    rl.rows = n;
    rl.vocab = vocab;
    rl.dtype = dtype;
    rl.options = o;
    rl.threads = threads;
    rl.vector_bytes = vector_bytes;
    rl.loads_in_flight = loads_in_flight;
    LIGER_RETURN_IF_ERROR(ce::launch_rows(rl, s));
    if (!want_grad) continue;
    if (grad_input != nullptr) {
      void* gx_c = static_cast<unsigned char*>(grad_input) + static_cast<std::size_t>(c0 * grad_input_row_stride) * elem;
      // dX_c (col-major H x n) = W (H x V) * dL (V x n)
      FLCE_CUBLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, H, n, V, &one, weight, t_in, ldw, logits, t_in, ldl, &zero, gx_c,
                               t_in, static_cast<int>(grad_input_row_stride), compute, CUBLAS_GEMM_DEFAULT));
    }
    if (grad_weight != nullptr) {
      // dW (col-major H x V, ld H) (+)= X_c (H x n) * dL^T (n x V)
      FLCE_CUBLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, H, V, n, &one, x_c, t_in, ldx, logits, t_in, ldl,
                               first ? &zero : &one, grad_weight, flce::cuda_type(grad_weight_dtype), H, compute,
                               CUBLAS_GEMM_DEFAULT));
    }
    if (grad_bias != nullptr) {
      // dbias (V x 1, fp32) (+)= dL (V x n) * ones (n x 1)
      FLCE_CUBLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, V, 1, n, &one, logits, t_in, ldl, ones, t_in, n,
                               first ? &zero : &one, bias_out32, CUDA_R_32F, V, compute, CUBLAS_GEMM_DEFAULT));
    }
  }
  if (grad_bias != nullptr && bias_out32 != grad_bias) {
    dispatch_dtype(grad_bias_dtype, [&](auto zero_value) {
      using T = decltype(zero_value);
      flce::convert_kernel<T><<<flce::blocks_for(vocab), 256, 0, s>>>(bias_acc, static_cast<T*>(grad_bias), vocab);
    });
    LIGER_RETURN_IF_ERROR(check_launch("convert_kernel"));
  }
  if (!none) LIGER_RETURN_IF_ERROR(ce::launch_reduce(row_loss, row_z, tokens, loss, z_loss, s));
  return LIGER_STATUS_SUCCESS;
}

LIGER_API liger_status liger_fused_linear_cross_entropy_backward(const float* grad_output, void* grad_input,
                                                                 int64_t grad_input_row_stride, int64_t tokens,
                                                                 int64_t hidden, void* grad_weight,
                                                                 liger_dtype grad_weight_dtype, int64_t vocab,
                                                                 void* grad_bias, liger_dtype grad_bias_dtype,
                                                                 liger_dtype dtype, liger_stream_t stream) {
  if (!is_valid_dtype(dtype) || (grad_weight != nullptr && !is_valid_dtype(grad_weight_dtype)) ||
      (grad_bias != nullptr && !is_valid_dtype(grad_bias_dtype)))
    return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "flce_backward: bad dtype");
  if (grad_output == nullptr) return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_backward: grad_output is null");
  if (tokens < 0 || hidden <= 0 || vocab <= 0 || (grad_input != nullptr && grad_input_row_stride < hidden))
    return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_backward: bad sizes or stride");
  DeviceGuard guard(grad_output);
  cudaStream_t s = to_cuda(stream);
  if (grad_input != nullptr)
    LIGER_RETURN_IF_ERROR(ce::launch_scale(grad_input, grad_input_row_stride, tokens, hidden, dtype, grad_output, false, 256,
                                           16, s));
  if (grad_weight != nullptr)
    LIGER_RETURN_IF_ERROR(ce::launch_scale(grad_weight, hidden, vocab, hidden, grad_weight_dtype, grad_output, false, 256,
                                           16, s));
  if (grad_bias != nullptr)
    LIGER_RETURN_IF_ERROR(
        ce::launch_scale(grad_bias, vocab, 1, vocab, grad_bias_dtype, grad_output, false, 1024, 16, s));
  return LIGER_STATUS_SUCCESS;
}

LIGER_API liger_status liger_fused_linear_cross_entropy_default_tunables(int sm_arch, int64_t rows, int64_t cols,
                                                                         liger_dtype dtype, liger_tunables* out) {
  if (out == nullptr) return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_default_tunables: out is null");
  if (!is_valid_dtype(dtype)) return fail(LIGER_STATUS_UNSUPPORTED_DTYPE, "flce_default_tunables: dtype");
  if (cols <= 0) return fail(LIGER_STATUS_INVALID_ARGUMENT, "flce_default_tunables: cols must be > 0");
  *out = flce::default_tunables(sm_arch, rows, cols, static_cast<int64_t>(dtype_size(dtype)));
  return LIGER_STATUS_SUCCESS;
}

}  // extern "C"
