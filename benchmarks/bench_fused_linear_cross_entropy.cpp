// Fused linear cross-entropy benchmark entries at the bar shape (bf16, tokens 8192,
// hidden 4096, vocab 128256). "full" = the forward that computes loss and all gradients
// (grad_input, grad_weight in bf16) + the backward scale with grad_output = 1, as Liger does.
// flops = the three GEMMs, 3 x 2 x T x H x V. The workspace (one logits chunk + 32 MiB cuBLAS
// workspace + per-row scratch) is the op's transient memory and is declared.
#include <random>
#include <string>
#include <vector>

#include "harness.h"
#include "liger_kernels/fused_linear_cross_entropy.h"

namespace {

using liger::bench::BenchCase;
using liger::bench::BenchContext;
using liger::bench::RunFn;

BenchCase flce_case(const std::string& mode, int64_t tokens, int64_t hidden, int64_t vocab, liger_dtype dtype,
                    liger_dtype gw_dtype, const liger_tunables* declared_tunables) {
  BenchCase c;
  c.op = "fused_linear_cross_entropy";
  c.mode = mode;
  c.shape = std::to_string(tokens) + "x" + std::to_string(hidden) + "x" + std::to_string(vocab) +
            (gw_dtype == LIGER_DTYPE_FLOAT32 ? "_gwfp32" : "");
  c.dtype = dtype;
  const double e = liger::bench::dtype_bytes(dtype);
  const double T = static_cast<double>(tokens), H = static_cast<double>(hidden), V = static_cast<double>(vocab);
  const bool grads = mode != "forward";
  c.flops = (grads ? 3.0 : 1.0) * 2.0 * T * H * V;
  c.min_bytes = (T * H + V * H) * e + (grads ? T * H * e + V * H * liger::bench::dtype_bytes(gw_dtype) : 0.0);
  size_t ws = 0;
  liger_fused_linear_cross_entropy_workspace_size(tokens, hidden, vocab, dtype, nullptr, declared_tunables, &ws);
  c.declared_workspace_bytes = ws;
  c.note = std::string(grads ? "loss + grad_input + grad_weight" : "loss only") + ", workspace " +
           std::to_string(ws >> 20) + " MiB at default chunk_rows (a --tunable chunk_rows changes it)";
  c.setup = [=](BenchContext& ctx) -> RunFn {
    void* x = ctx.random(static_cast<std::size_t>(tokens * hidden), dtype, -1.0, 1.0);
    void* w = ctx.random(static_cast<std::size_t>(vocab * hidden), dtype, -0.03, 0.03);
    std::mt19937_64 gen(ctx.seed());
    std::uniform_int_distribution<int64_t> d(0, vocab - 1);
    std::vector<int64_t> targets(static_cast<std::size_t>(tokens));
    for (auto& t : targets) t = d(gen);
    auto* y = static_cast<const int64_t*>(ctx.upload(targets.data(), targets.size() * sizeof(int64_t)));
    float* loss = static_cast<float*>(ctx.alloc(sizeof(float)));
    const float one = 1.0f;
    float* go = static_cast<float*>(ctx.upload(&one, sizeof(float)));
    void* gx = grads ? ctx.alloc(static_cast<std::size_t>(tokens * hidden) * static_cast<std::size_t>(e)) : nullptr;
    void* gw = grads ? ctx.alloc(static_cast<std::size_t>(vocab * hidden) * liger::bench::dtype_bytes(gw_dtype)) : nullptr;
    const liger_tunables* t = ctx.tunables();
    size_t ws_run = 0;
    liger_fused_linear_cross_entropy_workspace_size(tokens, hidden, vocab, dtype, nullptr, t, &ws_run);
    void* workspace = ctx.alloc(ws_run);
    return [=](cudaStream_t s) -> liger_status {
      auto stream = reinterpret_cast<liger_stream_t>(s);
      liger_status st = liger_fused_linear_cross_entropy_forward(
          x, hidden, w, hidden, nullptr, y, nullptr, loss, nullptr, gx, hidden, gw, gw_dtype, nullptr,
          LIGER_DTYPE_FLOAT32, tokens, hidden, vocab, dtype, nullptr, workspace, ws_run, t, stream);
      if (st != LIGER_STATUS_SUCCESS || !grads) return st;
      return liger_fused_linear_cross_entropy_backward(go, gx, hidden, tokens, hidden, gw, gw_dtype, vocab, nullptr,
                                                       LIGER_DTYPE_FLOAT32, dtype, stream);
    };
  };
  return c;
}

}  // namespace

LIGER_BENCH_REGISTER(fused_linear_cross_entropy) {
  cases.push_back(flce_case("full", 8192, 4096, 128256, LIGER_DTYPE_BFLOAT16, LIGER_DTYPE_BFLOAT16, nullptr));
  cases.push_back(flce_case("full", 8192, 4096, 128256, LIGER_DTYPE_BFLOAT16, LIGER_DTYPE_FLOAT32, nullptr));
  cases.push_back(flce_case("forward", 8192, 4096, 128256, LIGER_DTYPE_BFLOAT16, LIGER_DTYPE_BFLOAT16, nullptr));
}
