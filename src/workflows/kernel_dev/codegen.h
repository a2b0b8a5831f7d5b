// Code emission for Tier-1 ops: fp32 CUDA device statements and fp64 C++ reference statements
// for a set of named outputs, with common subexpressions shared as named temporaries, integer
// powers as products and the numerically safe forms. The CUDA statements call the kernel's math
// policy M:: (exp, log, log1p, expm1, tanh, div, sigmoid, softplus: accurate for fp32 storage, SFU forms
// for 16-bit storage) and sign_f32; the fp64 statements call std:: and sigmoid_f64 / softplus_f64 /
// sign_f64 (the templates define both).
#pragma once

#include <functional>
#include <set>
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

// Outputs are assigned in order; `indent` prefixes every line. Each largest subexpression whose
// symbols are all `invariants` (scalar parameters: the same for every element) is a named
// temporary of its own, computed before any element-dependent code.
EmittedCode emit_statements(const std::vector<std::pair<std::string, Expr>>& outputs, Dialect dialect,
                            const std::string& indent = "  ", const std::set<std::string>& invariants = {});

// A literal in the dialect ("1.702f", "(-0.5f)", "1.702").
std::string emit_literal(double value, Dialect dialect);

// Forward and backward emission for a program: forward assigns `program.output`; backward
// assigns d<input> for every input and d<param> (the per-element contribution) for every
// learnable parameter, each = dy * d output / d variable, from the upstream gradient `d<output>`.
struct Tier1Code {
  std::vector<std::pair<std::string, Expr>> forward;   // (output, expression)
  std::vector<std::pair<std::string, Expr>> backward;  // (d<name>, dy * derivative)
  // What the CUDA statements compute: forward/backward after the fp32 rewrites below (the fp64
  // reference statements keep the original forms, so the reference tests check every rewrite).
  std::vector<std::pair<std::string, Expr>> forward_device, backward_device;
  std::vector<std::string> rewrites_applied;  // rule names, once each, in order of first use
  EmittedCode forward_cuda, forward_reference, backward_cuda, backward_reference;
};

struct CodegenOptions {
  // The cheaper equivalent forms of rewrite_rules() in the CUDA statements. Off: the CUDA
  // statements evaluate the formulas as written (with the math policy's safe forms).
  bool rewrites = true;
};
Tier1Code generate_tier1(const Program& program, const CodegenOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Rewrites of special-function-heavy formulas into cheaper equivalent fp32 forms, applied to the
// CUDA statements only. Each rule is pattern -> replacement with the condition under which it
// is valid (the arguments it holds for, or the context it needs: which other subexpressions the
// statements already compute). The replacements carry their own overflow guards.
struct RewriteContext {
  std::set<std::string> exp_arguments;  // u of every exp(u) the statements compute (after pass 0)
};
struct RewriteRule {
  std::string name;
  std::string pattern;
  std::string replacement;
  std::string validity;
  int pass = 0;  // 0: context-free; 1: uses what pass 0 left (RewriteContext)
  // The replacement of a node (its arguments already rewritten), or nullptr where the pattern or
  // its condition does not hold.
  std::function<Expr(const Expr&, const RewriteContext&)> apply;
};
const std::vector<RewriteRule>& rewrite_rules();
// Applies the rules bottom-up to a group of statements that share temporaries (one device
// function); `applied` collects the names of the rules that fired.
std::vector<std::pair<std::string, Expr>> rewrite_for_device(const std::vector<std::pair<std::string, Expr>>& outputs,
                                                             std::vector<std::string>* applied = nullptr);

// ---------------------------------------------------------------------------------------------
// The statements of a Tier-1 direction (profile forward.cuda / backward.cuda, generated or edited)
// split into what is the same for every element and what is not. A line `const float NAME = ...;`
// at brace depth 0 that reads only `invariant_symbols` (scalar parameters, module parameters),
// earlier such names, literals and function calls is a per-thread value: the kernel computes it
// once per thread before its loop over elements (nvcc neither hoists nor shares the SFU
// instructions of such a value between the elements of a vector).
struct SplitStatements {
  std::string per_thread;          // the per-thread declarations, in order
  std::vector<std::string> names;  // the names they declare
  std::string per_element;         // every other line, in order
};
SplitStatements split_per_thread_statements(const std::string& cuda, const std::set<std::string>& invariant_symbols);

// ---------------------------------------------------------------------------------------------
// Memory traffic of a generated Tier-1 op: which tensors each direction must read and write.
// An input that a direction's formulas never reference is neither loaded by the kernel nor
// counted (d(a*sigmoid(b)+c)/dc = dz reads no c).
struct Tier1Traffic {
  std::vector<bool> forward_reads;   // per program input
  std::vector<bool> backward_reads;  // per program input
  bool backward_reads_upstream = true;
  int forward_channel_reads = 0, backward_channel_reads = 0;  // per-column parameters ([cols])
  int scalar_params = 0;            // fp32 scalars (read by both directions)
  int channel_grads = 0, scalar_grads = 0;  // learnable parameter gradients written by the backward
  // [rows, cols] tensors moved: inputs read + outputs written (forward: the output; backward:
  // the upstream gradient if read, every input's gradient).
  int forward_tensors() const;
  int backward_tensors() const;
};
// From the emitted CUDA statements (what the kernel compiles): an input is read by a direction
// when its name occurs in that direction's statements.
Tier1Traffic tier1_traffic(const std::vector<std::string>& inputs, const std::string& output, int channel_params,
                           int scalar_params, const std::string& forward_cuda, const std::string& backward_cuda);
Tier1Traffic tier1_traffic(const Program& program, const Tier1Code& code);
// The fewest bytes a direction ("forward", "backward", "full" = both) must move: each tensor
// read or written once; [cols] parameters in `weight_bytes`, scalars as fp32.
double tier1_min_bytes(const Tier1Traffic& traffic, const std::string& mode, double rows, double cols, double element_bytes,
                       double weight_bytes);

// ---------------------------------------------------------------------------------------------
// Approximate special functions the math policy may use per storage type, decided from the
// profile's tolerance table (the smallest atol and rtol of the dtype's rows). tanh.approx.f32 has a
// relative error up to 2^-10.99; __logf an absolute error up to 2^-21.41 near 1 and 3 ulp
// elsewhere. Each is allowed where the tolerance is >= 8x its error (the backward amplifies it:
// 1 - tanh^2 doubles tanh's absolute error).
struct ToleranceRow {
  std::string dtype;  // "fp32" | "fp16" | "bf16"
  double atol = 0, rtol = 0;
};
struct ApproximationPolicy {
  bool tanh_approx_bf16 = false, tanh_approx_fp16 = false;
  bool fast_log_fp32 = false;
};
ApproximationPolicy approximation_policy(const std::vector<ToleranceRow>& tolerances);

}  // namespace liger::kernel_dev
