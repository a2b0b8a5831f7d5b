// Tier 2 offline: row reductions in the expression IR, their lowering from the named row ops
// (softmax, log_softmax, logsumexp, norms, variance, RMS/layer normalisation), and the derivation
// of a complete row program (profile.h, RowProgramSpec) with its backward by symbolic reverse-mode
// differentiation through the reductions.
//
// In the IR a reduction over the last dimension is a call row_sum(e), row_mean(e), row_max(e),
// row_min(e) or row_shift(e) whose argument is a per-column expression; the call's value is one
// scalar per row, broadcast over the columns where it is used. row_shift is a row maximum whose
// gradient is zero by construction: the lowerings use it only as the stabilising shift of
// exp(v - shift) inside expressions that do not depend on the shift (softmax, log-softmax,
// logsumexp), so dropping its gradient is exact, not an approximation.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "workflows/kernel_dev/expr.h"
#include "workflows/kernel_dev/profile.h"

namespace liger::kernel_dev {

// --------------------------------------------------------------------------------------------
// A node of e's kind (and name) over new operands `args`, through the simplifying constructors;
// the rewrites of the derivation and of the saved-output backward rebuild their trees with it.
Expr rebuild(const Expr& e, std::vector<Expr> args);

// --------------------------------------------------------------------------------------------
// Reductions in the IR.
Expr row_reduce(const std::string& op, Expr per_column);  // op: sum | mean | max | min | shift
bool has_row_reduction(const Expr& e);
// A reduction result whose dimension was dropped (keepdim=False): shape [rows], which PyTorch
// broadcasts against the columns, not the rows. Marked so the translation can refuse it where it
// meets a [rows, cols] tensor; the marker is transparent otherwise.
Expr row_dropped(Expr row_scalar);

// The named row ops, lowered to the reductions (stable forms: max-shifted exponentials).
Expr row_logsumexp(const Expr& v);
Expr row_softmax(const Expr& v);
Expr row_log_softmax(const Expr& v);
// The p-norm of the row (p = 2: sqrt(sum(v^2)); 1: sum(|v|); inf: max(|v|); else (sum |v|^p)^(1/p)).
Expr row_norm(const Expr& v, double p);
// Variance with `correction` (0: biased, 1: unbiased) and its square root.
Expr row_var(const Expr& v, double correction);
Expr row_rms_norm(const Expr& v, const Expr& eps);
Expr row_layer_norm(const Expr& v, const Expr& eps);
// F.normalize: v / max(||v||_p, eps).
Expr row_normalize(const Expr& v, double p, const Expr& eps);

// The expression language's row functions (sum, mean, max/min with one argument, amax, amin,
// logsumexp, softmax, log_softmax, norm, var, std, rms_norm, layer_norm, normalize, and the
// row_* calls themselves), then `inner` (the catalogue's activations).
FunctionResolver row_reduction_resolver(FunctionResolver inner);
// The functions row_reduction_resolver adds, for error messages.
const std::vector<std::string>& row_function_names();

// --------------------------------------------------------------------------------------------
// Derivation.
struct RowDerivation {
  std::optional<RowProgramSpec> program;  // absent when declined
  std::string declined;                   // why (one sentence naming the limitation and what to do)
  std::vector<std::string> forward_text;  // "m = max(x)", ..., "y = ..."
  std::vector<std::string> backward_text; // "gs = sum(...)", ..., "dx = ..."
  std::vector<std::string> recomputed;    // forward reductions the backward recomputes
  std::vector<std::string> saved_stats;   // forward reductions stored per row for the backward
  std::set<std::string> scalar_weights;   // learnable scalars among the weights (summed over columns too)
  bool from_output = false;               // the backward reads the saved output, not the input
  bool per_row_output = false;            // one value per row (logsumexp, z-loss): y and dy are [rows]
  bool keepdim = true;                    // ... of shape [rows, 1] (keepdim=True) or [rows]
  bool exp_of_output = false;             // ... and takes exp of it (log-softmax): see tier2_profile.cpp
  std::vector<std::string> functions;     // element-wise functions used (exp, log, rsqrt, ...)
  std::vector<std::string> notes;         // choices a reviewer should know (ties at a max/min)
};

// The passes of a derived row program as expressions (tier2_derive.cpp builds it; the
// saved-output rewrite works on it). Forward reductions may be ops sum | mean | max | min | shift;
// backward reductions are sums of per-column adjoint terms.
struct RowStructure {
  struct Reduction {
    std::string name, op;
    Expr argument;  // per column
  };
  std::string x, y, dy;
  std::vector<Reduction> forward;
  Expr output;                       // over x and the forward reductions
  std::vector<Reduction> backward;   // over dy, x or y, forward and earlier backward reductions
  Expr grad;                         // dx
  Environment parameters;            // module parameters at their defaults
};

// Whether the output is unchanged (fp64, random rows) when forward reduction `index` is moved by
// a constant, the later reductions following: the reduction is then a stabilising shift written
// out by hand (softmax as exp(x - amax(x)) / sum(...)), and its adjoint is zero.
bool output_invariant_to(const RowStructure& structure, std::size_t index);

// The backward rewritten to read the saved output y (and dy) with no forward reduction, when that
// is exact and well conditioned (tier2_saved_output.cpp describes and checks the rule); nullopt
// when the backward needs x or the forward statistics.
std::optional<RowStructure> backward_from_output(const RowStructure& structure);

// `program.expression` holds row reductions. Declines (with the reason) an op outside the Tier-2
// row-program form: more than one input tensor, learnable parameters (their gradients need a
// reduction across rows), a reduction result broadcast along the wrong dimension. An output with
// no per-column term (logsumexp, z-loss) is one value per row (per_row_output).
RowDerivation derive_row_program(const Program& program);

// The row op's name when `program` is one of the named lowerings applied to its input
// ("softmax", "log_softmax", "logsumexp", "l2_normalize"), else "".
std::string recognised_row_op(const Program& program);

// The row op `program` computes, recognised numerically (fp64, random rows and weights; module
// parameters must barely matter, as an eps does): softmax, log_softmax, logsumexp, l2_normalize,
// rms_norm, layer_norm, each with its learnable variant named against the PyTorch module's affine
// (nn.RMSNorm has a weight, nn.LayerNorm a weight and a bias): rms_norm_no_affine, rms_norm_offset
// (x * (1 + w), Gemma), rms_norm_bias, layer_norm_no_bias, layer_norm_no_affine, softmax_weighted,
// ...; "" when none.
std::string recognised_row_variant(const Program& program);

// The op's name (tier2_naming.cpp): `source_name` (its function or class, snake_cased) when it is
// meaningful (not f, fn, forward, Model, ...), else the recognised row op, else `callees` (the row
// functions the code calls, joined; for an expression its reductions: mean, sum, amax, amin) +
// "_custom", else row_<hash>. A name the library already has
// becomes the recognised variant's when that differs (rms_norm without weight:
// rms_norm_no_affine), else gets _custom, with a note, so Act's "already exists" refusal is never
// met by accident.
std::string tier2_op_name(const Program& program, const std::string& source_name, const KnowledgeBase& knowledge,
                          std::vector<std::string>& notes, const std::string& callees = "");

// Fills every field of a Tier-2 profile from `program` (identity already set), or leaves the
// formulas undecided with the reason the derivation declined.
void derive_tier2(KernelProfile& profile, const Program& program, const KnowledgeBase& knowledge);
// The program with the extra arguments a row op's code names like weights (w, weight, gamma, scale,
// bias, beta, shift) as learnable per-column parameters, when that leaves one reduced tensor; a
// note in `notes` says so. Otherwise the program unchanged.
Program named_weights_as_parameters(const Program& given, std::vector<std::string>& notes);

// fp64 evaluation of a profile's row program over one row (the same passes the generated
// reference makes); module parameters at their defaults unless given in `parameters`, learnable
// per-column weights at their init value in every column unless given in `weights` ([cols] each);
// the input tensors after the first must be given there too (their row, [cols] each).
using ColumnValues = std::map<std::string, std::vector<double>>;
std::vector<double> row_forward_f64(const KernelProfile& profile, const std::vector<double>& x,
                                    const Environment& parameters = {}, const ColumnValues& weights = {});
std::vector<double> row_backward_f64(const KernelProfile& profile, const std::vector<double>& x,
                                     const std::vector<double>& dy, const Environment& parameters = {},
                                     const ColumnValues& weights = {});
// Each learnable weight's gradient contribution from this row, per column (dw is its sum over rows).
ColumnValues row_param_gradients_f64(const KernelProfile& profile, const std::vector<double>& x,
                                     const std::vector<double>& dy, const Environment& parameters = {},
                                     const ColumnValues& weights = {});
// Each input tensor after the first: its gradient over this row, per column.
ColumnValues row_input_gradients_f64(const KernelProfile& profile, const std::vector<double>& x,
                                     const std::vector<double>& dy, const Environment& parameters,
                                     const ColumnValues& columns);

}  // namespace liger::kernel_dev
