// The mini-config and RoPE rules of commit 0eac6be, each on a variant of a trimmed fixture written
// into a temporary directory: Python digit separators in config defaults, a wrapper's own
// vocab_size and other vocab_size* fields, state-space sizes, M-RoPE sections that follow
// partial_rotary_factor, and a rotate-half apply function with another parameter list.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "liger/util.h"
#include "workflows/autopatch/model_analysis.h"

namespace fs = std::filesystem;
using namespace liger::autopatch;

namespace {

fs::path fixtures() { return fs::path(LIGER_SOURCE_DIR) / "tests/workflows/fixtures/autopatch"; }

// A copy of fixture files in a temporary directory, removed with the object. Paths are relative to
// tests/workflows/fixtures/autopatch and keep their folder, so models/<type>/ layouts survive.
struct Tree {
  fs::path root = fs::temp_directory_path() / ("liger-autopatch-mini-" + std::to_string(::getpid()) + "-" +
                                               std::to_string(reinterpret_cast<std::uintptr_t>(this)));
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  // `edits`: each `from` text must occur in the fixture (a test whose edit no longer applies fails
  // rather than silently testing the unedited file).
  fs::path copy(const std::string& rel, const std::vector<std::pair<std::string, std::string>>& edits = {}) {
    std::string text = liger::util::read_file(fixtures() / rel);
    for (const auto& [a, b] : edits) {
      const auto at = text.find(a);
      EXPECT_NE(at, std::string::npos) << "fixture text not found in " << rel << ": " << a;
      if (at != std::string::npos) text.replace(at, a.size(), b);
    }
    const fs::path out = root / rel;
    fs::create_directories(out.parent_path());
    std::ofstream(out) << text;
    return out;
  }
};

std::string dump(const YAML::Node& n) { return YAML::Dump(n); }

bool derivation_mentions(const ModelProfile& p, const std::string& field, const std::string& text) {
  for (const auto& d : p.mini_config["derivations"]) {
    const std::string s = d.as<std::string>();
    if (s.rfind(field + ":", 0) == 0 && s.find(text) != std::string::npos) return true;
  }
  return false;
}

int section_sum(const YAML::Node& sec) {
  int sum = 0;
  for (const auto& x : sec) sum += x.as<int>();
  return sum;
}

// tinyqwen2vl (M-RoPE in the text rotary module) with its configuration edited by `config_edits`.
ModelProfile qwen2vl_with(Tree& t, const std::vector<std::pair<std::string, std::string>>& config_edits) {
  t.copy("tinyqwen2vl/configuration_tinyqwen2vl.py", config_edits);
  const fs::path m = t.copy("tinyqwen2vl/modeling_tinyqwen2vl.py");
  return analyse_model(m.string());
}

}  // namespace

// Gemma3Config writes boi_token_index = 255_999: read as 255 (or not at all) the id stays at its
// full-size default and indexes past the mini embedding.
TEST(AutopatchMiniConfigRules, DigitSeparatorsInTokenIdDefaultsAreReadAsIntegers) {
  Tree t;
  t.copy("zoo/models/llama/modeling_llama.py");
  t.copy("zoo/models/llama/configuration_llama.py",
         {{"bos_token_id=1,", "bos_token_id=255_999,"}, {"eos_token_id=2,", "eos_token_id=[1, 256_000],"}});
  ModelProfile p = analyse_model((t.root / "zoo/models/llama/modeling_llama.py").string());
  const YAML::Node a = p.mini_config["attributes"];
  const int vocab = a["vocab_size"].as<int>();
  ASSERT_TRUE(a["bos_token_id"]) << dump(p.mini_config);
  EXPECT_GE(a["bos_token_id"].as<long long>(), 0);
  EXPECT_LT(a["bos_token_id"].as<long long>(), vocab) << dump(p.mini_config);
  EXPECT_TRUE(derivation_mentions(p, "bos_token_id", "255_999")) << dump(p.mini_config);
  // In a list too: the id below the vocabulary is kept, the other moved inside it and distinct.
  ASSERT_TRUE(a["eos_token_id"] && a["eos_token_id"].IsSequence()) << dump(p.mini_config);
  ASSERT_EQ(a["eos_token_id"].size(), 2u);
  EXPECT_EQ(a["eos_token_id"][0].as<long long>(), 1);
  const long long moved = a["eos_token_id"][1].as<long long>();
  EXPECT_LT(moved, vocab);
  EXPECT_NE(moved, a["bos_token_id"].as<long long>());
}

// PaliGemmaConfig keeps vocab_size = 257152 beside its text_config: code that asks the top-level
// config draws ids from it, so it shrinks to the text_config's mini vocabulary.
TEST(AutopatchMiniConfigRules, WrapperOwnVocabSizeShrinksWithTheTextVocabulary) {
  Tree t;
  t.copy("zoo/models/llama/modeling_llama.py");
  t.copy("zoo/models/llama/configuration_llama.py");
  t.copy("zoo/models/llava/configuration_llava.py",
         {{"image_token_index=32000,", "image_token_index=32000,\n        vocab_size=257152,"}});
  const fs::path m = t.copy("zoo/models/llava/modeling_llava.py");
  ModelProfile p = analyse_model(m.string());
  const YAML::Node a = p.mini_config["attributes"];
  ASSERT_TRUE(a["text_config"] && a["text_config"]["vocab_size"]) << dump(p.mini_config);
  const int text_vocab = a["text_config"]["vocab_size"].as<int>();
  EXPECT_LT(text_vocab, 32000);
  ASSERT_TRUE(a["vocab_size"]) << dump(p.mini_config);
  EXPECT_EQ(a["vocab_size"].as<int>(), text_vocab);
  EXPECT_TRUE(derivation_mentions(p, "vocab_size", "257152")) << dump(p.mini_config);
  // The wrapper's token id still moves inside that vocabulary.
  ASSERT_TRUE(a["image_token_index"]);
  EXPECT_LT(a["image_token_index"].as<int>(), text_vocab);

  // Control: a wrapper without its own vocab_size gets none (the config class would reject it).
  Tree plain;
  plain.copy("zoo/models/llama/modeling_llama.py");
  plain.copy("zoo/models/llama/configuration_llama.py");
  plain.copy("zoo/models/llava/configuration_llava.py");
  ModelProfile q = analyse_model(plain.copy("zoo/models/llava/modeling_llava.py").string());
  EXPECT_FALSE(q.mini_config["attributes"]["vocab_size"]) << dump(q.mini_config);
}

// Gemma 4's vocab_size_per_layer_input (an embedding per layer input) is sized like the main
// vocabulary and shrinks with it; a vocab_size* field already below the mini vocabulary is kept.
TEST(AutopatchMiniConfigRules, OtherVocabSizeFieldsShrinkWithTheMiniVocabulary) {
  Tree t;
  t.copy("zoo/models/llama/modeling_llama.py");
  t.copy("zoo/models/llama/configuration_llama.py",
         {{"vocab_size=32000,", "vocab_size=32000,\n        vocab_size_per_layer_input=262144,\n"
                                "        audio_vocab_size=128,"}});
  ModelProfile p = analyse_model((t.root / "zoo/models/llama/modeling_llama.py").string());
  const YAML::Node a = p.mini_config["attributes"];
  const int vocab = a["vocab_size"].as<int>();
  ASSERT_TRUE(a["vocab_size_per_layer_input"]) << dump(p.mini_config);
  EXPECT_EQ(a["vocab_size_per_layer_input"].as<int>(), vocab);
  EXPECT_TRUE(derivation_mentions(p, "vocab_size_per_layer_input", "262144")) << dump(p.mini_config);
  EXPECT_FALSE(a["audio_vocab_size"]) << "128 already fits; left at its default\n" << dump(p.mini_config);
}

// Falcon-H1's state-space defaults (128 heads, state 256, chunk 256) make the PyTorch scan
// materialise tens of GiB; the mini config sets every state-space size the class declares small.
TEST(AutopatchMiniConfigRules, StateSpaceSizesAreSmallInTheMiniConfig) {
  Tree t;
  t.copy("zoo/models/llama/modeling_llama.py");
  t.copy("zoo/models/llama/configuration_llama.py",
         {{"head_dim=None,", "head_dim=None,\n        mamba_d_ssm=8192,\n        mamba_n_heads=128,\n"
                             "        mamba_d_state=256,\n        mamba_chunk_size=256,\n"
                             "        ssm_state_size=128,\n        state_size=64,"}});
  ModelProfile p = analyse_model((t.root / "zoo/models/llama/modeling_llama.py").string());
  const YAML::Node a = p.mini_config["attributes"];
  const std::vector<std::pair<std::string, int>> defaults = {
      {"mamba_d_ssm", 8192}, {"mamba_n_heads", 128}, {"mamba_d_state", 256},
      {"mamba_chunk_size", 256}, {"ssm_state_size", 128}, {"state_size", 64}};
  for (const auto& [name, full] : defaults) {
    ASSERT_TRUE(a[name]) << name << " left at its default " << full << "\n" << dump(p.mini_config);
    const int v = a[name].as<int>();
    EXPECT_GT(v, 0) << name;
    EXPECT_LT(v, full) << name;
  }
  // The scan's (chunk, chunk, heads, state) block stays small, and the heads split the SSM width.
  const long long block = 1LL * a["mamba_chunk_size"].as<int>() * a["mamba_chunk_size"].as<int>() *
                          a["mamba_n_heads"].as<int>() * a["mamba_d_state"].as<int>();
  EXPECT_LE(block, 1LL << 20) << dump(a);
  EXPECT_EQ(a["mamba_d_ssm"].as<int>() % a["mamba_n_heads"].as<int>(), 0) << dump(a);
  // A config that declares none of them gets none (the class would reject unknown keywords).
  ModelProfile plain = analyse_model((fixtures() / "zoo/models/llama/modeling_llama.py").string());
  EXPECT_FALSE(plain.mini_config["attributes"]["mamba_n_heads"]);
  EXPECT_FALSE(plain.mini_config["attributes"]["state_size"]);
}

// M-RoPE sections add up to the rotated half of the head: head_dim * partial_rotary_factor / 2,
// with head_dim and the factor taken from the config's fields.
TEST(AutopatchMiniConfigRules, MropeSectionsFollowHeadDimAndThePartialRotaryFactorField) {
  Tree t;
  ModelProfile p = qwen2vl_with(t, {{"    rms_norm_eps: float = 1e-05\n",
                                     "    rms_norm_eps: float = 1e-05\n    head_dim: int = 128\n"
                                     "    partial_rotary_factor: float = 0.5\n"}});
  ASSERT_EQ(p.decision("rope").value_string(), "mrope") << YAML::Dump(p.to_yaml()["decisions"]["rope"]);
  const YAML::Node tc = p.mini_config["attributes"]["text_config"];
  ASSERT_TRUE(tc["head_dim"]) << dump(p.mini_config);
  const int hd = tc["head_dim"].as<int>();
  const YAML::Node sec = tc["rope_parameters"]["mrope_section"];
  ASSERT_TRUE(sec && sec.size() == 3) << dump(p.mini_config);
  EXPECT_EQ(section_sum(sec), hd / 2 / 2) << dump(sec);
  for (const auto& x : sec) EXPECT_GT(x.as<int>(), 0) << dump(sec);
  EXPECT_TRUE(derivation_mentions(p, "mrope_section", "partial_rotary_factor 0.5")) << dump(p.mini_config);
}

// GLM-4V-MoE sets the factor in __post_init__ with kwargs.setdefault rather than as a field.
TEST(AutopatchMiniConfigRules, MropeSectionsFollowAPartialRotaryFactorSetWithSetdefault) {
  Tree t;
  ModelProfile p = qwen2vl_with(
      t, {{"    rope_parameters: RopeParameters | dict | None = None\n",
           "    rope_parameters: RopeParameters | dict | None = None\n\n"
           "    def __post_init__(self, **kwargs):\n"
           "        kwargs.setdefault(\"partial_rotary_factor\", 0.25)\n"
           "        super().__post_init__(**kwargs)\n"}});
  ASSERT_EQ(p.decision("rope").value_string(), "mrope");
  const YAML::Node tc = p.mini_config["attributes"]["text_config"];
  // No head_dim field: the rotary module derives it from hidden_size / heads of the mini config.
  const int hd = tc["head_dim"] ? tc["head_dim"].as<int>()
                                : tc["hidden_size"].as<int>() / tc["num_attention_heads"].as<int>();
  const YAML::Node sec = tc["rope_parameters"]["mrope_section"];
  ASSERT_TRUE(sec && sec.size() == 3) << dump(p.mini_config);
  EXPECT_EQ(section_sum(sec), hd / 4 / 2) << dump(sec);

  // Control: without the factor the sections cover the whole head (half of head_dim).
  Tree u;
  ModelProfile full = qwen2vl_with(u, {});
  const YAML::Node ftc = full.mini_config["attributes"]["text_config"];
  EXPECT_EQ(section_sum(ftc["rope_parameters"]["mrope_section"]),
            ftc["hidden_size"].as<int>() / ftc["num_attention_heads"].as<int>() / 2)
      << dump(full.mini_config);
  EXPECT_FALSE(full.mini_config["derivations"] && derivation_mentions(full, "mrope_section", "partial_rotary_factor"));
}

// Gemma 4's apply_rotary_pos_emb(x, cos, sin, unsqueeze_dim) is rotate-half but called once per
// tensor: liger_rotary_pos_emb(q, k, cos, sin, ...) cannot replace it, so rope is declined.
TEST(AutopatchMiniConfigRules, RotateHalfApplyWithoutQkCosSinParametersIsDeclined) {
  Tree t;
  t.copy("zoo/models/llama/configuration_llama.py");
  const fs::path m = t.copy(
      "zoo/models/llama/modeling_llama.py",
      {{"def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):\n"
        "    cos = cos.unsqueeze(unsqueeze_dim)\n"
        "    sin = sin.unsqueeze(unsqueeze_dim)\n"
        "    q_embed = (q * cos) + (rotate_half(q) * sin)\n"
        "    k_embed = (k * cos) + (rotate_half(k) * sin)\n"
        "    return q_embed, k_embed\n",
        "def apply_rotary_pos_emb(x, cos, sin, unsqueeze_dim=1):\n"
        "    cos = cos.unsqueeze(unsqueeze_dim)\n"
        "    sin = sin.unsqueeze(unsqueeze_dim)\n"
        "    return (x * cos) + (rotate_half(x) * sin)\n"},
       {"        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)\n",
        "        query_states = apply_rotary_pos_emb(query_states, cos, sin)\n"
        "        key_states = apply_rotary_pos_emb(key_states, cos, sin)\n"}});
  ModelProfile p = analyse_model(m.string());
  EXPECT_EQ(p.decision("rope").value_string(), "standard") << YAML::Dump(p.to_yaml()["decisions"]["rope"]);
  EXPECT_EQ(p.applied("rope"), nullptr);
  const PatchItem* d = p.declined_item("rope");
  ASSERT_NE(d, nullptr) << YAML::Dump(p.to_yaml()["patch_plan"]);
  EXPECT_NE(d->reason.find("apply_rotary_pos_emb(x, cos, sin, unsqueeze_dim)"), std::string::npos) << d->reason;
  EXPECT_NE(d->reason.find("(q, k, cos, sin"), std::string::npos) << d->reason;
  // Control: the unedited (q, k, cos, sin, ...) function is patched.
  ModelProfile plain = analyse_model((fixtures() / "zoo/models/llama/modeling_llama.py").string());
  EXPECT_NE(plain.applied("rope"), nullptr) << YAML::Dump(plain.to_yaml()["patch_plan"]);
}
