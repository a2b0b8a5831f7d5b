// kernel-dev profile: the built-in analyser on words, expressions and PyTorch code (25+
// element-wise ops in each form), tier classification, undecided fields, YAML round trip, and
// the Tier-2 row program (round trip, every problem the validator reports).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "liger/profile.h"
#include "workflows/kernel_dev/profile.h"

namespace kd = liger::kernel_dev;

namespace {

const kd::KnowledgeBase& kb() {
  static const kd::KnowledgeBase k = kd::KnowledgeBase::load(LIGER_SOURCE_DIR);
  return k;
}

kd::KernelProfile analyse(const std::string& text, kd::InputKind kind = kd::InputKind::Auto) {
  return kd::analyse({text, kind, ""}, kb());
}

// The profile's forward and every gradient, checked numerically against the catalogue entry's
// function and central finite differences of the profile's own forward.
void check_profile_numerics(const kd::KernelProfile& p, const kd::Program& expected, const std::string& label) {
  ASSERT_EQ(p.tier, 1) << label << ": " << p.tier_reason;
  ASSERT_TRUE(p.complete()) << label << ": undecided " << p.undecided.begin()->first << ": " << p.undecided.begin()->second;
  kd::Program got = p.program();
  ASSERT_EQ(got.inputs.size(), expected.inputs.size()) << label;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> dist(-3.5, 3.5);
  for (int i = 0; i < 60; ++i) {
    kd::Environment eg, ee;
    for (const auto& q : got.params) eg[q.name] = q.init;
    for (const auto& q : expected.params) ee[q.name] = q.init;
    for (std::size_t k = 0; k < got.inputs.size(); ++k) {
      double v = dist(rng);
      eg[got.inputs[k]] = v;
      ee[expected.inputs[k]] = v;
    }
    ASSERT_NEAR(kd::eval_f64(got.expression, eg), kd::eval_f64(expected.expression, ee),
                1e-9 * (1 + std::fabs(kd::eval_f64(expected.expression, ee))))
        << label << ": forward " << p.forward->expression;
    for (const auto& g : *p.gradients) {
      kd::Expr d = kd::parse_expression(g.expression);
      const double h = 1e-6;
      auto plus = eg, minus = eg, plus2 = eg, minus2 = eg;
      plus[g.wrt] += h;
      minus[g.wrt] -= h;
      plus2[g.wrt] += 2 * h;
      minus2[g.wrt] -= 2 * h;
      double right = (kd::eval_f64(got.expression, plus2) - kd::eval_f64(got.expression, eg)) / (2 * h);
      double left = (kd::eval_f64(got.expression, eg) - kd::eval_f64(got.expression, minus2)) / (2 * h);
      if (std::fabs(right - left) > 1e-4 * (1 + std::fabs(right))) continue;  // a kink
      double numeric = (kd::eval_f64(got.expression, plus) - kd::eval_f64(got.expression, minus)) / (2 * h);
      ASSERT_NEAR(kd::eval_f64(d, eg), numeric, 1e-5 * (1 + std::fabs(numeric)))
          << label << ": d/d" << g.wrt << " = " << g.expression;
    }
  }
  // The generated code strings exist and assign every output.
  EXPECT_NE(p.forward->cuda.find(got.output + " = "), std::string::npos) << label;
  for (const auto& in : got.inputs) EXPECT_NE(p.backward->cuda.find("d" + in + " = "), std::string::npos) << label;
}

struct OpForms {
  const char* catalogue_name;
  const char* words;
  const char* expression;
  const char* pytorch;
};

// 28 element-wise ops, each given as words, as an expression and as PyTorch code.
const std::vector<OpForms>& suite() {
  static const std::vector<OpForms> ops = {
      {"relu_squared", "ReLU squared activation function", "y = relu(x)^2", "def relu2(x):\n    return torch.relu(x) ** 2\n"},
      {"relu", "rectified linear unit", "y = max(x, 0)", "y = F.relu(x)"},
      {"leaky_relu", "leaky ReLU", "y = where(x > 0, x, negative_slope * x)\nparam negative_slope = 0.01 fixed",
       "class Leaky(nn.Module):\n    def __init__(self, negative_slope=0.01):\n        super().__init__()\n"
       "        self.negative_slope = negative_slope\n    def forward(self, x):\n"
       "        return torch.where(x > 0, x, self.negative_slope * x)\n"},
      {"elu", "ELU activation", "y = where(x > 0, x, alpha * (exp(x) - 1))\nparam alpha = 1.0 fixed",
       "class E(nn.Module):\n    def __init__(self, alpha=1.0):\n        super().__init__()\n        self.alpha = alpha\n"
       "    def forward(self, x):\n        return F.elu(x, self.alpha)\n"},
      {"celu", "CELU", "y = where(x > 0, x, alpha * expm1(x / alpha))\nparam alpha = 1 fixed",
       "class C(nn.Module):\n    def __init__(self, alpha=1.0):\n        super().__init__()\n        self.alpha = alpha\n"
       "    def forward(self, x):\n        return F.celu(x, self.alpha)\n"},
      {"selu", "scaled exponential linear unit", "y = 1.0507009873554805 * where(x > 0, x, 1.6732632423543772 * expm1(x))",
       "def f(x):\n    return F.selu(x)\n"},
      {"gelu", "GELU (erf) activation", "y = 0.5 * x * (1 + erf(x / sqrt(2)))", "def f(x):\n    return F.gelu(x)\n"},
      {"gelu_tanh", "GELU with tanh approximation", "y = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))",
       "def gelu_new(x):\n    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))\n"},
      {"quick_gelu", "quick GELU", "y = x * sigmoid(1.702 * x)", "def f(x):\n    return x * torch.sigmoid(1.702 * x)\n"},
      {"silu", "SiLU", "y = x / (1 + exp(-x))", "y = F.silu(x)"},
      {"swish", "Swish-beta activation", "y = x * sigmoid(beta * x)\nparam beta: scalar = 1 fixed",
       "class Swish(nn.Module):\n    def __init__(self, beta=1.0):\n        super().__init__()\n        self.beta = beta\n"
       "    def forward(self, x):\n        return x * torch.sigmoid(self.beta * x)\n"},
      {"mish", "Mish", "y = x * tanh(log(1 + exp(x)))", "def mish(x):\n    return x * torch.tanh(F.softplus(x))\n"},
      {"softplus", "softplus activation",
       "y = where(beta * x > threshold, x, log1p(exp(beta * x)) / beta)\nparam beta = 1 fixed\nparam threshold = 20 fixed",
       "class SP(nn.Module):\n    def __init__(self, beta=1.0, threshold=20.0):\n        super().__init__()\n"
       "        self.beta = beta\n        self.threshold = threshold\n    def forward(self, x):\n"
       "        return F.softplus(x, self.beta, self.threshold)\n"},
      {"sigmoid", "sigmoid", "y = 1 / (1 + exp(-x))", "y = torch.sigmoid(x)"},
      {"tanh", "tanh", "y = tanh(x)", "y = x.tanh()"},
      {"hardswish", "hard swish", "y = x * clamp(x + 3, 0, 6) / 6", "def f(x):\n    return F.hardswish(x)\n"},
      {"hardsigmoid", "hard sigmoid", "y = where(x <= -3, 0, where(x >= 3, 1, x / 6 + 0.5))", "y = F.hardsigmoid(x)"},
      {"hardtanh", "hard tanh", "y = where(x <= min_val, min_val, where(x >= max_val, max_val, x))\nparam min_val = -1 fixed\nparam max_val = 1 fixed",
       "class HT(nn.Module):\n    def __init__(self, min_val=-1.0, max_val=1.0):\n        super().__init__()\n"
       "        self.min_val = min_val\n        self.max_val = max_val\n    def forward(self, x):\n"
       "        return F.hardtanh(x, self.min_val, self.max_val)\n"},
      {"relu6", "ReLU6", "y = where(x <= 0, 0, where(x >= 6, 6, x))", "y = F.relu6(x)"},
      {"softsign", "softsign", "y = x / (1 + abs(x))", "def f(x):\n    return x / (1 + torch.abs(x))\n"},
      {"tanhshrink", "tanh shrink", "y = x - tanh(x)", "y = x - torch.tanh(x)"},
      {"logsigmoid", "log sigmoid", "y = -softplus(-x)", "y = F.logsigmoid(x)"},
      {"square", "x squared element-wise", "y = x * x", "y = torch.square(x)"},
      {"reglu", "ReGLU", "c = relu(a) * b", "def reglu(a, b):\n    return F.relu(a) * b\n"},
      {"swiglu", "SwiGLU", "c = a * sigmoid(a) * b", "def swiglu(a, b):\n    return F.silu(a) * b\n"},
      {"geglu", "GeGLU", "c = gelu_tanh(a) * b", "def geglu(a, b):\n    return F.gelu(a, approximate='tanh') * b\n"},
      {"geglu_erf", "exact GELU gated", "c = 0.5 * a * (1 + erf(a * 0.7071067811865476)) * b",
       "def f(a, b):\n    return F.gelu(a) * b\n"},
      {"dyt", "Dynamic Tanh (DyT)", "y = gamma * tanh(alpha * x) + beta\nparam alpha: scalar = 0.5",
       "class DyT(nn.Module):\n    def __init__(self, dim, alpha_init_value=0.5):\n        super().__init__()\n"
       "        self.alpha = nn.Parameter(torch.ones(1) * alpha_init_value)\n"
       "        self.gamma = nn.Parameter(torch.ones(dim))\n        self.beta = nn.Parameter(torch.zeros(dim))\n"
       "    def forward(self, x):\n        return self.gamma * torch.tanh(self.alpha * x) + self.beta\n"},
  };
  return ops;
}

}  // namespace

TEST(KernelDevProfile, ReluSquaredFromWords) {
  auto p = analyse("ReLU squared activation function");
  EXPECT_EQ(p.source_kind, "words");
  EXPECT_EQ(p.op_name, "relu_squared");
  EXPECT_EQ(p.c_prefix, "liger_relu_squared");
  EXPECT_EQ(p.python_module, "LigerReluSquared");
  EXPECT_EQ(p.tier, 1);
  EXPECT_EQ(p.closest_kernel, "swiglu");
  ASSERT_TRUE(p.complete());
  EXPECT_EQ(p.forward->expression, "relu(x)^2");
  ASSERT_EQ(p.gradients->size(), 1u);
  EXPECT_EQ((*p.gradients)[0].expression, "2 * relu(x) * step(x)");
  EXPECT_EQ(p.saved_for_backward->saved, std::vector<std::string>{"x"});
  EXPECT_NE(p.saved_for_backward->reason.find("memory-bound"), std::string::npos);
  // Integer power as a product of a named temporary, relu via a select.
  EXPECT_NE(p.forward->cuda.find("const float t0 = (x > 0.0f ? x : 0.0f);"), std::string::npos) << p.forward->cuda;
  EXPECT_NE(p.forward->cuda.find("y = (t0 * t0);"), std::string::npos) << p.forward->cuda;
  EXPECT_NE(p.forward->reference.find("y = (t0 * t0);"), std::string::npos) << p.forward->reference;
  ASSERT_EQ(p.tolerances->size(), 3u);
}

TEST(KernelDevProfile, ModuleParameterValuesFromWords) {
  auto p = analyse("leaky ReLU with negative slope 0.2");
  ASSERT_EQ(p.op_name, "leaky_relu");
  ASSERT_EQ(p.module_parameters.size(), 1u);
  EXPECT_DOUBLE_EQ(p.module_parameters[0].value, 0.2);
  p = analyse("softplus activation, beta=2, threshold: 10");
  ASSERT_EQ(p.module_parameters.size(), 2u);
  EXPECT_DOUBLE_EQ(p.module_parameters[0].value, 2.0);
  EXPECT_DOUBLE_EQ(p.module_parameters[1].value, 10.0);
  p = analyse("leaky relu");
  EXPECT_DOUBLE_EQ(p.module_parameters[0].value, 0.01);  // the default when not given
}

TEST(KernelDevProfile, ExpressionsAreRecognisedAndClosestKernelFollowsTheMath) {
  auto p = analyse("y = x * sigmoid(1.702 * x)");
  EXPECT_EQ(p.source_kind, "expression");
  EXPECT_EQ(p.op_name, "quick_gelu");
  EXPECT_EQ(p.closest_kernel, "swiglu");
  p = analyse("c = gelu(a) * b");
  EXPECT_EQ(p.op_name, "geglu_erf");
  EXPECT_EQ(p.closest_kernel, "geglu");
  EXPECT_EQ(p.inputs.size(), 2u);
  p = analyse("y = x^3 + sin(x)");
  EXPECT_EQ(p.op_name.rfind("custom_", 0), 0u) << p.op_name;
  EXPECT_TRUE(p.complete());
  p = kd::analyse({"y = x^3 + sin(x)", kd::InputKind::Auto, "cubic sine"}, kb());
  EXPECT_EQ(p.op_name, "cubic_sine");
}

TEST(KernelDevProfile, DytHasLearnableParametersWithReducedGradients) {
  auto p = analyse("DyT");
  ASSERT_EQ(p.tier, 1);
  ASSERT_EQ(p.learnable_parameters.size(), 3u);
  ASSERT_EQ(p.gradients->size(), 4u);  // x, alpha, gamma, beta
  for (const auto& g : *p.gradients) EXPECT_EQ(g.reduction, g.kind == "learnable") << g.wrt;
  EXPECT_NE(p.tiling->parameter_gradients.find("two-pass"), std::string::npos);
  EXPECT_EQ(p.tolerances->size(), 6u);
  bool fp32_sums = false;
  for (const auto& n : *p.precision) fp32_sums = fp32_sums || n.operation == "parameter-gradient sums";
  EXPECT_TRUE(fp32_sums);
}

TEST(KernelDevProfile, ALearnableHyperparameterBecomesALearnableParameter) {
  // "learnable" in words turns the entry's fixed hyperparameter into a learned one with its own
  // reduced gradient, never silently a constant; the eager baseline is the expression (the
  // entry's PyTorch spelling takes the parameter as a Python number).
  auto p = analyse("Swish with learnable beta");
  ASSERT_TRUE(p.complete()) << p.tier_reason;
  EXPECT_EQ(p.op_name, "swish_learnable");
  ASSERT_EQ(p.learnable_parameters.size(), 1u);
  EXPECT_EQ(p.learnable_parameters[0].name, "beta");
  EXPECT_EQ(p.learnable_parameters[0].shape, "scalar");
  EXPECT_DOUBLE_EQ(p.learnable_parameters[0].value, 1.0);
  EXPECT_TRUE(p.module_parameters.empty());
  ASSERT_EQ(p.gradients->size(), 2u);
  EXPECT_TRUE((*p.gradients)[1].reduction);
  for (const auto& n : p.notes) EXPECT_EQ(n.rfind("PyTorch eager baseline", 0), std::string::npos) << n;

  p = analyse("leaky ReLU with a trainable slope per channel");
  ASSERT_EQ(p.learnable_parameters.size(), 1u);
  EXPECT_EQ(p.learnable_parameters[0].name, "negative_slope");
  EXPECT_EQ(p.learnable_parameters[0].shape, "channel");
  EXPECT_DOUBLE_EQ(p.learnable_parameters[0].value, 0.01);

  p = analyse("softplus with learnable beta");  // threshold stays a fixed module parameter
  ASSERT_EQ(p.learnable_parameters.size(), 1u);
  ASSERT_EQ(p.module_parameters.size(), 1u);
  EXPECT_EQ(p.module_parameters[0].name, "threshold");

  p = analyse("learnable softplus");  // two parameters, neither named
  EXPECT_FALSE(p.complete());
  std::string reasons = p.tier_reason;
  for (const auto& [field, why] : p.undecided) reasons += why;
  EXPECT_NE(reasons.find("does not say which of its parameters (beta, threshold)"), std::string::npos) << reasons;

  p = analyse("Swish with beta 1.5");  // no learn word: a fixed module parameter, as before
  EXPECT_TRUE(p.learnable_parameters.empty());
  ASSERT_EQ(p.module_parameters.size(), 1u);
}

TEST(KernelDevProfile, TierTwoAndThreeRequestsStopWithUndecidedFormulas) {
  // A Tier-2 request without a built-in PyTorch form (tiers.yaml) stops at the checkpoint.
  auto p = analyse("a fused group norm kernel");
  EXPECT_EQ(p.tier, 2);
  EXPECT_EQ(p.closest_kernel, "layer_norm");
  EXPECT_FALSE(p.complete());
  EXPECT_TRUE(p.undecided.count("forward"));
  ASSERT_TRUE(p.undecided.count("gradients"));
  EXPECT_NE(p.undecided.at("gradients").find("LLM provider"), std::string::npos);
  // One with a form is derived from it (KL between two rows of logits).
  p = analyse("kl divergence");
  EXPECT_EQ(p.tier, 2);
  EXPECT_EQ(p.closest_kernel, "cross_entropy");
  EXPECT_TRUE(p.complete());
  p = analyse("fused linear cross entropy");
  EXPECT_EQ(p.tier, 3);
  EXPECT_EQ(p.closest_kernel, "fused_linear_cross_entropy");
  // PyTorch code reducing over the last dimension is derived offline (tier2_derive.h); over
  // another dimension it stops, with the line.
  p = analyse("def f(x):\n    h = torch.relu(x)\n    return F.softmax(h, dim=-1)\n");
  EXPECT_EQ(p.source_kind, "pytorch");
  EXPECT_EQ(p.tier, 2);
  EXPECT_EQ(p.closest_kernel, "cross_entropy");
  EXPECT_TRUE(p.complete());
  p = analyse("def f(x):\n    h = torch.relu(x)\n    return F.softmax(h, dim=0)\n");
  EXPECT_EQ(p.tier, 2);
  EXPECT_FALSE(p.complete());
  EXPECT_NE(p.tier_reason.find("line 3"), std::string::npos) << p.tier_reason;
  p = analyse("def f(x, w):\n    return x @ w\n");
  EXPECT_EQ(p.tier, 3);
}

TEST(KernelDevProfile, NotUnderstoodIsUndecidedWithTheReason) {
  auto p = analyse("florp zaxx quibble");
  EXPECT_EQ(p.tier, 0);
  ASSERT_TRUE(p.undecided.count("tier"));
  EXPECT_NE(p.undecided.at("tier").find("no catalogue activation matches"), std::string::npos);
  p = analyse("y = relu(x", kd::InputKind::Expression);
  ASSERT_TRUE(p.undecided.count("tier"));
  EXPECT_NE(p.undecided.at("tier").find("column"), std::string::npos) << p.undecided.at("tier");
  p = analyse("def f(x):\n    return x[0]\n");
  ASSERT_TRUE(p.undecided.count("tier"));
  EXPECT_NE(p.undecided.at("tier").find("line 2"), std::string::npos) << p.undecided.at("tier");
}

TEST(KernelDevProfile, InputKindDetection) {
  const auto& c = kb().catalogue;
  EXPECT_EQ(kd::detect_input_kind("ReLU squared activation function", c), kd::InputKind::Words);
  EXPECT_EQ(kd::detect_input_kind("relu^2", c), kd::InputKind::Words);
  EXPECT_EQ(kd::detect_input_kind("y = relu(x)^2", c), kd::InputKind::Expression);
  EXPECT_EQ(kd::detect_input_kind("relu(x)^2", c), kd::InputKind::Expression);
  EXPECT_EQ(kd::detect_input_kind("import torch\ndef f(x):\n    return x", c), kd::InputKind::PyTorch);
  EXPECT_EQ(kd::detect_input_kind("Dynamic Tanh (DyT) layer", c), kd::InputKind::Words);
}

TEST(KernelDevProfile, YamlRoundTrip) {
  for (const char* text : {"ReLU squared activation function", "DyT", "leaky relu", "softmax", "florp zaxx",
                           "c = gelu(a) * b"}) {
    auto p = analyse(text);
    std::string yaml = kd::profile_to_text(p);
    auto back = kd::profile_from_yaml(YAML::Load(yaml));
    EXPECT_EQ(kd::profile_to_text(back), yaml) << text;
    EXPECT_EQ(back.undecided, p.undecided) << text;
    EXPECT_EQ(back.tier, p.tier);
    if (p.tier == 1) {
      kd::Program a = p.program(), b = back.program();
      EXPECT_TRUE(kd::equal(a.expression, b.expression)) << text;
      EXPECT_EQ(a.inputs, b.inputs);
      ASSERT_EQ(a.params.size(), b.params.size());
    }
  }
  // Undecided fields are written as {undecided: reason}.
  auto yaml = YAML::Load(kd::profile_to_text(analyse("group norm")));
  ASSERT_TRUE(yaml["gradients"]["undecided"]);
  EXPECT_EQ(yaml["tier"]["value"].as<int>(), 2);
  EXPECT_THROW(kd::profile_from_yaml(YAML::Load("identity: {op_name: ''}")), std::runtime_error);
}

TEST(KernelDevSuite, TwentyFiveOpsAsWordsExpressionsAndPyTorch) {
  ASSERT_GE(suite().size(), 25u);
  for (const auto& op : suite()) {
    const kd::Activation* entry = kb().catalogue.find(op.catalogue_name);
    ASSERT_NE(entry, nullptr) << op.catalogue_name;
    kd::Program expected = entry->program();

    auto words = analyse(op.words);
    EXPECT_EQ(words.source_kind, "words") << op.words;
    EXPECT_EQ(words.op_name, op.catalogue_name) << op.words;
    check_profile_numerics(words, expected, std::string("words: ") + op.words);

    auto expression = analyse(op.expression);
    EXPECT_EQ(expression.source_kind, "expression") << op.expression;
    check_profile_numerics(expression, expected, std::string("expression: ") + op.expression);
    EXPECT_EQ(expression.op_name, op.catalogue_name) << op.expression << " (recognised as the catalogue op)";

    auto code = analyse(op.pytorch);
    EXPECT_EQ(code.source_kind, "pytorch") << op.pytorch;
    check_profile_numerics(code, expected, std::string("pytorch: ") + op.pytorch);
    EXPECT_EQ(code.op_name, op.catalogue_name) << op.pytorch;
  }
}

// The profiles the analyser writes validate against skills/kernel_dev/profile.schema.yaml (with
// the project's schema validator); Tier-2 profiles validate too, their gaps reported as pending
// decisions rather than errors.

TEST(KernelDevProfileSchema, AnalysedProfilesValidate) {
  auto schema = liger::profile::Schema::load_file(std::filesystem::path(LIGER_SOURCE_DIR) / "skills/kernel_dev/profile.schema.yaml");
  for (const char* text : {"ReLU squared activation function", "DyT", "leaky relu", "c = gelu(a) * b",
                           "def f(x):\n    return x * torch.sigmoid(1.702 * x)\n"}) {
    auto report = schema.validate(YAML::Load(kd::profile_to_text(analyse(text))));
    EXPECT_TRUE(report.ok()) << text << ":\n" << report.format_errors("profile.yaml");
    EXPECT_TRUE(report.undecided.empty()) << text << ":\n" << report.format_undecided("profile.yaml");
  }
  auto group_norm = schema.validate(YAML::Load(kd::profile_to_text(analyse("group norm"))));
  EXPECT_TRUE(group_norm.ok()) << group_norm.format_errors("profile.yaml");
  EXPECT_GE(group_norm.undecided.size(), 8u) << group_norm.format_undecided("profile.yaml");
  // A wrong value is an error.
  auto bad = YAML::Load(kd::profile_to_text(analyse("relu squared")));
  bad["tiling"]["vector_bytes"] = 3;
  EXPECT_FALSE(schema.validate(bad).ok());
}

// Tier 2: the built-in analyser leaves the row program undecided (naming the LLM providers); a
// model's row program round-trips through YAML and is checked name by name.
namespace {

// The softmax profile the model gives in the recorded Tier-2 exchange (answers/3.md), with
// `edit` applied to its YAML.
kd::KernelProfile softmax_profile(const std::function<void(YAML::Node&)>& edit = {}) {
  std::ifstream in(std::filesystem::path(LIGER_SOURCE_DIR) / "tests/workflows/fixtures/kernel_dev/cassettes/softmax_llm/answers/3.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const std::size_t begin = s.find("```yaml\n") + 8;
  YAML::Node node = YAML::Load(s.substr(begin, s.find("```", begin) - begin));
  if (edit) edit(node);
  return kd::profile_from_yaml(node);
}

std::string problems_of(const kd::KernelProfile& p) {
  std::string all;
  for (const auto& problem : kd::row_program_problems(p)) all += problem + "\n";
  return all;
}

}  // namespace

TEST(KernelDevProfile, Tier2RowProgramUndecidedByTheBuiltInAnalyser) {
  auto p = analyse("group norm");
  ASSERT_TRUE(p.undecided.count("row_program"));
  EXPECT_NE(p.undecided.at("row_program").find("--llm openai|anthropic"), std::string::npos);
  EXPECT_FALSE(p.row_program.has_value());
  // Tier 1 and Tier 3 documents have no row_program at all.
  EXPECT_FALSE(YAML::Load(kd::profile_to_text(analyse("relu squared")))["row_program"]);
  EXPECT_FALSE(YAML::Load(kd::profile_to_text(analyse("fused linear cross entropy")))["row_program"]);
  EXPECT_FALSE(analyse("fused linear cross entropy").undecided.count("row_program"));
}

TEST(KernelDevProfile, Tier2RowProgramRoundTripsAndValidates) {
  auto p = softmax_profile();
  ASSERT_TRUE(p.row_program.has_value());
  EXPECT_TRUE(p.complete());
  ASSERT_EQ(p.row_program->forward_reductions.size(), 2u);
  EXPECT_EQ(p.row_program->forward_reductions[1].op, "sum");
  EXPECT_EQ(p.row_program->backward_uses, std::vector<std::string>{"y"});
  EXPECT_EQ(p.row_program->grad_input, "y * (dy - g)");
  EXPECT_EQ(p.row_program->pytorch_reference, "torch.softmax(x, dim=-1)");
  const std::string yaml = kd::profile_to_text(p);
  EXPECT_EQ(kd::profile_to_text(kd::profile_from_yaml(YAML::Load(yaml))), yaml);
  EXPECT_EQ(problems_of(p), "");
  auto schema = liger::profile::Schema::load_file(std::filesystem::path(LIGER_SOURCE_DIR) / "skills/kernel_dev/profile.schema.yaml");
  auto report = schema.validate(YAML::Load(yaml));
  EXPECT_TRUE(report.ok()) << report.format_errors("profile.yaml");
  auto bad = YAML::Load(yaml);
  bad["row_program"]["forward"]["reductions"][0]["op"] = "prod";
  EXPECT_FALSE(schema.validate(bad).ok());
}

TEST(KernelDevProfile, Tier2RowProgramProblemsNameTheFieldAndTheFix) {
  auto problems = problems_of(softmax_profile([](YAML::Node& n) { n["row_program"]["forward"]["output"] = "exp(x - m) / total"; }));
  EXPECT_NE(problems.find("forward.output: 'exp(x - m) / total' uses total, not available there"), std::string::npos) << problems;
  problems = problems_of(softmax_profile([](YAML::Node& n) { n["row_program"]["forward"]["reductions"][1]["expression"] = "exp(x - m"; }));
  EXPECT_NE(problems.find("forward.reductions[1] (s): 'exp(x - m' does not parse"), std::string::npos) << problems;
  // Forward reductions are recomputed from x: a backward naming them must save x.
  problems = problems_of(softmax_profile([](YAML::Node& n) { n["row_program"]["backward"]["grad_input"] = "exp(x - m) / s * (dy - g)"; }));
  EXPECT_NE(problems.find("needs x in backward.uses"), std::string::npos) << problems;
  EXPECT_EQ(problems_of(softmax_profile([](YAML::Node& n) {
              n["row_program"]["backward"]["uses"] = std::vector<std::string>{"x"};
              n["row_program"]["backward"]["reductions"][0]["expression"] = "dy * exp(x - m) / s";
              n["row_program"]["backward"]["grad_input"] = "exp(x - m) / s * (dy - g)";
            })),
            "");
  problems = problems_of(softmax_profile([](YAML::Node& n) { n["row_program"]["backward"]["uses"] = std::vector<std::string>{"z"}; }));
  EXPECT_NE(problems.find("backward.uses: 'z' is neither the input 'x', the output 'y' nor a forward reduction (m, s)"),
            std::string::npos)
      << problems;
  // Forward reductions in backward.uses are stored per row: the backward may then name them
  // without x, as long as it reads the rows of x or y; one it never reads is an error.
  EXPECT_EQ(problems_of(softmax_profile([](YAML::Node& n) {
              n["row_program"]["backward"]["uses"] = std::vector<std::string>{"x", "m", "s"};
              n["row_program"]["backward"]["reductions"][0]["expression"] = "dy * exp(x - m) / s";
              n["row_program"]["backward"]["grad_input"] = "exp(x - m) / s * (dy - g)";
            })),
            "");
  problems = problems_of(softmax_profile([](YAML::Node& n) {
    n["row_program"]["backward"]["uses"] = std::vector<std::string>{"y", "m"};
  }));
  EXPECT_NE(problems.find("the forward reduction 'm' is saved per row but nothing in the backward reads it"), std::string::npos)
      << problems;
  problems = problems_of(softmax_profile([](YAML::Node& n) {
    n["row_program"]["backward"]["uses"] = std::vector<std::string>{"m", "s"};
    n["row_program"]["backward"]["reductions"][0]["expression"] = "dy * exp(x - m) / s";
  }));
  EXPECT_NE(problems.find("besides the saved row statistics (m, s); list one of them"), std::string::npos) << problems;
  problems = problems_of(softmax_profile([](YAML::Node& n) {
    n["row_program"]["forward"]["reductions"][1]["name"] = "m";
    n["row_program"]["forward"]["reductions"][0]["op"] = "prod";
  }));
  EXPECT_NE(problems.find("name 'm' is used twice"), std::string::npos) << problems;
  EXPECT_NE(problems.find("op 'prod' is not one of sum, mean, max, min"), std::string::npos) << problems;
  problems = problems_of(softmax_profile([](YAML::Node& n) { n["row_program"]["backward"]["reductions"][0]["name"] = "t0"; }));
  EXPECT_NE(problems.find("name 't0' is reserved"), std::string::npos) << problems;
  // A learnable per-column weight or scalar needs its gradient in backward.param_gradients; a row
  // program needs Tier 2 and one tensor each way.
  problems = problems_of(softmax_profile([](YAML::Node& n) {
    YAML::Node w;
    w["name"] = "w";
    w["shape"] = "channel";
    w["init"] = 1.0;
    n["learnable_parameters"].push_back(w);
  }));
  EXPECT_NE(problems.find("no gradient for the learnable parameter 'w'"), std::string::npos) << problems;
  problems = problems_of(softmax_profile([](YAML::Node& n) {
    YAML::Node w;
    w["name"] = "w";
    w["shape"] = "scalar";
    w["init"] = 1.0;
    n["learnable_parameters"].push_back(w);
  }));
  // A learnable scalar is a weight like any other here (broadcast over the columns): it needs its gradient too.
  EXPECT_NE(problems.find("no gradient for the learnable parameter 'w'"), std::string::npos) << problems;
  problems = problems_of(softmax_profile([](YAML::Node& n) { n["tier"]["value"] = 1; }));
  EXPECT_NE(problems.find("only a Tier-2 (row reduction) profile has a row program"), std::string::npos) << problems;
  // A second input needs its gradient, and may not repeat the first's name.
  problems = problems_of(softmax_profile([](YAML::Node& n) { n["inputs"].push_back(n["inputs"][0]); }));
  EXPECT_NE(problems.find("clashes"), std::string::npos) << problems;
  problems = problems_of(softmax_profile([](YAML::Node& n) {
    YAML::Node t = YAML::Clone(n["inputs"][0]);
    t["name"] = "t";
    n["inputs"].push_back(t);
  }));
  EXPECT_NE(problems.find("no gradient for the input 't'"), std::string::npos) << problems;
  problems = problems_of(softmax_profile([](YAML::Node& n) { n["outputs"].push_back(n["outputs"][0]); }));
  EXPECT_NE(problems.find("one output tensor"), std::string::npos) << problems;
  // Module parameters are constants the expressions may use.
  EXPECT_EQ(problems_of(softmax_profile([](YAML::Node& n) {
              YAML::Node t;
              t["name"] = "temperature";
              t["default"] = 2.0;
              n["module_parameters"].push_back(t);
              n["row_program"]["forward"]["reductions"][1]["expression"] = "exp((x - m) / temperature)";
              n["row_program"]["forward"]["output"] = "exp((x - m) / temperature) / s";
              n["row_program"]["backward"]["grad_input"] = "y * (dy - g) / temperature";
            })),
            "");
}
