// fp64 CPU reference of the fused linear cross-entropy: logits = input @ weight^T + bias, then
// the cross-entropy of cross_entropy_ref.h; gradients of input, weight and bias by the chain
// rule. Meant for small shapes (the GEMMs are naive triple loops).
#pragma once

#include <cstdint>
#include <vector>

#include "cross_entropy_ref.h"

namespace liger::ref {

struct FusedLinearCrossEntropyResult {
  std::vector<double> loss;         // as CrossEntropyResult::loss
  std::vector<double> z_loss;       // as CrossEntropyResult::z_loss
  std::vector<double> grad_input;   // [tokens * hidden]
  std::vector<double> grad_weight;  // [vocab * hidden]
  std::vector<double> grad_bias;    // [vocab] (zeros when bias is empty)
  std::vector<double> logits;       // [tokens * vocab], for diagnostics
};

// input [tokens * hidden], weight [vocab * hidden], bias empty or [vocab], all row-major.
// round_logits: when non-null, applied to every logit before the cross-entropy (to model a
// kernel that stores the logits chunk in a 16-bit type); the gradients then are those of the
// rounded model (no straight-through correction), which is what such a kernel computes.
FusedLinearCrossEntropyResult fused_linear_cross_entropy_forward(
    const std::vector<double>& input, const std::vector<double>& weight, const std::vector<double>& bias,
    const std::vector<int64_t>& targets, int64_t tokens, int64_t hidden, int64_t vocab,
    const CrossEntropyOptions& options, const std::vector<double>& row_scale = {},
    double (*round_logits)(double) = nullptr);

}  // namespace liger::ref
