// SwiGLU benchmark entries: forward, backward (in place, as Liger does), and full (forward then
// in-place backward), at the MLP shapes of Llama-3-8B (14336 intermediate) and smaller.
#include "harness.h"
#include "liger_kernels/swiglu.h"

namespace {

using liger::bench::BenchCase;
using liger::bench::BenchContext;
using liger::bench::RunFn;

// fused: a and b are the two halves of one [rows, 2*cols] gate_up tensor.
BenchCase make_case(const char* mode, int64_t rows, int64_t cols, liger_dtype dtype, bool fused) {
  const double n = static_cast<double>(rows) * static_cast<double>(cols);
  const double e = static_cast<double>(liger::bench::dtype_bytes(dtype));
  BenchCase c;
  c.op = "swiglu";
  c.mode = mode;
  c.shape = std::to_string(rows) + "x" + std::to_string(cols) + (fused ? "_fused" : "");
  c.dtype = dtype;
  const std::string m = mode;
  // forward: read a, b, write c; backward: read dc, a, b, write da, db; full: both.
  c.min_bytes = (m == "forward" ? 3 : m == "backward" ? 5 : 8) * n * e;
  c.note = fused ? "a, b halves of one gate_up tensor (row stride 2*cols); backward in place"
                 : "backward in place (da -> a, db -> b)";
  c.setup = [=](BenchContext& ctx) -> RunFn {
    const std::size_t count = static_cast<std::size_t>(rows * cols);
    void* a = nullptr;
    void* b = nullptr;
    int64_t stride = cols;
    if (fused) {
      a = ctx.random(2 * count, dtype);
      b = a ? static_cast<uint8_t*>(a) + cols * liger::bench::dtype_bytes(dtype) : nullptr;
      stride = 2 * cols;
    } else {
      a = ctx.random(count, dtype);
      b = ctx.random(count, dtype);
    }
    void* out = m == "backward" ? nullptr : ctx.alloc(count * liger::bench::dtype_bytes(dtype));
    void* dc = m == "forward" ? nullptr : ctx.random(count, dtype);
    const liger_tunables* t = ctx.tunables();
    return [=](cudaStream_t s) {
      auto stream = reinterpret_cast<liger_stream_t>(s);
      liger_status status = LIGER_STATUS_SUCCESS;
      if (m != "backward")
        status = liger_swiglu_forward(a, stride, b, stride, out, cols, rows, cols, dtype, t, stream);
      if (status == LIGER_STATUS_SUCCESS && m != "forward")
        status = liger_swiglu_backward(dc, cols, a, stride, b, stride, nullptr, 0, nullptr, 0, rows, cols, 1, dtype,
                                       t, stream);
      return status;
    };
  };
  return c;
}

}  // namespace

LIGER_BENCH_REGISTER(swiglu) {
  for (const char* mode : {"forward", "backward", "full"}) {
    cases.push_back(make_case(mode, 16384, 14336, LIGER_DTYPE_BFLOAT16, false));
    cases.push_back(make_case(mode, 4096, 14336, LIGER_DTYPE_BFLOAT16, false));
    cases.push_back(make_case(mode, 4096, 4096, LIGER_DTYPE_BFLOAT16, false));
    cases.push_back(make_case(mode, 4096, 4096, LIGER_DTYPE_FLOAT32, false));
    cases.push_back(make_case(mode, 4096, 4096, LIGER_DTYPE_FLOAT16, false));
  }
  cases.push_back(make_case("full", 16384, 14336, LIGER_DTYPE_BFLOAT16, true));
  cases.push_back(make_case("forward", 16384, 14336, LIGER_DTYPE_BFLOAT16, true));
}
