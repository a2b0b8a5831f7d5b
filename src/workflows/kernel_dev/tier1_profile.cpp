// Tier 1 (element-wise) profile derivation: from one parsed forward, the derivative, the
// saved-vs-recomputed choice, precision notes, input samples and the launch (profile.h,
// derive_tier1). analyse() in profile.cpp calls it for every element-wise input.
#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <sstream>

#include "workflows/kernel_dev/input_sampling.h"
#include "workflows/kernel_dev/input_split.h"
#include "workflows/kernel_dev/profile.h"

namespace liger::kernel_dev {
namespace {

void collect_calls(const Expr& e, std::set<std::string>& functions, std::vector<std::string>& subexpressions) {
  if (e->kind == Kind::Call) {
    functions.insert(e->name);
    std::string text = to_string(e);
    if (std::find(subexpressions.begin(), subexpressions.end(), text) == subexpressions.end())
      subexpressions.push_back(text);
  }
  if (e->kind == Kind::Pow && !(is_number(e->args[1]) && e->args[1]->value == std::floor(e->args[1]->value)))
    functions.insert("pow");
  for (const auto& a : e->args) collect_calls(a, functions, subexpressions);
}

}  // namespace

void derive_tier1(KernelProfile& p, const Program& program, const KnowledgeBase& knowledge) {
  p.tier = 1;
  p.tier_reason = "Tier 1 (element-wise): every output element depends only on the inputs at the same index" +
                  std::string(program.params.empty() ? "" : " and on scalar or per-column parameters") +
                  "; no reduction in the forward";
  Tier1Code code = generate_tier1(program);
  Expr forward = code.forward.front().second;

  // Closest kernel.
  std::set<std::string> functions;
  std::vector<std::string> subexpressions;
  collect_calls(forward, functions, subexpressions);
  for (const auto& rule : knowledge.tiers.tier1_closest) {
    bool applies = rule.uses_any.empty() ||
                   std::any_of(rule.uses_any.begin(), rule.uses_any.end(), [&](const std::string& f) { return functions.count(f) > 0; });
    if (applies) {
      p.closest_kernel = rule.kernel;
      p.closest_reason = rule.reason;
      break;
    }
  }

  // Tensors and parameters.
  p.inputs.clear();
  p.outputs.clear();
  p.learnable_parameters.clear();
  p.module_parameters.clear();
  for (const auto& in : program.inputs) {
    p.inputs.push_back({in, "[rows, cols]", "fp32 | fp16 | bf16 (all inputs and outputs share it)",
                        "leading dimensions flattened into rows; last dimension contiguous, a row stride per tensor"});
    if (auto cut = program.splits.find(in); cut != program.splits.end()) {
      p.inputs.back().split = split_text(SplitRef{cut->second.source, cut->second.index, cut->second.parts});
      p.inputs.back().description = "part " + std::to_string(cut->second.index) + " of " + std::to_string(cut->second.parts) +
                                    " of the argument " + cut->second.source + " along its last dimension ([rows, " +
                                    std::to_string(cut->second.parts) + " * cols]), passed as a row-strided view";
    }
  }
  p.outputs.push_back({program.output, "[rows, cols]", "same as the inputs", "forward output"});
  for (const auto& param : program.params) {
    ParameterSpec spec;
    spec.name = param.name;
    spec.learnable = param.learnable;
    spec.shape = param.shape == ParamShape::Scalar ? "scalar" : "channel";
    spec.value = param.init;
    if (param.learnable) {
      spec.description = param.shape == ParamShape::Scalar
                             ? "one fp32 value in device memory; its gradient is an fp32 sum over all elements"
                             : "[cols] in weight_dtype (the activation dtype or fp32); gradient summed over rows";
      p.learnable_parameters.push_back(spec);
    } else {
      spec.description = "fixed module parameter: a float in the op's options struct (default shown)";
      p.module_parameters.push_back(spec);
    }
  }

  ForwardSpec f;
  f.expression = to_string(forward);
  f.cuda = code.forward_cuda.statements;
  f.reference = code.forward_reference.statements;
  p.forward = f;
  BackwardSpec b;
  b.cuda = code.backward_cuda.statements;
  b.reference = code.backward_reference.statements;
  p.backward = b;

  // Precision-sensitive operations.
  std::vector<PrecisionNote> precision;
  precision.push_back({"all arithmetic", "fp32",
                       "inputs are loaded in their storage type, converted to fp32, computed in fp32 and rounded once at "
                       "the store: bf16 has 8 mantissa bits, so every intermediate rounding to bf16 would add ~0.4% error"});
  static const std::map<std::string, std::string> reasons = {
      {"exp", "expf in fp32: exp amplifies input error (relative error of e^x = absolute error of x)"},
      {"expm1", "expm1f in fp32: accurate near 0 where exp(x) - 1 cancels"},
      {"log", "logf in fp32"},
      {"log1p", "log1pf in fp32: accurate near 0"},
      {"tanh", "tanhf in fp32: saturates to ±1 without overflow; 1 - tanh² stays finite"},
      {"sigmoid", "fp32, sign-split stable form (x >= 0: 1/(1+e^-x); else e^x/(1+e^x)): never evaluates e^|x|, no overflow at |x| = 80"},
      {"softplus", "fp32, log1p(exp(-|x|)) + max(x, 0): exp never overflows; linear for large x"},
      {"erf", "erff in fp32"},
      {"rsqrt", "rsqrtf in fp32"},
      {"sqrt", "sqrtf in fp32"},
      {"pow", "powf in fp32 for non-integer exponents (integer powers are products)"},
      {"sin", "sinf in fp32"},
      {"cos", "cosf in fp32"},
      {"atan", "atanf in fp32"}};
  std::set<std::string> all_functions = functions;
  for (const auto& [name, e] : code.backward) {
    std::vector<std::string> ignored;
    collect_calls(e, all_functions, ignored);
  }
  for (const auto& fn : all_functions) {
    auto it = reasons.find(fn);
    if (it != reasons.end()) precision.push_back({fn, "fp32", it->second});
  }
  bool has_param_grads = std::any_of(program.params.begin(), program.params.end(), [](const ParamDecl& d) { return d.learnable; });
  if (has_param_grads)
    precision.push_back({"parameter-gradient sums", "fp32 partial sums, reduced in fp32, one rounding at the end",
                         "summing rows*cols (scalar) or rows (per channel) terms in bf16 would lose the gradient; fp32 "
                         "partial sums per block are reduced by a second pass, deterministically (no atomics)"});
  p.precision = precision;

  // Saved vs recomputed.
  SavedSpec saved;
  saved.saved = program.inputs;
  for (const auto& param : program.params)
    if (param.learnable) saved.saved.push_back(param.name);
  saved.recomputed = subexpressions;
  if (saved.recomputed.empty()) saved.recomputed.push_back("(nothing: the derivative needs only the inputs)");
  saved.reason =
      "element-wise ops are memory-bound: saving the output or an intermediate costs one extra write in the forward "
      "and one extra read in the backward (2 bytes per element each in bf16) plus the activation memory held until "
      "the backward, while recomputing " +
      std::string(subexpressions.empty() ? "the intermediates" : "them") +
      " from the saved inputs costs a few fp32 operations per element, hidden behind the loads. So only the inputs "
      "(which autograd keeps anyway) are saved; nothing is materialised for the backward.";
  p.saved_for_backward = saved;

  // Gradients.
  std::vector<GradientSpec> gradients;
  std::vector<Expr> derivatives;
  for (const auto& in : program.inputs) {
    derivatives.push_back(derivative(forward, in));
    gradients.push_back({in, "input", to_string(derivatives.back()), false, ""});
  }
  for (const auto& param : program.params) {
    if (!param.learnable) continue;
    derivatives.push_back(derivative(forward, param.name));
    GradientSpec g{param.name, "learnable", to_string(derivatives.back()), true, ""};
    g.reduction_note = param.shape == ParamShape::Scalar
                           ? "d" + param.name + " = sum over all elements of d" + program.output + " * (expression)"
                           : "d" + param.name + "[c] = sum over rows of d" + program.output + "[r, c] * (expression)";
    gradients.push_back(g);
  }
  p.gradients = gradients;

  // Where the tests draw each input from: the op may be defined on part of the line only.
  Environment at_defaults;
  for (const auto& param : program.params) at_defaults[param.name] = param.init;
  // 256 points for ops of ordinary size; fewer for very large expressions (a 5 000-term sum), so
  // Understand stays fast: each point evaluates the forward and every gradient.
  std::uint64_t nodes = tree_shape(forward).nodes;
  for (const auto& d : derivatives) nodes += tree_shape(d).nodes;
  const int points = static_cast<int>(std::clamp<std::uint64_t>(400000 / std::max<std::uint64_t>(nodes, 1), 32, 256));
  const SampleChoice samples = choose_input_samples(forward, derivatives, program.inputs, at_defaults, points,
                                                    program.sample_hints);
  for (auto& in : p.inputs) {
    in.sample = samples.kind.at(in.name);
    if (in.sample != "normal")
      p.notes.push_back("tests draw " + sample_description(in.sample, in.name) +
                        (program.sample_hints.count(in.name) ? " (the range PyTorch documents for it; inputs[].sample)"
                                                             : " (the op is not finite on the whole line; inputs[].sample)"));
  }
  if (!samples.problem.empty()) p.notes.push_back("input sampling: " + samples.problem);

  TilingSpec t;
  t.threads_per_block = 256;
  t.vector_bytes = 16;
  t.rows_per_block = 0;
  bool has_channel = std::any_of(program.params.begin(), program.params.end(),
                                 [](const ParamDecl& d) { return d.shape == ParamShape::Channel; });
  t.strategy = has_channel
                   ? "2-D: blockIdx.x over column tiles of threads*VEC columns, blockIdx.y over row groups; each thread "
                     "keeps its columns (and their per-channel parameters) and strides over rows"
                   : "2-D with contiguous tensors collapsed into one long row: blockIdx.x over column tiles of "
                     "threads*VEC elements, blockIdx.y over row groups for strided layouts";
  t.grid = "x: ceil(cols / (threads_per_block * VEC)); y: min(rows, SMs * blocks_per_sm / x-tiles)";
  t.parameter_gradients =
      has_param_grads ? "two-pass: the backward kernel writes fp32 partial sums per (row group, column) and per block for "
                        "scalars into a caller-provided workspace (liger_" + p.op_name +
                            "_backward_workspace_size); a second kernel reduces them in fp32 and stores the gradients. "
                            "Chosen over atomics: deterministic, and the same scheme as the norms' dW"
                      : "none (no learnable parameters)";
  t.reason = "memory-bound: 16-byte vector loads and stores (8 bf16/fp16 or 4 fp32 elements) with a scalar tail "
             "per row reach copy bandwidth; VEC falls back to 8/4/2 bytes or scalar when pointers or row strides are "
             "not aligned; 256 threads per block as the library's element-wise defaults (tuned table in tuning.h)";
  p.tiling = t;

  BenchmarkSpec bench;
  bench.variable = "rows (tokens = batch x sequence)";
  bench.values = {1024, 2048, 4096, 8192, 16384};
  bench.fixed = {{"cols", program.inputs.size() > 1 ? "14336 (Llama-3-8B intermediate size)" : "4096 (hidden size)"},
                 {"dtype", "bf16 (also fp16, fp32 at one size)"}};
  bench.dtypes = {"bf16", "fp16", "fp32"};
  bench.modes = {"forward", "backward", "full"};
  bench.baselines = {"PyTorch eager", "closest library kernel: " + p.closest_kernel, "device copy bandwidth"};
  bench.metrics = "median time of CUDA-event timings after warm-up with rotated inputs; achieved bandwidth vs copy; "
                  "peak memory of forward+backward";
  p.benchmark = bench;

  std::vector<ToleranceSpec> tolerances;
  bool transcendental = std::any_of(all_functions.begin(), all_functions.end(), [](const std::string& f) {
    return reasons.count(f) > 0;
  });
  double f32 = transcendental ? 4e-5 : 1e-5;
  tolerances.push_back({"fp32", "outputs and input gradients", f32, f32, f32,
                        transcendental ? "fp32 math with library transcendentals (≤ 2 ulp each, chained a few deep) "
                                         "against fp64: a few 1e-6 relative, 4e-5 leaves margin without hiding a wrong formula"
                                       : "fp32 storage and arithmetic: only a few roundings of 2^-24"});
  tolerances.push_back({"fp16", "outputs and input gradients", 2e-3, 2e-3, 1e-3,
                        "inputs already fp16 (the reference sees the same quantised values), fp32 math, one rounding "
                        "of the result: 2^-11 relative (4.9e-4)"});
  tolerances.push_back({"bf16", "outputs and input gradients", 1.6e-2, 1.6e-2, 8e-3,
                        "inputs already bf16, fp32 math, one rounding of the result: 2^-8 relative (3.9e-3); the bound "
                        "allows two roundings (e.g. dy rounded then dx rounded)"});
  if (has_param_grads) {
    tolerances.push_back({"fp32", "parameter gradients", 1e-4, 1e-4, 1e-4,
                          "sums of rows (or rows*cols) fp32 terms in a different order than the fp64 reference"});
    tolerances.push_back({"fp16", "parameter gradients", 4e-3, 4e-3, 2e-3,
                          "fp32 sums of fp32 products from fp16 inputs; one rounding of the sum when stored in fp16"});
    tolerances.push_back({"bf16", "parameter gradients", 3.2e-2, 3.2e-2, 1.6e-2,
                          "fp32 sums of fp32 products from bf16 inputs; one bf16 rounding of the sum (2^-8) and "
                          "cancellation between terms of both signs"});
  }
  p.tolerances = tolerances;

  for (const char* field : {"forward", "precision", "saved_for_backward", "gradients", "backward", "tiling",
                            "benchmark", "tolerances", "inputs", "outputs", "learnable_parameters", "tier"})
    p.undecided.erase(field);
  // Nowhere finite (y = x / 0, log(-|x| - 1)): no kernel of it could pass a test; the request is
  // almost certainly not what was meant.
  if (samples.points > 0 && samples.failing == samples.points)
    p.undecided["forward"] = "the forward '" + to_string(forward) + "' or its gradient is not finite at any of " +
                             std::to_string(samples.points) + " random points under any input distribution tried (" +
                             "the whole line, positive, (-1, 1), (0, 1), above 1): check the formula";
  if (!p.closest_kernel.empty()) p.undecided.erase("closest_kernel");
}

}  // namespace liger::kernel_dev
