// The kernel profile (SPEC section 5): what Understand decides and Act renders, as a C++ struct
// with YAML serialisation, and the built-in analyser that fills it offline.
//
// Every field the analyser cannot decide is listed in `undecided` (field -> reason) and is
// written to YAML as `{undecided: "<reason>"}`, so a checkpoint can name it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "workflows/kernel_dev/catalogue.h"
#include "workflows/kernel_dev/codegen.h"
#include "workflows/kernel_dev/expr.h"
#include "workflows/kernel_dev/segment_spec.h"
#include "workflows/kernel_dev/tier3_spec.h"

namespace liger::kernel_dev {

struct TensorSpec {
  std::string name;
  std::string shape;  // "[rows, cols]", "[cols]", "[1]"
  std::string dtype;  // "same as x" / "fp32"
  std::string description;
  // Inputs only: the distribution the tests draw this input from (input_sampling.h); "" is normal.
  std::string sample = "normal";
  // Tier-1 inputs only: "x.chunk(2, dim=-1)[0]" when this input is a part of the argument x
  // (input_split.h); "" when the input is an argument itself.
  std::string split = {};
};

struct ParameterSpec {
  std::string name;
  bool learnable = true;
  std::string shape = "scalar";  // scalar | channel
  double value = 0.0;            // init (learnable) or default (module parameter)
  std::string description;
};

struct ForwardSpec {
  std::string expression;  // the simplified IR as text
  std::string cuda;        // fp32 device statements (CSE temporaries), see codegen.h
  std::string reference;   // fp64 C++ statements
};

struct PrecisionNote {
  std::string operation;
  std::string requirement;
  std::string reason;
};

struct SavedSpec {
  std::vector<std::string> saved;
  std::vector<std::string> recomputed;
  std::string reason;
};

struct GradientSpec {
  std::string wrt;
  std::string kind;        // input | learnable
  std::string expression;  // d output / d wrt (simplified); the gradient is dy * expression
  bool reduction = false;  // parameter gradients sum over rows (channel) or all elements (scalar)
  std::string reduction_note;
};

struct BackwardSpec {
  std::string cuda;       // fp32 statements computing every gradient contribution
  std::string reference;  // fp64 statements
};

struct TilingSpec {
  std::string strategy;
  int threads_per_block = 256;
  int vector_bytes = 16;
  int rows_per_block = 0;  // 0: not row-wise (Tier 2: rows one forward block strides over)
  // Tier 2: the backward's own launch (0: the forward's threads_per_block / rows_per_block).
  int backward_threads_per_block = 0;
  int backward_rows_per_block = 0;
  std::string grid;
  std::string parameter_gradients;  // how parameter gradients are reduced
  std::string reason;
};

struct BenchmarkSpec {
  std::string variable;
  std::vector<long long> values;
  std::map<std::string, std::string> fixed;
  std::vector<std::string> dtypes;
  std::vector<std::string> modes;
  std::vector<std::string> baselines;
  std::string metrics;
};

struct ToleranceSpec {
  std::string dtype;
  std::string applies_to;  // "outputs and input gradients" | "parameter gradients"
  double atol = 0, rtol = 0, max_relative_l2 = 0;
  std::string reason;
};

// Tier 2 (row reduction): the op as passes over one row of x [rows, cols]. Each reduction is an
// expression evaluated at every column j and combined over the row (sum, mean, max, min); the
// output and the input gradient are element-wise expressions that may use the reductions. The
// names the expressions may use are checked by row_program_problems().
struct RowReduction {
  std::string name;        // a row scalar, usable by later expressions
  std::string op;          // sum | mean | max | min
  std::string expression;  // kernel-dev expression language, evaluated per column
};

// The gradient of a learnable per-column parameter w [cols]: `expression` is its contribution
// at column j of one row (dy_j dy_j/dw_j plus the reductions' adjoints through w); dw_j is its
// sum over the rows, made by the kernel's second (deterministic) reduction.
struct RowParamGradient {
  std::string name;        // the learnable parameter (a channel parameter of the profile)
  std::string expression;  // per column of one row; the names of grad_input's scope
};

struct RowProgramSpec {
  std::vector<RowReduction> forward_reductions;  // may use x, module parameters, n, earlier reductions
  std::string output;                            // y per column; may also use the forward reductions
  // What the forward saves for the backward: the input and/or the output, and forward reductions
  // to store per row (fp32) rather than recompute. Forward reductions the backward names and this
  // does not list are recomputed from the saved input (one more pass each).
  std::vector<std::string> backward_uses;
  std::vector<RowReduction> backward_reductions;  // may use dy, the saved tensors, forward and earlier reductions
  std::string grad_input;                         // dx per column
  std::vector<RowParamGradient> param_gradients;  // one per learnable per-column parameter
  // One per input tensor after the first (the profile's inputs[1..], each [rows, cols] like x and
  // read per column with it): its gradient at column j of the row, in grad_input's scope.
  std::vector<RowParamGradient> input_gradients;
  std::string pytorch_reference;                  // optional eager baseline ("torch.softmax(x, dim=-1)")
};

struct KernelProfile {
  // identity
  std::string op_name;
  std::string display_name;
  std::string c_prefix;           // liger_<op> (C ABI: liger_<op>_forward / _backward)
  std::string cpp_namespace;      // liger::kernels::<op>
  std::string python_functional;  // liger_<op>
  std::string python_module;      // Liger<Camel>
  std::string python_function;    // Liger<Camel>Function
  // source
  std::string source_kind;  // words | expression | pytorch
  std::string source_text;
  // PyTorch input: what Verify calls as the PyTorch baseline, the input's own code rather than its
  // translation ("f", "Module.forward", "<snippet>"); empty for other inputs.
  std::string source_entry;
  std::string resolved_from;  // how it was understood ("catalogue entry relu_squared matched 'relu squared'")
  // classification
  int tier = 0;  // 0 = undecided
  std::string tier_reason;
  std::string closest_kernel;
  std::string closest_reason;
  // tensors
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<ParameterSpec> learnable_parameters;
  std::vector<ParameterSpec> module_parameters;
  // decisions (absent ones are in `undecided`)
  std::optional<ForwardSpec> forward;
  std::optional<std::vector<PrecisionNote>> precision;
  std::optional<SavedSpec> saved_for_backward;
  std::optional<std::vector<GradientSpec>> gradients;
  std::optional<BackwardSpec> backward;
  std::optional<TilingSpec> tiling;
  std::optional<BenchmarkSpec> benchmark;
  std::optional<std::vector<ToleranceSpec>> tolerances;
  std::optional<RowProgramSpec> row_program;  // Tier 2 only (absent from Tier-1/3 documents)
  std::optional<SegmentSpec> segment;         // a segment reduction (Tier 2, instead of a row program; segment.h)
  std::optional<FusedLinearSpec> fused_linear;  // a fused linear + row loss (Tier 3; tier3.h)
  std::map<std::string, std::string> undecided;  // field -> reason
  std::vector<std::string> notes;

  bool complete() const { return undecided.empty(); }
  // Parsed program (Tier 1 only): rebuilt from forward.expression and the parameters.
  Program program() const;
};

YAML::Node profile_to_yaml(const KernelProfile& profile);
// Throws std::runtime_error naming the field on a malformed document.
KernelProfile profile_from_yaml(const YAML::Node& node);
std::string profile_to_text(const KernelProfile& profile);

// Every problem of a profile's row program, in words a model can act on (empty: none, or no row
// program): Tier 2 only, one input and one output, no learnable parameters, known reduction ops,
// fresh names, expressions that parse and use only the names in scope at their pass.
std::vector<std::string> row_program_problems(const KernelProfile& profile);

// ---------------------------------------------------------------------------------------------
// Tier knowledge (skills/kernel_dev/tiers.yaml).
struct TierRequest {
  std::string name;
  int tier = 0;
  std::string closest;
  std::vector<std::string> keywords;
  std::string reason;
  bool generic = false;  // matched only when no specific request does
  // Tier 2: the request's PyTorch form over the last dimension, derived offline when the
  // description says nothing more than the request (every other word a filler word). Empty: the
  // formulas are left to an LLM or a human.
  std::string pytorch;
  // When set, the PyTorch form applies only if one of these phrases is in the description (the
  // library's RMSNorm has a weight: only "without weight" asks for the form without one);
  // requires_reason says why it did not apply.
  std::vector<std::string> requires_any;
  std::string requires_reason;
  // Words that restate what the request computes ("z-loss, the squared logsumexp of each row"):
  // a description may use them without saying more than the request.
  std::vector<std::string> restating_words;
};
struct Tier1Rule {
  std::vector<std::string> uses_any;
  std::string kernel;
  std::string reason;
};
// A phrase that changes what a Tier-2 request's PyTorch form reads, with the number it takes
// ("softmax with temperature 2": the row divided by 2 first; "log-softmax with softcap 30").
// A modifier rewrites the input ({x}), the output ({y}: "z-loss with coefficient 1e-4"), or sets
// a keyword parameter of the form ("RMSNorm without weight, eps 1e-5": `parameter: eps`).
struct InputModifier {
  std::string name;                 // names the variant: softmax_temperature (not for a parameter)
  std::vector<std::string> phrases; // "temperature", "temp"
  std::string rewrite;              // PyTorch of the input or output: "{x} / {value}", "{value} * ({y})"
  std::string parameter;            // or: the form's keyword parameter the number sets
  bool on_output() const { return rewrite.find("{y}") != std::string::npos; }
};

struct TierKnowledge {
  std::map<int, std::string> tier_names;
  std::map<int, std::string> tier_tiling;
  std::vector<TierRequest> requests;
  std::vector<Tier1Rule> tier1_closest;
  std::vector<std::string> kernels;  // the library's kernels
  // Words a description may add to a request without changing the op ("row-wise softmax over
  // the last dimension"); any other word or number keeps the formulas undecided.
  std::set<std::string> filler_words;
  std::vector<InputModifier> input_modifiers;
  static TierKnowledge load_file(const std::filesystem::path& path);
};

struct KnowledgeBase {
  Catalogue catalogue;
  TierKnowledge tiers;
  // Loads skills/kernel_dev/{activations,tiers}.yaml under `data_dir`.
  static KnowledgeBase load(const std::filesystem::path& data_dir);
};

enum class InputKind { Auto, Words, Expression, PyTorch };

struct AnalysisRequest {
  std::string text;
  InputKind kind = InputKind::Auto;
  std::string name;  // optional op name override (snake_case)
};

// Detects the input kind (PyTorch code, an expression, or words).
InputKind detect_input_kind(const std::string& text, const Catalogue& catalogue);

// The built-in analyser: a complete profile for Tier-1 inputs it understands; otherwise the tier
// and closest kernel where it can tell, every other field undecided with the reason.
KernelProfile analyse(const AnalysisRequest& request, const KnowledgeBase& knowledge);

// Same function: the same inputs in order and parameters, equal values at random points
// (parameters at their defaults and perturbed). Recognises "y = x * sigmoid(x)" as the
// catalogue's silu, and a PyTorch source that still computes an edited forward.
bool same_function(const Program& a, const Program& b);

// Fills every derived field of a Tier-1 profile from `program` (used by analyse() and by an
// edited profile whose expression changed).
void derive_tier1(KernelProfile& profile, const Program& program, const KnowledgeBase& knowledge);

std::string camel_case(const std::string& snake);

// Why `request` is input no decision can rescue (a usage error before any run exists), or
// nullopt: an expression that does not parse and names no known non-element-wise op, or (when
// no LLM can be asked) words that match no activation and no tier request. A tie between
// activations is a decision and is not reported here.
// Words longer than this are not a description of one op (the limit also keeps any such text
// from ever being tried as a file name).
constexpr std::size_t kMaxDescriptionBytes = 255;
struct InputProblem {
  std::string message;
  std::string hint;
};
std::optional<InputProblem> input_problem(const AnalysisRequest& request, const KnowledgeBase& knowledge,
                                          bool llm_available);

// The op name a --name / --modify value stands for (snake_case), as the analyser uses it.
std::string op_name_for(const std::string& name);
// Why `op_name` cannot name an op although it is snake_case (a C++ or Python keyword, or a module
// the generated Python imports: the name becomes a C++ namespace and a Python module and
// function), or "" when it can.
std::string reserved_op_name_problem(const std::string& op_name);

}  // namespace liger::kernel_dev
