// FusedAddRMSNorm benchmark entries: forward (s = x + residual written, y, rstd), backward (with
// the residual-output gradient), full; bf16.
#include <string>

#include "harness.h"
#include "liger_kernels/fused_add_rms_norm.h"

namespace {

using liger::bench::BenchCase;
using liger::bench::BenchContext;
using liger::bench::RunFn;

BenchCase make_case(const char* mode, int64_t rows, int64_t cols, liger_dtype dtype) {
  const double n = static_cast<double>(rows) * static_cast<double>(cols);
  const double e = static_cast<double>(liger::bench::dtype_bytes(dtype));
  BenchCase c;
  c.op = "fused_add_rms_norm";
  c.mode = mode;
  c.shape = std::to_string(rows) + "x" + std::to_string(cols);
  c.dtype = dtype;
  const std::string m = mode;
  // forward: read x, residual, w; write y, s, rstd. backward: read dy, ds_out, s, w, rstd; write dx, dw.
  const double fwd = 4 * n * e + cols * e + rows * 4.0;
  const double bwd = 4 * n * e + 2 * cols * e + rows * 4.0;
  c.min_bytes = m == "forward" ? fwd : m == "backward" ? bwd : fwd + bwd;
  c.note = "llama casting; ds_out given; dx separate";
  c.setup = [=](BenchContext& ctx) -> RunFn {
    const std::size_t count = static_cast<std::size_t>(rows * cols);
    const std::size_t bytes = count * liger::bench::dtype_bytes(dtype);
    void* x = ctx.random(count, dtype);
    void* r = ctx.random(count, dtype);
    void* w = ctx.random(static_cast<std::size_t>(cols), dtype, 0.5, 1.5);
    void* y = m == "backward" ? nullptr : ctx.alloc(bytes);
    void* s_out = m == "backward" ? ctx.random(count, dtype) : ctx.alloc(bytes);
    float* rstd = static_cast<float*>(m == "backward" ? ctx.random(static_cast<std::size_t>(rows), LIGER_DTYPE_FLOAT32, 0.5, 1.5)
                                                      : ctx.alloc(static_cast<std::size_t>(rows) * 4));
    void* dy = m == "forward" ? nullptr : ctx.random(count, dtype);
    void* ds = m == "forward" ? nullptr : ctx.random(count, dtype);
    void* dx = m == "forward" ? nullptr : ctx.alloc(bytes);
    void* dw = m == "forward" ? nullptr : ctx.alloc(static_cast<std::size_t>(cols) * liger::bench::dtype_bytes(dtype));
    const liger_tunables* t = ctx.tunables();
    size_t ws_bytes = 0;
    liger_fused_add_rms_norm_backward_workspace_size(-1, rows, cols, dtype, t, &ws_bytes);
    void* ws = m == "forward" ? nullptr : ctx.alloc(ws_bytes > 0 ? ws_bytes : 16);
    const liger_rms_norm_options options{1e-6f, 0.f, LIGER_RMS_NORM_CASTING_LLAMA, 0};
    return [=](cudaStream_t st) {
      auto stream = reinterpret_cast<liger_stream_t>(st);
      liger_status status = LIGER_STATUS_SUCCESS;
      if (m != "backward")
        status = liger_fused_add_rms_norm_forward(x, cols, r, cols, w, dtype, y, cols, s_out, cols, rstd, rows, cols,
                                                  dtype, &options, t, stream);
      if (status == LIGER_STATUS_SUCCESS && m != "forward")
        status = liger_fused_add_rms_norm_backward(dy, cols, ds, cols, s_out, cols, w, dtype, rstd, dx, cols, dw, ws,
                                                   ws_bytes, rows, cols, dtype, &options, t, stream);
      return status;
    };
  };
  return c;
}

}  // namespace

LIGER_BENCH_REGISTER(fused_add_rms_norm) {
  for (const char* mode : {"forward", "backward", "full"}) {
    cases.push_back(make_case(mode, 16384, 4096, LIGER_DTYPE_BFLOAT16));
    cases.push_back(make_case(mode, 8192, 8192, LIGER_DTYPE_BFLOAT16));
  }
}
