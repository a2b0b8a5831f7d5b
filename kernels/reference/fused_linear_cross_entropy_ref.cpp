#include "fused_linear_cross_entropy_ref.h"

namespace liger::ref {

FusedLinearCrossEntropyResult fused_linear_cross_entropy_forward(
    const std::vector<double>& input, const std::vector<double>& weight, const std::vector<double>& bias,
    const std::vector<int64_t>& targets, int64_t tokens, int64_t hidden, int64_t vocab,
    const CrossEntropyOptions& options, const std::vector<double>& row_scale, double (*round_logits)(double)) {
  const auto T = static_cast<std::size_t>(tokens), H = static_cast<std::size_t>(hidden),
             V = static_cast<std::size_t>(vocab);
  FusedLinearCrossEntropyResult result;
  result.logits.assign(T * V, 0.0);
  for (std::size_t r = 0; r < T; ++r) {
    for (std::size_t v = 0; v < V; ++v) {
      double acc = 0.0;
      for (std::size_t h = 0; h < H; ++h) acc += input[r * H + h] * weight[v * H + h];
      if (!bias.empty()) acc += bias[v];
      result.logits[r * V + v] = round_logits ? round_logits(acc) : acc;
    }
  }
  CrossEntropyResult ce = cross_entropy_forward(result.logits, targets, tokens, vocab, options, row_scale);
  result.loss = ce.loss;
  result.z_loss = ce.z_loss;
  result.grad_input.assign(T * H, 0.0);
  result.grad_weight.assign(V * H, 0.0);
  result.grad_bias.assign(V, 0.0);
  for (std::size_t r = 0; r < T; ++r) {
    for (std::size_t v = 0; v < V; ++v) {
      const double g = ce.grad[r * V + v];
      if (g == 0.0) continue;
      for (std::size_t h = 0; h < H; ++h) {
        result.grad_input[r * H + h] += g * weight[v * H + h];
        result.grad_weight[v * H + h] += g * input[r * H + h];
      }
      if (!bias.empty()) result.grad_bias[v] += g;
    }
  }
  return result;
}

}  // namespace liger::ref
