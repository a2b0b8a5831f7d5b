// The compile backend's registry entry for a generated op (kernels/python/liger_kernels/compile/
// generated/<op>.py): the op's forward written as PyTorch code, which the backend traces with
// torch.fx and looks for in model graphs (liger_kernels/compile/pattern.py).
//
// The code is written the way models write element-wise math (torch.tanh(alpha * x) * weight +
// bias, torch.clamp(x, min=0.0), F.softplus(x)), because the backend matches a graph region by
// its operations, not by its values: a model that computes the same thing with other operations
// (x.clamp(0.0) for max(x, 0), torch.square for x ** 2) is not found. Verify traces the PyTorch
// function the op came from and checks that the pattern matches it
// (benchmarks/compile_pattern_check.py). A PyTorch input whose one `return` still computes the
// forward (translated again and compared at sample points) keeps its own spelling as the pattern
// (torch.asinh, F.silu, F.smooth_l1_loss(..., reduction="none"): calls the translation expands).
#pragma once

#include <optional>
#include <string>

#include "workflows/kernel_dev/expr.h"
#include "workflows/kernel_dev/profile.h"

namespace liger::kernel_dev {

// `e` as a PyTorch expression over its free symbols (tensors or Python numbers), using `torch`
// and `F` (torch.nn.functional). Throws std::invalid_argument for a function it has no PyTorch
// spelling for.
std::string torch_expression(const Expr& e);

struct CompileEntryPlan {
  std::string expression;  // torch_expression of the forward ("" when no entry is rendered)
  std::string skipped;     // why no entry is rendered ("" when one is)
};

// The pattern expression of a profile's forward, or why the op gets no entry: Tier 2 (row
// reductions are written in too many ways for a traced pattern to find: dim=-1 vs dim=1,
// x.max(-1)[0] vs amax, the row length from x.shape) and forwards that leave out one of the op's
// arguments (the pattern binds every argument of the library call from the graph).
CompileEntryPlan plan_compile_entry(const KernelProfile& profile);

}  // namespace liger::kernel_dev
