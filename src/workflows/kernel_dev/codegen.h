// Code emission for Tier-1 ops: fp32 CUDA device statements and fp64 C++ reference statements
// for a set of named outputs, with common subexpressions shared as named temporaries, integer
// powers as products and the numerically safe forms. The CUDA statements call the kernel's math
// policy M:: (exp, log, log1p, expm1, tanh, div, sigmoid, softplus: accurate for fp32 storage, SFU forms
// for 16-bit storage) and sign_f32; the fp64 statements call std:: and sigmoid_f64 / softplus_f64 /
// sign_f64 (the templates define both).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "workflows/kernel_dev/expr.h"

namespace liger::kernel_dev {

enum class Dialect { CudaF32, CppF64 };

struct EmittedCode {
  std::string statements;  // "const float t0 = ...;\n...\ny = ...;\n" (outputs assigned, not declared)
  int temporaries = 0;
};

// Outputs are assigned in order; `indent` prefixes every line.
EmittedCode emit_statements(const std::vector<std::pair<std::string, Expr>>& outputs, Dialect dialect,
                            const std::string& indent = "  ");

// A literal in the dialect ("1.702f", "(-0.5f)", "1.702").
std::string emit_literal(double value, Dialect dialect);

// Forward and backward emission for a program: forward assigns `program.output`; backward
// assigns d<input> for every input and d<param> (the per-element contribution) for every
// learnable parameter, each = dy * d output / d variable, from the upstream gradient `d<output>`.
struct Tier1Code {
  std::vector<std::pair<std::string, Expr>> forward;   // (output, expression)
  std::vector<std::pair<std::string, Expr>> backward;  // (d<name>, dy * derivative)
  EmittedCode forward_cuda, forward_reference, backward_cuda, backward_reference;
};
Tier1Code generate_tier1(const Program& program);

}  // namespace liger::kernel_dev
