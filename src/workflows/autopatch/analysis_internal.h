// Internal to the autopatch analysis (src/workflows/autopatch/*.cpp): text helpers, the model's
// structure (which classes play which role) and the Analyzer that takes the 12 decisions. Each
// decision family lives in its own file: structure.cpp, analysis_norms.cpp, analysis_mlp.cpp,
// analysis_rope.cpp, analysis_output.cpp, patch_plan.cpp, mini_config.cpp, external_text.cpp.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "liger/error.h"
#include "workflows/autopatch/model_analysis.h"

namespace liger::autopatch::detail {

inline bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}
inline bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}
inline bool starts_with(std::string_view s, std::string_view pre) { return s.rfind(pre, 0) == 0; }

// What a `return` statement returns, joined again from its tokens: the normalised text puts no
// space after `return` when the value opens with a bracket ("return(w*h).to(t)"), so cutting a
// fixed "return " prefix would eat that bracket and misread the expression (OLMo2's RMSNorm).
inline std::string returned_expr(const Statement& st) {
  return st.tokens.empty() ? std::string() : join_tokens(st.tokens, 1, st.tokens.size());
}

inline std::string unquote(std::string s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front())
    return s.substr(1, s.size() - 2);
  return s;
}

inline bool is_vision_name(std::string_view n) {
  static const char* marks[] = {"Vision", "Visual", "Siglip", "Clip", "CLIP", "Patch", "Image",
                                "Projector", "Merger", "Pixtral", "ViT", "Vit"};
  for (const char* m : marks)
    if (contains(n, m)) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// The model's structure: which classes play which role (structure.cpp)
// ---------------------------------------------------------------------------------------------

enum class NormKind { None, Rms, Layer };

struct NormClass {
  std::string name;  // local class name, or "nn.LayerNorm" / "nn.RMSNorm"
  NormKind kind = NormKind::None;
  const ClassDef* cls = nullptr;  // null for torch classes
  // Set when the forward takes more than the hidden states (a gate) or multiplies by an
  // activation (Qwen3.5's / Mamba2's RMSNormGated: norm(x) * silu(gate)): such a class is never
  // replaced by the library RMSNorm, which has no gate.
  std::string gated_why;
  int gated_line = 0;
  bool gated() const { return !gated_why.empty(); }

  NormClass() = default;
  NormClass(std::string n, NormKind k, const ClassDef* c) : name(std::move(n)), kind(k), cls(c) {}
};

struct NormAttr {
  std::string attr;
  std::string cls;
  int line = 0;
};

// A token mixer of the decoder layer that is not softmax attention (a GatedDeltaNet, a Mamba
// mixer...): hybrid models build one on some layers and softmax attention on the others.
struct LinearMixer {
  std::string attr;
  const ClassDef* cls = nullptr;
  int line = 0;
  std::vector<NormAttr> norms;  // its norm attributes (Qwen3.5's `norm = ...RMSNormGated(...)`)
};

// The text model is built from another model's config (`self.language_model =
// AutoModel.from_config(config.text_config)`, GLM-4.6V): its classes are not in this file.
struct ExternalText {
  std::string attr;         // language_model
  std::string owner;        // the class assigning it
  int line = 0;
  std::string model_type;   // the text_config's default model type, from the configuration file
  int config_line = 0;
  std::string modeling;     // models/<dir>/modeling_<dir>.py when found next to this model
  fs::path modeling_path;   // that file on disk
  std::string folder;       // <dir>
  std::string follow_error; // why analysing it failed
};

struct Structure {
  const PythonModule& m;
  std::map<std::string, NormClass> norms;  // by class name
  const ClassDef* base_model = nullptr;    // text model: embed_tokens + layers
  const ClassDef* decoder = nullptr;
  const ClassDef* attention = nullptr;
  std::string attention_attr;
  int attention_line = 0;
  std::vector<LinearMixer> linear_mixers;
  std::optional<ExternalText> external_text;
  std::vector<NormAttr> decoder_norms, attention_norms;
  std::optional<NormAttr> final_norm;
  std::vector<std::pair<std::string, const ClassDef*>> mlp_candidates;  // attr, class
  std::string mlp_attr;
  int mlp_line = 0;
  // Decoder norm attributes assigned only in branches the default configuration does not take.
  std::vector<NormAttr> skipped_norms;
  std::vector<std::string> skipped_why;
  // The configuration's default for a field, as written (set by the Analyzer): lets the structure
  // pick the class a conditional expression builds by default.
  std::function<std::optional<std::string>(const std::string&)> config_default;

  explicit Structure(const PythonModule& mod) : m(mod) {}
};

// The statements of a method with `self._helper(...)` bodies inlined (norms often compute in a
// `_norm` helper).
std::vector<Statement> method_with_helpers(const ClassDef& c, std::string_view name);
std::string joined_text(const std::vector<Statement>& sts);
const NormClass* norm_of_callee(const Structure& s, const std::string& callee);
// Norm attributes assigned in c.__init__, first assignment of each name, skipping skip_lines.
std::vector<NormAttr> norm_attrs(const Structure& s, const ClassDef& c, const std::set<int>* skip_lines = nullptr);
std::vector<std::string> local_classes_in(const Structure& s, const Assignment& a);
void find_structure(Structure& s);
// A config attribute's default as Python text ("False", "None", "2"), nullopt when unknown.
using ConfigLookup = std::function<std::optional<std::string>(const std::string&)>;
std::set<int> inactive_branch_lines(const FunctionDef& f, const ConfigLookup& def, std::vector<std::string>* why);
// `A if cond else B` at the top level of a value (inside one pair of brackets at most): token
// indices of the value's start, `if`, `else` and end.
struct Conditional { size_t begin = 0, if_at = 0, else_at = 0, end = 0; };
std::optional<Conditional> top_level_conditional(const std::vector<Token>& t);
// The truth of a condition on the configuration alone (`not config.is_moe`, `config.x is None and
// config.y == 2`) under its defaults; nullopt when it names anything else or a default is unknown.
std::optional<bool> eval_config_condition(const std::string& cond, const ConfigLookup& def);

// ---------------------------------------------------------------------------------------------
// The decisions
// ---------------------------------------------------------------------------------------------

struct Analyzer {
  const PythonModule& m;
  const PythonModule* cfg_module;
  ConfigInfo cfg;
  std::string model_type;
  Structure s;
  ModelProfile p;

  Analyzer(const PythonModule& mod, const PythonModule* c, std::string type)
      : m(mod), cfg_module(c), model_type(std::move(type)), s(mod) {
    if (c) cfg = parse_config_module(*c);
  }

  Evidence ev(int line) const { return Evidence{m.origin, line, m.line_text(line)}; }
  Evidence cfg_ev(int line) const {
    return Evidence{cfg_module ? cfg_module->origin : "", line,
                    cfg_module ? cfg_module->line_text(line) : ""};
  }

  Decision& d(std::string_view key) {
    for (auto& x : p.decisions)
      if (x.key == key) return x;
    throw Error(ErrorKind::Internal, "unknown decision " + std::string(key));
  }
  void undecide(Decision& x, std::string why) {
    x.value = YAML::Node();
    x.undecided = std::move(why);
    x.confidence = 0.0;
  }
  template <class T>
  void decide(Decision& x, const T& v, double conf) {
    x.value = YAML::Node(v);
    x.undecided.clear();
    x.confidence = conf;
  }

  // The config class the text model's classes are annotated with (`config: Qwen3OmniMoeTextConfig`
  // on the decoder layer): its defaults come first, so a field several config classes of the file
  // declare (hidden_act: silu for the text model, gelu_pytorch_tanh for the vision tower) is read
  // from the text model's.
  std::string text_config_class;
  std::optional<ConfigParam> config_param(const std::string& attr) const {
    if (!text_config_class.empty())
      if (const ConfigClass* c = cfg.find(text_config_class))
        if (const ConfigParam* p = c->param(attr)) return *p;
    return cfg.default_of(model_type, attr);
  }
  // The default as written (quotes kept), for evaluating conditions.
  std::optional<std::string> config_default_raw(const std::string& attr) const {
    auto prm = config_param(attr);
    if (!prm) return std::nullopt;
    return prm->default_value;
  }
  std::optional<std::string> config_default(const std::string& attr) const {
    auto prm = config_param(attr);
    if (!prm) return std::nullopt;
    return unquote(prm->default_value);
  }

  // ---- 1-4, 12: norms, in-place backward, norm names (analysis_norms.cpp) ----------------------
  struct RmsArith {
    std::string casting;  // llama | gemma | none | "" (undecided)
    int offset = -1;
    bool has_weight = true;
    std::string why;
    std::vector<int> lines;
  };
  RmsArith rms_arithmetic(const ClassDef& c);
  std::vector<NormAttr> text_norm_attrs() const;
  const NormClass* primary_norm(NormKind kind) const;
  // Gated norm classes (norm(x, gate)) of the text model: the decoder layer's, the attention's,
  // the linear-attention mixers' and the final norm's, then any other in the file outside a
  // vision tower. Each is excluded from the norm kernels with its reason.
  struct GatedNorm {
    const NormClass* nc;
    std::vector<std::string> attrs;  // "norm" (in Qwen3_5GatedDeltaNet)...
    std::vector<std::string> owners; // the classes holding those attributes
  };
  std::vector<GatedNorm> gated_norms() const;
  void decide_norms();
  void decide_in_place();
  void decide_norm_names();

  // ---- 5-6: MLP and architecture (analysis_mlp.cpp) --------------------------------------------
  struct MlpInfo {
    std::string kind;  // swiglu | geglu | fused_swiglu | other | "" (undecided)
    std::string why;
    std::string activation, config_attr, gate, up, down, gate_up;
    std::string activation_note;  // how an activation read indirectly was found (a reviewer's caveat)
    // Set when the gated product is scaled beyond down(act(gate(x)) * up(x)) (FalconH1's
    // gate_multiplier / down_multiplier): the activation is still what it is, but the library
    // kernel would drop the scale, so the patch is declined with this reason.
    std::string scaled;
    std::vector<int> lines;
    bool gated = false, fused = false;
  };
  static std::string map_activation(const std::string& act);
  MlpInfo analyse_mlp(const ClassDef& c);
  static bool is_moe_class(const ClassDef& c);
  std::set<const ClassDef*> mlp_classes_not_built(std::vector<std::string>* notes) const;
  void decide_mlp_and_arch();

  // ---- 8: RoPE (analysis_rope.cpp) -------------------------------------------------------------
  struct RopeFn {
    std::string variant;  // standard | partial | interleaved | mrope | complex | custom
    std::string why;
    int line = 0;
    bool partial_capable = false;
  };
  RopeFn classify_rope_function(const FunctionDef& f);
  const ClassDef* text_rotary_class(int* assigned_line) const;
  static std::vector<int> mrope_statements(const ClassDef& c, std::string* section_default);
  void decide_rope();
  void add_linear_mixer_facts(Decision& dd);

  // ---- 7, 9-11: vision, output class, last hidden state, soft-capping (analysis_output.cpp) ----
  const ClassDef* output_cls = nullptr;
  // The config class the output head annotates (`config: Gemma3TextConfig`) when the configuration
  // file defines it: the mini model is built from it.
  std::string output_config_class;
  // One scalar factor on the logits: `op` "*" or "/", `factor` the path from the head (`self`)
  // to it ("config.logits_scaling", "logit_scale", "model.lm_head_multiplier") or a literal, and
  // the config field it comes from where one does.
  struct LogitScale {
    std::string op, factor, config_attribute;
    int line = 0;
  };
  struct HeadInfo {
    const ClassDef* cls = nullptr;
    int forward_line = 0, lm_line = 0;
    std::string hs_var, access, cap_attr, undecided;
    // The output projection: `lm_head`, or what get_output_embeddings returns (BioGPT's
    // output_projection, GPT-NeoX's embed_out); the base model the forward calls first.
    std::string head_attr = "lm_head", base_attr;
    std::string head_arg;    // what the projection is applied to (the hidden-state variable, unsliced)
    std::string hs_changed;  // a reassignment of the hidden state before the projection
    bool logits_to_keep = false;
    std::vector<int> hs_lines, cap_lines, transform_lines;
    std::vector<std::string> transforms;
    // The transforms that are scalar scales of the logits (folded into the fused loss), and why the
    // first one that is not could not fold ("" when every transform folds).
    std::vector<LogitScale> scales;
    std::string unfoldable;
    bool softcaps() const { return !cap_lines.empty() || !cap_attr.empty(); }
    bool transforms_fold() const { return !scales.empty() && unfoldable.empty(); }
  };
  std::vector<HeadInfo> heads;  // every *ForCausalLM / *ForConditionalGeneration with a forward
  HeadInfo analyse_head(const ClassDef& c) const;
  // analysis_logit_scale.cpp
  std::string fold_logit_scale(HeadInfo& h, const std::string& transform, int line,
                               const std::string& operand = "logits") const;
  bool scalar_init_value(const std::string& value, std::string* field) const;
  const HeadInfo* head_of(const ClassDef* c) const {
    for (const auto& x : heads)
      if (x.cls == c) return &x;
    return nullptr;
  }
  void decide_vision();
  void decide_output();

  // ---- patch plan (patch_plan.cpp), mini model (mini_config.cpp) -------------------------------
  void plan();
  void plan_text_kernels();
  void plan_heads();
  void plan_vision_parts();
  void mini_config();
  void derive_mini_fields(const ConfigClass& cc, YAML::Node& out, YAML::Node& why);

  // ---- a text model defined in another model's file (external_text.cpp) -----------------------
  // The backbone's own analysis (llava -> models/llama/modeling_llama.py); `follow` is false
  // inside that analysis so following stops after one level.
  bool follow = true;
  std::optional<PythonModule> backbone_modeling, backbone_config;
  std::optional<ModelProfile> backbone;
  void find_external_text();
  void follow_external_text();
  std::string external_text_reason() const;
  void apply_external_text();
  void plan_external_text();

  ModelProfile run();
};

}  // namespace liger::autopatch::detail
