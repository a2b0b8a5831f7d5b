// LayerNorm benchmark entries: forward (y, mean, rstd), backward (dx separate, dweight and dbias
// through the caller-provided workspace), full; bf16 with bias.
#include <string>

#include "harness.h"
#include "liger_kernels/layer_norm.h"

namespace {

using liger::bench::BenchCase;
using liger::bench::BenchContext;
using liger::bench::RunFn;

BenchCase make_case(const char* mode, int64_t rows, int64_t cols, liger_dtype dtype) {
  const double n = static_cast<double>(rows) * static_cast<double>(cols);
  const double e = static_cast<double>(liger::bench::dtype_bytes(dtype));
  BenchCase c;
  c.op = "layer_norm";
  c.mode = mode;
  c.shape = std::to_string(rows) + "x" + std::to_string(cols);
  c.dtype = dtype;
  const std::string m = mode;
  // forward: read x, w, b; write y, mean, rstd. backward: read dy, x, w, mean, rstd; write dx, dw, db.
  const double fwd = 2 * n * e + 2 * cols * e + rows * 8.0;
  const double bwd = 3 * n * e + 3 * cols * e + rows * 8.0;
  c.min_bytes = m == "forward" ? fwd : m == "backward" ? bwd : fwd + bwd;
  c.note = "with bias; dx separate";
  c.setup = [=](BenchContext& ctx) -> RunFn {
    const std::size_t count = static_cast<std::size_t>(rows * cols);
    const std::size_t bytes = count * liger::bench::dtype_bytes(dtype);
    const std::size_t wbytes = static_cast<std::size_t>(cols) * liger::bench::dtype_bytes(dtype);
    void* x = ctx.random(count, dtype);
    void* w = ctx.random(static_cast<std::size_t>(cols), dtype, 0.5, 1.5);
    void* b = ctx.random(static_cast<std::size_t>(cols), dtype);
    void* y = m == "backward" ? nullptr : ctx.alloc(bytes);
    const bool bwd_only = m == "backward";
    float* mean = static_cast<float*>(bwd_only ? ctx.random(static_cast<std::size_t>(rows), LIGER_DTYPE_FLOAT32, -0.1, 0.1)
                                               : ctx.alloc(static_cast<std::size_t>(rows) * 4));
    float* rstd = static_cast<float*>(bwd_only ? ctx.random(static_cast<std::size_t>(rows), LIGER_DTYPE_FLOAT32, 0.5, 1.5)
                                               : ctx.alloc(static_cast<std::size_t>(rows) * 4));
    void* dy = m == "forward" ? nullptr : ctx.random(count, dtype);
    void* dx = m == "forward" ? nullptr : ctx.alloc(bytes);
    void* dw = m == "forward" ? nullptr : ctx.alloc(wbytes);
    void* db = m == "forward" ? nullptr : ctx.alloc(wbytes);
    const liger_tunables* t = ctx.tunables();
    size_t ws_bytes = 0;
    liger_layer_norm_backward_workspace_size(-1, rows, cols, dtype, 1, t, &ws_bytes);
    void* ws = m == "forward" ? nullptr : ctx.alloc(ws_bytes > 0 ? ws_bytes : 16);
    const liger_layer_norm_options options{1e-5f, {0, 0, 0}};
    return [=](cudaStream_t st) {
      auto stream = reinterpret_cast<liger_stream_t>(st);
      liger_status status = LIGER_STATUS_SUCCESS;
      if (m != "backward")
        status = liger_layer_norm_forward(x, cols, w, b, dtype, y, cols, mean, rstd, rows, cols, dtype, &options, t,
                                          stream);
      if (status == LIGER_STATUS_SUCCESS && m != "forward")
        status = liger_layer_norm_backward(dy, cols, x, cols, w, dtype, mean, rstd, dx, cols, dw, db, ws, ws_bytes,
                                           rows, cols, dtype, t, stream);
      return status;
    };
  };
  return c;
}

}  // namespace

LIGER_BENCH_REGISTER(layer_norm) {
  for (const char* mode : {"forward", "backward", "full"}) {
    cases.push_back(make_case(mode, 16384, 4096, LIGER_DTYPE_BFLOAT16));
    cases.push_back(make_case(mode, 8192, 8192, LIGER_DTYPE_BFLOAT16));
    cases.push_back(make_case(mode, 4096, 16384, LIGER_DTYPE_BFLOAT16));
    // Rows wider than one register chunk (the chunked path): the compile registry's widest class.
    cases.push_back(make_case(mode, 4096, 32768, LIGER_DTYPE_BFLOAT16));
  }
}
