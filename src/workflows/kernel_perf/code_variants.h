// kernel-perf code variants: compile-time strategies of a kernel family (knobs) rendered into
// the op's tuning header as one `using <alias> = <template><v1, v2, ...>;` line, so a variant is a
// real source diff that the existing build / smoke test / benchmark / guardrail path realises.
//
//   search_spaces.yaml, per op:
//     code_knobs:
//       alias: BwdVariant                       the alias the library's launcher instantiates
//       template: norm::BwdVariant              what the alias names (the line is rewritten whole)
//       knobs: [{name: dw_first, values: [0, 1]}, ...]   in template-argument order; first value
//                                                          listed is NOT the default: the file's is
//       instantiate: {includes: [...], kernel: "ns::k<..., ns::Alias>", params: "ns::Params"}
//                                                one kernel instantiation: the compile check and
//                                                the profile's per-variant ptxas report build it
//
//   strategies.yaml: kind: code_variant, knobs: {cache_fp32: 0}   applied over the current best
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace liger::kernel_perf {

struct KernelResources;
struct Strategy;

struct CodeKnob {
  std::string name;
  std::vector<int> values;  // the values the template accepts
  std::string doc;
};

struct CodeKnobSpec {
  bool present = false;
  std::string alias, tmpl;
  std::vector<CodeKnob> knobs;  // template-argument order
  std::vector<std::string> includes;
  std::string kernel, params;   // explicit instantiation: template __global__ void <kernel>(<params>);
  std::string address_of;       // or an expression naming the kernel (its address is taken), for a
                                // kernel picked by a constexpr helper
  // The template's own name ("BwdVariant" of "norm::BwdVariant"): demangled kernel names carry
  // it with the rendered arguments.
  std::string template_name() const;
};

using KnobSetting = std::map<std::string, int>;

// Throws liger::Error (Internal) naming the problem when the node is malformed.
CodeKnobSpec parse_code_knobs(const YAML::Node& node);

// The knob values of the alias line in `tuning_text`; nullopt when the line is absent or does
// not have one integer argument per knob.
std::optional<KnobSetting> read_knobs(const CodeKnobSpec& spec, const std::string& tuning_text);

// `tuning_text` with the alias line's arguments set from `base` overlaid with `change`. Throws
// Failure when the line is absent, and Usage for an unknown knob or a value the knob does not take.
std::string render_knobs(const CodeKnobSpec& spec, const std::string& tuning_text, const KnobSetting& change);

// "dw_first=0 cache_fp32=1 min_blocks=0" in template order.
std::string knob_text(const CodeKnobSpec& spec, const KnobSetting& setting);

// A translation unit that explicitly instantiates the spec's one kernel (the variant's tuning
// header found first on the include path). LIGER_KERNEL_VARIANT_UNIT is defined first: a source
// included whole (kernels with internal linkage) leaves its own dispatch out under it.
std::string instantiation_source(const CodeKnobSpec& spec);

// nvcc for one instantiation with the ptxas resource report: the rendered tuning header lives
// under `override_dir` (same relative path as in kernels/src), searched before the tree.
std::vector<std::string> variant_compile_argv(const std::filesystem::path& tree, const std::filesystem::path& override_dir,
                                              const std::filesystem::path& source, const std::filesystem::path& object,
                                              int sm);

// Writes the rendered tuning header (dir/<tuning rel>) and the instantiation unit dir/variant.cu;
// returns the .cu path. (A source's quoted include of "<op>/tuning.h" is not found beside it, so
// -I resolves it, the override directory first.)
std::filesystem::path write_variant_unit(const CodeKnobSpec& spec, const std::string& tuning_rel,
                                         const std::string& rendered_tuning, const std::filesystem::path& dir);

// Of a ptxas report, the kernel that shows the variant: the one whose name carries the variant
// template with the most spill bytes, then registers; nullptr when none does.
const KernelResources* variant_kernel(const std::vector<KernelResources>& kernels, const CodeKnobSpec& spec);

// ---------------------------------------------------------------- the profile's per-variant report

struct VariantCompile {
  std::string label;       // "current" or the strategy id
  KnobSetting setting;     // the full knob setting compiled
  std::string knobs;       // knob_text(setting)
  bool ok = false;
  int registers = 0;
  long long spill_bytes = 0;   // stores + loads
  long long stack_bytes = 0;
  double occupancy = 0;        // estimate at the family's block size (fraction)
  std::string error;           // why it did not compile
};

// The settings worth compiling: the current one, then each code_variant strategy whose knobs
// the op has and which changes the current setting (duplicates once).
std::vector<std::pair<std::string, KnobSetting>> variant_settings(const CodeKnobSpec& spec, const KnobSetting& current,
                                                                   const std::vector<Strategy>& catalogue);

}  // namespace liger::kernel_perf
