// Tier 2 offline: the profile fields of a derived row program (tier2_derive.h, derive_tier2).
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <set>

#include "workflows/kernel_dev/input_sampling.h"
#include "workflows/kernel_dev/tier2_derive.h"

namespace liger::kernel_dev {

namespace {

std::string joined(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

// The row program's expression with every reduction replaced by its per-column argument: an
// element-wise stand-in that computes each column's terms (log(t), sqrt(v), t * log(t)) the way
// the passes do, so the Tier-1 input sampling can tell where an input must be drawn from.
Expr element_wise_terms(const Expr& e) {
  if (e->kind == Kind::Call && e->args.size() == 1 && e->name.rfind("row_", 0) == 0) return element_wise_terms(e->args[0]);
  std::vector<Expr> args;
  for (const auto& a : e->args) args.push_back(element_wise_terms(a));
  return rebuild(e, std::move(args));
}

// inputs[].sample of a Tier-2 op: the Tier-1 choice over the row program's per-column terms, taken
// only when it makes every random point finite (a stand-in whose reductions collapsed, as
// (x - mean(x)) / std(x) into 0 / 0, fails under every choice and keeps all inputs normal).
void choose_row_samples(KernelProfile& p, const Program& program) {
  const Expr terms = simplify(element_wise_terms(program.expression));
  std::vector<Expr> gradients;
  for (const auto& in : program.inputs) gradients.push_back(derivative(terms, in));
  Environment at_defaults;
  for (const auto& param : program.params) at_defaults[param.name] = param.init;
  const SampleChoice samples =
      choose_input_samples(terms, gradients, program.inputs, at_defaults, 128, program.sample_hints);
  if (!samples.problem.empty()) return;
  for (auto& in : p.inputs) {
    auto chosen = samples.kind.find(in.name);
    if (chosen == samples.kind.end() || chosen->second == "normal") continue;
    in.sample = chosen->second;
    p.notes.push_back("tests draw " + sample_description(in.sample, in.name) +
                      (program.sample_hints.count(in.name) ? " (the range PyTorch documents for it; inputs[].sample)"
                                                           : " (a per-column term of the row program is not finite on "
                                                             "the whole line; inputs[].sample)"));
  }
}

void decline(KernelProfile& p, const std::string& reason) {
  const std::string why = "the built-in analyser cannot generate this Tier-2 op: " + reason;
  for (const char* field : {"forward", "precision", "saved_for_backward", "gradients", "backward", "tiling", "benchmark",
                            "tolerances", "row_program"})
    p.undecided[field] = why;
  p.notes.push_back("Tier 2 declined: " + reason);
}

}  // namespace

// A function that also takes `w`, `weight`, `gamma`, `scale`, `bias`, `beta` or `shift` (def rms(x, w):
// ...) means, as those names do in the expression language, a per-column weight or shift: the same
// on every row. They become learnable per-column parameters (the first argument stays the reduced
// tensor), and a note says so at the checkpoint (rename the argument to keep it a tensor input of
// the row's shape).
Program named_weights_as_parameters(const Program& given, std::vector<std::string>& notes) {
  if (given.inputs.size() < 2) return given;
  Program program = given;
  program.inputs.clear();
  std::vector<std::string> taken, by_role;
  for (const auto& in : given.inputs) {
    const bool reduced = in == given.inputs.front();  // the first argument stays the reduced tensor
    const auto guess = default_param_for_name(in);
    const auto role = given.column_roles.find(in);
    if (!reduced && role != given.column_roles.end()) {
      program.params.push_back(ParamDecl{in, ParamShape::Channel, role->second, true});
      by_role.push_back(in);
    } else if (!reduced && guess && guess->shape == ParamShape::Channel) {
      program.params.push_back(*guess);
      taken.push_back(in);
    } else {
      program.inputs.push_back(in);
    }
  }
  if ((taken.empty() && by_role.empty()) || program.inputs.empty()) return given;
  if (!by_role.empty())
    notes.push_back("the argument(s) " + joined(by_role, ", ") + " are passed as the weight or bias of a " +
                    "normalisation (F.layer_norm / F.rms_norm take those as [normalized_shape]): taken as learnable " +
                    "per-column parameters [cols], the reduced tensor being " + program.inputs.front());
  if (!taken.empty())
    notes.push_back("the argument(s) " + joined(taken, ", ") + " of the code are taken as learnable per-column " +
                    "parameters [cols] (their names, as in the expression language), the reduced tensor being " +
                    program.inputs.front() + "; if one is a tensor of the row's shape [rows, cols], rename it and it " +
                    "becomes an input tensor of the row program with its own gradient");
  return program;
}

void derive_tier2(KernelProfile& p, const Program& program, const KnowledgeBase& knowledge) {
  p.tier = 2;
  const RowDerivation d = derive_row_program(program);
  const std::string x = program.inputs.empty() ? "x" : program.inputs[0];
  p.inputs.clear();
  p.outputs.clear();
  p.learnable_parameters.clear();
  p.module_parameters.clear();
  for (const auto& in : program.inputs)
    p.inputs.push_back({in, "[rows, cols]", "fp32 | fp16 | bf16",
                        "reduced over the last (contiguous) dimension; leading dimensions flattened into rows"});
  p.outputs.push_back({program.output, "[rows, cols]", "same as " + x, "one row of output per row of " + x});
  for (const auto& param : program.params) {
    ParameterSpec spec;
    spec.name = param.name;
    spec.learnable = param.learnable;
    spec.shape = param.shape == ParamShape::Scalar ? "scalar" : "channel";
    spec.value = param.init;
    spec.description = param.learnable ? "learnable" : "fixed module parameter: a float in the op's options (default shown)";
    (param.learnable ? p.learnable_parameters : p.module_parameters).push_back(spec);
  }
  for (const char* field : {"tier", "inputs", "outputs", "learnable_parameters"}) p.undecided.erase(field);

  const bool softmax_family = std::find(d.functions.begin(), d.functions.end(), "exp") != d.functions.end();
  p.closest_kernel = softmax_family ? "cross_entropy" : "rms_norm";
  p.closest_reason = softmax_family
                         ? "cross_entropy reduces a row with a max-shifted sum of exponentials, as this op does"
                         : "rms_norm is the library's one-block-per-row reduction kernel with fp32 row statistics";
  if (std::find(knowledge.tiers.kernels.begin(), knowledge.tiers.kernels.end(), p.closest_kernel) !=
      knowledge.tiers.kernels.end())
    p.undecided.erase("closest_kernel");

  if (!d.program) {
    p.tier_reason = "Tier 2 (reduction): the output depends on a reduction over the row";
    decline(p, d.declined);
    return;
  }
  const RowProgramSpec& r = *d.program;
  choose_row_samples(p, program);
  if (d.per_row_output) {
    p.outputs[0].shape = d.keepdim ? "[rows, 1]" : "[rows]";
    p.outputs[0].description = "one value per row of " + x + " (a row scalar: " +
                               (d.keepdim ? "keepdim=True" : "the reduced dimension dropped") + ")";
  }
  p.tier_reason = "Tier 2 (reduction): every output element depends on its whole row through " +
                  std::to_string(r.forward_reductions.size()) + " reduction(s) over the last dimension (" +
                  joined(std::vector<std::string>(d.forward_text.begin(), d.forward_text.end() - 1), "; ") + ")";
  p.row_program = r;

  ForwardSpec f;
  f.expression = joined(d.forward_text, "; ");
  f.cuda = "// generated from row_program: one pass over the row per reduction (fp32 block reduction), then the "
           "output pass\n";
  f.reference = "// generated from row_program, in fp64\n";
  p.forward = f;
  BackwardSpec b;
  b.cuda = "// generated from row_program: " + joined(d.backward_text, "; ") + "\n";
  b.reference = "// generated from row_program, in fp64\n";
  p.backward = b;

  std::vector<PrecisionNote> precision;
  precision.push_back({"row reductions", "fp32 accumulation, fp32 block combine",
                       "a sum over thousands of columns in bf16/fp16 would lose all but the largest terms; every pass "
                       "loads the storage type, converts to fp32 and rounds once at the store"});
  if (softmax_family)
    precision.push_back({"exp", "fp32, max-shifted",
                         "exponentials are taken of (v - row max) <= 0: they never overflow, and the shift cancels "
                         "exactly in the result (its gradient is zero, so the backward does not differentiate it)"});
  for (const auto& fn : d.functions)
    if (fn == "log" || fn == "rsqrt" || fn == "sqrt" || fn == "tanh")
      precision.push_back({fn, "fp32", fn + "f in fp32 on the row statistic"});
  p.precision = precision;

  SavedSpec saved;
  if (d.from_output) {
    saved.saved = {program.output};
    saved.recomputed = {"(nothing: the backward is written from the saved output and the upstream gradient)"};
    saved.reason = "the gradient depends on the input only through the output (checked in fp64 when derived), so the "
                   "output is saved (autograd usually holds it anyway) and the backward reads it and the upstream "
                   "gradient once each, with no forward reduction recomputed";
  } else {
    // Every input tensor: the generated autograd function saves them all (a, b of a cosine
    // similarity: each one's gradient reads the other).
    saved.saved = program.inputs.empty() ? std::vector<std::string>{x} : program.inputs;
    const bool several = saved.saved.size() > 1;
    for (const auto& stat : d.saved_stats) saved.saved.push_back(stat + " (per row, fp32)");
    saved.recomputed = d.recomputed;
    if (saved.recomputed.empty())
      saved.recomputed.push_back(several ? "(nothing: the backward needs only the inputs and the saved statistics)"
                                         : "(nothing: the backward needs only the input and the saved statistics)");
    saved.reason = std::string("the gradient needs the ") + (several ? "inputs" : "input") + " (autograd holds " +
                   (several ? "them" : "it") + " anyway)" +
                   (d.saved_stats.empty()
                        ? std::string(" and no forward statistic")
                        : " and the row statistics it names (" + joined(d.saved_stats, ", ") +
                              "), which the forward stores per row in fp32: 4 bytes a row each, where recomputing "
                              "them would cost the backward one more pass over the row apiece");
  }
  p.saved_for_backward = saved;

  GradientSpec g;
  g.wrt = x;
  g.kind = "input";
  g.expression = "reverse-mode through the row reductions: " + joined(d.backward_text, "; ");
  std::vector<GradientSpec> gradients{g};
  for (const auto& ig : r.input_gradients) {
    GradientSpec other;
    other.wrt = ig.name;
    other.kind = "input";
    other.expression = "reverse-mode through the row reductions: d" + ig.name + " = " + ig.expression;
    gradients.push_back(other);
  }
  for (const auto& pg : r.param_gradients) {
    const bool scalar = d.scalar_weights.count(pg.name) > 0;
    GradientSpec w;
    w.wrt = pg.name;
    w.kind = "learnable";
    w.expression = (scalar ? "sum over rows and columns of (" : "sum over rows of (") + pg.expression + ")";
    w.reduction = true;
    w.reduction_note = scalar ? "learnable scalar: the kernel takes its one element, each thread sums the contributions "
                                "of the elements it visits in one fp32 register, each block combines its threads' sums "
                                "into one partial, and a second kernel adds the blocks' partials in a fixed order "
                                "(deterministic)"
                              : "per-column weight: its contributions from every row are summed (fp32 partial sums "
                                "per block of rows, then a second kernel sums the blocks in a fixed order: deterministic)";
    gradients.push_back(w);
  }
  p.gradients = gradients;

  TilingSpec t;
  t.strategy = "blocks of rows, a launch per direction: a block owns one row at a time and strides over rows_per_block "
               "rows; each reduction is a pass over the row streamed from memory (the first from DRAM, the others "
               "from L1/L2) with an fp32 warp-shuffle + shared-memory block reduction, then the element-wise pass; "
               "16-byte accesses (narrowed for unaligned rows)";
  // The launch per direction, from one H100 build of six generated ops (bf16 16384x4096, every
  // shape measured in one process, 2026-11-27: docs/benchmarks/raw/2026-11-27-h100-session21-row-
  // block-shapes.md). Streamed passes are bound by instructions per element and loads in flight:
  // - a forward whose only output is one value per row (logsumexp, a row's entropy, KL between
  //   rows) reads and writes no row: 128 threads with 4 chunks each beat 256 by 1.13-1.22x
  //   (66.1 -> 57.4, 98.0 -> 80.3, 168.1 -> 148.4 us at 2 rows per block), while the forwards
  //   that write a row lose at 128 (softmax 103.3 -> 163.1, LayerNorm 100.8 -> 169.9);
  // - 256 threads x 2 rows: the best of the row-writing forwards within 2.1%;
  // - backward, 256 threads x 1 row: softmax's (reads y and dy, writes dx) 173.7 -> 142.0 us
  //   against 2 rows per block, the other five within 1% of their best at 256 threads;
  // - backward of a per-row output once it reads the saved statistics (one or two passes reading
  //   only x per column; H200, every shape in one process, 2026-11-28: docs/benchmarks/raw/
  //   2026-11-28-h200-session26-kernels.md): 128 threads x 1 row beat 256 for the row entropy
  //   (95.9 -> 86.9 us) and logsumexp (72.9 -> 70.6), and tie for KL between rows (177.2 / 177.9).
  t.threads_per_block = d.per_row_output ? 128 : 256;
  t.vector_bytes = 16;
  t.rows_per_block = 2;
  t.backward_threads_per_block = d.per_row_output && !d.saved_stats.empty() ? 128 : 256;
  t.backward_rows_per_block = 1;
  t.grid = "x: forward rows / rows_per_block, backward rows / backward_rows_per_block (each block strides over its rows)";
  if (r.param_gradients.empty()) {
    t.parameter_gradients = "none (no learnable parameters)";
  } else {
    t.grid = "x: forward rows / rows_per_block; in the backward one wave of the blocks that fit on the SMs at once, at most 8 per SM (each block strides over rows and sums its weight gradients)";
    t.parameter_gradients = "each backward block accumulates its rows' weight-gradient contributions per column in fp32 "
                            "(by default the row streams and the sums live in the block's shared memory when all weights' columns fit "
                            "48 KB; else the row is held and the sums are in registers, or in the block's own row of the fp32 "
                            "workspace), writes one "
                            "partial row per weight, and a second kernel sums the partials over the blocks in a fixed "
                            "order (deterministic)";
    if (!d.scalar_weights.empty())
      t.parameter_gradients += "; a learnable scalar's contributions are summed over rows and columns in one fp32 "
                               "register per thread, combined per block into one partial, and the blocks' partials "
                               "added in a fixed order (no per-column sums: scalars take no shared memory)";
  }
  t.reason = "a row is reduced inside one block, so no inter-block synchronisation; the later passes over a row "
             "hit L1/L2, so each tensor crosses DRAM about once however many reductions the row program has";
  p.tiling = t;

  BenchmarkSpec bench;
  bench.variable = "rows";
  bench.values = {1024, 4096, 16384};
  bench.fixed = {{"cols", "4096 (hidden size)"}, {"dtype", "bf16 (also fp16, fp32)"}};
  bench.dtypes = {"bf16", "fp16", "fp32"};
  bench.modes = {"forward", "backward", "full"};
  bench.baselines = {"PyTorch eager", "closest library kernel: " + p.closest_kernel, "device copy bandwidth"};
  bench.metrics = "median time of CUDA-event timings after warm-up; achieved bandwidth vs copy; peak memory";
  p.benchmark = bench;

  // A row statistic sums `cols` fp32 terms (log2(cols) roundings in the tree reduction), and the
  // backward subtracts a row sum from a per-column term: looser than an element-wise op. In fp32
  // the row sum of cols unit-size terms is ~sqrt(cols) (64 at 4096) and its rounding, times a
  // per-column factor up to 1 (softmax's p), lands on elements whose own value may be small:
  // log-softmax's dx was 3e-5 off at 14 of 8.4M elements (H200), relative L2 6e-8.
  p.tolerances = std::vector<ToleranceSpec>{
      {"fp32", "outputs and input gradients", 1e-4, 1e-5, 1e-5,
       "fp32 row statistics against fp64: a few roundings of 2^-24 times log2(cols) in the block sums; atol for a "
       "row sum of ~sqrt(cols) magnitude subtracted from small elements"},
      {"fp16", "outputs and input gradients", 2e-3, 4e-3, 2e-3,
       "fp16 inputs and outputs, fp32 statistics: one rounding of 2^-11 at the store, plus the rounded dy"},
      {"bf16", "outputs and input gradients", 1.6e-2, 1.6e-2, 8e-3,
       "bf16 inputs and outputs, fp32 statistics: one rounding of 2^-8 at the store, plus the rounded dy"}};
  if (d.exp_of_output) {
    // exp(y) of the saved, rounded y: its absolute rounding |y| 2^-p becomes a relative error of
    // exp(y) (as in PyTorch's own log-softmax backward), times a row sum that grows as sqrt(cols).
    for (auto& t : *p.tolerances)
      if (t.dtype != "fp32") {
        t.atol *= 2;
        t.reason += "; atol doubled: the backward takes exp of the saved " + program.output +
                    ", whose rounding (|" + program.output + "| 2^-p absolute) exp turns into a relative error";
      }
  }
  if (d.per_row_output) {
    // The output is itself a row sum of cols terms (a loss per row): its fp32 rounding is absolute,
    // 2^-24 times sqrt(cols) times the terms' size, and the terms can be large where the sum is
    // small (a soft-target cross-entropy: -t * log_softmax(x) terms of ~30, a sum of ~0.5; on the
    // H100 one value of 5 rows x 4093 was 2.3e-4 off).
    for (auto& t : *p.tolerances)
      if (t.dtype == "fp32") {
        t.atol = 1e-3;
        t.reason += "; atol 1e-3: the per-row output is a sum of cols terms, rounded in fp32 at the size of its terms, "
                    "not of the sum";
      }
  }
  if (program.inputs.size() > 1) {
    // Several inputs combine into sharper rows than one (x * v + u of three normal draws gives a
    // softmax with one column near 1): the gradient there is a difference of nearly equal values
    // (dy - sum(dy * y)), so its fp32 rounding is relative to a small result. Measured on the
    // H100: relative L2 8e-5 at 2 x 16384 for such a dv, every element within atol and rtol.
    for (auto& t : *p.tolerances)
      if (t.dtype == "fp32") {
        t.max_relative_l2 = 1e-4;
        t.reason += "; relative L2 1e-4: with several inputs a row can peak at one column, where the gradient "
                    "cancels in fp32";
      }
  }

  for (const char* field : {"forward", "precision", "saved_for_backward", "gradients", "backward", "tiling", "benchmark",
                            "tolerances", "row_program"})
    p.undecided.erase(field);
  p.notes.push_back("row program derived offline: forward " + joined(d.forward_text, "; ") + "; backward " +
                    joined(d.backward_text, "; "));
  for (const auto& note : d.notes) p.notes.push_back(note);
}

}  // namespace liger::kernel_dev
