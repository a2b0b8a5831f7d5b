// RMSNorm benchmark entries: forward, backward (dx into its own buffer, dweight through the
// caller-provided workspace) and full (forward then backward), bf16 activations with bf16
// weights (and fp32 weights at the headline shape), at Llama hidden sizes.
#include <string>

#include "harness.h"
#include "liger_kernels/rms_norm.h"

namespace {

using liger::bench::BenchCase;
using liger::bench::BenchContext;
using liger::bench::RunFn;

BenchCase make_case(const char* mode, int64_t rows, int64_t cols, liger_dtype dtype, liger_dtype wdtype) {
  const double n = static_cast<double>(rows) * static_cast<double>(cols);
  const double e = static_cast<double>(liger::bench::dtype_bytes(dtype));
  const double we = static_cast<double>(liger::bench::dtype_bytes(wdtype));
  BenchCase c;
  c.op = "rms_norm";
  c.mode = mode;
  c.shape = std::to_string(rows) + "x" + std::to_string(cols) + (wdtype != dtype ? "_w32" : "");
  c.dtype = dtype;
  const std::string m = mode;
  // forward: read x, w; write y, rstd. backward: read dy, x, w, rstd; write dx, dw.
  const double fwd = 2 * n * e + cols * we + rows * 4.0;
  const double bwd = 3 * n * e + 2 * cols * we + rows * 4.0;
  c.min_bytes = m == "forward" ? fwd : m == "backward" ? bwd : fwd + bwd;
  size_t ws = 0;
  liger_rms_norm_backward_workspace_size(-1, rows, cols, dtype, nullptr, &ws);
  c.note = "llama casting; dx separate; workspace (caller-provided, fp32 partials) " + std::to_string(ws >> 10) + " KiB";
  c.setup = [=](BenchContext& ctx) -> RunFn {
    const std::size_t count = static_cast<std::size_t>(rows * cols);
    const std::size_t bytes = count * liger::bench::dtype_bytes(dtype);
    void* x = ctx.random(count, dtype);
    void* w = ctx.random(static_cast<std::size_t>(cols), wdtype, 0.5, 1.5);
    void* y = m == "backward" ? nullptr : ctx.alloc(bytes);
    float* rstd = static_cast<float*>(m == "backward" ? ctx.random(static_cast<std::size_t>(rows), LIGER_DTYPE_FLOAT32, 0.5, 1.5)
                                                      : ctx.alloc(static_cast<std::size_t>(rows) * 4));
    void* dy = m == "forward" ? nullptr : ctx.random(count, dtype);
    void* dx = m == "forward" ? nullptr : ctx.alloc(bytes);
    void* dw = m == "forward" ? nullptr : ctx.alloc(static_cast<std::size_t>(cols) * liger::bench::dtype_bytes(wdtype));
    const liger_tunables* t = ctx.tunables();
    size_t ws_bytes = 0;
    liger_rms_norm_backward_workspace_size(-1, rows, cols, dtype, t, &ws_bytes);
    void* ws = m == "forward" ? nullptr : ctx.alloc(ws_bytes > 0 ? ws_bytes : 16);
    const liger_rms_norm_options options{1e-6f, 0.f, LIGER_RMS_NORM_CASTING_LLAMA, 0};
    return [=](cudaStream_t s) {
      auto stream = reinterpret_cast<liger_stream_t>(s);
      liger_status status = LIGER_STATUS_SUCCESS;
      if (m != "backward")
        status = liger_rms_norm_forward(x, cols, w, wdtype, y, cols, rstd, rows, cols, dtype, &options, t, stream);
      if (status == LIGER_STATUS_SUCCESS && m != "forward")
        status = liger_rms_norm_backward(dy, cols, x, cols, w, wdtype, rstd, dx, cols, dw, ws, ws_bytes, rows, cols,
                                         dtype, &options, t, stream);
      return status;
    };
  };
  return c;
}

}  // namespace

LIGER_BENCH_REGISTER(rms_norm) {
  for (const char* mode : {"forward", "backward", "full"}) {
    cases.push_back(make_case(mode, 16384, 4096, LIGER_DTYPE_BFLOAT16, LIGER_DTYPE_BFLOAT16));
    cases.push_back(make_case(mode, 16384, 4096, LIGER_DTYPE_BFLOAT16, LIGER_DTYPE_FLOAT32));
    cases.push_back(make_case(mode, 16384, 1024, LIGER_DTYPE_BFLOAT16, LIGER_DTYPE_BFLOAT16));
    cases.push_back(make_case(mode, 8192, 8192, LIGER_DTYPE_BFLOAT16, LIGER_DTYPE_BFLOAT16));
    cases.push_back(make_case(mode, 4096, 16384, LIGER_DTYPE_BFLOAT16, LIGER_DTYPE_BFLOAT16));
    // Rows wider than one register chunk (the chunked path): the compile registry's widest class.
    cases.push_back(make_case(mode, 4096, 32768, LIGER_DTYPE_BFLOAT16, LIGER_DTYPE_BFLOAT16));
    cases.push_back(make_case(mode, 16384, 4096, LIGER_DTYPE_FLOAT32, LIGER_DTYPE_FLOAT32));
  }
}
