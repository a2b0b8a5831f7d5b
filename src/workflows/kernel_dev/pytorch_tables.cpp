// The PyTorch translator's name tables (pytorch_detail.h).
#include "workflows/kernel_dev/pytorch_detail.h"

namespace liger::kernel_dev::torch_detail {

// Functions (torch., F., nn.functional.) that are reductions or GEMMs: not Tier 1.
const std::map<std::string, std::pair<int, std::string>>& non_elementwise() {
  static const std::map<std::string, std::pair<int, std::string>> table = {
      {"sum", {2, "a reduction over a dimension"}},
      {"mean", {2, "a reduction over a dimension"}},
      {"var", {2, "a reduction (variance) over a dimension"}},
      {"std", {2, "a reduction (standard deviation) over a dimension"}},
      {"var_mean", {2, "a reduction (variance and mean) over a dimension"}},
      {"std_mean", {2, "a reduction (standard deviation and mean) over a dimension"}},
      {"norm", {2, "a norm over a dimension"}},
      {"prod", {2, "a reduction over a dimension"}},
      {"amax", {2, "a reduction over a dimension"}},
      {"amin", {2, "a reduction over a dimension"}},
      {"argmax", {2, "a reduction over a dimension"}},
      {"argmin", {2, "a reduction over a dimension"}},
      {"logsumexp", {2, "a reduction (log-sum-exp) over a dimension"}},
      {"cumsum", {2, "a scan over a dimension"}},
      {"cumprod", {2, "a scan over a dimension"}},
      {"logcumsumexp", {2, "a scan over a dimension"}},
      {"cummax", {2, "a scan over a dimension"}},
      {"cummin", {2, "a scan over a dimension"}},
      {"softmax", {2, "softmax, a row-wise reduction"}},
      {"log_softmax", {2, "log-softmax, a row-wise reduction"}},
      {"softmin", {2, "softmin, a row-wise reduction"}},
      {"layer_norm", {2, "layer normalisation, a row-wise reduction"}},
      {"rms_norm", {2, "RMS normalisation, a row-wise reduction"}},
      {"group_norm", {2, "group normalisation, a reduction over groups"}},
      {"batch_norm", {2, "batch normalisation, a reduction over the batch"}},
      {"instance_norm", {2, "instance normalisation, a reduction"}},
      {"normalize", {2, "L-p normalisation, a row-wise reduction"}},
      {"cosine_similarity", {2, "cosine similarity, a row-wise reduction of two tensors"}},
      {"pairwise_distance", {2, "the p-norm of a difference, a row-wise reduction of two tensors"}},
      {"glu", {1, "glu splits a dimension in halves (use the gated form c = sigmoid(a) * b on separate inputs)"}},
      {"topk", {2, "top-k selection over a dimension"}},
      {"sort", {2, "sorting over a dimension"}},
      {"matmul", {3, "a matrix multiplication (GEMM)"}},
      {"mm", {3, "a matrix multiplication (GEMM)"}},
      {"bmm", {3, "a batched matrix multiplication (GEMM)"}},
      {"linear", {3, "a linear layer (GEMM)"}},
      {"einsum", {3, "an einsum contraction"}},
      {"conv1d", {3, "a convolution"}},
      {"conv2d", {3, "a convolution"}},
      {"cross_entropy", {3, "cross-entropy, a fused softmax + loss"}},
      {"nll_loss", {3, "a loss with a reduction"}},
      {"kl_div", {2, "KL divergence with a reduction"}},
      {"mse_loss", {2, "a loss with a reduction"}},
      {"scaled_dot_product_attention", {3, "attention (GEMMs + softmax)"}},
      {"dropout", {0, "random (it needs an RNG state), not a deterministic element-wise op: leave dropout out of the kernel and apply it after"}},
      {"embedding", {3, "an embedding lookup (indexing)"}},
  };
  return table;
}

// nn.<Class> modules -> functional name.
const std::map<std::string, std::string>& module_functionals() {
  static const std::map<std::string, std::string> table = {
      {"ReLU", "relu"},           {"GELU", "gelu"},           {"SiLU", "silu"},         {"Tanh", "tanh"},
      {"Sigmoid", "sigmoid"},     {"LeakyReLU", "leaky_relu"}, {"ELU", "elu"},          {"CELU", "celu"},
      {"SELU", "selu"},           {"Softplus", "softplus"},   {"Mish", "mish"},         {"Hardswish", "hardswish"},
      {"Hardsigmoid", "hardsigmoid"}, {"Hardtanh", "hardtanh"}, {"ReLU6", "relu6"},     {"Softsign", "softsign"},
      {"Tanhshrink", "tanhshrink"}, {"LogSigmoid", "logsigmoid"}, {"Identity", "identity"},
      {"Linear", "linear"},       {"LayerNorm", "layer_norm"}, {"RMSNorm", "rms_norm"}, {"GroupNorm", "group_norm"},
      {"Softmax", "softmax"},     {"LogSoftmax", "log_softmax"}, {"Dropout", "dropout"}, {"BatchNorm1d", "batch_norm"},
      {"Conv1d", "conv1d"},       {"Conv2d", "conv2d"},       {"Embedding", "embedding"},
  };
  return table;
}

// Catalogue functionals and the names of their hyperparameters in PyTorch's signature order.
const std::map<std::string, std::vector<std::string>>& catalogue_functionals() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"silu", {}},         {"mish", {}},        {"selu", {}},          {"hardswish", {}},     {"hardsigmoid", {}},
      {"relu6", {}},        {"softsign", {}},    {"tanhshrink", {}},    {"logsigmoid", {}},    {"elu", {"alpha"}},
      {"celu", {"alpha"}},  {"leaky_relu", {"negative_slope"}},       {"softplus", {"beta", "threshold"}},
      {"hardtanh", {"min_val", "max_val"}},
  };
  return table;
}

}  // namespace liger::kernel_dev::torch_detail
