// RoPE benchmark entries: q [B, Hq, T, D] and k [B, Hk, T, D] rotated in place in one launch, as
// Liger does, with HF's layout ([B, H, T, D] views of [B, T, H, D] storage) and contiguous
// [B, H, T, D]; cos/sin [1, T, D] (batch broadcast).
#include <array>
#include <string>

#include "harness.h"
#include "liger_kernels/rope.h"

namespace {

using liger::bench::BenchCase;
using liger::bench::BenchContext;
using liger::bench::RunFn;

BenchCase make_case(const char* mode, int64_t B, int64_t Hq, int64_t Hk, int64_t T, int64_t D, liger_dtype dtype,
                    bool hf_layout) {
  const double e = static_cast<double>(liger::bench::dtype_bytes(dtype));
  const double qk = static_cast<double>(B * (Hq + Hk) * T * D) * e;
  const double tables = 2.0 * static_cast<double>(T * D / 2) * e;  // first halves of cos and sin
  const std::string m = mode;
  BenchCase c;
  c.op = "rope";
  c.mode = mode;
  c.shape = "q" + std::to_string(B) + "x" + std::to_string(Hq) + "x" + std::to_string(T) + "x" + std::to_string(D) +
            "_k" + std::to_string(Hk) + (hf_layout ? "_hf" : "_bhtd");
  c.dtype = dtype;
  c.min_bytes = (m == "full" ? 2 : 1) * (2 * qk + tables);
  c.note = hf_layout ? "in place; q/k storage [B,T,H,D] (HF transpose view)" : "in place; q/k contiguous [B,H,T,D]";
  c.setup = [=](BenchContext& ctx) -> RunFn {
    void* q = ctx.random(static_cast<std::size_t>(B * Hq * T * D), dtype);
    void* k = ctx.random(static_cast<std::size_t>(B * Hk * T * D), dtype);
    void* cos = ctx.random(static_cast<std::size_t>(T * D), dtype, -1.0, 1.0);
    void* sin = ctx.random(static_cast<std::size_t>(T * D), dtype, -1.0, 1.0);
    const liger_tunables* t = ctx.tunables();
    auto strides = [=](int64_t H) {
      return hf_layout ? std::array<int64_t, 3>{T * H * D, D, H * D} : std::array<int64_t, 3>{H * T * D, T * D, D};
    };
    const auto qs = strides(Hq), ks = strides(Hk);
    return [=](cudaStream_t s) {
      auto stream = reinterpret_cast<liger_stream_t>(s);
      liger_status status = LIGER_STATUS_SUCCESS;
      if (m != "backward")
        status = liger_rope_forward(q, qs.data(), nullptr, nullptr, Hq, k, ks.data(), nullptr, nullptr, Hk, cos, sin,
                                    1, T * D, D, B, T, D, dtype, t, stream);
      if (status == LIGER_STATUS_SUCCESS && m != "forward")
        status = liger_rope_backward(q, qs.data(), nullptr, nullptr, Hq, k, ks.data(), nullptr, nullptr, Hk, cos, sin,
                                     1, T * D, D, B, T, D, dtype, t, stream);
      return status;
    };
  };
  return c;
}

}  // namespace

LIGER_BENCH_REGISTER(rope) {
  for (const char* mode : {"forward", "backward", "full"}) {
    cases.push_back(make_case(mode, 4, 32, 8, 4096, 128, LIGER_DTYPE_BFLOAT16, true));
    cases.push_back(make_case(mode, 4, 32, 8, 4096, 128, LIGER_DTYPE_BFLOAT16, false));
    cases.push_back(make_case(mode, 4, 32, 8, 4096, 128, LIGER_DTYPE_FLOAT32, true));
    cases.push_back(make_case(mode, 1, 32, 8, 2048, 128, LIGER_DTYPE_BFLOAT16, true));
  }
}
