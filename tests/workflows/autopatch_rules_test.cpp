// The analysis rules added while shipping the zoo (issue 19, items 3 and 5), each on a variant of
// the trimmed llama / llava fixtures written into a temporary models/ tree: the text model built
// through a local with `config=` (PaliGemma's spelling, a regression on transformers 5.17), a model
// type declared by a config class in another folder (gemma3_text), gated-MLP operands that are more
// than a projection, and a hidden state changed before the output projection.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "liger/error.h"
#include "liger/util.h"
#include "workflows/autopatch/model_analysis.h"

namespace fs = std::filesystem;
using namespace liger::autopatch;

namespace {

fs::path zoo() { return fs::path(LIGER_SOURCE_DIR) / "tests/workflows/fixtures/autopatch/zoo/models"; }

// A models/ tree in a temporary directory, removed with the object.
struct Tree {
  fs::path root = fs::temp_directory_path() / ("liger-autopatch-rules-" + std::to_string(::getpid()) + "-" +
                                               std::to_string(reinterpret_cast<std::uintptr_t>(this)));
  Tree() { fs::create_directories(root / "models"); }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  // models/<to>/<prefix>_<to>.py from the fixture models/<from>/<prefix>_<from>.py, with `edits`
  // (each `from` text must occur) applied.
  fs::path copy(const std::string& from, const std::string& to, const std::string& prefix,
                const std::vector<std::pair<std::string, std::string>>& edits = {}) {
    std::string text = liger::util::read_file(zoo() / from / (prefix + "_" + from + ".py"));
    for (const auto& [a, b] : edits) {
      const auto at = text.find(a);
      EXPECT_NE(at, std::string::npos) << "fixture text not found: " << a;
      if (at != std::string::npos) text.replace(at, a.size(), b);
    }
    fs::create_directories(root / "models" / to);
    const fs::path out = root / "models" / to / (prefix + "_" + to + ".py");
    std::ofstream(out) << text;
    return out;
  }
};

const PatchItem* find_item(const std::vector<PatchItem>& items, const std::string& kernel) {
  for (const auto& it : items)
    if (it.kernel == kernel) return &it;
  return nullptr;
}

std::string dump(const ModelProfile& p) { return YAML::Dump(p.to_yaml()); }

}  // namespace

TEST(AutopatchRules, TextModelBuiltThroughALocalWithConfigKeywordIsFollowed) {
  Tree t;
  t.copy("llama", "llama", "modeling");
  t.copy("llama", "llama", "configuration");
  t.copy("llava", "llava", "configuration");
  const fs::path f = t.copy("llava", "llava", "modeling",
                            {{"self.language_model = AutoModel.from_config(config.text_config)",
                              "language_model = AutoModel.from_config(config=config.text_config)\n"
                              "        self.language_model = language_model"}});
  ModelProfile p = analyse_model(f.string());
  const Decision& nt = p.decision("norm_type");
  ASSERT_TRUE(nt.decided()) << dump(p);
  EXPECT_EQ(nt.details["decided_in"].as<std::string>(), "models/llama/modeling_llama.py");
  EXPECT_EQ(p.decision("mlp_activation").value_string(), "swiglu");
  EXPECT_EQ(p.decision("rope").value_string(), "standard");
  EXPECT_EQ(p.reference_integration, "llama");
}

TEST(AutopatchRules, ModelTypeDeclaredInAnotherFolderResolvesToThatFolder) {
  Tree t;
  t.copy("llama", "llama", "modeling");
  t.copy("llama", "llama", "configuration",
         {{"class LlamaConfig(", "class LlamaTextOnlyConfig(PretrainedConfig):\n    model_type = \"llama_text\"\n\n\n"
                                 "class LlamaConfig("}});
  ResolveOptions o;
  o.transformers_dir = t.root;
  ModelSource src = resolve_model_input("llama_text", o);
  EXPECT_EQ(src.model_type, "llama_text");
  EXPECT_EQ(src.modeling.filename().string(), "modeling_llama.py");
  EXPECT_THROW(resolve_model_input("llama_nowhere", o), liger::Error);
}

TEST(AutopatchRules, GatedMlpOperandThatIsMoreThanAProjectionIsDeclined) {
  Tree t;
  t.copy("llama", "llama", "configuration");
  const fs::path f = t.copy("llama", "llama", "modeling",
                            {{"down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))",
                              "gate = self.gate_proj(x).clamp(max=7.0)\n"
                              "        down_proj = self.down_proj(self.act_fn(gate) * self.up_proj(x))"}});
  ModelProfile p = analyse_model(f.string());
  // The activation is still SwiGLU; the patch is not: the kernel would drop the clamp.
  EXPECT_EQ(p.decision("mlp_activation").value_string(), "swiglu") << dump(p);
  EXPECT_EQ(find_item(p.apply, "swiglu"), nullptr) << dump(p);
  const PatchItem* d = find_item(p.declined, "swiglu");
  ASSERT_NE(d, nullptr) << dump(p);
  EXPECT_NE(d->reason.find("not a bare projection"), std::string::npos) << d->reason;
}

TEST(AutopatchRules, HiddenStateChangedBeforeTheProjectionDeclinesTheFusedLoss) {
  Tree t;
  t.copy("llama", "llama", "configuration");
  const fs::path f = t.copy("llama", "llama", "modeling",
                            {{"        logits = self.lm_head(hidden_states[:, slice_indices, :])",
                              "        hidden_states = self.final_proj(hidden_states)\n"
                              "        logits = self.lm_head(hidden_states[:, slice_indices, :])"}});
  ModelProfile p = analyse_model(f.string());
  EXPECT_FALSE(p.decision("last_hidden_state").decided()) << dump(p);
  EXPECT_EQ(find_item(p.apply, "fused_linear_cross_entropy"), nullptr);
  const PatchItem* d = find_item(p.declined, "fused_linear_cross_entropy");
  ASSERT_NE(d, nullptr) << dump(p);
  EXPECT_NE(d->reason.find("changed before self.lm_head"), std::string::npos) << d->reason;
  // The unchanged fixture keeps the fused loss (the rule is not a blanket decline).
  ModelProfile plain = analyse_model((zoo() / "llama/modeling_llama.py").string());
  EXPECT_NE(find_item(plain.apply, "fused_linear_cross_entropy"), nullptr) << dump(plain);
}

// A scalar factor on the logits (or on the hidden state before the projection) folds into the fused
// loss; a factor that is not shown to be one number, or one applied after the soft-cap, does not.
namespace {
ModelProfile llama_with(const std::string& from, const std::string& to) {
  Tree t;
  t.copy("llama", "llama", "configuration");
  return analyse_model(t.copy("llama", "llama", "modeling", {{from, to}}).string());
}
const std::string kLogitsLine = "        logits = self.lm_head(hidden_states[:, slice_indices, :])";
const std::string kHeadInit = "        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)";
}  // namespace

TEST(AutopatchRules, ScalarLogitScalesFoldIntoTheFusedLoss) {
  struct Case {
    std::string from, to, scale, config_attribute;
  } cases[] = {
      {kLogitsLine, kLogitsLine + "\n        logits = logits / self.config.logits_scaling", "/ config.logits_scaling",
       "logits_scaling"},
      {kLogitsLine, "        logits = self.lm_head(hidden_states[:, slice_indices, :]) * self.config.get_text_config().mult",
       "* config.mult", "mult"},
      {kLogitsLine, kLogitsLine + "\n        logits = 0.5 * logits", "* 0.5", ""},
      {kLogitsLine, "        hidden_states = hidden_states * self.config.width_mult\n" + kLogitsLine, "* config.width_mult",
       "width_mult"},
  };
  for (const auto& c : cases) {
    ModelProfile p = llama_with(c.from, c.to);
    const PatchItem* it = find_item(p.apply, "fused_linear_cross_entropy");
    ASSERT_NE(it, nullptr) << c.to << "\n" << dump(p);
    EXPECT_EQ(it->params["logits_scale"].as<std::string>(""), c.scale) << c.to;
    YAML::Node sc = p.decision("last_hidden_state").details["logits_scale"];
    ASSERT_EQ(sc.size(), 1u) << c.to;
    EXPECT_EQ(sc[0]["config_attribute"].as<std::string>(""), c.config_attribute) << c.to;
  }
  // self.<attr> set in __init__ from the config: the attribute path is what the forward reads.
  Tree t;
  t.copy("llama", "llama", "configuration");
  ModelProfile p = analyse_model(
      t.copy("llama", "llama", "modeling",
             {{kHeadInit, kHeadInit + "\n        self.logit_scale = float(config.logit_scale)"},
              {kLogitsLine, kLogitsLine + "\n        logits = logits * self.logit_scale"}})
          .string());
  const PatchItem* it = find_item(p.apply, "fused_linear_cross_entropy");
  ASSERT_NE(it, nullptr) << dump(p);
  EXPECT_EQ(it->params["logits_scale"].as<std::string>(""), "* logit_scale");
  // A learned scalar parameter folds too (its gradient flows through the scaled hidden state).
  for (const std::string init : {"nn.Parameter(torch.tensor(1.0))", "nn.Parameter(torch.ones(()))",
                                 "nn.Parameter(torch.ones(1), requires_grad=True)"}) {
    Tree t2;
    t2.copy("llama", "llama", "configuration");
    ModelProfile q = analyse_model(t2.copy("llama", "llama", "modeling",
                                           {{kHeadInit, kHeadInit + "\n        self.logit_scale = " + init},
                                            {kLogitsLine, kLogitsLine + "\n        logits = logits * self.logit_scale"}})
                                       .string());
    const PatchItem* folded = find_item(q.apply, "fused_linear_cross_entropy");
    ASSERT_NE(folded, nullptr) << init << "\n" << dump(q);
    EXPECT_EQ(folded->params["logits_scale"].as<std::string>(""), "* logit_scale") << init;
  }
}

TEST(AutopatchRules, LogitTransformsThatAreNotOneScalarDeclineTheFusedLossWithTheReason) {
  struct Case {
    std::vector<std::pair<std::string, std::string>> edits;
    std::string why;
  } cases[] = {
      // A learned per-vocabulary vector: each column would be scaled differently.
      {{{kHeadInit, kHeadInit + "\n        self.vocab_scale = nn.Parameter(torch.ones(config.vocab_size))"},
        {kLogitsLine, kLogitsLine + "\n        logits = logits * self.vocab_scale"}},
       "not known to be one number"},
      {{{kLogitsLine, kLogitsLine + "\n        logits = logits + self.config.logit_bias"}}, "not a product or quotient"},
      {{{kLogitsLine, kLogitsLine + "\n        logits = logits * self.a * self.b"}}, "not a product or quotient"},
      {{{kLogitsLine, kLogitsLine + "\n        logits = logits / (self.config.a + 1)"}}, "an expression"},
      {{{kLogitsLine, kLogitsLine + "\n        logits = logits * self.missing"}}, "never assigned"},
  };
  for (const auto& c : cases) {
    Tree t;
    t.copy("llama", "llama", "configuration");
    ModelProfile p = analyse_model(t.copy("llama", "llama", "modeling", c.edits).string());
    EXPECT_EQ(find_item(p.apply, "fused_linear_cross_entropy"), nullptr) << c.edits.back().second;
    const PatchItem* d = find_item(p.declined, "fused_linear_cross_entropy");
    ASSERT_NE(d, nullptr) << dump(p);
    EXPECT_NE(d->reason.find(c.why), std::string::npos) << d->reason;
    EXPECT_FALSE(p.decision("last_hidden_state").details["logits_scale"]) << c.edits.back().second;
  }
}

// MoE blocks without an `experts` list of MLP modules: a block that runs parallel-expert
// projections and the activation itself (JetMoE), and experts whose 3-D parameters and activation
// sit one module deeper (DBRX's DbrxExperts.mlp = DbrxExpertGLU, activation named through a local
// of __init__). Decision 5 reads the activation there; the gated-MLP patch is declined as 3-D experts.
TEST(AutopatchRules, ExpertsComputedByTheBlockOrOneModuleDeeperDecideTheActivation) {
  const std::string parallel =
      "class LlamaParallelExperts(nn.Module):\n"
      "    def __init__(self, num_experts, input_size, output_size):\n"
      "        super().__init__()\n"
      "        self.weight = nn.Parameter(torch.empty(num_experts, output_size, input_size))\n"
      "\n"
      "    def forward(self, inputs, expert_size):\n"
      "        return inputs\n"
      "\n"
      "\n"
      "class LlamaMoE(nn.Module):\n"
      "    def __init__(self, config):\n"
      "        super().__init__()\n"
      "        self.activation = ACT2FN[config.hidden_act]\n"
      "        self.input_linear = LlamaParallelExperts(config.num_local_experts, config.hidden_size, config.intermediate_size * 2)\n"
      "        self.output_linear = LlamaParallelExperts(config.num_local_experts, config.intermediate_size, config.hidden_size)\n"
      "        self.router = nn.Linear(config.hidden_size, config.num_local_experts)\n"
      "\n"
      "    def forward(self, x):\n"
      "        expert_size = self.router(x)\n"
      "        h = self.input_linear(x, expert_size)\n"
      "        chunked = h.chunk(2, dim=-1)\n"
      "        h = self.activation(chunked[0]) * chunked[1]\n"
      "        return self.output_linear(h, expert_size)\n"
      "\n"
      "\n"
      "class LlamaDecoderLayer(nn.Module):";
  const std::string deeper =
      "class LlamaExpertGLU(nn.Module):\n"
      "    def __init__(self, config):\n"
      "        super().__init__()\n"
      "        self.w1 = nn.Parameter(torch.empty(config.num_local_experts * config.intermediate_size, config.hidden_size))\n"
      "        self.v1 = nn.Parameter(torch.empty(config.num_local_experts * config.intermediate_size, config.hidden_size))\n"
      "        self.w2 = nn.Parameter(torch.empty(config.num_local_experts * config.intermediate_size, config.hidden_size))\n"
      "        act_fn_name = config.ffn_act_fn.get(\"name\", \"silu\")\n"
      "        self.activation_fn = ACT2FN[act_fn_name]\n"
      "\n"
      "    def forward(self, x, w1, v1, w2):\n"
      "        gate = x.matmul(w1.T)\n"
      "        up = x.matmul(v1.T)\n"
      "        gate = self.activation_fn(gate)\n"
      "        intermediate = gate * up\n"
      "        return intermediate.matmul(w2)\n"
      "\n"
      "\n"
      "class LlamaExperts(nn.Module):\n"
      "    def __init__(self, config):\n"
      "        super().__init__()\n"
      "        self.mlp = LlamaExpertGLU(config)\n"
      "\n"
      "    def forward(self, x, index, weights):\n"
      "        return self.mlp(x, self.mlp.w1, self.mlp.v1, self.mlp.w2)\n"
      "\n"
      "\n"
      "class LlamaMoE(nn.Module):\n"
      "    def __init__(self, config):\n"
      "        super().__init__()\n"
      "        self.router = nn.Linear(config.hidden_size, config.num_local_experts)\n"
      "        self.experts = LlamaExperts(config)\n"
      "\n"
      "    def forward(self, x):\n"
      "        return self.experts(x, self.router(x), None)\n"
      "\n"
      "\n"
      "class LlamaDecoderLayer(nn.Module):";
  // DBRX before transformers 5 took the activation dict as a constructor argument.
  std::string deeper_argument = deeper;
  deeper_argument.replace(deeper_argument.find("config.ffn_act_fn.get("), 22, "ffn_act_fn.get(");
  struct Case {
    const std::string* classes;
    std::string kind, mlp_class, declined_target;
  } cases[] = {{&parallel, "fused_swiglu", "LlamaMoE", "LlamaMoE"},
               {&deeper, "swiglu", "LlamaExpertGLU", "LlamaExperts"},
               {&deeper_argument, "swiglu", "LlamaExpertGLU", "LlamaExperts"}};
  for (const auto& c : cases) {
    Tree t;
    t.copy("llama", "llama", "configuration");
    ModelProfile p = analyse_model(t.copy("llama", "llama", "modeling",
                                          {{"class LlamaDecoderLayer(nn.Module):", *c.classes},
                                           {"self.mlp = LlamaMLP(config)", "self.mlp = LlamaMoE(config)"}})
                                       .string());
    EXPECT_EQ(p.decision("architecture").value_string(), "moe") << dump(p);
    EXPECT_EQ(p.decision("mlp_activation").value_string(), c.kind) << dump(p);
    EXPECT_EQ(p.decision("mlp_activation").details["mlp_class"].as<std::string>(""), c.mlp_class);
    EXPECT_EQ(find_item(p.apply, "swiglu"), nullptr) << "3-D experts take no gated-MLP patch\n" << dump(p);
    const PatchItem* d = find_item(p.declined, "swiglu");
    ASSERT_NE(d, nullptr) << dump(p);
    EXPECT_EQ(d->target, c.declined_target);
    EXPECT_NE(d->reason.find("3-D"), std::string::npos) << d->reason;
  }
}

// Rotary code that only a vision tower uses (GLM-5-Next: Glm5NextVisionRotaryEmbedding,
// apply_rotary_pos_emb_vision; its text attention gets no position embeddings) is no RoPE of the
// text model: "none", with the vision names in the note. Text rotary code the attention does not
// call stays undecided.
TEST(AutopatchRules, RotaryCodeOfTheVisionTowerOnlyIsNoTextRope) {
  const std::vector<std::pair<std::string, std::string>> no_text_call = {
      {"        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)\n", ""}};
  auto with = [&](const std::vector<std::pair<std::string, std::string>>& renames) {
    std::vector<std::pair<std::string, std::string>> edits = no_text_call;
    edits.insert(edits.end(), renames.begin(), renames.end());
    Tree t;
    t.copy("llama", "llama", "configuration");
    return analyse_model(t.copy("llama", "llama", "modeling", edits).string());
  };
  ModelProfile vision = with({{"class LlamaRotaryEmbedding(", "class LlamaVisionRotaryEmbedding("},
                              {"LlamaRotaryEmbedding(config=config)", "LlamaVisionRotaryEmbedding(config=config)"},
                              {"def apply_rotary_pos_emb(", "def apply_rotary_pos_emb_vision("}});
  EXPECT_EQ(vision.decision("rope").value_string(), "none") << dump(vision);
  ASSERT_FALSE(vision.decision("rope").notes.empty());
  EXPECT_NE(vision.decision("rope").notes.front().find("LlamaVisionRotaryEmbedding"), std::string::npos);
  ModelProfile text = with({});
  EXPECT_FALSE(text.decision("rope").decided()) << dump(text);
  // A rotary function nothing calls, and no rotary module (Jamba, Nemotron-H: apply_rotary_pos_emb
  // only named in a decorator): none, with the function named.
  ModelProfile uncalled = with({{"class LlamaRotaryEmbedding(", "class LlamaPositions("},
                                {"LlamaRotaryEmbedding(config=config)", "LlamaPositions(config=config)"}});
  EXPECT_EQ(uncalled.decision("rope").value_string(), "none") << dump(uncalled);
  ASSERT_FALSE(uncalled.decision("rope").notes.empty());
  EXPECT_NE(uncalled.decision("rope").notes.front().find("apply_rotary_pos_emb are defined but never called"),
            std::string::npos);
}

// The decoder picks its MLP class through a local (`ffn_layer_class = XSparseMoe if num_experts > 1
// else XMLP`, then `self.mlp = ffn_layer_class(config)`: Jamba, Bamba), and the per-layer expert
// count is a configuration property computed from a period (Jamba's layers_num_experts from
// expert_layer_period = 2): both classes are found, and the decoder is a dense/MoE hybrid.
TEST(AutopatchRules, MlpClassChosenThroughALocalAndAPeriodPropertyMakeAHybrid) {
  Tree t;
  t.copy("llama", "llama", "configuration",
         {{"        hidden_act=\"silu\",\n", "        hidden_act=\"silu\",\n        num_experts=4,\n        expert_layer_period=2,\n"},
          {"        self.hidden_act = hidden_act\n",
           "        self.hidden_act = hidden_act\n        self.num_experts = num_experts\n"
           "        self.expert_layer_period = expert_layer_period\n"},
          {"        super().__init__(**kwargs)\n",
           "        super().__init__(**kwargs)\n\n    @property\n    def layers_num_experts(self):\n"
           "        return [self.num_experts if i % self.expert_layer_period == 1 else 1 for i in range(self.num_hidden_layers)]\n"}});
  const std::string moe =
      "class LlamaSparseMoe(nn.Module):\n"
      "    def __init__(self, config):\n"
      "        super().__init__()\n"
      "        self.router = nn.Linear(config.hidden_size, config.num_experts, bias=False)\n"
      "        self.experts = nn.ModuleList([LlamaMLP(config) for _ in range(config.num_experts)])\n"
      "\n"
      "    def forward(self, x):\n"
      "        return self.experts[0](x) * self.router(x).sum()\n"
      "\n"
      "\n"
      "class LlamaDecoderLayer(nn.Module):";
  ModelProfile p = analyse_model(
      t.copy("llama", "llama", "modeling",
             {{"class LlamaDecoderLayer(nn.Module):", moe},
              {"        self.mlp = LlamaMLP(config)\n",
               "        num_experts = config.layers_num_experts[layer_idx]\n"
               "        ffn_layer_class = LlamaSparseMoe if num_experts > 1 else LlamaMLP\n"
               "        self.mlp = ffn_layer_class(config)\n"}})
          .string());
  EXPECT_EQ(p.decision("architecture").value_string(), "hybrid") << dump(p);
  EXPECT_EQ(p.decision("mlp_activation").value_string(), "swiglu") << dump(p);
  const PatchItem* mlp = find_item(p.apply, "swiglu");
  ASSERT_NE(mlp, nullptr) << dump(p);
  EXPECT_EQ(mlp->target, "LlamaMLP");
}
