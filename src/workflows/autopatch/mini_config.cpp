// The mini-model configuration the generated tests build.
#include "workflows/autopatch/analysis_internal.h"

#include <set>

namespace liger::autopatch::detail {

void Analyzer::mini_config() {
  YAML::Node mc;
  const ConfigClass* main = cfg.main(model_type);
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
  if (text && main && text != main) {
    YAML::Node tc;
    fill(text, tc);
    attrs["text_config"] = tc;
  } else {
    fill(text ? text : main, attrs);
  }
  // M-RoPE sections must add up to head_dim / 2.
  if (d("rope").decided() && d("rope").value_string() == "mrope") {
    YAML::Node rs;
    rs["rope_type"] = "default";
    rs["mrope_section"].push_back(4);
    rs["mrope_section"].push_back(6);
    rs["mrope_section"].push_back(6);
    const ConfigClass* rc = text ? text : main;
    std::string key = rc && rc->param("rope_parameters") ? "rope_parameters" : "rope_scaling";
    if (text && main && text != main) attrs["text_config"][key] = rs;
    else attrs[key] = rs;
  }
  if (d("vision").decided() && d("vision").value.as<bool>() && main) {
    auto it = main->sub_configs.find("vision_config");
    const ConfigClass* vc = it != main->sub_configs.end() ? cfg.find(it->second) : nullptr;
    YAML::Node v;
    const std::vector<std::pair<std::string, int>> vision_values = {
        {"hidden_size", 64}, {"embed_dim", 64}, {"depth", 2}, {"num_hidden_layers", 2},
        {"num_heads", 2}, {"num_attention_heads", 2}, {"intermediate_size", 128},
        {"out_hidden_size", 128}, {"projection_dim", 128}, {"vision_output_dim", 128}};
    for (const auto& [name, val] : vision_values)
      if (!vc || vc->param(name)) v[name] = val;
    if (!vc) p.warnings.push_back("vision sub-config class not found; vision_config attribute names unverified");
    else v["config_class"] = vc->name;
    attrs["vision_config"] = v;
  }
  mc["attributes"] = attrs;
  p.mini_config = mc;
}

}  // namespace liger::autopatch::detail
