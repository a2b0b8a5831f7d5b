// Benchmark cases shared by the gated element-wise ops (SwiGLU, GeGLU): same ABI shape, same
// shapes (the MLP of Llama-3-8B, 14336 intermediate, and smaller), same traffic model.
#pragma once

#include <string>
#include <vector>

#include "harness.h"

namespace liger::bench {

using GluForwardFn = liger_status (*)(const void*, int64_t, const void*, int64_t, void*, int64_t, int64_t, int64_t,
                                      liger_dtype, const liger_tunables*, liger_stream_t);
using GluBackwardFn = liger_status (*)(const void*, int64_t, const void*, int64_t, const void*, int64_t, void*,
                                       int64_t, void*, int64_t, int64_t, int64_t, int32_t, liger_dtype,
                                       const liger_tunables*, liger_stream_t);

// fused: a and b are the two halves of one [rows, 2*cols] gate_up tensor.
inline BenchCase make_glu_case(const char* op, GluForwardFn forward, GluBackwardFn backward, const char* mode,
                               int64_t rows, int64_t cols, liger_dtype dtype, bool fused) {
  const double n = static_cast<double>(rows) * static_cast<double>(cols);
  const double e = static_cast<double>(dtype_bytes(dtype));
  BenchCase c;
  c.op = op;
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
      b = a ? static_cast<uint8_t*>(a) + cols * dtype_bytes(dtype) : nullptr;
      stride = 2 * cols;
    } else {
      a = ctx.random(count, dtype);
      b = ctx.random(count, dtype);
    }
    void* out = m == "backward" ? nullptr : ctx.alloc(count * dtype_bytes(dtype));
    void* dc = m == "forward" ? nullptr : ctx.random(count, dtype);
    const liger_tunables* t = ctx.tunables();
    return [=](cudaStream_t s) {
      auto stream = reinterpret_cast<liger_stream_t>(s);
      liger_status status = LIGER_STATUS_SUCCESS;
      if (m != "backward") status = forward(a, stride, b, stride, out, cols, rows, cols, dtype, t, stream);
      if (status == LIGER_STATUS_SUCCESS && m != "forward")
        status = backward(dc, cols, a, stride, b, stride, nullptr, 0, nullptr, 0, rows, cols, 1, dtype, t, stream);
      return status;
    };
  };
  return c;
}

inline void add_glu_cases(std::vector<BenchCase>& cases, const char* op, GluForwardFn forward, GluBackwardFn backward) {
  for (const char* mode : {"forward", "backward", "full"}) {
    cases.push_back(make_glu_case(op, forward, backward, mode, 16384, 14336, LIGER_DTYPE_BFLOAT16, false));
    cases.push_back(make_glu_case(op, forward, backward, mode, 4096, 14336, LIGER_DTYPE_BFLOAT16, false));
    cases.push_back(make_glu_case(op, forward, backward, mode, 4096, 4096, LIGER_DTYPE_BFLOAT16, false));
    cases.push_back(make_glu_case(op, forward, backward, mode, 4096, 4096, LIGER_DTYPE_FLOAT32, false));
    cases.push_back(make_glu_case(op, forward, backward, mode, 4096, 4096, LIGER_DTYPE_FLOAT16, false));
  }
  cases.push_back(make_glu_case(op, forward, backward, "full", 16384, 14336, LIGER_DTYPE_BFLOAT16, true));
  cases.push_back(make_glu_case(op, forward, backward, "forward", 16384, 14336, LIGER_DTYPE_BFLOAT16, true));
}

}  // namespace liger::bench
