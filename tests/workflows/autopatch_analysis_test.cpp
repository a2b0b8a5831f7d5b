// autopatch: the Python tokenizer/parser, the 12 decisions on synthetic fixtures, the profile
// YAML and input resolution.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "autopatch_expect.h"
#include "liger/error.h"
#include "workflows/autopatch/model_analysis.h"
#include "workflows/autopatch/python_source.h"

namespace fs = std::filesystem;
using namespace liger::autopatch;

namespace {

fs::path fixtures() { return fs::path(LIGER_SOURCE_DIR) / "tests/workflows/fixtures/autopatch"; }

ModelProfile fixture_profile(const std::string& name) {
  return analyse_model((fixtures() / name / ("modeling_" + name + ".py")).string());
}

std::vector<TokKind> kinds(const LexResult& r) {
  std::vector<TokKind> k;
  for (const auto& t : r.tokens) k.push_back(t.kind);
  return k;
}

}  // namespace

// ---- tokenizer -------------------------------------------------------------------------------

TEST(AutopatchTokenizer, IndentationProducesIndentAndDedent) {
  auto r = tokenize("class A:\n    def f(self):\n        return 1\nx = 2\n");
  int indents = 0, dedents = 0;
  for (auto k : kinds(r)) {
    indents += k == TokKind::Indent;
    dedents += k == TokKind::Dedent;
  }
  EXPECT_EQ(indents, 2);
  EXPECT_EQ(dedents, 2);
  EXPECT_EQ(r.tokens.back().kind, TokKind::End);
}

TEST(AutopatchTokenizer, StringsOfEveryKindAreSingleTokens) {
  std::string src =
      "a = 'x#y'\n"
      "b = \"\"\"line1\n# not a comment\nline3\"\"\"\n"
      "c = f\"{d['k']} and {e:>10}\"\n"
      "g = rb'\\d+'\n"
      "h = '''it''s'''\n";
  auto r = tokenize(src);
  std::vector<std::string> strings;
  for (const auto& t : r.tokens)
    if (t.kind == TokKind::String) strings.push_back(t.text);
  ASSERT_EQ(strings.size(), 5u);
  EXPECT_EQ(strings[0], "'x#y'");
  EXPECT_NE(strings[1].find("# not a comment"), std::string::npos);
  EXPECT_EQ(strings[2], "f\"{d['k']} and {e:>10}\"");
  EXPECT_EQ(strings[3], "rb'\\d+'");
  EXPECT_TRUE(r.comments.empty()) << "a '#' inside a string is not a comment";
  // The triple-quoted string spans 3 lines: c is on line 5.
  for (const auto& t : r.tokens)
    if (t.text == "c") EXPECT_EQ(t.line, 5);
}

TEST(AutopatchTokenizer, CommentsAndLineJoining) {
  auto r = tokenize("x = (1 +\n     2)  # sum\ny = 3 + \\\n    4\n# Copied from transformers.models.llama\n");
  int newlines = 0;
  for (auto k : kinds(r)) newlines += k == TokKind::Newline;
  EXPECT_EQ(newlines, 2) << "brackets and backslashes join physical lines";
  ASSERT_EQ(r.comments.size(), 2u);
  EXPECT_EQ(r.comments[0].text, "sum");
  EXPECT_EQ(r.comments[1].line, 5);
}

TEST(AutopatchTokenizer, UnterminatedStringIsAnErrorNamingTheLine) {
  try {
    tokenize("x = 1\ny = 'abc\n", "m.py");
    FAIL() << "expected an error";
  } catch (const liger::Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.py:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tokenize("x = (1,\n", "m.py"), liger::Error);
}

TEST(AutopatchTokenizer, NumbersAndOperators) {
  auto r = tokenize("x = 1e-6 + 0x1F ** 2 // 3\nx **= 2\n");
  std::vector<std::string> texts;
  for (const auto& t : r.tokens)
    if (t.kind == TokKind::Number || t.kind == TokKind::Op) texts.push_back(t.text);
  std::vector<std::string> want = {"=", "1e-6", "+", "0x1F", "**", "2", "//", "3", "**=", "2"};
  EXPECT_EQ(texts, want);
}

// ---- structure -------------------------------------------------------------------------------

TEST(AutopatchParser, ClassesMethodsDecoratorsAndMarkers) {
  std::string src =
      "from ...activations import ACT2FN\n"
      "import torch\n"
      "\n"
      "# Copied from transformers.models.llama.modeling_llama.LlamaMLP with Llama->Foo\n"
      "@use_kernel_forward_from_hub(\"MLP\")\n"
      "class FooMLP(nn.Module, Mixin):\n"
      "    flag = True\n"
      "\n"
      "    def __init__(self, config, intermediate_size=None):\n"
      "        super().__init__()\n"
      "        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)\n"
      "        if config.x:\n"
      "            self.act_fn = ACT2FN[config.hidden_act]\n"
      "\n"
      "    @torch.no_grad()\n"
      "    def forward(self, x):\n"
      "        return self.gate_proj(x)\n"
      "\n"
      "def helper(a, *args, b=1, **kw):\n"
      "    return a\n";
  PythonModule m = parse_python(src, "modeling_foo.py");
  ASSERT_EQ(m.classes.size(), 1u);
  const ClassDef& c = m.classes[0];
  EXPECT_EQ(c.name, "FooMLP");
  EXPECT_EQ(c.bases, (std::vector<std::string>{"nn.Module", "Mixin"}));
  ASSERT_EQ(c.decorators.size(), 1u);
  EXPECT_EQ(c.decorators[0], "use_kernel_forward_from_hub(\"MLP\")");
  ASSERT_TRUE(c.copied_from);
  EXPECT_NE(c.copied_from->find("LlamaMLP"), std::string::npos);
  EXPECT_EQ(c.line, 6);
  EXPECT_EQ(c.end_line, 17);
  ASSERT_EQ(c.methods.size(), 2u);
  EXPECT_EQ(c.methods[1].decorators, (std::vector<std::string>{"torch.no_grad()"}));
  EXPECT_EQ(c.method("__init__")->params, (std::vector<std::string>{"self", "config", "intermediate_size"}));
  auto gp = c.init_assignments_to("gate_proj");
  ASSERT_EQ(gp.size(), 1u);
  ASSERT_TRUE(gp[0].call);
  EXPECT_EQ(gp[0].call->callee, "nn.Linear");
  EXPECT_EQ(gp[0].call->args.size(), 2u);
  EXPECT_EQ(gp[0].call->kwargs.at("bias"), "False");
  EXPECT_EQ(c.init_assignments_to("act_fn").size(), 1u) << "conditional assignments count";
  ASSERT_EQ(m.functions.size(), 1u);
  EXPECT_EQ(m.functions[0].params, (std::vector<std::string>{"helper"}).size() ? m.functions[0].params : m.functions[0].params);
  EXPECT_EQ(m.functions[0].params, (std::vector<std::string>{"a", "args", "b", "kw"}));
  EXPECT_TRUE(m.imports_name("ACT2FN"));
  EXPECT_EQ(m.line_text(11), "self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)");
}

TEST(AutopatchParser, CallsAndExpressionHelpers) {
  PythonModule m = parse_python("y = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))\n", "m.py");
  ASSERT_EQ(m.statements.size(), 1u);
  auto calls = find_calls(m.statements[0]);
  std::vector<std::string> callees;
  for (auto& c : calls) callees.push_back(c.callee);
  EXPECT_EQ(callees, (std::vector<std::string>{"self.down_proj", "self.act_fn", "self.gate_proj", "self.up_proj"}));
  EXPECT_EQ(calls[0].args.size(), 1u);
  EXPECT_EQ(calls[0].args[0], "self.act_fn(self.gate_proj(x))*self.up_proj(x)");
  auto parts = split_top_level(calls[0].args[0], '*');
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1], "self.up_proj(x)");
  EXPECT_EQ(split_top_level("a**2*b", '*').size(), 2u);
  EXPECT_EQ(split_top_level("1e+6", '+').size(), 1u);
  EXPECT_EQ(split_top_level("1e-6+x", '+').size(), 2u);
  EXPECT_EQ(strip_parens("((a*b))"), "a*b");
  EXPECT_EQ(strip_parens("(a)*(b)"), "(a)*(b)");
  // Chained call on a call result.
  PythonModule m2 = parse_python("out = self._norm(x.float()).type_as(x)\n", "m.py");
  auto c2 = find_calls(m2.statements[0]);
  bool chained = false;
  for (auto& c : c2) chained |= c.callee == ".type_as";
  EXPECT_TRUE(chained);
  auto a = as_assignment(m2.statements[0]);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->targets, (std::vector<std::string>{"out"}));
  EXPECT_FALSE(a->call) << "the value is a chain, not exactly one call";
  auto tuple = as_assignment(parse_python("q, (k) = f(x)\n", "m.py").statements[0]);
  ASSERT_TRUE(tuple);
  EXPECT_EQ(tuple->targets, (std::vector<std::string>{"q", "k"}));
  ASSERT_TRUE(tuple->call);
  EXPECT_EQ(edit_distance("qwen3", "qwen2"), 1u);
}

// ---- decisions on the synthetic fixtures -----------------------------------------------------

class AutopatchFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(AutopatchFixture, DecisionsMatchTheExpectationTable) {
  YAML::Node table = YAML::LoadFile((fixtures() / "expected_fixtures.yaml").string());
  const std::string name = GetParam();
  ASSERT_TRUE(table[name]) << "no expectations for " << name;
  for (const auto& key : decision_keys())
    EXPECT_TRUE(table[name][key]) << name << ": the table must assert every decision; missing " << key;
  ModelProfile p = fixture_profile(name);
  auto problems = autopatch_test::check(p, table[name]);
  EXPECT_TRUE(problems.empty()) << name << ":\n" << autopatch_test::join(problems) << "\nprofile:\n"
                                << YAML::Dump(p.to_yaml());
  // Every decided decision carries evidence pointing into the modeling file.
  for (const auto& d : p.decisions) {
    if (!d.decided()) {
      EXPECT_FALSE(d.undecided.empty());
      continue;
    }
    EXPECT_GT(d.confidence, 0.0) << d.key;
    if (d.key == "vision" && !d.value.as<bool>()) continue;
    if (d.key == "rms_norm_casting" && d.value_string() == "not_applicable") continue;
    if (d.key == "rms_norm_offset" && d.value_string() == "not_applicable") continue;
    ASSERT_FALSE(d.evidence.empty()) << name << ": " << d.key << " has no evidence";
    for (const auto& e : d.evidence) {
      EXPECT_GT(e.line, 0) << d.key;
      EXPECT_FALSE(e.fragment.empty()) << d.key << " line " << e.line;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AutopatchFixture,
                         ::testing::Values("tinyllama", "tinygemma", "tinymoe", "tinyphi", "tinyrope",
                                           "tinyvl", "tinycohere", "tinyds", "tinyolmo2",
                                           "tinyqwen2vl", "tinyqwen25vl", "tinyqwen35"));

TEST(AutopatchDecisions, LlamaEvidencePointsAtTheCastAndTheWeightMultiply) {
  ModelProfile p = fixture_profile("tinyllama");
  const Decision& d = p.decision("rms_norm_casting");
  bool weight_line = false;
  for (const auto& e : d.evidence)
    weight_line |= e.fragment == "return self.weight * hidden_states.to(input_dtype)";
  EXPECT_TRUE(weight_line) << YAML::Dump(p.to_yaml()["decisions"]["rms_norm_casting"]);
  const PatchItem* rms = p.applied("rms_norm");
  ASSERT_NE(rms, nullptr);
  EXPECT_EQ(rms->target, "TinyLlamaRMSNorm");
  EXPECT_EQ(rms->params["casting_mode"].as<std::string>(), "llama");
  EXPECT_EQ(rms->params["offset"].as<int>(), 0);
  EXPECT_TRUE(rms->params["in_place"].as<bool>());
  EXPECT_EQ(rms->attributes, (std::vector<std::string>{"input_layernorm", "post_attention_layernorm", "norm"}));
}

TEST(AutopatchDecisions, GemmaPatchUsesOffsetOneGemmaCastingAndNoInPlace) {
  ModelProfile p = fixture_profile("tinygemma");
  const PatchItem* rms = p.applied("rms_norm");
  ASSERT_NE(rms, nullptr);
  EXPECT_EQ(rms->params["offset"].as<int>(), 1);
  EXPECT_EQ(rms->params["casting_mode"].as<std::string>(), "gemma");
  EXPECT_FALSE(rms->params["in_place"].as<bool>());
  EXPECT_EQ(rms->params["init_fn"].as<std::string>(), "zeros");
  const PatchItem* flce = p.applied("fused_linear_cross_entropy");
  ASSERT_NE(flce, nullptr);
  EXPECT_EQ(flce->params["softcap"].as<std::string>(), "config.final_logit_softcapping");
  // The offset's evidence includes the zeros initialisation.
  bool zeros = false;
  for (const auto& e : p.decision("rms_norm_offset").evidence) zeros |= e.fragment.find("torch.zeros") != std::string::npos;
  EXPECT_TRUE(zeros);
}

// OLMo2 multiplies by the weight in float32 and casts afterwards; its return statement opens
// with a bracket, which the normalised text joins to `return` without a space. Reading that as
// `return ` + value ate the bracket and made the cast look like Llama's (the GPU run on
// transformers 5.x reported llama for olmo2, and for the seven other models written the same way).
TEST(AutopatchDecisions, Olmo2CastsAfterTheFloat32WeightMultiply) {
  ModelProfile p = fixture_profile("tinyolmo2");
  const Decision& d = p.decision("rms_norm_casting");
  ASSERT_TRUE(d.decided()) << d.undecided;
  EXPECT_EQ(d.value_string(), "gemma");
  bool weight_line = false;
  for (const auto& e : d.evidence)
    weight_line |= e.fragment == "return (self.weight * hidden_states).to(input_dtype)";
  EXPECT_TRUE(weight_line) << YAML::Dump(p.to_yaml()["decisions"]["rms_norm_casting"]);
  const PatchItem* rms = p.applied("rms_norm");
  ASSERT_NE(rms, nullptr);
  EXPECT_EQ(rms->target, "Olmo2RMSNorm");
  EXPECT_EQ(rms->params["casting_mode"].as<std::string>(), "gemma");
  EXPECT_EQ(rms->params["offset"].as<int>(), 0);
  EXPECT_FALSE(rms->params["in_place"].as<bool>()) << "post-norms feed the residual add directly";
  EXPECT_EQ(p.reference_integration, "gemma");

  // The same statement without the outer bracket is Llama's order: the operand is cast first.
  auto llama_like = [](std::string src) {
    const std::string from = "return (self.weight * hidden_states).to(input_dtype)";
    src.replace(src.find(from), from.size(), "return self.weight * hidden_states.to(input_dtype)");
    return src;
  };
  std::ifstream in(fixtures() / "tinyolmo2" / "modeling_tinyolmo2.py");
  std::string src((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ModelProfile l = analyse_modules(parse_python(llama_like(src), "modeling_tinyolmo2.py"), nullptr, "tinyolmo2");
  EXPECT_EQ(l.decision("rms_norm_casting").value_string(), "llama");
}

namespace {

std::string fixture_source(const std::string& name) {
  std::ifstream in(fixtures() / name / ("modeling_" + name + ".py"));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

}  // namespace

// Transformers 5.17 Qwen3.5 (trimmed): the decoder layer builds `self.linear_attn =
// Qwen3_5GatedDeltaNet(...)` on linear-attention layers before `self.self_attn =
// Qwen3_5Attention(...)` on full-attention layers. The attention class is the softmax one, so RoPE
// is read from its apply_rotary_pos_emb call and the text rotary's mrope_section (M-RoPE,
// declined); the GatedDeltaNet's gated norm (forward(hidden_states, gate), * silu(gate)) is never
// planned as the plain rms_norm kernel, and the plain Qwen3_5RMSNorm is what rms_norm patches.
TEST(AutopatchDecisions, Qwen35HybridAttentionAndGatedNorm) {
  ModelProfile p = fixture_profile("tinyqwen35");
  const Decision& names = p.decision("norm_names");
  ASSERT_TRUE(names.decided()) << names.undecided;
  EXPECT_EQ(names.details["attention_class"].as<std::string>(), "Qwen3_5Attention");
  ASSERT_TRUE(names.details["linear_attention"]);
  EXPECT_EQ(names.details["linear_attention"][0]["attribute"].as<std::string>(), "linear_attn");
  EXPECT_EQ(names.details["linear_attention"][0]["class"].as<std::string>(), "Qwen3_5GatedDeltaNet");
  EXPECT_EQ(names.details["linear_attention"][0]["norms"]["norm"].as<std::string>(), "Qwen3_5RMSNormGated");
  std::vector<std::string> att;
  for (const auto& a : names.value["attention"]) att.push_back(a.as<std::string>());
  EXPECT_EQ(att, (std::vector<std::string>{"q_norm", "k_norm"}));

  // RoPE: M-RoPE from the text rotary module, declined with the reason.
  const Decision& rope = p.decision("rope");
  ASSERT_TRUE(rope.decided()) << rope.undecided;
  EXPECT_EQ(rope.value_string(), "mrope");
  EXPECT_EQ(rope.details["mrope_in"].as<std::string>(), "Qwen3_5TextRotaryEmbedding");
  EXPECT_EQ(rope.details["attention_class"].as<std::string>(), "Qwen3_5Attention");
  std::set<std::string> fragments;
  for (const auto& e : rope.evidence) fragments.insert(e.fragment);
  EXPECT_TRUE(fragments.count("query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)"))
      << YAML::Dump(p.to_yaml()["decisions"]["rope"]);
  EXPECT_TRUE(fragments.count("self.mrope_section = config.rope_parameters.get(\"mrope_section\", [11, 11, 10])"));
  bool mixer_note = false;
  for (const auto& n : rope.notes) mixer_note |= n.find("Qwen3_5GatedDeltaNet") != std::string::npos;
  EXPECT_TRUE(mixer_note) << "the note names the linear-attention mixer left out of the rope decision";
  EXPECT_EQ(p.applied("rope"), nullptr);
  const PatchItem* rope_item = p.declined_item("rope");
  ASSERT_NE(rope_item, nullptr);
  EXPECT_NE(rope_item->reason.find("M-RoPE"), std::string::npos) << rope_item->reason;
  EXPECT_NE(rope_item->reason.find("Qwen3_5TextRotaryEmbedding"), std::string::npos) << rope_item->reason;

  // Norms: the plain Qwen3_5RMSNorm ((1 + w), float32 then cast) is patched on its attributes;
  // the gated norm is excluded with its reason and never applied.
  const Decision& nt = p.decision("norm_type");
  ASSERT_TRUE(nt.details["excluded"]);
  ASSERT_EQ(nt.details["excluded"].size(), 1u);
  EXPECT_EQ(nt.details["excluded"][0]["class"].as<std::string>(), "Qwen3_5RMSNormGated");
  EXPECT_NE(nt.details["excluded"][0]["reason"].as<std::string>().find("gate"), std::string::npos);
  EXPECT_EQ(p.decision("rms_norm_casting").details["class"].as<std::string>(), "Qwen3_5RMSNorm");
  EXPECT_EQ(p.decision("rms_norm_casting").value_string(), "gemma");
  EXPECT_EQ(p.decision("rms_norm_offset").value_string(), "1");
  int rms_applied = 0;
  for (const auto& it : p.apply) {
    if (it.kernel != "rms_norm") continue;
    ++rms_applied;
    EXPECT_EQ(it.target, "Qwen3_5RMSNorm");
    EXPECT_EQ(it.attributes, (std::vector<std::string>{"input_layernorm", "post_attention_layernorm", "q_norm",
                                                       "k_norm", "norm"}));
    EXPECT_EQ(it.params["offset"].as<int>(), 1);
    EXPECT_EQ(it.params["casting_mode"].as<std::string>(), "gemma");
  }
  EXPECT_EQ(rms_applied, 1);
  const PatchItem* gated = nullptr;
  for (const auto& it : p.declined)
    if (it.target == "Qwen3_5RMSNormGated") gated = &it;
  ASSERT_NE(gated, nullptr) << "the gated norm is declined explicitly";
  EXPECT_EQ(gated->kernel, "rms_norm");
  EXPECT_NE(gated->reason.find("forward(hidden_states, gate)"), std::string::npos) << gated->reason;
  EXPECT_NE(gated->reason.find("activation"), std::string::npos) << gated->reason;
  // The hybrid mini model has 4 layers so both layer kinds exist (every 4th layer is full attention).
  EXPECT_EQ(p.mini_config["attributes"]["num_hidden_layers"].as<int>(), 4) << YAML::Dump(p.mini_config);
}

// A norm with a gate argument is never the rms_norm target, even as the decoder layer's only norm.
TEST(AutopatchDecisions, GatedNormIsNeverTheRmsNormTarget) {
  std::string src = fixture_source("tinyqwen35");
  src = replace_all(src, "self.input_layernorm = Qwen3_5RMSNorm(", "self.input_layernorm = Qwen3_5RMSNormGated(");
  src = replace_all(src, "self.post_attention_layernorm = Qwen3_5RMSNorm(",
                    "self.post_attention_layernorm = Qwen3_5RMSNormGated(");
  src = replace_all(src, "self.q_norm = Qwen3_5RMSNorm(", "self.q_norm = Qwen3_5RMSNormGated(");
  src = replace_all(src, "self.k_norm = Qwen3_5RMSNorm(", "self.k_norm = Qwen3_5RMSNormGated(");
  src = replace_all(src, "self.norm = Qwen3_5RMSNorm(", "self.norm = Qwen3_5RMSNormGated(");
  PythonModule m = parse_python(src, "modeling_tinyqwen35.py");
  ModelProfile p = analyse_modules(m, nullptr, "tinyqwen35");
  for (const auto& it : p.apply) EXPECT_NE(it.kernel, "rms_norm") << it.target;
  EXPECT_FALSE(p.decision("rms_norm_casting").decided());
  EXPECT_NE(p.decision("rms_norm_casting").undecided.find("gated"), std::string::npos)
      << p.decision("rms_norm_casting").undecided;
  ASSERT_NE(p.declined_item("rms_norm"), nullptr);
  EXPECT_EQ(p.declined_item("rms_norm")->target, "Qwen3_5RMSNormGated");
}

// Transformers 5.x Qwen2-VL: the attention calls a plain rotate-half apply_rotary_pos_emb and the
// M-RoPE sections are applied by the rotary module that builds cos/sin. The model's RoPE is still
// M-RoPE, which no library kernel implements: the profile says so and keeps the model's own.
TEST(AutopatchDecisions, MropeInTheRotaryModuleIsReportedAndDeclined) {
  ModelProfile p = fixture_profile("tinyqwen2vl");
  const Decision& d = p.decision("rope");
  ASSERT_TRUE(d.decided()) << d.undecided;
  EXPECT_EQ(d.value_string(), "mrope");
  std::set<std::string> fragments;
  for (const auto& e : d.evidence) fragments.insert(e.fragment);
  EXPECT_TRUE(fragments.count("self.mrope_section = config.rope_parameters.get(\"mrope_section\", [16, 24, 24])"))
      << YAML::Dump(p.to_yaml()["decisions"]["rope"]);
  EXPECT_TRUE(fragments.count(
      "freq = torch.cat([m[i % 3] for i, m in enumerate(freq.split(self.mrope_section, dim=-1))], dim=-1)"));
  EXPECT_TRUE(fragments.count("self.rotary_emb = Qwen2VLRotaryEmbedding(config=config)"));
  EXPECT_TRUE(fragments.count("query_states, key_states = apply_rotary_pos_emb(query_states, query_states, cos, sin)"));
  ASSERT_FALSE(d.notes.empty());
  EXPECT_NE(d.notes.front().find("Qwen2VLRotaryEmbedding"), std::string::npos) << d.notes.front();

  EXPECT_EQ(p.applied("rope"), nullptr);
  const PatchItem* rope = p.declined_item("rope");
  ASSERT_NE(rope, nullptr);
  EXPECT_EQ(rope->target, "apply_rotary_pos_emb");
  EXPECT_NE(rope->reason.find("M-RoPE"), std::string::npos) << rope->reason;
  EXPECT_NE(rope->reason.find("Qwen2VLRotaryEmbedding"), std::string::npos) << rope->reason;
  // The reason travels in the profile Understand writes.
  YAML::Node declined = YAML::Load(YAML::Dump(p.to_yaml()))["patch_plan"]["declined"];
  bool in_profile = false;
  for (const auto& it : declined)
    in_profile |= it["kernel"].as<std::string>() == "rope" && it["reason"].as<std::string>() == rope->reason;
  EXPECT_TRUE(in_profile) << YAML::Dump(declined);
  // The mini model sets sections that fit its head dim (128 / 4 heads / 2), under rope_parameters
  // as the 5.x text config names it.
  YAML::Node sec = p.mini_config["attributes"]["text_config"]["rope_parameters"]["mrope_section"];
  ASSERT_TRUE(sec) << YAML::Dump(p.mini_config);
  int sum = 0;
  for (auto x : sec) sum += x.as<int>();
  EXPECT_EQ(sum, 16);

  // Control: the same file with the sections taken out of the rotary module is standard RoPE and
  // gets the library kernel, so the M-RoPE verdict above comes from the rotary module alone.
  std::string src = fixture_source("tinyqwen2vl");
  std::string plain = replace_all(src, "self.mrope_section = config.rope_parameters.get(\"mrope_section\", [16, 24, 24])",
                                  "self.sections = [16, 24, 24]");
  plain = replace_all(plain, "self.mrope_section", "self.sections");
  ASSERT_EQ(plain.find("mrope_section"), std::string::npos);
  ModelProfile s = analyse_modules(parse_python(plain, "modeling_tinyqwen2vl.py"), nullptr, "tinyqwen2vl");
  EXPECT_EQ(s.decision("rope").value_string(), "standard");
  EXPECT_NE(s.applied("rope"), nullptr);
  // A docstring that talks about mrope_section is not code that uses it.
  std::string doc = replace_all(plain, "Recompose the frequencies into the final spatial layout used per each grid.",
                                "Unlike mrope_section models, nothing is recomposed here.");
  ASSERT_NE(doc.find("mrope_section"), std::string::npos);
  EXPECT_EQ(analyse_modules(parse_python(doc, "m.py"), nullptr, "tinyqwen2vl").decision("rope").value_string(),
            "standard");
}

// Qwen2.5-VL: the vision tower has a rotary module too, with its own recomposition_frequencies
// (axial 2-D RoPE), but it is not the one the text model builds cos/sin with.
TEST(AutopatchDecisions, MropeIsReadFromTheTextRotaryNotTheVisionOne) {
  ModelProfile p = fixture_profile("tinyqwen25vl");
  const Decision& d = p.decision("rope");
  EXPECT_EQ(d.value_string(), "mrope");
  EXPECT_EQ(d.details["mrope_in"].as<std::string>(), "Qwen2_5_VLRotaryEmbedding");
  for (const auto& e : d.evidence)
    EXPECT_EQ(e.fragment.find("freq_hw"), std::string::npos) << "vision rotary line taken as evidence: " << e.fragment;
  const PatchItem* rope = p.declined_item("rope");
  ASSERT_NE(rope, nullptr);
  EXPECT_NE(rope->reason.find("Qwen2_5_VLRotaryEmbedding"), std::string::npos) << rope->reason;
}

TEST(AutopatchDecisions, DeclinedPartsSayWhy) {
  ModelProfile p = fixture_profile("tinyrope");
  const PatchItem* rope = p.declined_item("rope");
  ASSERT_NE(rope, nullptr);
  EXPECT_EQ(rope->target, "apply_bucketed_rope");
  EXPECT_NE(rope->reason.find("rotate-half"), std::string::npos) << rope->reason;
  const PatchItem* mlp = p.declined_item("swiglu");
  ASSERT_NE(mlp, nullptr);
  EXPECT_NE(mlp->reason.find("not gated"), std::string::npos) << mlp->reason;
  const PatchItem* norm = p.declined_item("rms_norm");
  ASSERT_NE(norm, nullptr);
  EXPECT_FALSE(norm->reason.empty());
  EXPECT_EQ(p.undecided(), (std::vector<std::string>{"rms_norm_casting", "rms_norm_offset"}));
  // Undecided decisions are written as {undecided: reason}, never as a guessed value.
  YAML::Node doc = p.to_yaml();
  EXPECT_TRUE(doc["decisions"]["rms_norm_casting"]["value"]["undecided"]);
  EXPECT_EQ(doc["undecided"].size(), 2u);

  ModelProfile c = fixture_profile("tinycohere");
  const PatchItem* ln = c.declined_item("layer_norm");
  ASSERT_NE(ln, nullptr);
  EXPECT_NE(ln->reason.find("bias"), std::string::npos);
  // `logits * self.logit_scale` with `self.logit_scale = config.logit_scale`: a scalar, folded.
  const PatchItem* flce = c.applied("fused_linear_cross_entropy");
  ASSERT_NE(flce, nullptr);
  EXPECT_EQ(flce->params["logits_scale"].as<std::string>(), "* logit_scale");
  YAML::Node scale = c.decision("last_hidden_state").details["logits_scale"];
  ASSERT_EQ(scale.size(), 1u);
  EXPECT_EQ(scale[0]["config_attribute"].as<std::string>(), "logit_scale");
}

TEST(AutopatchDecisions, MoeExpertLayoutsAndRouter) {
  ModelProfile p = fixture_profile("tinymoe");
  EXPECT_FALSE(p.decision("architecture").notes.empty()) << "dense alternative explained";
  // q_norm/k_norm share the RMSNorm class, so the rms_norm patch covers them.
  const PatchItem* rms = p.applied("rms_norm");
  ASSERT_NE(rms, nullptr);
  EXPECT_NE(std::find(rms->attributes.begin(), rms->attributes.end(), "q_norm"), rms->attributes.end());
  ModelProfile ds = fixture_profile("tinyds");
  const PatchItem* experts = ds.declined_item("swiglu");
  ASSERT_NE(experts, nullptr);
  EXPECT_EQ(experts->target, "TinyDsExperts");
  EXPECT_NE(experts->reason.find("3-D"), std::string::npos);
  EXPECT_EQ(ds.mini_config["attributes"]["num_hidden_layers"].as<int>(), 4) << "hybrid: dense and MoE layers both present";
  EXPECT_EQ(ds.mini_config["attributes"]["n_routed_experts"].as<int>(), 4);
  EXPECT_EQ(ds.mini_config["attributes"]["first_k_dense_replace"].as<int>(), 1);
}

TEST(AutopatchProfile, MiniModelUsesTheConfigClassAttributeNames) {
  ModelProfile p = fixture_profile("tinyllama");
  YAML::Node a = p.mini_config["attributes"];
  EXPECT_EQ(p.mini_config["config_class"].as<std::string>(), "TinyLlamaConfig");
  EXPECT_EQ(a["hidden_size"].as<int>(), 128);
  EXPECT_EQ(a["num_key_value_heads"].as<int>(), 2);
  EXPECT_TRUE(a["head_dim"]);
  EXPECT_FALSE(a["num_experts"]) << "dense model: no expert attributes";
  EXPECT_FALSE(a["sliding_window"]) << "only names the config class has";

  ModelProfile vl = fixture_profile("tinyvl");
  YAML::Node va = vl.mini_config["attributes"];
  EXPECT_EQ(vl.mini_config["config_class"].as<std::string>(), "TinyVLConfig");
  ASSERT_TRUE(va["text_config"]);
  EXPECT_EQ(va["text_config"]["hidden_size"].as<int>(), 128);
  ASSERT_TRUE(va["text_config"]["rope_scaling"]["mrope_section"]);
  int sum = 0;
  for (auto s : va["text_config"]["rope_scaling"]["mrope_section"]) sum += s.as<int>();
  EXPECT_EQ(sum, 16) << "mrope sections add up to head_dim / 2 of the mini model";
  ASSERT_TRUE(va["vision_config"]);
  // The class is recorded beside the attributes: inside them it would reach the config as a kwarg.
  EXPECT_EQ(vl.mini_config["vision_config_class"].as<std::string>(), "TinyVLVisionConfig");
  EXPECT_FALSE(va["vision_config"]["config_class"]);
  EXPECT_TRUE(va["vision_config"]["depth"]);
  EXPECT_TRUE(va["vision_config"]["embed_dim"]);
  EXPECT_FALSE(va["vision_config"]["num_hidden_layers"]) << "TinyVLVisionConfig calls it depth";

  ModelProfile moe = fixture_profile("tinymoe");
  EXPECT_EQ(moe.mini_config["attributes"]["num_experts"].as<int>(), 4);
  EXPECT_EQ(moe.mini_config["attributes"]["num_experts_per_tok"].as<int>(), 2);
  EXPECT_FALSE(moe.mini_config["attributes"]["n_routed_experts"]);
}

TEST(AutopatchProfile, YamlHasEveryDecisionPlanAndReference) {
  ModelProfile p = fixture_profile("tinygemma");
  YAML::Node doc = YAML::Load(YAML::Dump(p.to_yaml()));  // round trip through text
  EXPECT_EQ(doc["model_type"].as<std::string>(), "tinygemma");
  ASSERT_TRUE(doc["source"]["configuration"]);
  int n = 1;
  for (const auto& key : decision_keys()) {
    ASSERT_TRUE(doc["decisions"][key]) << key;
    EXPECT_EQ(doc["decisions"][key]["number"].as<int>(), n++);
    EXPECT_TRUE(doc["decisions"][key]["confidence"]);
    EXPECT_TRUE(doc["decisions"][key]["evidence"].IsSequence());
  }
  EXPECT_EQ(doc["decisions"]["rms_norm_offset"]["value"].as<int>(), 1);
  EXPECT_EQ(doc["reference_integration"]["name"].as<std::string>(), "gemma");
  EXPECT_GE(doc["patch_plan"]["apply"].size(), 4u);
  EXPECT_EQ(doc["decisions"]["softcapping"]["evidence"][0]["file"].as<std::string>(), "modeling_tinygemma.py");
}

TEST(AutopatchProfile, ProfileValidatesAgainstTheSkillSchema) {
  // The schema is data in skills/autopatch; the values the analysis produces must be allowed.
  YAML::Node spec = YAML::LoadFile((fs::path(LIGER_SOURCE_DIR) / "skills/autopatch/decisions.yaml").string());
  for (const char* name : {"tinyllama", "tinygemma", "tinymoe", "tinyphi", "tinyrope", "tinyvl", "tinycohere", "tinyds",
                           "tinyolmo2", "tinyqwen2vl", "tinyqwen25vl", "tinyqwen35"}) {
    ModelProfile p = fixture_profile(name);
    for (const auto& d : p.decisions) {
      YAML::Node dd = spec["decisions"][d.key];
      ASSERT_TRUE(dd) << "decisions.yaml lacks " << d.key;
      EXPECT_EQ(dd["number"].as<int>(), d.number);
      if (!d.decided() || !d.value.IsScalar() || !dd["values"]) continue;
      bool allowed = false;
      for (auto v : dd["values"]) allowed |= v.as<std::string>() == d.value.as<std::string>();
      EXPECT_TRUE(allowed) << name << ": " << d.key << " = " << d.value.as<std::string>()
                           << " is not among the allowed values of skills/autopatch/decisions.yaml";
    }
  }
}

TEST(AutopatchProfile, NoConfigurationFileMakesActivationUndecided) {
  // Copy only the modeling file: the activation default (config.hidden_act) is unknown.
  fs::path dir = fs::temp_directory_path() / "autopatch_noconfig";
  fs::create_directories(dir);
  fs::copy_file(fixtures() / "tinyllama/modeling_tinyllama.py", dir / "modeling_tinyllama.py",
                fs::copy_options::overwrite_existing);
  ModelProfile p = analyse_model((dir / "modeling_tinyllama.py").string());
  EXPECT_FALSE(p.decision("mlp_activation").decided());
  EXPECT_NE(p.decision("mlp_activation").undecided.find("hidden_act"), std::string::npos);
  EXPECT_FALSE(p.warnings.empty());
  EXPECT_TRUE(p.decision("rms_norm_casting").decided());
  fs::remove_all(dir);
}

// ---- input resolution ------------------------------------------------------------------------

TEST(AutopatchResolve, PathAndDirectory) {
  ModelSource s = resolve_model_input((fixtures() / "tinygemma/modeling_tinygemma.py").string());
  EXPECT_EQ(s.model_type, "tinygemma");
  ASSERT_TRUE(s.configuration);
  EXPECT_EQ(s.configuration->filename(), "configuration_tinygemma.py");
  ModelSource d = resolve_model_input((fixtures() / "tinyphi").string());
  EXPECT_EQ(d.model_type, "tinyphi");
  EXPECT_THROW(resolve_model_input((fixtures() / "expected_fixtures.yaml").string()), liger::Error);
  EXPECT_THROW(resolve_model_input("no/such/modeling_x.py"), liger::Error);
}

TEST(AutopatchResolve, ModelTypeThroughATransformersTree) {
  // A fake transformers package: models/<type>/modeling_<type>.py.
  fs::path root = fs::temp_directory_path() / "autopatch_fake_transformers";
  fs::remove_all(root);
  for (const char* t : {"tinyllama", "tinygemma", "tinymoe"}) {
    fs::create_directories(root / "models" / t);
    for (const char* kind : {"modeling_", "configuration_"})
      fs::copy_file(fixtures() / t / (std::string(kind) + t + ".py"), root / "models" / t / (std::string(kind) + t + ".py"));
  }
  ResolveOptions opt;
  opt.transformers_dir = root;
  ModelSource s = resolve_model_input("tinymoe", opt);
  EXPECT_EQ(s.model_type, "tinymoe");
  EXPECT_NE(s.resolved_from.find("transformers"), std::string::npos);
  ModelProfile p = analyse_model("tinygemma", opt);
  EXPECT_EQ(p.decision("rms_norm_offset").value.as<int>(), 1);
  try {
    resolve_model_input("tinygema", opt);
    FAIL() << "expected unknown model type";
  } catch (const liger::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model type"), std::string::npos);
    EXPECT_NE(e.hint().find("tinygemma"), std::string::npos) << e.hint();
  }
  EXPECT_EQ(close_model_types(root / "models", "tinymo").front(), "tinymoe");
  fs::remove_all(root);
}

TEST(AutopatchResolve, MissingPythonOrTransformersIsAClearError) {
  ResolveOptions opt;
  opt.python = "/nonexistent/python3";
  if (std::getenv("LIGER_TRANSFORMERS_DIR")) GTEST_SKIP() << "LIGER_TRANSFORMERS_DIR overrides the lookup";
  try {
    find_transformers_dir(opt);
    FAIL() << "expected an error";
  } catch (const liger::Error& e) {
    EXPECT_EQ(e.kind(), liger::ErrorKind::Toolchain);
    EXPECT_NE(e.hint().find("modeling_"), std::string::npos) << e.hint();
  }
  // A python that cannot import transformers: `false` exits 1 like a failed import.
  opt.python = "false";
  EXPECT_THROW(find_transformers_dir(opt), liger::Error);
}
