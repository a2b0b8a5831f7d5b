// Cross-entropy benchmark entries at the bar shape (bf16, 8192 x 128256) and a smaller
// vocab. "full" = forward (loss + gradient written in place, Liger's memory trick) + backward
// with grad_output = 1 (the backward kernel reads the factor on the device and leaves the rows
// untouched when it is exactly 1 — the same work Liger's host-side skip saves); "backward" scales
// by 0.5 so it really rewrites the gradient.
#include <random>
#include <string>
#include <vector>

#include "harness.h"
#include "liger_kernels/cross_entropy.h"

namespace {

using liger::bench::BenchCase;
using liger::bench::BenchContext;
using liger::bench::RunFn;

BenchCase ce_case(const std::string& mode, int64_t rows, int64_t vocab, liger_dtype dtype) {
  BenchCase c;
  c.op = "cross_entropy";
  c.mode = mode;
  c.shape = std::to_string(rows) + "x" + std::to_string(vocab);
  c.dtype = dtype;
  const double logit_bytes = static_cast<double>(rows) * static_cast<double>(vocab) * liger::bench::dtype_bytes(dtype);
  // forward/full: logits read once, gradient written once; backward: read + write.
  c.min_bytes = 2.0 * logit_bytes;
  size_t ws = 0;
  liger_cross_entropy_workspace_size(rows, vocab, nullptr, &ws);
  c.declared_workspace_bytes = 0;  // the workspace is rows*8 bytes, allocated in setup
  c.note = mode == "backward" ? "scale stored gradient by grad_output=0.5 in place"
                              : "in-place gradient, mean reduction" + std::string(mode == "full" ? ", + backward(grad_output=1)" : "");
  c.setup = [=](BenchContext& ctx) -> RunFn {
    void* logits = ctx.random(static_cast<std::size_t>(rows * vocab), dtype, -4.0, 4.0);
    std::mt19937_64 gen(ctx.seed());
    std::uniform_int_distribution<int64_t> d(0, vocab - 1);
    std::vector<int64_t> targets(static_cast<std::size_t>(rows));
    for (auto& t : targets) t = d(gen);
    for (std::size_t i = 0; i < targets.size(); i += 17) targets[i] = -100;
    auto* targets_dev = static_cast<const int64_t*>(ctx.upload(targets.data(), targets.size() * sizeof(int64_t)));
    float* loss = static_cast<float*>(ctx.alloc(sizeof(float)));
    const float one = 1.0f, half = 0.5f;
    float* go_one = static_cast<float*>(ctx.upload(&one, sizeof(float)));
    float* go_half = static_cast<float*>(ctx.upload(&half, sizeof(float)));
    void* workspace = ctx.alloc(ws);
    const liger_tunables* t = ctx.tunables();
    return [=](cudaStream_t s) -> liger_status {
      auto stream = reinterpret_cast<liger_stream_t>(s);
      if (mode == "backward")
        return liger_cross_entropy_backward(logits, vocab, rows, vocab, dtype, go_half, 0, t, stream);
      liger_status st = liger_cross_entropy_forward(logits, vocab, targets_dev, logits, vocab, loss, nullptr, rows, vocab,
                                                    dtype, nullptr, workspace, ws, t, stream);
      if (st != LIGER_STATUS_SUCCESS || mode == "forward") return st;
      return liger_cross_entropy_backward(logits, vocab, rows, vocab, dtype, go_one, 0, t, stream);
    };
  };
  return c;
}

}  // namespace

LIGER_BENCH_REGISTER(cross_entropy) {
  for (const char* mode : {"full", "forward", "backward"}) {
    cases.push_back(ce_case(mode, 8192, 128256, LIGER_DTYPE_BFLOAT16));
    cases.push_back(ce_case(mode, 8192, 32000, LIGER_DTYPE_BFLOAT16));
  }
  cases.push_back(ce_case("full", 8192, 128256, LIGER_DTYPE_FLOAT32));
}
