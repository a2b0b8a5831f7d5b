// autopatch across files and mini-model configs (issue 19, items 1, 2 and 5): a wrapper whose text
// model is built with AutoModel.from_config(config.text_config) is analysed through the sibling
// modeling file; every causal-LM head is patched or declined; vision-tower parts are recorded;
// the mini config keeps token ids, per-layer lists and MoE sizes inside the mini model.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <map>

#include "autopatch_expect.h"
#include "liger/profile.h"
#include "workflows/autopatch/model_analysis.h"

namespace fs = std::filesystem;
using namespace liger::autopatch;

namespace {

fs::path fixtures() { return fs::path(LIGER_SOURCE_DIR) / "tests/workflows/fixtures/autopatch"; }

ModelProfile profile_of(const std::string& rel) { return analyse_model((fixtures() / rel).string()); }

const PatchItem* find_item(const std::vector<PatchItem>& items, const std::string& kernel, const std::string& target) {
  for (const auto& it : items)
    if (it.kernel == kernel && it.target == target) return &it;
  return nullptr;
}

std::string dump(const ModelProfile& p) { return YAML::Dump(p.to_yaml()); }

}  // namespace

TEST(AutopatchZoo, DecisionsMatchTheExpectationTable) {
  YAML::Node table = YAML::LoadFile((fixtures() / "expected_zoo.yaml").string());
  for (auto it = table.begin(); it != table.end(); ++it) {
    const std::string rel = it->first.as<std::string>();
    SCOPED_TRACE(rel);
    ModelProfile p = profile_of(rel);
    auto problems = autopatch_test::check(p, it->second);
    EXPECT_TRUE(problems.empty()) << rel << ":\n" << autopatch_test::join(problems) << "\nprofile:\n" << dump(p);
  }
}

TEST(AutopatchZoo, WrapperTextModelIsReadFromTheSiblingModelingFile) {
  ModelProfile p = profile_of("zoo/models/llava/modeling_llava.py");
  const Decision& nt = p.decision("norm_type");
  ASSERT_TRUE(nt.decided()) << dump(p);
  // Where it was decided: the backbone's file and line, and how the wrapper reaches it.
  ASSERT_FALSE(nt.evidence.empty());
  EXPECT_EQ(nt.evidence.front().file, "modeling_llama.py");
  EXPECT_EQ(nt.details["decided_in"].as<std::string>(), "models/llama/modeling_llama.py");
  ASSERT_FALSE(nt.notes.empty());
  EXPECT_NE(nt.notes.front().find("LlavaModel.language_model"), std::string::npos) << nt.notes.front();
  EXPECT_NE(nt.notes.front().find("configuration_llava.py:"), std::string::npos) << nt.notes.front();
  YAML::Node doc = p.to_yaml();
  EXPECT_EQ(doc["decisions"]["norm_type"]["source"].as<std::string>().rfind("modeling_llama.py:", 0), 0u);
  EXPECT_EQ(doc["decisions"]["output_class"]["source"].as<std::string>().rfind("modeling_llava.py:", 0), 0u);
  // The text kernels name the module defining their class; the loss stays on this file's head.
  const PatchItem* rms = find_item(p.apply, "rms_norm", "LlamaRMSNorm");
  ASSERT_TRUE(rms) << dump(p);
  EXPECT_EQ(rms->module, "transformers.models.llama.modeling_llama");
  EXPECT_EQ(rms->params["casting_mode"].as<std::string>(), "llama");
  const PatchItem* mlp = find_item(p.apply, "swiglu", "LlamaMLP");
  ASSERT_TRUE(mlp);
  EXPECT_EQ(mlp->module, "transformers.models.llama.modeling_llama");
  const PatchItem* loss = find_item(p.apply, "fused_linear_cross_entropy", "LlavaForConditionalGeneration.forward");
  ASSERT_TRUE(loss);
  EXPECT_TRUE(loss->module.empty());
  // The mini model configures the text model with the backbone's config class and type, and the
  // wrapper's image token lies inside the mini vocabulary.
  YAML::Node a = p.mini_config["attributes"];
  ASSERT_TRUE(a["text_config"]) << YAML::Dump(p.mini_config);
  EXPECT_EQ(a["text_config"]["model_type"].as<std::string>(), "llama");
  EXPECT_EQ(a["text_config"]["hidden_size"].as<int>(), 128);
  EXPECT_EQ(p.mini_config["text_config_class"].as<std::string>(), "LlamaConfig");
  // LlavaConfig builds its vision config through CONFIG_MAPPING (CLIP): only the names ViT configs share.
  ASSERT_TRUE(a["vision_config"]);
  EXPECT_EQ(a["vision_config"]["num_hidden_layers"].as<int>(), 2);
  EXPECT_FALSE(a["vision_config"]["depth"]) << "a Qwen2-VL name the CLIP config does not have";
  ASSERT_TRUE(a["image_token_index"]) << YAML::Dump(p.mini_config);
  EXPECT_LT(a["image_token_index"].as<int>(), 1024);
}

TEST(AutopatchZoo, WrapperWithoutItsBackboneStaysUndecidedWithTheReason) {
  // The llava files alone, without models/llama beside them.
  fs::path tmp = fs::temp_directory_path() / ("autopatch_zoo_" + std::to_string(::getpid()));
  fs::create_directories(tmp / "models/llava");
  for (const char* f : {"modeling_llava.py", "configuration_llava.py"})
    fs::copy_file(fixtures() / "zoo/models/llava" / f, tmp / "models/llava" / f, fs::copy_options::overwrite_existing);
  ModelProfile p = analyse_model((tmp / "models/llava/modeling_llava.py").string());
  fs::remove_all(tmp);
  const Decision& nt = p.decision("norm_type");
  EXPECT_FALSE(nt.decided());
  EXPECT_NE(nt.undecided.find("default model type is llama"), std::string::npos) << nt.undecided;
  EXPECT_NE(nt.undecided.find("not found beside this one"), std::string::npos) << nt.undecided;
  EXPECT_FALSE(p.applied("rms_norm"));
  ASSERT_TRUE(p.declined_item("rms_norm"));
  EXPECT_NE(p.declined_item("rms_norm")->reason.find("another model's file"), std::string::npos);
}

TEST(AutopatchZoo, EveryCausalLmHeadIsPatchedOrDeclinedWithTheReason) {
  ModelProfile p = profile_of("tinygemma3/modeling_tinygemma3.py");
  const Decision& out = p.decision("output_class");
  ASSERT_TRUE(out.details["heads"]) << dump(p);
  ASSERT_EQ(out.details["heads"].size(), 2u);
  std::map<std::string, YAML::Node> heads;
  for (const auto& h : out.details["heads"]) heads[h["class"].as<std::string>()] = YAML::Node(h);
  EXPECT_EQ(heads["TinyGemma3ForConditionalGeneration"]["status"].as<std::string>(), "patched");
  EXPECT_FALSE(heads["TinyGemma3ForConditionalGeneration"]["softcapping"].as<bool>());
  EXPECT_EQ(heads["TinyGemma3ForCausalLM"]["status"].as<std::string>(), "declined");
  EXPECT_TRUE(heads["TinyGemma3ForCausalLM"]["softcapping"].as<bool>());
  EXPECT_EQ(heads["TinyGemma3ForCausalLM"]["softcap_attribute"].as<std::string>(), "final_logit_softcapping");
  const PatchItem* lm = find_item(p.declined, "fused_linear_cross_entropy", "TinyGemma3ForCausalLM.forward");
  ASSERT_TRUE(lm) << dump(p);
  EXPECT_NE(lm->reason.find("soft-caps its logits with config.final_logit_softcapping"), std::string::npos) << lm->reason;
  // The soft-capping decision names the head that differs.
  bool noted = false;
  for (const auto& n : p.decision("softcapping").notes) noted |= n.find("TinyGemma3ForCausalLM soft-caps") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(AutopatchZoo, VisionTowerNormsAndMlpsAreRecordedBesideTheTextNorms) {
  ModelProfile p = profile_of("tinygemma3/modeling_tinygemma3.py");
  const Decision& nt = p.decision("norm_type");
  EXPECT_EQ(nt.value_string(), "RMSNorm") << "the text model's norms";
  ASSERT_TRUE(nt.details["vision_tower"]) << dump(p);
  bool layer_norm = false;
  for (const auto& v : nt.details["vision_tower"])
    if (v["kind"].as<std::string>() == "LayerNorm") {
      layer_norm = true;
      EXPECT_EQ(v["status"].as<std::string>(), "declined");
    }
  EXPECT_TRUE(layer_norm) << "the LayerNorm vision tower is reported beside the RMSNorm text model";
  const PatchItem* ln = find_item(p.declined, "layer_norm", "nn.LayerNorm");
  ASSERT_TRUE(ln) << dump(p);
  EXPECT_EQ(ln->reason.rfind("vision tower (", 0), 0u) << ln->reason;
  ASSERT_TRUE(p.decision("mlp_activation").details["vision_tower"]) << dump(p);
  EXPECT_EQ(p.decision("mlp_activation").details["vision_tower"][0]["class"].as<std::string>(), "TinyGemma3VisionMLP");
  EXPECT_TRUE(find_item(p.declined, "swiglu", "TinyGemma3VisionMLP"));
}

TEST(AutopatchZoo, TextLayersAppendedToALocalListAreTheDecoder) {
  // Mllama's text model appends cross- and self-attention layers to a local list; its vision
  // encoder (nn.LayerNorm) must not be taken for the text decoder.
  ModelProfile p = profile_of("zoo/models/mllama/modeling_mllama.py");
  EXPECT_EQ(p.decision("norm_type").value_string(), "RMSNorm") << dump(p);
  EXPECT_EQ(p.decision("norm_names").value["final"].as<std::string>(), "norm");
  EXPECT_TRUE(p.applied("rms_norm"));
  EXPECT_EQ(p.applied("rms_norm")->target, "MllamaTextRMSNorm");
  // Both heads are accounted for.
  EXPECT_TRUE(find_item(p.declined, "fused_linear_cross_entropy", "MllamaForCausalLM.forward"));
  // Cross-attention layer indices fit the 2-layer mini model.
  YAML::Node tc = p.mini_config["attributes"]["text_config"];
  ASSERT_TRUE(tc["cross_attention_layers"]) << YAML::Dump(p.mini_config);
  for (const auto& i : tc["cross_attention_layers"]) EXPECT_LT(i.as<int>(), tc["num_hidden_layers"].as<int>());
  EXPECT_LT(tc["pad_token_id"].as<int>(), tc["vocab_size"].as<int>());
  EXPECT_LT(p.mini_config["attributes"]["image_token_index"].as<int>(), tc["vocab_size"].as<int>());
}

TEST(AutopatchZoo, MiniConfigTokenIdsLieInsideTheVocabulary) {
  // Phi-3's pad_token_id=32000 (and eos_token_id=32000) with the mini vocabulary of 1024 made
  // nn.Embedding raise "Padding_idx must be within num_embeddings".
  ModelProfile p = profile_of("zoo/models/phi3/modeling_phi3.py");
  YAML::Node a = p.mini_config["attributes"];
  const int vocab = a["vocab_size"].as<int>();
  ASSERT_TRUE(a["pad_token_id"]) << YAML::Dump(p.mini_config);
  EXPECT_LT(a["pad_token_id"].as<int>(), vocab);
  EXPECT_LT(a["eos_token_id"].as<int>(), vocab);
  EXPECT_EQ(a["bos_token_id"].IsDefined() ? a["bos_token_id"].as<int>() : 1, 1) << "in-range ids keep their default";
  ASSERT_TRUE(p.mini_config["derivations"]);
  std::string all;
  for (const auto& d : p.mini_config["derivations"]) all += d.as<std::string>() + "\n";
  EXPECT_NE(all.find("pad_token_id: 32000 -> "), std::string::npos) << all;
  EXPECT_NE(all.find("outside the mini vocabulary of 1024"), std::string::npos) << all;
  // Heads times head dim is the hidden size.
  EXPECT_EQ(a["hidden_size"].as<int>() % a["num_attention_heads"].as<int>(), 0);
}

TEST(AutopatchZoo, ProfilesWithForeignModulesValidateAgainstTheSkillSchema) {
  // Plan items of a followed text model carry module/source; the schema must allow them (the
  // workflow refuses a profile that violates its own schema).
  auto schema = liger::profile::Schema::load_file(fs::path(LIGER_SOURCE_DIR) / "skills/autopatch/profile.schema.yaml");
  for (const char* rel : {"zoo/models/llava/modeling_llava.py", "zoo/models/mllama/modeling_mllama.py",
                          "zoo/models/phi3/modeling_phi3.py", "tinygemma3/modeling_tinygemma3.py"}) {
    YAML::Node doc = profile_of(rel).to_yaml();
    auto report = schema.validate(doc);
    EXPECT_TRUE(report.ok()) << rel << ":\n" << report.format_errors(rel);
  }
}

TEST(AutopatchZoo, MoeMiniConfigIsSmallButValid) {
  ModelProfile p = profile_of("zoo/models/gpt_oss/modeling_gpt_oss.py");
  YAML::Node a = p.mini_config["attributes"];
  ASSERT_TRUE(a["num_local_experts"]) << YAML::Dump(p.mini_config);
  ASSERT_TRUE(a["num_experts_per_tok"]);
  EXPECT_LE(a["num_experts_per_tok"].as<int>(), a["num_local_experts"].as<int>());
  EXPECT_LT(a["num_local_experts"].as<int>(), 128) << "small";
  const int vocab = a["vocab_size"].as<int>();
  EXPECT_LT(a["pad_token_id"].as<int>(), vocab);
  EXPECT_LT(a["eos_token_id"].as<int>(), vocab);
  EXPECT_NE(a["pad_token_id"].as<int>(), a["eos_token_id"].as<int>()) << "distinct defaults stay distinct";
  EXPECT_EQ(a["hidden_size"].as<int>(), a["num_attention_heads"].as<int>() * a["head_dim"].as<int>());
}
