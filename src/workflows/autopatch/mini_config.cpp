// The mini-model configuration the generated tests build.
#include "workflows/autopatch/analysis_internal.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <sstream>
#include <set>

namespace liger::autopatch::detail {

namespace {

constexpr int kMiniVocab = 1024;

std::optional<long long> as_int(const std::string& text) {
  // Python allows digit separators (Gemma3Config: boi_token_index = 255_999).
  std::string s;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] != '_' || i == 0 || i + 1 == text.size() || !std::isdigit(static_cast<unsigned char>(text[i - 1])) ||
        !std::isdigit(static_cast<unsigned char>(text[i + 1])))
      s += text[i];
  try {
    size_t pos = 0;
    long long v = std::stoll(s, &pos);
    if (pos == s.size()) return v;
  } catch (...) {
  }
  return std::nullopt;
}

// A flat Python list literal's elements as text ("[0,3]" -> {"0", "3"}), nullopt otherwise.
std::optional<std::vector<std::string>> list_items(const std::string& s) {
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return std::nullopt;
  std::vector<std::string> out;
  for (auto& x : split_top_level(s.substr(1, s.size() - 2), ',')) {
    std::string v = x;
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    while (!v.empty() && v.back() == ' ') v.pop_back();
    if (v.empty()) continue;
    if (v.front() == '[' || v.front() == '(' || v.front() == '{') return std::nullopt;
    out.push_back(v);
  }
  return out;
}

bool is_token_id_field(const std::string& n) {
  return ends_with(n, "_token_id") || ends_with(n, "_token_ids") || ends_with(n, "_token_index") ||
         ends_with(n, "_token_idx");
}

YAML::Node scalar_node(const std::string& v) {
  if (auto i = as_int(v)) return YAML::Node(*i);
  return YAML::Node(unquote(v));
}

}  // namespace

// Makes the mini configuration one the config class accepts and the model builds: fields are
// read from the class's own defaults and brought inside the mini model's sizes. Each change is
// recorded as "field: default -> value (why)" in `derivations`, which the generated test quotes
// when building the model fails.
void Analyzer::derive_mini_fields(const ConfigClass& cc, YAML::Node& out, YAML::Node& why) {
  const int layers = out["num_hidden_layers"] ? out["num_hidden_layers"].as<int>() : 2;
  const int vocab = out["vocab_size"] ? out["vocab_size"].as<int>() : kMiniVocab;
  auto note = [&](const std::string& field, const std::string& from, const YAML::Node& to, const std::string& reason) {
    out[field] = to;
    YAML::Emitter e;
    e << YAML::Flow << to;
    why.push_back(field + ": " + from + " -> " + e.c_str() + " (" + reason + ")");
  };
  // Token ids outside the shrunk vocabulary (Phi-3's pad_token_id=32000 with vocab 1024) fail in
  // nn.Embedding(padding_idx=...) or index past the embedding: moved to free ids at its top.
  std::set<long long> used;
  for (const auto& prm : cc.params)
    if (is_token_id_field(prm.name))
      if (auto v = as_int(prm.default_value); v && *v >= 0 && *v < vocab) used.insert(*v);
  long long next_free = vocab - 1;
  auto free_id = [&] {
    while (used.count(next_free)) --next_free;
    used.insert(next_free);
    return next_free;
  };
  const std::string in_vocab = "outside the mini vocabulary of " + std::to_string(vocab);
  for (const auto& prm : cc.params) {
    if (!is_token_id_field(prm.name) || out[prm.name]) continue;
    if (auto v = as_int(prm.default_value)) {
      if (*v >= vocab) note(prm.name, prm.default_value, YAML::Node(free_id()), in_vocab);
    } else if (auto items = list_items(prm.default_value)) {
      bool moved = false, all_int = true;
      YAML::Node ids(YAML::NodeType::Sequence);
      for (const auto& it : *items) {
        auto iv = as_int(it);
        if (!iv) { all_int = false; break; }
        if (*iv >= vocab) { ids.push_back(free_id()); moved = true; }
        else ids.push_back(*iv);
      }
      if (all_int && moved) note(prm.name, prm.default_value, ids, in_vocab);
    }
  }
  // Other vocabularies sized like the main one (Gemma 4's vocab_size_per_layer_input = 262_144,
  // an embedding per layer input) shrink with it.
  for (const auto& prm : cc.params) {
    if (out[prm.name] || prm.name == "vocab_size" || !contains(prm.name, "vocab_size")) continue;
    if (auto v = as_int(prm.default_value); v && *v > vocab)
      note(prm.name, prm.default_value, YAML::Node(vocab), "the mini vocabulary of " + std::to_string(vocab));
  }
  // Per-layer lists: index lists (`cross_attention_layers=[3,8,...]`, `mlp_only_layers`) keep the
  // indices below the mini layer count; pattern lists (`layer_types`) are cycled to that count.
  for (const auto& prm : cc.params) {
    if (out[prm.name] || !contains(prm.name, "layer")) continue;
    auto items = list_items(prm.default_value);
    if (!items || items->empty()) continue;
    bool ints = std::all_of(items->begin(), items->end(), [](const std::string& x) { return as_int(x).has_value(); });
    YAML::Node v(YAML::NodeType::Sequence);
    if (ints && (ends_with(prm.name, "_layers") || ends_with(prm.name, "_layer_ids") || ends_with(prm.name, "_indices"))) {
      for (const auto& x : *items)
        if (*as_int(x) >= 0 && *as_int(x) < layers) v.push_back(*as_int(x));
      if (v.size() == items->size()) continue;
      if (v.size() == 0) v.push_back(layers - 1);  // keep one layer of that kind
      note(prm.name, prm.default_value, v, "layer indices of the " + std::to_string(layers) + "-layer mini model");
    } else if (static_cast<int>(items->size()) != layers) {
      for (int i = 0; i < layers; ++i) v.push_back(scalar_node((*items)[static_cast<size_t>(i) % items->size()]));
      note(prm.name, prm.default_value, v, "one entry per layer of the " + std::to_string(layers) + "-layer mini model");
    }
  }
  // Latent attention (MLA: keys and values expanded per query head from one low-rank latent,
  // `kv_lora_rank`) has as many key/value heads as query heads; a grouped count makes
  // repeat_kv multiply heads the projection already made (MiniCPM3: 4 query vs 8 key heads).
  // Kept equal when the configuration's own defaults are equal.
  if (cc.param("kv_lora_rank") && out["num_attention_heads"] && out["num_key_value_heads"] &&
      out["num_key_value_heads"].as<int>() != out["num_attention_heads"].as<int>()) {
    const ConfigParam* kv = cc.param("num_key_value_heads");
    const ConfigParam* q = cc.param("num_attention_heads");
    const std::string kvd = kv ? unquote(kv->default_value) : "None";
    if (kvd == "None" || (q && kvd == unquote(q->default_value)))
      note("num_key_value_heads", kv ? kv->default_value : "unset", out["num_attention_heads"],
           "latent attention (kv_lora_rank): one key/value head per query head, as the configuration's defaults have it");
  }
  // Experts chosen per token never exceed the experts there are.
  int experts = 0;
  for (const char* n : {"num_experts", "num_local_experts", "n_routed_experts"})
    if (out[n]) experts = out[n].as<int>();
  if (experts > 0)
    for (const char* n : {"num_experts_per_tok", "moe_topk", "top_k", "experts_per_token", "num_experts_per_token"}) {
      if (!cc.param(n)) continue;
      auto dv = as_int(cc.param(n)->default_value);
      bool too_many = out[n] ? out[n].as<int>() > experts : (!dv || *dv > experts);
      if (too_many) note(n, cc.param(n)->default_value, YAML::Node(std::min(2, experts)),
                         "at most the mini model's " + std::to_string(experts) + " experts");
    }
  // Rotary and head sizes agree with the mini head dim (hidden 128 / 4 heads = 32).
  const int head_dim = out["head_dim"] ? out["head_dim"].as<int>() : 32;
  for (const char* n : {"rotary_dim", "rope_dim", "rotary_emb_dim"})
    if (cc.param(n) && !out[n])
      if (auto dv = as_int(cc.param(n)->default_value); dv && *dv > head_dim)
        note(n, cc.param(n)->default_value, YAML::Node(head_dim), "the mini head dim is " + std::to_string(head_dim));
  for (const char* n : {"kv_channels", "attention_head_dim", "global_head_dim"})
    if (cc.param(n) && !out[n])
      if (auto dv = as_int(cc.param(n)->default_value); dv && *dv != head_dim)
        note(n, cc.param(n)->default_value, YAML::Node(head_dim), "head_dim * heads = hidden size of the mini model");
}

void Analyzer::mini_config() {
  YAML::Node mc;
  const ConfigClass* main = cfg.main(model_type);
  // The head patched is built with its own config class (Llama4ForCausalLM: Llama4TextConfig).
  if (!output_config_class.empty())
    if (const ConfigClass* own = cfg.find(output_config_class)) main = own;
  if (!main) {
    p.warnings.push_back("no configuration file: the mini-model configuration lists the usual "
                         "attribute names unverified");
  }
  // 4 layers where layer kinds alternate (dense/MoE hybrids; linear-attention hybrids such as
  // Qwen3.5, whose default pattern makes every 4th layer full attention), so both kinds exist.
  bool hybrid = (d("architecture").decided() && d("architecture").value_string() == "hybrid") ||
                !s.linear_mixers.empty();
  bool moe = d("architecture").decided() && d("architecture").value_string() != "dense";
  const std::vector<std::pair<std::string, YAML::Node>> text_values = {
      {"vocab_size", YAML::Node(1024)},
      {"hidden_size", YAML::Node(128)},
      {"intermediate_size", YAML::Node(256)},
      {"intermediate_size_mlp", YAML::Node(256)},
      {"num_hidden_layers", YAML::Node(hybrid ? 4 : 2)},
      {"num_attention_heads", YAML::Node(4)},
      {"num_key_value_heads", YAML::Node(2)},
      {"head_dim", YAML::Node(32)},
      {"max_position_embeddings", YAML::Node(512)},
      {"moe_intermediate_size", YAML::Node(64)},
      {"num_experts", YAML::Node(4)},
      {"num_local_experts", YAML::Node(4)},
      {"n_routed_experts", YAML::Node(4)},
      {"num_experts_per_tok", YAML::Node(2)},
      {"n_shared_experts", YAML::Node(1)},
      {"shared_expert_intermediate_size", YAML::Node(64)},
      {"first_k_dense_replace", YAML::Node(1)},
      {"n_group", YAML::Node(1)},
      {"topk_group", YAML::Node(1)},
      {"kv_lora_rank", YAML::Node(32)},
      {"q_lora_rank", YAML::Node(64)},
      {"qk_rope_head_dim", YAML::Node(16)},
      {"qk_nope_head_dim", YAML::Node(16)},
      {"v_head_dim", YAML::Node(32)},
      {"sliding_window", YAML::Node(64)},
      // State-space mixers of hybrid models (Falcon-H1): at their defaults (128 heads, state 256,
      // chunk 256) the PyTorch fallback's chunked scan materialises a (batch, chunk, chunk, heads,
      // state) tensor of 32 GiB. Heads * head dim = expand (2) * the mini hidden size (128).
      {"mamba_d_ssm", YAML::Node(256)},
      {"mamba_n_heads", YAML::Node(8)},
      {"mamba_d_state", YAML::Node(16)},
      {"mamba_chunk_size", YAML::Node(32)},
      {"ssm_state_size", YAML::Node(16)},
      {"state_size", YAML::Node(16)},
  };
  auto fill = [&](const ConfigClass* cc, YAML::Node& out) {
    for (const auto& [name, v] : text_values) {
      if (!moe && (contains(name, "expert") || name == "moe_intermediate_size" || name == "first_k_dense_replace"))
        continue;
      if (!cc) {
        static const std::set<std::string> core = {"vocab_size", "hidden_size", "intermediate_size",
                                                   "num_hidden_layers", "num_attention_heads",
                                                   "num_key_value_heads"};
        if (core.count(name)) out[name] = v;
        continue;
      }
      if (cc->param(name)) out[name] = v;
    }
  };
  const ConfigClass* text = cfg.text(model_type);
  if (main) {
    mc["config_class"] = main->name;
    mc["model_type"] = main->model_type.empty() ? model_type : main->model_type;
  } else {
    mc["model_type"] = model_type;
  }
  YAML::Node attrs;
  YAML::Node derivations(YAML::NodeType::Sequence);
  // The text model of a wrapper built with AutoModel.from_config(config.text_config) is
  // configured by the backbone's config class (LlavaConfig's text_config is a LlamaConfig).
  std::optional<ConfigInfo> bcfg;
  if (backbone_config && s.external_text) bcfg = parse_config_module(*backbone_config);
  const ConfigClass* btext = bcfg ? bcfg->text(s.external_text->folder) : nullptr;
  if (btext) {
    YAML::Node tc;
    fill(btext, tc);
    derive_mini_fields(*btext, tc, derivations);
    tc["model_type"] = btext->model_type.empty() ? s.external_text->model_type : btext->model_type;
    attrs["text_config"] = tc;
    mc["text_config_class"] = btext->name;
  } else if (text && main && text != main) {
    YAML::Node tc;
    fill(text, tc);
    derive_mini_fields(*text, tc, derivations);
    attrs["text_config"] = tc;
  } else {
    fill(text ? text : main, attrs);
    if (text || main) derive_mini_fields(text ? *text : *main, attrs, derivations);
  }
  // The wrapper's own token ids (llava's image_token_index=32000) index the text vocabulary too.
  if (main && attrs["text_config"]) {
    YAML::Node top;
    top["vocab_size"] = attrs["text_config"]["vocab_size"] ? attrs["text_config"]["vocab_size"].as<int>() : kMiniVocab;
    top["num_hidden_layers"] = 2;
    YAML::Node moved(YAML::NodeType::Sequence);
    derive_mini_fields(*main, top, moved);
    for (const auto& kv : top) {
      const std::string k = kv.first.as<std::string>();
      if (is_token_id_field(k)) attrs[k] = kv.second;
    }
    for (const auto& w : moved)
      if (is_token_id_field(w.as<std::string>().substr(0, w.as<std::string>().find(':')))) derivations.push_back(w);
    // A wrapper that keeps its own vocab_size beside text_config's (PaliGemmaConfig: 257152) has
    // it read as the vocabulary by code that asks the top-level config: left at full size, inputs
    // drawn from it index past the mini embedding (a device-side assert on the GPU).
    if (main->param("vocab_size")) {
      attrs["vocab_size"] = top["vocab_size"];
      derivations.push_back("vocab_size: " + main->param("vocab_size")->default_value + " -> " +
                            top["vocab_size"].as<std::string>() + " (the text_config's mini vocabulary)");
    }
  }
  // M-RoPE sections must add up to half the rotated dims: head_dim * partial_rotary_factor / 2
  // (GLM-4V-MoE and Qwen3.5 rotate half / a quarter of the head, a factor their configs set in
  // __post_init__ with kwargs.setdefault rather than as a field). Split 1 : 1.5 : 1.5 over t/h/w
  // like the released checkpoints' [16, 24, 24].
  if (d("rope").decided() && d("rope").value_string() == "mrope") {
    YAML::Node rs;
    rs["rope_type"] = "default";
    const YAML::Node& tcfg = attrs["text_config"] ? attrs["text_config"] : attrs;
    const int hd = tcfg["head_dim"] ? tcfg["head_dim"].as<int>() : 32;
    double factor = 1.0;
    if (auto f = config_default("partial_rotary_factor"); f && std::atof(f->c_str()) > 0) factor = std::atof(f->c_str());
    else if (cfg_module) {
      static const std::regex set_default(R"(partial_rotary_factor["']\s*,\s*([0-9.]+))");
      for (const auto& line : cfg_module->lines) {
        std::smatch mm;
        if (std::regex_search(line, mm, set_default) && std::atof(mm[1].str().c_str()) > 0) {
          factor = std::atof(mm[1].str().c_str());
          break;
        }
      }
    }
    const int half = std::max(3, static_cast<int>(hd * factor) / 2);
    const int t = std::max(1, half / 4), h = (half - t) / 2, w = half - t - h;
    rs["mrope_section"].push_back(t);
    rs["mrope_section"].push_back(h);
    rs["mrope_section"].push_back(w);
    if (factor != 1.0)
      derivations.push_back("mrope_section: -> [" + std::to_string(t) + "," + std::to_string(h) + "," +
                            std::to_string(w) + "] (sums to head_dim " + std::to_string(hd) +
                            " * partial_rotary_factor " + [&] { std::ostringstream o; o << factor; return o.str(); }() + " / 2)");
    const ConfigClass* rc = text ? text : main;
    std::string key = rc && rc->param("rope_parameters") ? "rope_parameters" : "rope_scaling";
    if (text && main && text != main) attrs["text_config"][key] = rs;
    else attrs[key] = rs;
  }
  // A logits scale the fused loss folds (decision 10) must differ from 1 in the mini model, or a
  // forward that dropped it would pass the convergence test: a default of 1 (Granite's
  // logits_scaling, FalconH1's lm_head_multiplier) is moved to a factor that shrinks the logits.
  if (const YAML::Node scales = d("last_hidden_state").details["logits_scale"]; scales && scales.IsSequence())
    for (const auto& sc : scales) {
      const std::string field = sc["config_attribute"] ? sc["config_attribute"].as<std::string>("") : "";
      if (field.empty()) continue;
      const ConfigClass* owner = text && text->param(field) ? text : main && main->param(field) ? main : text ? text : main;
      const bool nested = owner && owner == text && text != main && main && attrs["text_config"];
      YAML::Node target = nested ? attrs["text_config"] : attrs;
      const ConfigParam* prm = owner ? owner->param(field) : nullptr;
      // Not a field of the class (MiniCPM3's logits_scaling is a property computed from two
      // fields): there is nothing to set, and setting it could be refused.
      if (!prm) continue;
      const std::string def = prm ? unquote(prm->default_value) : "";
      const double v = def.empty() || def == "None" ? 1.0 : std::atof(def.c_str());
      if (v != 1.0 && v != 0.0) continue;
      const double to = sc["op"].as<std::string>("*") == "/" ? 2.0 : 0.5;
      target[field] = to;
      derivations.push_back(field + ": " + def + " -> " + (to == 2.0 ? "2.0" : "0.5") +
                            " (the logits scale the fused loss folds into the hidden state; 1 would not show a "
                            "forward that drops it)");
    }
  if (d("vision").decided() && d("vision").value.as<bool>() && main) {
    auto it = main->sub_configs.find("vision_config");
    const ConfigClass* vc = it != main->sub_configs.end() ? cfg.find(it->second) : nullptr;
    YAML::Node v;
    const std::vector<std::pair<std::string, int>> vision_values = {
        {"hidden_size", 64}, {"embed_dim", 64}, {"depth", 2}, {"num_hidden_layers", 2},
        {"num_heads", 2}, {"num_attention_heads", 2}, {"attention_heads", 2}, {"num_key_value_heads", 2},
        {"head_dim", 32}, {"num_global_layers", 1}, {"num_layers", 2}, {"intermediate_size", 128},
        {"out_hidden_size", 128}, {"projection_dim", 128}, {"vision_output_dim", 128}};
    // (Mllama's vision config names its heads attention_heads, 16 by default, and adds 8 global
    // layers: left at their defaults, its image test's attention over 4 tiles of 1025 patches held
    // 70 GiB on the H100 and starved the tests running beside it.)
    // Without the class (a vision config built through AutoConfig / CONFIG_MAPPING: CLIP, SigLIP),
    // only the names those ViT configs share: an unknown name could be rejected by the class.
    static const std::set<std::string> common = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                                 "intermediate_size"};
    for (const auto& [name, val] : vision_values)
      if (vc ? vc->param(name) != nullptr : common.count(name) > 0) v[name] = val;
    // The image features replace placeholder embeddings row for row, so the vision tower's output
    // width is the mini text model's hidden size: a config with an inner width beside
    // hidden_size (Qwen2-VL's embed_dim) projects to hidden_size; a wrapper's projection_dim
    // (PaliGemma, copied into its vision config) is the projector's output.
    const YAML::Node text_attrs = attrs["text_config"] ? attrs["text_config"] : attrs;
    const int text_hidden = text_attrs["hidden_size"] ? text_attrs["hidden_size"].as<int>() : 128;
    const YAML::Node& set = v;  // read without adding keys
    for (const char* out : {"out_hidden_size", "projection_dim"})
      if (set[out]) v[out] = text_hidden;
    if (vc && vc->param("embed_dim") && vc->param("hidden_size")) v["hidden_size"] = text_hidden;
    // Image tokens pooled from the vision tower's patch grid (Gemma 3: mm_tokens_per_image = 256,
    // 16 per side, avg-pooled from image_size / patch_size per side): the mini tower's default
    // grid (SigLIP 224 / 16 = 14 per side) cannot pool to 16 per side (a kernel of 0), so 4x4.
    if (const ConfigParam* tokens = main->param("mm_tokens_per_image")) {
      attrs["mm_tokens_per_image"] = 16;
      derivations.push_back("mm_tokens_per_image: " + tokens->default_value +
                            " -> 16 (4x4 image tokens, pooled from the mini vision tower's patch grid)");
    }
    if (main->param("projection_dim")) {
      attrs["projection_dim"] = text_hidden;
      derivations.push_back("projection_dim: " + main->param("projection_dim")->default_value + " -> " +
                            std::to_string(text_hidden) + " (the image features replace text embeddings of the mini "
                            "hidden size)");
    }
    // The vision config's own per-layer fields against its mini depth (Mllama's
    // intermediate_layers_indices [3, 7, 15, 23, 30] index the 2 layers' hidden states).
    if (vc) {
      YAML::Node vd = YAML::Clone(v);
      if (!vd["num_hidden_layers"] && vd["depth"]) vd["num_hidden_layers"] = vd["depth"];
      YAML::Node vwhy(YAML::NodeType::Sequence);
      derive_mini_fields(*vc, vd, vwhy);
      for (const auto& kv : vd) {
        const std::string k = kv.first.as<std::string>();
        if (!v[k] && !(k == "num_hidden_layers" && !vc->param(k))) v[k] = kv.second;
      }
      for (const auto& w : vwhy) derivations.push_back("vision_config." + w.as<std::string>());
    }
    if (!vc) p.warnings.push_back("vision sub-config class not found in the configuration file; vision_config sets only "
                                  "hidden_size, num_hidden_layers, num_attention_heads and intermediate_size");
    else mc["vision_config_class"] = vc->name;  // beside the attributes, which become the config's kwargs
    attrs["vision_config"] = v;
  }
  mc["attributes"] = attrs;
  if (derivations.size() > 0) mc["derivations"] = derivations;
  p.mini_config = mc;
}

}  // namespace liger::autopatch::detail
