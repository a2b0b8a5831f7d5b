// fp64 CPU reference of the cross-entropy loss and its gradient (Liger-Kernel semantics; see
// kernels/include/liger_kernels/cross_entropy.h for the formulas).
#pragma once

#include <cstdint>
#include <vector>

namespace liger::ref {

enum class Reduction { kMean = 0, kSum = 1, kNone = 2 };

struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  double lse_square_scale = 0.0;
  double softcap = 0.0;  // 0 = off
  Reduction reduction = Reduction::kMean;
  std::vector<double> class_weight;  // empty = all ones, else [vocab]
};

struct CrossEntropyResult {
  std::vector<double> loss;    // [1] (mean/sum) or [rows] (none)
  std::vector<double> z_loss;  // shaped like loss
  std::vector<double> grad;    // [rows * vocab]: d(sum of loss outputs * row_scale)/d(logits)
  std::vector<double> lse;     // [rows] logsumexp of the (soft-capped) row; 0 for ignored rows
};

// logits: [rows * vocab] row-major. row_scale: empty or [rows]; when given the gradient is that
// of sum_r row_scale[r] * loss_r (the fused kernel's per-token upstream gradient).
// A target outside [0, vocab) that is not ignore_index gives a NaN row loss and a zero row grad.
CrossEntropyResult cross_entropy_forward(const std::vector<double>& logits, const std::vector<int64_t>& targets,
                                         int64_t rows, int64_t vocab, const CrossEntropyOptions& options,
                                         const std::vector<double>& row_scale = {});

// Backward: the stored gradient times the upstream gradient (one scalar, or one per row).
std::vector<double> cross_entropy_backward(const std::vector<double>& grad, int64_t rows, int64_t vocab,
                                           const std::vector<double>& grad_output, bool per_row);

}  // namespace liger::ref
