// Reading a fused-linear loss written as PyTorch code beyond its keyword arguments: what the
// returned value is made of (the loss call, a z-loss term, anything else), what is added to the
// linear layer's output, unsupported arguments of the loss call, and the generalised JSD's
// convention. Whatever the generated op would not compute is named with line:column, so a profile
// never silently drops a term, a factor or an argument.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace liger::kernel_dev {

struct LossCodeReading {
  std::string rejection;          // the first construct the fused op cannot take ("" = none)
  std::optional<double> z_loss;   // a z-loss coefficient read through variables (lse = logsumexp(..))
  std::optional<double> beta;     // a JSD's beta in the generator's convention (see tier3_spec.h)
  // A sum cross-entropy divided by the count of targets != this value: the mean over counted rows.
  std::optional<long long> counted_ignore_index;
  bool reverse_kl = false;        // kl_div(teacher log-probs, student probs): KL(student || teacher)
  // The one loss term multiplied by a constant (numbers and the temperature: `* T * T`).
  std::optional<double> loss_scale;
  std::vector<std::string> notes;
};

// `loss` is the recognised loss (cross_entropy, kl_div or jsd), `reduction` its reduction and
// `beta` the JSD beta read so far, `temperature` the code's temperature where it was read (the
// value of T in a scale `* T * T`). Never throws.
LossCodeReading read_loss_code(const std::string& code, const std::string& loss, const std::string& reduction,
                               double beta, std::optional<double> temperature = std::nullopt);

// Whether the code has two or more F.kl_div calls with the same first argument (the mixture of a
// JSD written out). Never throws.
bool kl_terms_share_input(const std::string& code);

}  // namespace liger::kernel_dev
