// The `fused_linear` section of a kernel-dev profile (Tier 3): a loss over logits = x @ weight^T
// computed in row chunks so the [rows, vocab] logits never exist in full. Kept apart from
// profile.h so the profile struct only gains one field.
#pragma once

#include <string>
#include <vector>

namespace liger::kernel_dev {

struct FusedLinearSpec {
  // cross_entropy: against int64 targets (options below); kl_div: KL(teacher || student) of the
  // softmaxes at `temperature`; jsd: the generalised Jensen-Shannon divergence with `beta`
  // (M = beta * p_student + (1 - beta) * p_teacher; beta 0 is KL(student || teacher), beta 1 is
  // KL(teacher || student)). The teacher's logits come from teacher_x @ teacher_weight^T, chunked
  // the same way, and get no gradient.
  std::string loss = "cross_entropy";
  // Cross-entropy options (PyTorch's meaning; z_loss and softcap as in Liger-Kernel / Gemma 2).
  long long ignore_index = -100;
  double label_smoothing = 0.0;
  double z_loss = 0.0;   // coefficient of lse^2 added to each counted row's loss
  double softcap = 0.0;  // logits -> softcap * tanh(logits / softcap) first; 0 = off
  // mean: cross-entropy over the rows not ignored; kl_div/jsd: the elementwise mean (sum / (rows * vocab)),
  // as F.kl_div's "mean". batchmean (kl_div/jsd): sum / rows. sum: the sum.
  std::string reduction = "mean";
  double beta = 0.5;         // jsd only
  double temperature = 1.0;  // kl_div/jsd: both logits divided by it
  // The loss multiplied by this constant (the T * T of temperature distillation, a loss weight):
  // the Python entry scales the kernel's result, and autograd the gradients through it.
  double loss_scale = 1.0;
  // Rows per chunk; 0 = the rule: about 4 * rows * hidden logits per chunk (a power of two, 16..4096),
  // so the chunk buffer is at most four times the input and grad_weight is accumulated in few passes.
  long long chunk_rows = 0;
  // How grad_weight accumulates over chunks: "input" (the weight's dtype, cuBLAS beta = 1 per
  // chunk; no extra memory) or "fp32" (an fp32 [vocab, hidden] accumulator in the workspace,
  // converted once at the end).
  std::string grad_weight_accumulator = "input";
  std::vector<std::string> dtypes = {"fp32", "fp16", "bf16"};
  // How the request spelled it (words, F.cross_entropy, nn.CrossEntropyLoss, F.kl_div, ...).
  std::string source_form = "words";
  // Benchmark: the main case (LM-head sizes).
  long long bench_tokens = 8192;
  long long bench_hidden = 4096;
  long long bench_vocab = 128256;
};

}  // namespace liger::kernel_dev
