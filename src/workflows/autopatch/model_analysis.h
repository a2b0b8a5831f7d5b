// autopatch's Understand core: resolve a HuggingFace model's source (a modeling file, or a model
// type found in an installed transformers), analyse it statically and produce the model profile:
// the 12 decisions of SPEC section 6 (each with evidence and a confidence, or an explicit
// `{undecided: reason}`), the patch plan (kernels applied, parts declined and why), the reference
// integration to follow and a mini-model configuration for tests.
//
//   ModelSource src = resolve_model_input("qwen3");        // or a path to modeling_qwen3.py
//   ModelProfile p = analyse_model(src);
//   YAML::Node doc = p.to_yaml();                           // what Understand writes
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workflows/autopatch/python_source.h"

namespace liger::autopatch {

namespace fs = std::filesystem;

// ---- input resolution ------------------------------------------------------------------------

struct ModelSource {
  std::string model_type;                 // "llama", from the file name or the argument
  fs::path modeling;                      // modeling_<type>.py
  std::optional<fs::path> configuration;  // configuration_<type>.py when it exists
  std::string resolved_from;              // "path" | "transformers <dir>"
};

struct ResolveOptions {
  std::string python = "python3";  // interpreter used to locate transformers
  // When set, used instead of asking python (tests, or a transformers source checkout); the
  // environment variable LIGER_TRANSFORMERS_DIR has the same effect.
  std::optional<fs::path> transformers_dir;
};

// `spec` is a path to modeling_<type>.py, a directory holding one, or a model type. Throws
// liger::Error (Usage/Toolchain) with a hint: python3 missing, transformers not installed, an
// unknown model type (listing close matches), a file that is not a modeling file.
ModelSource resolve_model_input(const std::string& spec, const ResolveOptions& options = {});
// The transformers package directory (…/site-packages/transformers), via `python3 -c`.
fs::path find_transformers_dir(const ResolveOptions& options = {});
// Model types (folder names under models/) close to `name`, best first.
std::vector<std::string> close_model_types(const fs::path& models_dir, const std::string& name,
                                           size_t max = 5);

// ---- configuration file --------------------------------------------------------------------

struct ConfigParam {
  std::string name;
  std::string default_value;  // normalised Python text ("\"silu\"", "1e-06", "None")
  int line = 0;
};

struct ConfigClass {
  std::string name;
  std::string model_type;  // the class attribute `model_type = "..."`
  int line = 0;
  std::vector<ConfigParam> params;  // __init__ parameters and class-level annotated fields
  std::map<std::string, std::string> sub_configs;  // "vision_config" -> "Qwen2VLVisionConfig"

  const ConfigParam* param(std::string_view name) const;
};

struct ConfigInfo {
  std::string file;
  std::vector<ConfigClass> classes;
  const ConfigClass* find(std::string_view name) const;
  // The top-level config of the model type (the one with `model_type = "<type>"` that is not a
  // sub-config), falling back to the first class.
  const ConfigClass* main(std::string_view model_type) const;
  // The class holding the text model's attributes (main, or its text_config sub-config).
  const ConfigClass* text(std::string_view model_type) const;
  // A parameter's default looked up in the text config, then the main config, then any class.
  std::optional<ConfigParam> default_of(std::string_view model_type, std::string_view name) const;
};

ConfigInfo parse_config_module(const PythonModule& module);

// ---- the profile -----------------------------------------------------------------------------

struct Evidence {
  std::string file;
  int line = 0;
  std::string fragment;  // the trimmed source line
};

// Keys in SPEC order: norm_type, rms_norm_casting, rms_norm_offset, in_place_backward,
// mlp_activation, architecture, vision, rope, output_class, last_hidden_state, softcapping,
// norm_names.
const std::vector<std::string>& decision_keys();
// A number the analysis reads as a literal logits factor ("0.5", ".5", "2e-1"); the profile's
// params.logits_scale is checked against the same rule when Act renders it.
bool is_logit_factor_literal(const std::string& text);

struct Decision {
  int number = 0;
  std::string key;
  YAML::Node value;        // scalar or map; null while undecided
  std::string undecided;   // the reason, when value is null
  double confidence = 0.0;
  std::vector<Evidence> evidence;
  YAML::Node details;      // supporting facts (classes, attributes, config defaults)
  std::vector<std::string> notes;

  bool decided() const { return undecided.empty() && value && !value.IsNull(); }
  std::string value_string() const;  // scalar value as text, "" otherwise
};

struct PatchItem {
  std::string kernel;  // rms_norm, layer_norm, rope, swiglu, geglu, fused_linear_cross_entropy,
                       // cross_entropy
  std::string target;  // the class / function replaced or whose forward is replaced
  std::vector<std::string> attributes;  // instance attributes touched (input_layernorm, mlp...)
  YAML::Node params;   // kernel options (offset, casting_mode, in_place, softcap...)
  std::string reason;  // for declined items: why the part keeps its own implementation
  // Set when the class lives in another modeling module than the analysed one (the text model
  // of a multimodal wrapper built with AutoModel.from_config): "transformers.models.llama.modeling_llama",
  // and the file it was read from ("models/llama/modeling_llama.py").
  std::string module;
  std::string source;
};

struct ModelProfile {
  std::string model_type;
  ModelSource source;
  std::vector<Decision> decisions;  // the 12, in order
  std::vector<PatchItem> apply;
  std::vector<PatchItem> declined;
  std::string reference_integration;  // llama | gemma | moe
  std::string reference_reason;
  YAML::Node mini_config;
  std::vector<std::string> warnings;

  const Decision& decision(std::string_view key) const;  // throws Internal on an unknown key
  std::vector<std::string> undecided() const;            // keys of undecided decisions
  const PatchItem* applied(std::string_view kernel) const;
  const PatchItem* declined_item(std::string_view kernel) const;
  YAML::Node to_yaml() const;
};

// Analyses already-parsed sources (tests, and the LLM path which may supply edited sources).
ModelProfile analyse_modules(const PythonModule& modeling, const PythonModule* configuration,
                             const std::string& model_type);
ModelProfile analyse_model(const ModelSource& source);
// resolve_model_input + analyse_model.
ModelProfile analyse_model(const std::string& spec, const ResolveOptions& options = {});

}  // namespace liger::autopatch
