// Translation of element-wise PyTorch code (an nn.Module's forward, or a function) into the
// expression IR. Anything outside the element-wise subset (matmul, reductions over a dim,
// softmax/norms, indexing, control flow) is classified as not Tier 1, with the offending line.
#pragma once

#include <string>

#include "workflows/kernel_dev/catalogue.h"
#include "workflows/kernel_dev/expr.h"

namespace liger::kernel_dev {

struct TorchTranslation {
  bool elementwise = false;
  // Reductions over the last dimension: `program.expression` holds row reductions (tier2_derive.h);
  // elementwise is false and tier_guess 2.
  bool row_reduction = false;
  Program program;           // valid when elementwise
  std::string entry;         // "Module.forward" or the function's name
  std::string module_class;  // the nn.Module subclass, "" for a function
  // When not element-wise (or not understood):
  std::string rejection;     // why, in one sentence
  int line = 0;              // 1-based line of the offending code (0 if none)
  int column = 0;            // 1-based column of the offending call in that line (0 if not known)
  std::string offending_line;
  int tier_guess = 0;        // 2 (reduction) or 3 (GEMM / fused / loss) when recognised, else 0
  std::vector<std::string> notes;  // translation remarks (casts dropped, modules inlined...)
  // The row functions the code calls (softmax, layer_norm, mean, ...), in call order without
  // repeats, joined by '_' (at most three): what an op without a meaningful name is named after.
  std::string row_callees;
};

// Never throws on bad input: a parse problem is a rejection with its line.
TorchTranslation translate_pytorch(const std::string& source, const Catalogue& catalogue);

// True when `text` looks like Python/PyTorch code rather than an expression or words.
bool looks_like_pytorch(const std::string& text);

}  // namespace liger::kernel_dev
