#include "workflows/kernel_dev/render.h"

#include <mustache.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "liger/text_escape.h"
#include "workflows/kernel_dev/codegen.h"
#include "workflows/kernel_dev/render_family.h"
#include "workflows/kernel_dev/compile_entry.h"
#include "workflows/kernel_dev/input_sampling.h"
#include "workflows/kernel_dev/input_split.h"
#include "workflows/kernel_dev/row_program.h"
#include "workflows/kernel_dev/segment.h"
#include "workflows/kernel_dev/tier3.h"

namespace liger::kernel_dev {

namespace mu = kainjow::mustache;

void require_no_row_launch_fields(const KernelProfile& p, int fixed_rows_per_block, const std::string& kernel) {
  if (!p.tiling) return;
  const auto& t = *p.tiling;
  // 0 and 1 both say "no block strides over rows"; a profile written by an LLM may carry either.
  if (t.rows_per_block > 1)
    throw std::invalid_argument("render: tiling.rows_per_block = " + std::to_string(t.rows_per_block) + ": " + kernel +
                                " launches its own grid; set it back to " + std::to_string(fixed_rows_per_block) +
                                " (rows per block are a Tier-2 row-kernel setting)");
  for (const auto& [field, value] : {std::pair<const char*, int>{"backward_threads_per_block", t.backward_threads_per_block},
                                     {"backward_rows_per_block", t.backward_rows_per_block}})
    if (value != 0)
      throw std::invalid_argument(std::string("render: tiling.") + field + " = " + std::to_string(value) + ": " + kernel +
                                  " has one launch configuration (threads_per_block); remove the field");
}

namespace {

std::string number_text(double value) {
  // Shortest text that reads back as the same double; valid in C++ and Python.
  char buffer[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  std::string text = buffer;
  if (text.find_first_of(".e") == std::string::npos && text.find("inf") == std::string::npos) text += ".0";
  return text;
}

std::string c_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// Free text from the profile (display name, reasons, expressions quoted in comments and docs):
// one line that cannot end a comment, a docstring, a string or a Markdown cell or code span
// wherever a template places it, so a profile value never becomes code or markup.
std::string free_text(const std::string& text) {
  std::string out = util::escape_code_text(text);
  for (char& c : out) {
    if (c == '|') c = '/';
    else if (c == '`') c = '\'';
  }
  return out;
}

std::string indent_lines(const std::string& text, const std::string& extra) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out += extra + line + "\n";
  if (!out.empty()) out.pop_back();  // the template supplies the final newline
  return out;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string dtype_enum(const std::string& dtype) {
  if (dtype == "fp32") return "LIGER_DTYPE_FLOAT32";
  if (dtype == "fp16") return "LIGER_DTYPE_FLOAT16";
  if (dtype == "bf16") return "LIGER_DTYPE_BFLOAT16";
  throw std::invalid_argument("profile tolerance for unknown dtype '" + dtype + "'");
}

void require_complete(const KernelProfile& p) {
  if (!p.complete()) {
    std::string fields;
    for (const auto& [field, reason] : p.undecided) fields += (fields.empty() ? "" : "; ") + field + ": " + reason;
    throw std::invalid_argument("render: profile '" + p.op_name + "' has undecided fields: " + fields);
  }
}

// The module parameters, tolerances and benchmark sweep: the fields both tiers' contexts share.
void shared_fields(const KernelProfile& p, mu::data& d, const std::string& default_cols) {
  mu::list hyper;
  for (const auto& m : p.module_parameters)
    hyper.push_back(mu::object{{"name", m.name},
                               {"default_text", number_text(m.value)},
                               {"default_literal", emit_literal(m.value, Dialect::CudaF32)}});
  d.set("hyperparameters", hyper);
  d.set("has_options", mu::data(!hyper.empty()));
  mu::list tolerances;
  for (const auto& t : *p.tolerances) {
    bool is_param = t.applies_to == "parameter gradients";
    char brace[512];
    std::snprintf(brace, sizeof(brace), "{%.9g, %.9g, %.9g, ", t.atol, t.rtol, t.max_relative_l2);
    tolerances.push_back(mu::object{{"dtype", t.dtype},
                                    {"dtype_enum", dtype_enum(t.dtype)},
                                    {"is_param", is_param ? "true" : "false"},
                                    {"applies_to", t.applies_to},
                                    {"atol", number_text(t.atol)},
                                    {"rtol", number_text(t.rtol)},
                                    {"reason", free_text(t.reason)},
                                    {"brace_init", std::string(brace) + c_string(free_text(t.reason)) + "}"}});
  }
  d.set("tolerances", tolerances);
  mu::list rows;
  std::string cols = default_cols;
  std::string variable = "rows";
  if (p.benchmark) {
    for (long long v : p.benchmark->values) rows.push_back(mu::object{{"value", std::to_string(v)}});
    auto fixed = p.benchmark->fixed.find("cols");
    if (fixed != p.benchmark->fixed.end()) {
      std::string digits;
      for (char c : fixed->second) {
        if (!std::isdigit(static_cast<unsigned char>(c))) break;
        digits += c;
      }
      if (!digits.empty()) cols = digits;
    }
    variable = p.benchmark->variable;
  }
  if (rows.empty())
    for (const char* v : {"4096", "16384"}) rows.push_back(mu::object{{"value", v}});
  d.set("bench_rows", rows);
  d.set("bench_cols", cols);
  d.set("bench_variable", variable);
}

// The default launch configurations of tuning.h come from the profile's tiling, so an edit to
// threads_per_block or vector_bytes at the checkpoint changes the generated kernel's defaults.
// Tier 1: large problems use the profile's block and vector width with enough blocks for 2048
// resident threads per SM; problems up to 2^20 elements use half the block (at least 64) so
// more SMs get work. (256 threads and 16 bytes give the library's {256, 16, 8} / {128, 16, 16}.)
void tier1_tuning(const KernelProfile& p, mu::data& d) {
  require_no_row_launch_fields(p, 0, "the Tier-1 element-wise kernel");
  const int threads = p.tiling ? p.tiling->threads_per_block : 256;
  const int vector = p.tiling ? p.tiling->vector_bytes : 16;
  if (threads < 64 || threads > 1024 || threads % 32 != 0)
    throw std::invalid_argument("render: tiling.threads_per_block = " + std::to_string(threads) +
                                " is not a block the kernels launch (64..1024, a multiple of 32)");
  if (vector != 2 && vector != 4 && vector != 8 && vector != 16)
    throw std::invalid_argument("render: tiling.vector_bytes = " + std::to_string(vector) + " (want 16, 8, 4 or 2)");
  const int small = std::max(64, threads / 2 / 32 * 32);
  auto config = [&](int block) {
    return "{" + std::to_string(block) + ", " + std::to_string(vector) + ", " + std::to_string(std::max(1, 2048 / block)) + "}";
  };
  d.set("config_large", config(threads));
  d.set("config_small", config(small));
  d.set("vector_bytes", std::to_string(vector));
}

// Tier 2: blocks of rows, a launch per direction. threads_per_block / backward_threads_per_block
// are the blocks for rows of up to 4096 columns and the other row-length classes scale with them
// (64..1024), as 64/128/256/512/1024 do around 256; rows_per_block / backward_rows_per_block are
// the rows one block strides over. vector_bytes is the width of the row passes' accesses
// (kVectorBytes).
void tier2_tuning(const KernelProfile& p, mu::data& d) {
  const int vector = p.tiling ? p.tiling->vector_bytes : 16;
  if (vector != 2 && vector != 4 && vector != 8 && vector != 16)
    throw std::invalid_argument("render: tiling.vector_bytes = " + std::to_string(vector) + " (want 16, 8, 4 or 2)");
  d.set("vector_bytes", std::to_string(vector));
  const int forward_threads = p.tiling ? p.tiling->threads_per_block : 256;
  const int forward_rows = p.tiling ? std::max(1, p.tiling->rows_per_block) : 1;
  const int backward_threads = p.tiling && p.tiling->backward_threads_per_block ? p.tiling->backward_threads_per_block : forward_threads;
  const int backward_rows = p.tiling && p.tiling->backward_rows_per_block ? p.tiling->backward_rows_per_block : forward_rows;
  auto check_threads = [](const char* field, int threads) {
    if (threads < 64 || threads > 1024 || threads % 32 != 0)
      throw std::invalid_argument(std::string("render: tiling.") + field + " = " + std::to_string(threads) +
                                  " is not a block the row kernel launches (64..1024, a multiple of 32)");
  };
  auto check_rows = [](const char* field, int rows) {
    if (rows < 1 || rows > 4096)
      throw std::invalid_argument(std::string("render: tiling.") + field + " = " + std::to_string(rows) + " (want 1..4096)");
  };
  check_threads("threads_per_block", forward_threads);
  check_threads("backward_threads_per_block", backward_threads);
  check_rows("rows_per_block", forward_rows);
  check_rows("backward_rows_per_block", backward_rows);
  const std::vector<std::pair<std::string, int>> classes = {
      {"256", 64}, {"1024", 128}, {"4096", 256}, {"16384", 512}, {"INT64_MAX", 1024}};
  auto scaled = [](int base, int threads) { return std::clamp(base * threads / 256 / 32 * 32, 64, 1024); };
  auto table = [&](const char* arch, int threads, int rows) {
    std::string line = "    ";
    for (std::size_t i = 0; i < classes.size(); ++i) {
      std::string cell = "{" + std::string(arch) + ", " + classes[i].first + ", {" +
                         std::to_string(scaled(classes[i].second, threads)) + ", " + std::to_string(rows) + "}},";
      // the columns line up as in the hand-written tables
      if (i + 1 < classes.size()) cell += std::string(cell.size() < 21 ? 21 - cell.size() : 1, ' ');
      line += cell;
    }
    return line;
  };
  for (const char* arch : {"80", "90"}) {
    d.set(std::string("forward_row_") + arch, table(arch, forward_threads, forward_rows));
    d.set(std::string("backward_row_") + arch, table(arch, backward_threads, backward_rows));
  }
  d.set("forward_longest", "{" + std::to_string(scaled(1024, forward_threads)) + ", " + std::to_string(forward_rows) + "}");
  d.set("backward_longest", "{" + std::to_string(scaled(1024, backward_threads)) + ", " + std::to_string(backward_rows) + "}");
  // The next-row prefetch of the resident kernel (pipeline depth 2) measured slower and stays a
  // tunable, off by default.
  d.set("pipeline_depth", "1");
  // Streamed passes by default: on an H100 (bf16 16384x4096, 256 threads, 2026-11-26) softmax took
  // 104.7 us forward / 149.3 us backward (2 rows per block; 106.9 / 148.8 with 1) against 124.5 /
  // 187.7 us with the row held in registers: fewer registers, more warps with loads in flight,
  // and the later passes hit L1/L2.
  d.set("row_stages", "1");
}

mu::data context(const KernelProfile& p) {
  if (p.tier != 1) throw std::invalid_argument("render: profile '" + p.op_name + "' is not Tier 1 (tier " + std::to_string(p.tier) + ")");
  require_complete(p);
  if (!p.forward || !p.backward || !p.gradients || !p.tolerances || p.inputs.empty() || p.outputs.empty())
    throw std::invalid_argument("render: profile '" + p.op_name + "' lacks forward/backward/gradients/tolerances/tensors");

  mu::data d;
  d.set("tier", "1");
  d.set("op", p.op_name);
  d.set("OP", upper(p.op_name));
  d.set("Camel", camel_case(p.op_name));
  d.set("display", free_text(p.display_name));
  d.set("expression", free_text(p.forward->expression));
  d.set("output", p.outputs.front().name);
  d.set("upstream", "d" + p.outputs.front().name);
  d.set("closest_kernel", p.closest_kernel);
  d.set("python_module", p.python_module);
  d.set("source_kind", p.source_kind);
  d.set("first_input", p.inputs.front().name);
  // detach() makes the backward differ from the forward's derivative on purpose (a straight-through
  // estimator): finite differences of the forward cannot check it.
  bool has_detach = false;
  try {
    has_detach = contains_function(parse_expression(p.forward->expression), "detach");
  } catch (const std::exception&) {
  }
  d.set("has_detach", has_detach);

  mu::list inputs;
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    const std::string& sample = p.inputs[i].sample.empty() ? std::string("normal") : p.inputs[i].sample;
    if (!is_sample_kind(sample)) {
      std::string kinds;
      for (const auto& kind : sample_kinds()) kinds += (kinds.empty() ? "" : ", ") + kind;
      throw std::invalid_argument("render: inputs[" + std::to_string(i) + "].sample '" + sample + "' is not one of " + kinds);
    }
    mu::object o{{"name", p.inputs[i].name},
                 {"index", std::to_string(i)},
                 {"sample", sample},
                 {"sample_cpp", sample_cpp(sample, "z")},
                 {"sample_extremes", sample_extremes_cpp(sample)}};
    inputs.push_back(o);
  }
  d.set("inputs", inputs);

  // The Python entry's arguments (input_split.h): an input, or an argument cut into inputs.
  // `split_inputs`: per input, the 2-D view the packed entry passes for it and its gradient's view.
  const std::vector<SplitArgument> arguments = call_arguments(p);
  const bool split = has_split_inputs(p);
  d.set("split", mu::data(split));
  mu::list args, cut_args, split_inputs;
  for (const auto& a : arguments) {
    mu::object o{{"name", a.name}, {"count", std::to_string(a.parts.size())}, {"whole", mu::data(a.parts.empty())}};
    args.push_back(o);
    if (a.parts.empty()) continue;
    std::string parts;
    for (std::size_t k : a.parts) parts += (parts.empty() ? "" : ", ") + p.inputs[k].name;
    o["parts"] = parts;
    cut_args.push_back(o);
  }
  for (const auto& in : p.inputs) {
    std::string view = "T.rows_view(" + in.name + ", OP, \"" + in.name + "\")";
    std::string grad = "d" + in.name + "2";
    if (const auto ref = parse_split(in.split)) {
      view = "_c_" + ref->source + "[" + std::to_string(ref->index) + "]";
      grad = "_dc_" + ref->source + "[" + std::to_string(ref->index) + "]";
    }
    split_inputs.push_back(mu::object{{"name", in.name}, {"view", view}, {"grad_view", grad}, {"split", mu::data(!in.split.empty())}});
  }
  d.set("args", args);
  d.set("cut_args", cut_args);
  d.set("split_inputs", split_inputs);
  d.set("first_arg", arguments.front().name);

  mu::list scalars, channels, learnable;
  std::string first_channel;
  for (std::size_t i = 0; i < p.learnable_parameters.size(); ++i) {
    const auto& l = p.learnable_parameters[i];
    mu::object o{{"name", l.name}, {"pindex", std::to_string(i)}, {"init_text", number_text(l.value)}, {"shape", l.shape}};
    if (l.shape == "channel") {
      o["cindex"] = std::to_string(channels.size());
      channels.push_back(o);
      if (first_channel.empty()) first_channel = l.name;
    } else {
      o["sindex"] = std::to_string(scalars.size());
      scalars.push_back(o);
    }
    learnable.push_back(o);
  }
  d.set("scalar_params", scalars);
  d.set("channel_params", channels);
  d.set("learnable", learnable);
  d.set("first_channel", first_channel);
  d.set("has_scalar", mu::data(!scalars.empty()));
  d.set("has_channel", mu::data(!channels.empty()));
  d.set("has_learnable", mu::data(!learnable.empty()));
  d.set("has_param_grads", mu::data(!learnable.empty()));
  d.set("n_inputs", std::to_string(p.inputs.size()));
  d.set("n_scalar", std::to_string(scalars.size()));
  d.set("n_channel", std::to_string(channels.size()));
  d.set("n_learnable", std::to_string(learnable.size()));
  d.set("n_tensors", std::to_string(p.inputs.size() + learnable.size()));

  // What each direction moves (the kernel loads only the inputs its statements use; the
  // benchmark's byte model counts exactly those) and the approximations the tolerances allow.
  std::vector<std::string> input_names;
  for (const auto& in : p.inputs) input_names.push_back(in.name);
  const Tier1Traffic traffic = tier1_traffic(input_names, p.outputs.front().name, static_cast<int>(channels.size()),
                                             static_cast<int>(scalars.size()), p.forward->cuda, p.backward->cuda);
  auto mask = [](const std::vector<bool>& reads) {
    unsigned long long bits = 0;
    for (std::size_t k = 0; k < reads.size() && k < 64; ++k)
      if (reads[k]) bits |= 1ull << k;
    return std::to_string(bits);
  };
  auto names = [&](const std::vector<bool>& reads, std::string out) {
    for (std::size_t i = 0; i < reads.size(); ++i)
      if (reads[i]) out += (out.empty() ? "" : ", ") + p.inputs[i].name;
    return out.empty() ? std::string("none") : out;
  };
  d.set("forward_read_mask", mask(traffic.forward_reads));
  d.set("backward_read_mask", mask(traffic.backward_reads));
  d.set("forward_read_names", names(traffic.forward_reads, ""));
  d.set("backward_read_names", names(traffic.backward_reads, traffic.backward_reads_upstream ? "d" + p.outputs.front().name : ""));
  d.set("backward_reads_upstream", traffic.backward_reads_upstream ? "true" : "false");
  d.set("forward_tensors", std::to_string(traffic.forward_tensors()));
  d.set("backward_tensors", std::to_string(traffic.backward_tensors()));
  std::vector<ToleranceRow> tolerance_rows;
  for (const auto& t : *p.tolerances) tolerance_rows.push_back({t.dtype, t.atol, t.rtol});
  const ApproximationPolicy approx = approximation_policy(tolerance_rows);
  d.set("tanh_approx_bf16", approx.tanh_approx_bf16 ? "1" : "0");
  d.set("tanh_approx_fp16", approx.tanh_approx_fp16 ? "1" : "0");
  d.set("fast_log_fp32", approx.fast_log_fp32 ? "1" : "0");

  // Values of the scalar parameters alone are computed once per thread (forward_invariants /
  // backward_invariants in the kernel), the rest per element.
  std::set<std::string> invariant_symbols;
  for (const auto& l : p.learnable_parameters)
    if (l.shape != "channel") invariant_symbols.insert(l.name);
  for (const auto& m : p.module_parameters) invariant_symbols.insert(m.name);
  auto per_thread = [&](const std::string& direction, const std::string& cuda) {
    const SplitStatements split = split_per_thread_statements(cuda, invariant_symbols);
    mu::list names;
    for (const auto& name : split.names) names.push_back(mu::object{{"name", name}});
    d.set(direction + "_invariants", names);
    d.set(direction + "_invariant_cuda", indent_lines(split.per_thread, ""));
    d.set(direction + "_cuda", indent_lines(split.per_element, ""));
  };
  per_thread("forward", p.forward->cuda);
  // A backward whose every statement is d<input> = d<output> (a straight-through estimator, x + c):
  // the binding returns the upstream gradient without a launch.
  bool identity_backward = learnable.empty();
  {
    std::set<std::string> statements;
    std::stringstream lines(p.backward->cuda);
    for (std::string line; std::getline(lines, line);) {
      std::string compact;
      for (char c : line)
        if (!std::isspace(static_cast<unsigned char>(c))) compact += c;
      if (!compact.empty()) statements.insert(compact);
    }
    std::set<std::string> identities;
    for (const auto& in : p.inputs) identities.insert("d" + in.name + "=d" + p.outputs.front().name + ";");
    identity_backward = identity_backward && statements == identities;
  }
  // The packed entry of a cut argument always launches the backward (it writes into the
  // argument's gradient); the parts entry keeps the shortcut.
  d.set("identity_backward", mu::data(identity_backward));
  per_thread("backward", p.backward->cuda);
  d.set("forward_reference", indent_lines(p.forward->reference, "    "));
  d.set("backward_reference", indent_lines(p.backward->reference, "    "));

  mu::list gradients;
  for (const auto& g : *p.gradients)
    gradients.push_back(
        mu::object{{"wrt", g.wrt}, {"expression", free_text(g.expression)}, {"reduction", mu::data(g.reduction)}});
  d.set("gradients", gradients);

  shared_fields(p, d, p.inputs.size() > 1 ? "14336" : "4096");
  tier1_tuning(p, d);
  return d;
}

// The kernel's math policy, taken verbatim from the Tier-1 kernel template so both tiers evaluate
// the expression language's functions identically (fp32 storage: libm; 16-bit storage: SFU forms).
std::string math_policy(const std::filesystem::path& templates_dir) {
  const std::filesystem::path path = templates_dir / "kernel.cu.mustache";
  const std::string text = read_template(path);
  const std::size_t begin = text.find("// The math policy of the generated code");
  const std::string last = "__device__ __forceinline__ float sign_f32(";
  std::size_t end = text.find(last, begin == std::string::npos ? 0 : begin);
  if (begin == std::string::npos || end == std::string::npos)
    throw std::runtime_error(path.string() + ": the Math<T> policy section (from '// The math policy of the generated "
                             "code' to sign_f32) was not found; the Tier-2 kernel takes it from there");
  end = text.find('\n', end);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// `statements` (indented for the fp64 reference's loops) indented by `more` spaces, for the row
// kernel's deeper chunk loops.
std::string indented(const std::string& statements, std::size_t more) {
  const std::string pad(more, ' ');
  std::string out = pad;
  for (char c : statements) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

mu::data tier2_context(const KernelProfile& p, const std::filesystem::path& templates_dir) {
  require_complete(p);
  if (!p.row_program)
    throw std::invalid_argument("render: Tier-2 profile '" + p.op_name +
                                "' has no row_program (its reductions and element-wise formulas); the templates "
                                "render a Tier-2 op from it");
  if (!p.tolerances) throw std::invalid_argument("render: profile '" + p.op_name + "' lacks tolerances");
  const Tier2Code code = generate_tier2(p);

  mu::data d;
  d.set("tier", "2");
  d.set("op", p.op_name);
  d.set("OP", upper(p.op_name));
  d.set("Camel", camel_case(p.op_name));
  d.set("display", free_text(p.display_name));
  d.set("closest_kernel", p.closest_kernel);
  d.set("python_module", p.python_module);
  d.set("source_kind", p.source_kind);
  d.set("input", code.input);
  d.set("output", code.output);
  d.set("upstream", "d" + code.output);
  d.set("dinput", "d" + code.input);
  d.set("first_input", code.input);
  // Where the tests draw each input from (inputs[].sample): the reference test's draw is normal(rng)
  // (N(0, 1.5)), the GPU test's a quantised z ~ N(0, 2); the extremes are two rows of four.
  auto sample_of = [&](const std::string& name) {
    for (const auto& in : p.inputs)
      if (in.name == name) {
        const std::string kind = in.sample.empty() ? std::string("normal") : in.sample;
        if (!is_sample_kind(kind))
          throw std::invalid_argument("render: inputs[].sample '" + kind + "' of " + name + " is not a sample kind");
        return kind;
      }
    return std::string("normal");
  };
  auto extremes = [&](const std::string& kind, const std::string& normal_values) {
    return kind == "normal" ? normal_values : sample_extremes_cpp(kind) + ", " + sample_extremes_cpp(kind);
  };
  const std::string input_sample = sample_of(code.input);
  d.set("input_sample", input_sample);
  d.set("input_sample_rng", sample_cpp(input_sample, "normal(rng)"));
  d.set("input_sample_z", sample_cpp(input_sample, "z"));
  // Two rows of 4: magnitudes that overflow a naive exp or square, then a row of near-equal values
  // (not equal: a row of equal values is where a standard deviation or a norm with no eps under its
  // square root has the gradient 0 * inf, NaN in PyTorch as well, which is not a formula's fault).
  d.set("input_extremes", extremes(input_sample, "-80.0, -1e-30, 0.0, 80.0, 3.0, 3.0, 3.0, 3.25"));
  // Every input tensor (x first): the reference's Inputs and Grads hold one [rows, cols] each.
  mu::list all_inputs{mu::object{{"name", code.input}, {"index", "0"}}};
  // The inputs after the first: read per column from their own rows, each with its gradient.
  mu::list others;
  for (std::size_t i = 0; i < code.others.size(); ++i) {
    const std::string& o = code.others[i];
    const RowPassCode& g = code.input_grads[i];
    all_inputs.push_back(mu::object{{"name", o}, {"index", std::to_string(i + 1)}});
    const std::string kind = sample_of(o);
    others.push_back(mu::object{{"name", o},
                                {"oindex", std::to_string(i)},
                                {"sample", kind},
                                {"sample_rng", sample_cpp(kind, "normal(rng)")},
                                {"sample_z", sample_cpp(kind, "z")},
                                {"extremes", extremes(kind, "0.5, -2.0, 80.0, -80.0, 3.0, -3.0, 1e-30, 1.0")},
                                {"grad_expression", free_text(g.expression)},
                                {"grad_cuda_inner", indented(g.cuda, 2)},
                                {"grad_row_cuda", g.row_cuda.empty() ? "" : indented(g.row_cuda, 4)},
                                {"grad_reference", indented(g.reference, 0)},
                                {"grad_python", g.python},
                                {"last", mu::data(i + 1 == code.others.size())}});
  }
  d.set("inputs", all_inputs);
  d.set("others", others);
  d.set("has_others", mu::data(!code.others.empty()));
  d.set("n_others", std::to_string(code.others.size()));
  d.set("scalar_params", mu::list{});
  // Learnable per-column weights: read per column by every pass, each with its gradient's
  // per-row contribution (summed over rows by the kernel's second reduction).
  mu::list weights;
  for (std::size_t i = 0; i < code.weights.size(); ++i) {
    const std::string& w = code.weights[i];
    double init = 1.0;
    for (const auto& l : p.learnable_parameters)
      if (l.name == w) init = l.value;
    const RowPassCode& g = code.param_grads[i];
    const bool scalar = code.scalar_weights.count(w) > 0;
    weights.push_back(mu::object{{"name", w},
                                 {"cindex", std::to_string(i)},
                                 {"pindex", std::to_string(i)},
                                 {"init_text", number_text(init)},
                                 {"shape", scalar ? "scalar" : "channel"},
                                 {"scalar", mu::data(scalar)},
                                 // A learnable scalar is one element; a channel weight one per column.
                                 {"extent", scalar ? "1" : "cols"},
                                 {"at", scalar ? "0" : "static_cast<std::size_t>(c_)"},
                                 {"grad_expression", free_text(g.expression)},
                                 {"grad_cuda_inner", indented(g.cuda, 2)},
                                 {"grad_row_cuda", g.row_cuda.empty() ? "" : indented(g.row_cuda, 4)},
                                 {"grad_reference", indented(g.reference, 0)},
                                 {"grad_python", g.python},
                                 {"last", mu::data(i + 1 == code.weights.size())}});
  }
  d.set("learnable", weights);
  d.set("channel_params", weights);
  d.set("weights", weights);
  d.set("has_weights", mu::data(!code.weights.empty()));
  d.set("no_weights", mu::data(code.weights.empty()));
  d.set("has_scalar_weights", mu::data(!code.scalar_weights.empty()));
  d.set("has_channel_weights", mu::data(code.scalar_weights.size() < code.weights.size()));
  d.set("n_weights", std::to_string(code.weights.size()));
  // The backward returns a list (dx, the other inputs' gradients, the weights') when it has more than dx.
  d.set("multi_grad", mu::data(!code.weights.empty() || !code.others.empty()));

  auto passes = [](const std::vector<RowPassCode>& list) {
    mu::list out;
    for (const auto& r : list) {
      const bool sum = r.op == "sum" || r.op == "mean";
      out.push_back(mu::object{{"name", r.name},
                               {"op", r.op},
                               {"expression", free_text(r.expression)},
                               {"cuda", r.cuda},
                               {"cuda_inner", indented(r.cuda, 4)},
                               {"reference", r.reference},
                               {"python", r.python},
                               {"reduce", sum ? "kSum" : r.op == "max" ? "kMax" : "kMin"},
                               {"combine", sum ? "sum" : r.op},
                               {"identity_reference", sum ? "0.0" : r.op == "max" ? "-HUGE_VAL" : "HUGE_VAL"},
                               {"torch_reduce", r.op == "sum" ? "sum" : r.op == "mean" ? "mean" : r.op == "max" ? "amax" : "amin"},
                               {"is_mean", mu::data(r.op == "mean")}});
    }
    return out;
  };
  // The kernel's passes: each a group of independent reductions combined together. A pass
  // accumulates each distinct per-column value once (slot): two reductions of the same value
  // (entropy's split sum holds sum(exp(x - m)) beside s itself) share one accumulator and one
  // combine. The values are emitted together, so what they share is computed once per element.
  auto groups = [&](const std::vector<std::vector<RowPassCode>>& list,
                    const std::vector<std::vector<RowPassCode>>& online) {
    mu::list out;
    for (std::size_t gi = 0; gi < list.size(); ++gi) {
      const auto& group = list[gi];
      const std::vector<RowPassCode> no_maxima;
      const auto& maxima = gi < online.size() ? online[gi] : no_maxima;
      mu::list members, slots;
      std::map<std::string, std::size_t> slot_of;  // reduce and value -> slot
      std::vector<std::pair<std::string, Expr>> values;
      std::vector<std::size_t> member_slot;
      for (const auto& r : group) {
        const bool sum = r.op == "sum" || r.op == "mean";
        const std::string reduce = sum ? "kSum" : r.op == "max" ? "kMax" : "kMin";
        if (!r.column_value) throw std::logic_error("row pass " + r.name + " has no per-column value");
        const std::string key = reduce + " " + to_string(r.column_value);
        auto known = slot_of.find(key);
        if (known == slot_of.end()) {
          known = slot_of.emplace(key, values.size()).first;
          values.emplace_back("v" + std::to_string(values.size()) + "_", r.column_value);
          slots.push_back(mu::object{{"slot", std::to_string(known->second)}, {"reduce", reduce}});
        }
        member_slot.push_back(known->second);
      }
      // An online pass (row_online.cpp): each folded max runs beside the sums; a sum that shifts with
      // it needs its W accumulated too (a slot of its own unless one of the pass's values is W).
      std::string rescale_cuda;
      if (!maxima.empty()) {
        std::vector<Expr> slot_values;
        std::vector<std::string> stats;
        for (const auto& v : values) slot_values.push_back(v.second);
        for (const auto& m : maxima) stats.push_back(m.name);
        const auto plan = plan_online_pass(slot_values, stats, kMaxPassGroup);
        if (!plan) throw std::logic_error("online pass over " + stats.front() + " has no plan for its sums");
        for (const auto& w : plan->extra) {
          slots.push_back(mu::object{{"slot", std::to_string(values.size())}, {"reduce", "kSum"}});
          values.emplace_back("v" + std::to_string(values.size()) + "_", w);
        }
        rescale_cuda = online_rescale_cuda(*plan, stats);
      }
      mu::list online_list;
      std::vector<std::pair<std::string, Expr>> peeks;
      for (std::size_t mi = 0; mi < maxima.size(); ++mi) {
        peeks.emplace_back("u" + std::to_string(mi) + "_", maxima[mi].column_value);
        online_list.push_back(mu::object{{"name", maxima[mi].name},
                                         {"expression", free_text(maxima[mi].expression)},
                                         {"index", std::to_string(mi)},
                                         {"last", mu::data(mi + 1 == maxima.size())}});
      }
      std::string peek_cuda;
      if (!peeks.empty()) {
        std::string declared_peeks;
        for (const auto& u : peeks) declared_peeks += (declared_peeks.empty() ? "" : ", ") + u.first;
        peek_cuda = "            float " + declared_peeks + ";\n" +
                    emit_statements(peeks, Dialect::CudaF32, "            ").statements;
        for (std::size_t mi = 0; mi < peeks.size(); ++mi)
          peek_cuda += "            chunk_max_[" + std::to_string(mi) + "] = fmaxf(chunk_max_[" + std::to_string(mi) +
                       "], " + peeks[mi].first + ");\n";
        while (!peek_cuda.empty() && peek_cuda.back() == '\n') peek_cuda.pop_back();
      }
      for (std::size_t i = 0; i < slots.size(); ++i) slots[i].set("last", mu::data(i + 1 == slots.size()));
      std::string declared;
      for (const auto& value : values) declared += (declared.empty() ? "" : ", ") + value.first;
      std::string values_cuda = "            float " + declared + ";\n" +
                                emit_statements(values, Dialect::CudaF32, "            ").statements;
      while (!values_cuda.empty() && values_cuda.back() == '\n') values_cuda.pop_back();
      for (std::size_t i = 0; i < group.size(); ++i) {
        const auto& r = group[i];
        members.push_back(mu::object{{"name", r.name},
                                     {"op", r.op},
                                     {"expression", free_text(r.expression)},
                                     {"row_cuda", r.row_cuda.empty() ? "" : indented(r.row_cuda, 6)},
                                     {"post_scale", r.post_scale},
                                     {"post_cuda", r.post_cuda.empty() ? "" : indented(r.post_cuda, 6)},
                                     {"combined", r.combined},
                                     {"combination", r.combination},
                                     {"has_combined", mu::data(!r.combined.empty())},
                                     {"has_post_scale", mu::data(!r.post_scale.empty())},
                                     {"is_mean", mu::data(r.op == "mean")},
                                     {"slot", std::to_string(member_slot[i])}});
      }
      // Each pass loads only the tensors its loops read: softmax(q)'s max pass does not touch p's row.
      std::set<std::string> read;
      for (const auto& r : group) read.insert(r.column_uses.begin(), r.column_uses.end());
      for (const auto& r : maxima) read.insert(r.column_uses.begin(), r.column_uses.end());
      mu::list group_others, group_weights;
      for (std::size_t i = 0; i < code.others.size(); ++i)
        if (read.count(code.others[i])) group_others.push_back(others[i]);
      for (std::size_t i = 0; i < code.weights.size(); ++i)
        if (read.count(code.weights[i])) group_weights.push_back(weights[i]);
      out.push_back(mu::object{{"members", members},
                               {"slots", slots},
                               {"values_cuda", values_cuda},
                               {"size", std::to_string(slots.size())},
                               {"others", group_others},
                               {"weights", group_weights},
                               {"online", online_list},
                               {"is_online", mu::data(!maxima.empty())},
                               {"online_size", std::to_string(maxima.size())},
                               {"rescale_cuda", rescale_cuda},
                               {"peek_cuda", peek_cuda}});
    }
    return out;
  };
  d.set("forward_groups", groups(code.forward_groups, code.forward_online));
  d.set("backward_groups", groups(code.backward_groups, {}));
  // A forward of one value per row that reads its row once (one pass, after the online fold) can
  // give each row a warp of its own (the row kernel's WARP form).
  d.set("warp_rows", mu::data(code.per_row && code.forward_groups.size() == 1));
  d.set("has_online_passes", mu::data(std::any_of(code.forward_online.begin(), code.forward_online.end(),
                                                  [](const auto& maxima) { return !maxima.empty(); })));
  d.set("max_group", std::to_string(kMaxPassGroup));
  d.set("forward_reductions", passes(code.forward_reductions));
  d.set("recomputed", passes(code.recomputed));
  d.set("reference_statistics", passes(code.reference_statistics));
  d.set("has_reference_statistics", mu::data(!code.reference_statistics.empty()));
  d.set("has_recomputed", mu::data(!code.recomputed.empty()));
  d.set("backward_reductions", passes(code.backward_reductions));
  d.set("output_expression", free_text(code.forward_output.expression));
  d.set("output_cuda", code.forward_output.cuda);
  d.set("output_cuda_inner", indented(code.forward_output.cuda, 2));
  d.set("output_row_cuda", code.forward_output.row_cuda.empty() ? "" : indented(code.forward_output.row_cuda, code.per_row ? 6 : 4));
  d.set("output_reference", code.forward_output.reference);
  d.set("output_python", code.forward_output.python);
  d.set("grad_expression", free_text(code.grad_input.expression));
  d.set("grad_cuda", code.grad_input.cuda);
  d.set("grad_cuda_inner", indented(code.grad_input.cuda, 2));
  d.set("grad_row_cuda", code.grad_input.row_cuda.empty() ? "" : indented(code.grad_input.row_cuda, 4));
  d.set("grad_reference", code.grad_input.reference);

  // One line for the lists and comments that describe an op by its forward.
  std::string expression = code.forward_output.expression;
  std::string with;
  for (const auto& r : code.forward_reductions) with += (with.empty() ? "" : ", ") + r.name + " = " + r.op + "(" + r.expression + ")";
  if (!with.empty()) expression += " with " + with + " per row";
  d.set("expression", free_text(expression));
  std::string backward;
  for (const auto& r : code.backward_reductions) backward += r.name + " = " + r.op + "(" + r.expression + "); ";
  // The reference header lists the gradients one per line; a Tier-2 op has one, through its rows.
  mu::list gradient_lines{mu::object{{"row_text", free_text("per row: " + backward + "d" + code.input + " = " + code.grad_input.expression)}}};
  for (const auto& g : code.input_grads)
    gradient_lines.push_back(mu::object{{"row_text", free_text("per row: " + g.name + " = " + g.expression)}});
  for (const auto& g : code.param_grads)
    gradient_lines.push_back(mu::object{{"row_text", free_text(g.name + " = sum over rows of (" + g.expression + ")")}});
  d.set("gradients", gradient_lines);

  mu::list saved;
  if (code.saves_input) saved.push_back(mu::object{{"name", code.input}});
  if (code.saves_output) saved.push_back(mu::object{{"name", code.output}});
  d.set("saved", saved);
  // The row statistics the forward stores for the backward: [rows, n_stats] fp32, this order.
  mu::list stats;
  for (std::size_t i = 0; i < code.saved_stats.size(); ++i)
    stats.push_back(mu::object{{"name", code.saved_stats[i]}, {"sindex", std::to_string(i)}});
  d.set("saved_stats", stats);
  d.set("has_saved_stats", mu::data(!code.saved_stats.empty()));
  d.set("n_stats", std::to_string(code.saved_stats.size()));
  d.set("first_saved", code.saves_input ? code.input : code.output);
  d.set("n_saved", std::to_string((code.saves_input ? 1 : 0) + (code.saves_output ? 1 : 0)));
  d.set("saves_input", mu::data(code.saves_input));
  d.set("saves_output", mu::data(code.saves_output));
  // A per-row output (logsumexp, z-loss): one value per row forward, one upstream value per row.
  d.set("per_row", mu::data(code.per_row));
  // As Tier 1: a detached row statistic (x - x.max().detach()) is a gradient by design, not the
  // derivative of the values; finite differences cannot check it.
  bool has_detach = p.row_program && p.row_program->output.find("detach(") != std::string::npos;
  if (p.row_program)
    for (const auto& r : p.row_program->forward_reductions)
      has_detach = has_detach || r.expression.find("detach(") != std::string::npos;
  d.set("has_detach", has_detach);
  d.set("per_column", mu::data(!code.per_row));
  d.set("keepdim", mu::data(code.per_row && p.outputs[0].shape.find('1') != std::string::npos));
  d.set("has_pytorch_reference", mu::data(!p.row_program->pytorch_reference.empty()));
  d.set("pytorch_reference", p.row_program->pytorch_reference);
  d.set("math_policy", math_policy(templates_dir));
  shared_fields(p, d, "4096");
  tier2_tuning(p, d);
  return d;
}

}  // namespace

std::vector<RenderedFile> render(const KernelProfile& profile, const std::filesystem::path& templates_dir) {
  if (profile.segment) return render_segment(profile, templates_dir);  // segment_render.cpp
  if (profile.fused_linear) return render_fused_linear(profile, templates_dir);  // tier3_render.cpp
  if (profile.tier != 1 && profile.tier != 2)
    throw std::invalid_argument("render: profile '" + profile.op_name + "' is Tier " + std::to_string(profile.tier) +
                                ": the templates generate Tier-1 (element-wise) and Tier-2 (row reduction) kernels");
  const bool row = profile.tier == 2;
  mu::data data = row ? tier2_context(profile, templates_dir) : context(profile);
  const std::string& op = profile.op_name;
  struct Target {
    const char* template_name;
    std::string path;
    bool insert;
    std::string prefix = {};
  };
  // Tier 2 has its own kernel, reference, tests, benchmark, binding and page; the reference
  // header (a section for its comment), the docs row and the exports are shared.
  std::vector<Target> targets = {
      {row ? "row_header.h.mustache" : "header.h.mustache", "kernels/include/liger_kernels/" + op + ".h", false},
      {row ? "row_kernel.cu.mustache" : "kernel.cu.mustache", "kernels/src/" + op + "/" + op + ".cu", false},
      {row ? "row_tuning.h.mustache" : "tuning.h.mustache", "kernels/src/" + op + "/tuning.h", false},
      {"reference.h.mustache", "kernels/reference/" + op + "_ref.h", false},
      {row ? "row_reference.cpp.mustache" : "reference.cpp.mustache", "kernels/reference/" + op + "_ref.cpp", false},
      {row ? "row_test_reference.cpp.mustache" : "test_reference.cpp.mustache",
       "tests/kernels/reference/test_" + op + "_ref.cpp", false},
      {row ? "row_test_gpu.cpp.mustache" : "test_gpu.cpp.mustache", "tests/kernels/gpu/test_" + op + ".cpp", false},
      {row ? "row_bench.cpp.mustache" : "bench.cpp.mustache", "benchmarks/bench_" + op + ".cpp", false},
      {row ? "row_python_op.py.mustache" : "python_op.py.mustache", "kernels/python/liger_kernels/ops/" + op + ".py", false},
      {row ? "row_doc.md.mustache" : "doc.md.mustache", "docs/kernels/" + op + ".md", false},
      {"docs_row.md.mustache", "docs/kernels/README.md", true, "| `"},
      // Python exports (the build lists are CMake globs: nothing to insert there).
      {"exports_import.py.mustache", "kernels/python/liger_kernels/functional.py", true, "from .ops."},
      {"exports_alias.py.mustache", "kernels/python/liger_kernels/functional.py", true, "liger_"},
      {"exports_all.py.mustache", "kernels/python/liger_kernels/functional.py", true, "    \""},
  };
  // The compile backend's registry entry, where the forward has a PyTorch pattern (Tier 1; the
  // reason otherwise is in plan_compile_entry and noted by Act).
  const CompileEntryPlan entry = plan_compile_entry(profile);
  if (!entry.expression.empty()) {
    data.set("pattern_expression", entry.expression);
    targets.push_back({"compile_entry.py.mustache", "kernels/python/liger_kernels/compile/generated/" + op + ".py", false});
  }
  std::vector<RenderedFile> files;
  for (const auto& target : targets) {
    std::filesystem::path path = templates_dir / target.template_name;
    mu::mustache tmpl{read_template(path)};
    if (!tmpl.is_valid()) throw std::runtime_error(path.string() + ": " + tmpl.error_message());
    // Code, not HTML: the context holds generated code, schema-checked names and free text
    // already made safe by free_text().
    tmpl.set_custom_escape([](const std::string& s) { return s; });
    std::string content = tmpl.render(data);
    if (!tmpl.is_valid()) throw std::runtime_error(path.string() + ": " + tmpl.error_message());
    files.push_back({target.path, content, target.template_name, target.insert, target.prefix});
  }
  return files;
}

std::vector<std::string> existing_paths(const std::vector<RenderedFile>& files, const std::filesystem::path& repo_root) {
  std::vector<std::string> out;
  for (const auto& f : files)
    if (!f.insert && std::filesystem::exists(repo_root / f.path)) out.push_back(f.path);
  return out;
}

std::string insert_sorted_line(const std::string& text, const std::string& line, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string current;
  while (std::getline(in, current)) lines.push_back(current);
  std::string new_line = line;
  while (!new_line.empty() && (new_line.back() == '\n' || new_line.back() == '\r')) new_line.pop_back();
  std::size_t begin = lines.size(), end = lines.size();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind(prefix, 0) == 0) {
      begin = i;
      end = i;
      while (end < lines.size() && lines[end].rfind(prefix, 0) == 0) ++end;
      break;
    }
  }
  if (begin == lines.size()) return text;
  if (std::find(lines.begin() + static_cast<long>(begin), lines.begin() + static_cast<long>(end), new_line) !=
      lines.begin() + static_cast<long>(end))
    return text;
  std::size_t at = begin;
  while (at < end && lines[at] < new_line) ++at;
  lines.insert(lines.begin() + static_cast<long>(at), new_line);
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  if (!text.empty() && text.back() != '\n') out.pop_back();
  return out;
}

}  // namespace liger::kernel_dev
