// kernel-dev Tier 3: a fused linear layer + a row loss (the LM head and its loss, distillation).
// Recognising one in a description or in PyTorch code (logits = x @ w.T / F.linear / matmul
// feeding F.cross_entropy, nn.CrossEntropyLoss, F.kl_div of log-softmaxes, ...), the complete
// profile it gives, the profile's `fused_linear` section in YAML, and Act's rendering from
// templates/kernel_dev/fused_linear/.
//
// The generated op processes rows in chunks: a cuBLAS GEMM computes the chunk's logits (fp32
// accumulation), a row kernel computes each row's loss and overwrites the logits with d loss /
// d logits, then cuBLAS GEMMs give the chunk's grad_x and accumulate grad_weight. The gradients
// are computed in the forward; the backward scales them by the upstream gradient.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "workflows/kernel_dev/profile.h"
#include "workflows/kernel_dev/render.h"
#include "workflows/kernel_dev/tier3_spec.h"

namespace liger::kernel_dev {

struct FusedLinearRecognition {
  bool matched = false;  // the text is a loss over a linear layer's logits
  FusedLinearSpec spec;
  std::string entry;     // the function the code defines ("" for words)
  std::string resolved_from;
  std::vector<std::string> notes;
  // Matched but not generable (an unsupported loss, a bias, ...): why, naming what is supported.
  std::string rejection;
};

// Never throws.
FusedLinearRecognition recognise_fused_linear(const std::string& text);

// The profile of a recognised fused-linear loss (complete unless rejected), or nullopt.
std::optional<KernelProfile> analyse_fused_linear(const AnalysisRequest& request, const KnowledgeBase& knowledge);

// Every problem of a profile's fused_linear section (empty: none or no section).
std::vector<std::string> fused_linear_problems(const KernelProfile& profile);

// The `fused_linear` section in the profile document, and back (read throws std::runtime_error
// naming the field).
YAML::Node fused_linear_to_yaml(const KernelProfile& profile);
void read_fused_linear(const YAML::Node& root, KernelProfile& profile);

// Act: every file of a fused-linear op. Throws std::invalid_argument for a profile it cannot render.
std::vector<RenderedFile> render_fused_linear(const KernelProfile& profile, const std::filesystem::path& templates_dir);

}  // namespace liger::kernel_dev
