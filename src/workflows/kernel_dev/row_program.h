// Tier 2 (row reduction) code generation: a profile's row program (profile.h, RowProgramSpec)
// turned into the passes of the generated kernel, its fp64 reference and a PyTorch version.
//
// Every reduction is one pass over the row's columns: the expression is emitted per column (fp32
// CUDA with the kernel's math policy M::, fp64 C++), accumulated per thread and combined across
// the block (sum, mean = sum / n, max, min). The output and the input gradient are element-wise
// passes that may use the reductions. The kernel holds the row in registers, so a pass costs no
// memory traffic. A backward that names forward reductions reads the ones backward.uses lists from
// the per-row statistics the forward stored (fp32, one value per row each: 4 bytes against a row's
// kilobytes) and recomputes the others from the saved input (one more pass each); a backward
// written from the saved output recomputes nothing.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "workflows/kernel_dev/expr.h"
#include "workflows/kernel_dev/profile.h"

namespace liger::kernel_dev {

struct RowPassCode {
  std::string name;       // the row scalar (reductions), the output, or d<input>
  std::string op;         // sum | mean | max | min; "" for element-wise passes
  std::string expression; // simplified, as text
  std::string cuda;       // fp32 statements assigning `name` (element-wise) or v_ (reductions)
  // Reductions: the per-column value `cuda` computes, after the hoisting. A pass emits its
  // reductions' values together from these, so a subexpression they share (exp(x - m) in a sum
  // and in a sum of exp(x - m) * x) is computed once per element: the SFU forms of M:: are inline
  // assembly, which the compiler never merges across statements.
  Expr column_value;
  // fp32 statements declaring and computing the pass's values that are one per row (hoisted out
  // of `cuda`, which uses them), placed before the pass's column loop; "" when there are none.
  std::string row_cuda;
  // Reductions: the row value the combined sum is multiplied by, when the per-column formula was
  // a product with factors that are one per row ("" otherwise), and the fp32 statements declaring
  // and computing it, placed after the block combine: the factor may use reductions combined in
  // the same pass (the LayerNorm backward's 1/sqrt(var + eps)^3 scales a sum taken beside var).
  std::string post_scale;
  std::string post_cuda;
  // Reductions: the symbols the column loop and the values before it read (not the post scale's):
  // a reduction whose loop reads none of a pass's results joins that pass.
  std::set<std::string> column_uses;
  // Reductions: the symbols the post scale reads (a reduction there must be combined before it).
  std::set<std::string> post_uses;
  // A part of a split sum (see generate_tier2): the last part declares `combined` and assigns it
  // `combination` (the parts added) after its combine; "" for an unsplit reduction.
  std::string combined, combination;
  std::string reference;  // fp64 statements, same assignment
  std::string python;     // a PyTorch expression of the per-column value
};

// Consecutive reductions none of which uses another's result share one pass over the row and one
// block combine of up to this many values (the kernel's shared memory holds 32 warps x this).
inline constexpr std::size_t kMaxPassGroup = 8;

// The most input tensors a generated row kernel takes (x and the others): each is one pointer and
// one row stride in the kernel's parameters, and each pass loads a chunk of every one it reads.
inline constexpr std::size_t kMaxRowInputs = 8;

struct Tier2Code {
  std::string input, output;  // tensor names (x, y); the upstream gradient is d<output>
  std::vector<RowPassCode> forward_reductions;
  RowPassCode forward_output;
  std::vector<RowPassCode> recomputed;  // the forward reductions the backward recomputes, in order
  // The forward reductions stored per row by the forward ([rows, saved_stats.size()] fp32, this
  // order) and read by the backward instead of being recomputed.
  std::vector<std::string> saved_stats;
  // The forward reductions the fp64 reference's backward computes (it saves nothing): a prefix
  // covering every one the backward reads, saved or recomputed.
  std::vector<RowPassCode> reference_statistics;
  std::vector<RowPassCode> backward_reductions;
  RowPassCode grad_input;
  // Learnable per-column weights (read per column, like x) and the per-row contribution to each
  // one's gradient (named d<weight>; summed over the rows by the kernel's second reduction).
  std::vector<std::string> weights;
  std::vector<RowPassCode> param_grads;
  // The weights that are one learnable scalar (the binding broadcasts them to [cols] and sums
  // their gradient over the columns).
  std::set<std::string> scalar_weights;
  // The input tensors after the first ([rows, cols], read per column like x from their own rows)
  // and their gradients (named d<input>, one value per element, stored like dx).
  std::vector<std::string> others;
  std::vector<RowPassCode> input_grads;
  bool saves_input = false, saves_output = false;
  bool per_row = false;  // per_row_output: y and dy are one value per row
  // The same reductions cut into passes (kMaxPassGroup): PolyNorm's three means are one pass.
  // Passes of the backward: the recomputed statistics, then its own reductions, in one sequence.
  std::vector<std::vector<RowPassCode>> forward_groups, backward_groups;
  // forward_online[i]: the max reductions folded into forward_groups[i] (an online pass: its sums
  // are kept relative to each thread's running max and rescaled as it grows; row_online.cpp), or
  // empty for a plain pass. Same length as forward_groups.
  std::vector<std::vector<RowPassCode>> forward_online;
};

// How a sum's per-column value V moves when the max m it is taken relative to grows from m_old
// to m_new (d = m_old - m_new): V_new = exp(d) * (V_old + d * W_old) when `scales`, else
// V_new = V_old + d * W_old; W = shift (moving like V without a shift of its own), absent: no
// shift term. nullopt: V does not move either way (or never reads m).
struct OnlineRescale {
  bool scales = true;
  std::optional<Expr> shift;
};
std::optional<OnlineRescale> online_rescale(const Expr& value, const std::string& stat);
// Whether two per-column values are the same function (equal at random points): a W that the
// simplifier left as -((-t2 - t1) + t2) still finds the accumulator of t1.
bool same_row_value(const Expr& a, const Expr& b);

// The updates of an online pass: for each folded max (in order), the accumulators it moves. Values
// are the pass's own per-column values, then `extra` (the W terms none of them is).
struct OnlinePlan {
  struct Update {
    std::size_t value;                  // the accumulator updated
    bool scales;                        // multiplied by exp(d)
    std::optional<std::size_t> shift_by; // plus shift_sign * d * this accumulator (before scaling)
    double shift_sign = 1.0;
  };
  std::vector<Expr> extra;
  std::vector<std::vector<Update>> updates;  // per max; shifts before scalings
};
std::optional<OnlinePlan> plan_online_pass(const std::vector<Expr>& values, const std::vector<std::string>& stats,
                                           std::size_t max_values);
// The row kernel's rescale_ body for a plan: per max, when the chunk's (or the row's) max `to_[i]`
// exceeds the running one, every accumulator moves (accumulator k is acc<k>_, as the kernel's
// slots name them).
std::string online_rescale_cuda(const OnlinePlan& plan, const std::vector<std::string>& stats);

// Folds each pass of plain row maxima into the next pass when every sum there moves with them as
// online_rescale describes; removes the folded passes from `groups` and returns, per remaining
// group, the maxima folded into it.
std::vector<std::vector<RowPassCode>> fold_max_passes(std::vector<std::vector<RowPassCode>>& groups);

// Whether the profile's output is one value per row (shape [rows] or [rows, 1]: logsumexp, a
// z-loss) rather than a [rows, cols] tensor: the forward writes one value per row, and the
// upstream gradient is one value per row.
bool per_row_output(const KernelProfile& profile);

// Whether `name` may not name a tensor or parameter of a row program (the generated row kernel's
// and reference's own names: n, p, M, ...; the expression language's functions).
bool reserved_in_row_program(const std::string& name);

// Throws std::invalid_argument listing every problem (row_program_problems) when the profile's
// row program cannot be generated.
Tier2Code generate_tier2(const KernelProfile& profile);

}  // namespace liger::kernel_dev
