// kernel-dev analysers: parser, derivatives (checked numerically), simplification, safe forms,
// the activation catalogue, natural-language resolution and PyTorch translation.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <random>

#include "workflows/kernel_dev/catalogue.h"
#include "workflows/kernel_dev/expr.h"
#include "workflows/kernel_dev/pytorch.h"

namespace kd = liger::kernel_dev;

namespace {

const kd::Catalogue& catalogue() {
  static const kd::Catalogue c =
      kd::Catalogue::load_file(std::filesystem::path(LIGER_SOURCE_DIR) / "skills/kernel_dev/activations.yaml");
  return c;
}

kd::Environment default_env(const kd::Program& p) {
  kd::Environment env;
  for (const auto& param : p.params) env[param.name] = param.init;
  return env;
}

// Checks every partial derivative of `program` against central finite differences at many
// random points (avoiding kinks, where the derivative is a convention, not a limit).
void check_derivatives(const kd::Program& program, const std::string& label, int points = 200) {
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> input_dist(-4.0, 4.0);
  std::vector<std::string> variables = program.inputs;
  for (const auto& p : program.params)
    if (p.learnable) variables.push_back(p.name);
  ASSERT_FALSE(variables.empty()) << label;
  int checked = 0;
  for (const auto& v : variables) {
    kd::Expr d = kd::derivative(program.expression, v);
    for (int i = 0; i < points; ++i) {
      kd::Environment env = default_env(program);
      for (const auto& in : program.inputs) env[in] = input_dist(rng);
      for (const auto& p : program.params)
        if (p.learnable) env[p.name] = p.init + 0.5 * input_dist(rng) / 4.0 + (p.init == 0 ? 0.3 : 0.0);
      const double h = 1e-6;
      kd::Environment plus = env, minus = env;
      plus[v] += h;
      minus[v] -= h;
      double f_plus = kd::eval_f64(program.expression, plus);
      double f_minus = kd::eval_f64(program.expression, minus);
      // Skip points near a kink: the one-sided slopes disagree.
      kd::Environment plus2 = env, minus2 = env;
      plus2[v] += 2 * h;
      minus2[v] -= 2 * h;
      double right = (kd::eval_f64(program.expression, plus2) - kd::eval_f64(program.expression, env)) / (2 * h);
      double left = (kd::eval_f64(program.expression, env) - kd::eval_f64(program.expression, minus2)) / (2 * h);
      if (std::fabs(right - left) > 1e-4 * (1 + std::fabs(right))) continue;
      double numeric = (f_plus - f_minus) / (2 * h);
      double symbolic = kd::eval_f64(d, env);
      ASSERT_NEAR(symbolic, numeric, 1e-5 * (1 + std::fabs(numeric)))
          << label << ": d/d" << v << " = " << kd::to_string(d) << " at " << v << " = " << env[v];
      ++checked;
    }
  }
  EXPECT_GT(checked, points / 2) << label << ": too few points checked";
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Parser

TEST(KernelDevParser, ParsesTheIssueExamples) {
  auto p = kd::parse_program("y = relu(x)^2");
  EXPECT_EQ(p.output, "y");
  EXPECT_EQ(kd::to_string(p.expression), "relu(x)^2");
  EXPECT_EQ(p.inputs, std::vector<std::string>{"x"});

  p = kd::parse_program("y = x * sigmoid(1.702 * x)");
  EXPECT_EQ(kd::to_string(p.expression), "x * sigmoid(1.702 * x)");

  p = kd::parse_program("c = gelu(a) * b", catalogue().resolver());
  EXPECT_EQ(p.output, "c");
  EXPECT_EQ(p.inputs, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(kd::contains_function(p.expression, "erf"));

  p = kd::parse_program("y = gamma * tanh(alpha * x) + beta");
  EXPECT_EQ(p.inputs, std::vector<std::string>{"x"});
  ASSERT_EQ(p.params.size(), 3u);
  EXPECT_EQ(p.params[0].name, "gamma");
  EXPECT_EQ(p.params[0].shape, kd::ParamShape::Channel);
  EXPECT_EQ(p.params[1].name, "alpha");
  EXPECT_EQ(p.params[1].shape, kd::ParamShape::Scalar);
  EXPECT_EQ(p.params[2].name, "beta");
  EXPECT_EQ(p.params[2].init, 0.0);
}

TEST(KernelDevParser, PrecedenceConstantsUnaryMinusAndRoundTrip) {
  EXPECT_DOUBLE_EQ(kd::eval_f64(kd::parse_expression("-2^2"), {}), -4.0);
  EXPECT_DOUBLE_EQ(kd::eval_f64(kd::parse_expression("2^3^2"), {}), 512.0);
  EXPECT_DOUBLE_EQ(kd::eval_f64(kd::parse_expression("1 - 2 - 3"), {}), -4.0);
  EXPECT_DOUBLE_EQ(kd::eval_f64(kd::parse_expression("8 / 4 / 2"), {}), 1.0);
  EXPECT_DOUBLE_EQ(kd::eval_f64(kd::parse_expression("2 * pi"), {}), 2 * M_PI);
  EXPECT_DOUBLE_EQ(kd::eval_f64(kd::parse_expression("e"), {}), M_E);
  EXPECT_DOUBLE_EQ(kd::eval_f64(kd::parse_expression("x ** 3"), {{"x", 2.0}}), 8.0);
  EXPECT_DOUBLE_EQ(kd::eval_f64(kd::parse_expression("where(x > 0, x, 0.01 * x)"), {{"x", -2.0}}), -0.02);
  EXPECT_DOUBLE_EQ(kd::eval_f64(kd::parse_expression("clamp(x, min=0, max=6)"), {{"x", 7.0}}), 6.0);
  EXPECT_DOUBLE_EQ(kd::eval_f64(kd::parse_expression("1e-3 * x"), {{"x", 2.0}}), 2e-3);
  // Multi-statement programs with temporaries and comments.
  auto p = kd::parse_program("s = sigmoid(x)  # gate\nt = x * s; y = t * t");
  EXPECT_EQ(p.output, "y");
  EXPECT_NEAR(kd::eval_f64(p.expression, {{"x", 1.0}}), std::pow(1.0 / (1 + std::exp(-1.0)), 2), 1e-15);
  // Declared parameters.
  p = kd::parse_program("param k: scalar = 2.5 fixed\ny = k * x");
  ASSERT_EQ(p.params.size(), 1u);
  EXPECT_FALSE(p.params[0].learnable);
  EXPECT_EQ(p.params[0].init, 2.5);
  // Printing re-parses to the same tree.
  for (const char* text : {"-x^2", "(-x)^2", "a - (b - c)", "a / (b * c)", "-(a * b)", "x^-1", "where(x >= 0, x, -x)",
                           "2 * x + 3 * y^2 - sigmoid(-x)"}) {
    auto e = kd::parse_expression(text);
    EXPECT_TRUE(kd::equal(e, kd::parse_expression(kd::to_string(e)))) << text << " -> " << kd::to_string(e);
  }
}

TEST(KernelDevParser, ErrorsNameTheColumnAndWhatWasExpected) {
  try {
    kd::parse_expression("y = relu(x ^ 2");
    FAIL() << "expected a parse error";
  } catch (const kd::ParseError& e) {
    EXPECT_EQ(e.column(), 15);
    EXPECT_NE(std::string(e.what()).find("column 15"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("')'"), std::string::npos) << e.what();
  }
  try {
    kd::parse_expression("y = x * * 2");
    FAIL();
  } catch (const kd::ParseError& e) {
    EXPECT_EQ(e.column(), 9) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected a number, a name"), std::string::npos) << e.what();
  }
  try {
    kd::parse_expression("y = frobnicate(x)");
    FAIL();
  } catch (const kd::ParseError& e) {
    EXPECT_EQ(e.column(), 5);
    EXPECT_NE(std::string(e.what()).find("unknown function 'frobnicate'"), std::string::npos) << e.what();
  }
  try {
    kd::parse_expression("y = x $ 2");
    FAIL();
  } catch (const kd::ParseError& e) {
    EXPECT_EQ(e.column(), 7) << e.what();
  }
  try {
    kd::parse_expression("y = tanh(x, 2)");
    FAIL();
  } catch (const kd::ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("takes 1 argument"), std::string::npos) << e.what();
  }
  try {
    kd::parse_expression("y = (x +\n  2 2)");
    FAIL();
  } catch (const kd::ParseError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.column(), 5) << e.what();
  }
  EXPECT_THROW(kd::parse_expression(""), kd::ParseError);
  EXPECT_THROW(kd::parse_expression("leaky_relu(x, 0.1, 3, 4)", catalogue().resolver()), kd::ParseError);
}

// ------------------------------------------------------------------------------------------
// Differentiation and simplification

TEST(KernelDevDerivative, SimplifiedFormsAreClean) {
  auto d = [](const char* text, const char* var = "x") { return kd::to_string(kd::derivative(kd::parse_expression(text), var)); };
  EXPECT_EQ(d("x^3"), "3 * x^2");
  EXPECT_EQ(d("relu(x)^2"), "2 * relu(x) * step(x)");
  EXPECT_EQ(d("tanh(x)"), "1 - tanh(x)^2");
  EXPECT_EQ(d("sigmoid(x)"), "sigmoid(x) * (1 - sigmoid(x))");
  EXPECT_EQ(d("x * 1 + 0"), "1");
  EXPECT_EQ(d("5 * x * 0 + 7"), "0");
  EXPECT_EQ(d("log(1 + exp(x))"), "sigmoid(x)");  // rewritten to softplus first
  EXPECT_EQ(d("a * b", "a"), "b");
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("1 / (1 + exp(-x))"))), "sigmoid(x)");
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("exp(x) - 1"))), "expm1(x)");
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("log(1 + x)"))), "log1p(x)");
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("max(x, 0)"))), "relu(x)");
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("2 * (3 * x)"))), "6 * x");
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("x * x * x"))), "x^3");
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("--x - 0"))), "x");
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("(x^2)^3"))), "x^6");
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("where(x > 0, y, y)"))), "y");
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("sqrt(4) + exp(0)"))), "3");
  // A factor of a product cancels against the same divisor (as w / w -> 1), also deep in the product:
  // the chain rule of a scale or cap leaves `cap * ... / cap`.
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("cap * (1 - tanh(x / cap)^2) / cap"))), "1 - tanh(x / cap)^2");
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("2 * (a * sin(a * x)) / a"))), "2 * sin(a * x)");
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("-(a * x) / a"))), "-x");
  EXPECT_EQ(kd::to_string(kd::simplify(kd::parse_expression("a * x / b"))), "a * x / b");
  // Simplification never changes values.
  auto raw = kd::differentiate(kd::parse_expression("x * tanh(log1p(exp(x)))"), "x");
  auto simple = kd::simplify(raw);
  EXPECT_LT(kd::node_count(simple), kd::node_count(raw));
  for (double x : {-3.0, -0.5, 0.25, 2.0}) EXPECT_NEAR(kd::eval_f64(simple, {{"x", x}}), kd::eval_f64(raw, {{"x", x}}), 1e-12);
}

TEST(KernelDevDerivative, KinksMatchPyTorchConventions) {
  auto at = [](const char* text, double x) { return kd::eval_f64(kd::derivative(kd::parse_expression(text), "x"), {{"x", x}}); };
  EXPECT_EQ(at("relu(x)", 0.0), 0.0);         // torch: relu'(0) = 0
  EXPECT_EQ(at("abs(x)", 0.0), 0.0);          // torch: sgn(0) = 0
  EXPECT_EQ(at("where(x > 0, x, 0.01 * x)", 0.0), 0.01);  // leaky_relu'(0) = negative_slope
  EXPECT_EQ(at("clamp(x, 0, 6)", 0.0), 1.0);  // torch.clamp: inclusive bounds
  EXPECT_EQ(at("clamp(x, 0, 6)", 6.0), 1.0);
  EXPECT_EQ(at("max(x, 1)", 1.0), 0.5);       // torch.maximum splits ties
  const auto* hs = catalogue().find("hardswish");
  ASSERT_NE(hs, nullptr);
  EXPECT_DOUBLE_EQ(kd::eval_f64(kd::derivative(hs->expression, "x"), {{"x", -3.0}}), -0.5);  // x/3 + 1/2
  EXPECT_DOUBLE_EQ(kd::eval_f64(kd::derivative(hs->expression, "x"), {{"x", 3.0}}), 1.5);
  const auto* hsig = catalogue().find("hardsigmoid");
  EXPECT_EQ(kd::eval_f64(kd::derivative(hsig->expression, "x"), {{"x", 3.0}}), 0.0);  // open interval
}

TEST(KernelDevDerivative, EveryCatalogueEntryMatchesFiniteDifferences) {
  ASSERT_GE(catalogue().entries().size(), 25u);
  for (const auto& a : catalogue().entries()) check_derivatives(a.program(), a.name);
}

TEST(KernelDevDerivative, FreeExpressionsMatchFiniteDifferences) {
  for (const char* text : {"y = x * sigmoid(1.702 * x)", "y = x^3 - 2 * x / (1 + x^2)", "y = exp(-x^2 / 2)",
                           "y = log1p(x^2) * cos(x)", "y = sqrt(1 + x^2) - rsqrt(2 + x^2)", "y = erf(x) * tanh(x)",
                           "c = a * sigmoid(a) * b", "c = gelu_tanh(a) * b + silu(b)", "y = min(x, 1) * max(x, -1)",
                           "y = (2 + x^2)^x", "y = gamma * tanh(alpha * x) + beta", "y = abs(x) * sign(x) + softplus(2 * x)"}) {
    auto p = kd::parse_program(text, catalogue().resolver());
    check_derivatives(p, text);
  }
}

TEST(KernelDevSafeForms, NoOverflowInFp32AtPlusMinus80) {
  for (const auto& a : catalogue().entries()) {
    kd::Program p = a.program();
    std::vector<std::string> variables = p.inputs;
    for (const auto& param : p.params)
      if (param.learnable) variables.push_back(param.name);
    std::vector<kd::Expr> exprs = {p.expression};
    for (const auto& v : variables) exprs.push_back(kd::derivative(p.expression, v));
    for (double x : {-80.0, -30.0, -1e-30, 0.0, 30.0, 80.0}) {
      kd::Environment env = default_env(p);
      for (const auto& in : p.inputs) env[in] = x;
      for (std::size_t k = 0; k < exprs.size(); ++k) {
        float value = kd::eval_f32(exprs[k], env);
        EXPECT_TRUE(std::isfinite(value)) << a.name << " expr " << k << " = " << kd::to_string(exprs[k]) << " at " << x;
      }
    }
  }
  // The stable forms themselves.
  auto e = kd::parse_expression("sigmoid(x)");
  EXPECT_EQ(kd::eval_f32(e, {{"x", -200.0}}), 0.0f);
  EXPECT_EQ(kd::eval_f32(e, {{"x", 200.0}}), 1.0f);
  auto sp = kd::parse_expression("softplus(x)");
  EXPECT_FLOAT_EQ(kd::eval_f32(sp, {{"x", 200.0}}), 200.0f);
  EXPECT_GT(kd::eval_f32(sp, {{"x", -80.0}}), 0.0f);
}

// ------------------------------------------------------------------------------------------
// Catalogue and natural language

TEST(KernelDevCatalogue, HasTheRequiredActivations) {
  for (const char* name : {"relu_squared", "leaky_relu", "elu", "selu", "gelu", "gelu_tanh", "silu", "swish", "mish",
                           "softplus", "sigmoid", "tanh", "hardswish", "hardsigmoid", "reglu", "swiglu", "geglu", "dyt"})
    EXPECT_NE(catalogue().find(name), nullptr) << name;
  const auto* dyt = catalogue().find("dyt");
  ASSERT_EQ(dyt->learnable.size(), 3u);
  EXPECT_EQ(dyt->learnable[0].shape, kd::ParamShape::Scalar);
  EXPECT_EQ(dyt->learnable[0].init, 0.5);
  EXPECT_EQ(catalogue().find("swiglu")->inputs, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(catalogue().find("Leaky-ReLU"), catalogue().find("leaky_relu"));
}

TEST(KernelDevCatalogue, ResolvesNaturalLanguage) {
  struct Case {
    const char* text;
    const char* expected;
  };
  for (const Case& c : std::vector<Case>{{"ReLU squared activation function", "relu_squared"},
                                         {"relu²", "relu_squared"},
                                         {"Please implement a squared ReLU kernel", "relu_squared"},
                                         {"ReLU^2", "relu_squared"},
                                         {"ReLU", "relu"},
                                         {"leaky ReLU activation", "leaky_relu"},
                                         {"Gaussian Error Linear Unit", "gelu"},
                                         {"GELU with tanh approximation", "gelu_tanh"},
                                         {"gelu_pytorch_tanh", "gelu_tanh"},
                                         {"SwiGLU", "swiglu"},
                                         {"swish-gated linear unit", "swiglu"},
                                         {"Mish activation function", "mish"},
                                         {"DyT", "dyt"},
                                         {"Dynamic Tanh (DyT) layer", "dyt"},
                                         {"hard swish op", "hardswish"},
                                         {"Swish-β", "swish"},
                                         {"scaled exponential linear unit", "selu"},
                                         {"the logistic sigmoid function", "sigmoid"}}) {
    auto r = catalogue().resolve(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.undecided;
    EXPECT_EQ(r.activation->name, c.expected) << c.text << " (normalised '" << r.normalised << "')";
  }
  auto r = catalogue().resolve("ReLU squared activation function");
  EXPECT_EQ(kd::to_string(r.activation->expression), "relu(x)^2");

  // Words outside the match that name operations refuse the match instead of being dropped.
  auto zloss = catalogue().resolve("z-loss: the square of the log of the sum of exponentials of each row of logits");
  EXPECT_FALSE(zloss.ok()) << "matched " << (zloss.activation ? zloss.activation->name : "");
  for (const char* w : {"log", "sum", "exponentials"})
    EXPECT_NE(std::find(zloss.unexplained.begin(), zloss.unexplained.end(), w), zloss.unexplained.end()) << w;
  EXPECT_NE(zloss.undecided.find("names more than catalogue entry 'square'"), std::string::npos) << zloss.undecided;
  EXPECT_FALSE(catalogue().resolve("tanh of x times 2").ok());
  // Parameter words and words the tool does not know stay harmless.
  for (const char* text : {"leaky ReLU with negative slope 0.2", "ReLU squared activation used in Primer transformers",
                           "SwiGLU as in the LLaMA MLP", "softplus with beta 2 and threshold 20"})
    EXPECT_TRUE(catalogue().resolve(text).ok()) << text << ": " << catalogue().resolve(text).undecided;
  // An arithmetic-only entry (square) beside a word the tool does not know is that word's function
  // transformed ("squared hinge" is max(0, 1 - x)^2), never x^2 with the word dropped.
  auto hinge = catalogue().resolve("squared hinge");
  EXPECT_FALSE(hinge.ok()) << "matched " << (hinge.activation ? hinge.activation->name : "");
  EXPECT_EQ(hinge.unexplained, std::vector<std::string>{"hinge"});
  // "derivative of" before the match asks for another function; after it, for the backward.
  EXPECT_FALSE(catalogue().resolve("derivative of derivative of mish").ok());
  EXPECT_TRUE(catalogue().resolve("mish and its derivative").ok()) << catalogue().resolve("mish and its derivative").undecided;
  for (const char* text : {"square", "elementwise square of the input", "squared activation for my transformer"})
    EXPECT_TRUE(catalogue().resolve(text).ok()) << text << ": " << catalogue().resolve(text).undecided;
  // A gate word and an activation compose the gated form, never the one-input activation.
  auto gated = catalogue().resolve("squared ReLU gated linear unit");
  ASSERT_TRUE(gated.ok()) << gated.undecided;
  EXPECT_EQ(gated.activation->name, "relu_squared_glu");
  EXPECT_EQ(gated.activation->inputs, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(kd::to_string(gated.activation->expression), "relu(a)^2 * b");
  EXPECT_EQ(gated.activation->torch, "(torch.relu(a).square()) * b");
  auto exact = catalogue().resolve("exact GELU (erf) gated linear unit");
  ASSERT_TRUE(exact.ok()) << exact.undecided;
  EXPECT_EQ(exact.activation->name, "geglu_erf") << "an entry that is the gated form keeps its name";
  auto mish_glu = catalogue().resolve("Mish GLU");
  ASSERT_TRUE(mish_glu.ok()) << mish_glu.undecided;
  EXPECT_EQ(mish_glu.activation->inputs.size(), 2u);

  auto gibberish = catalogue().resolve("florp zaxx quibble");
  EXPECT_FALSE(gibberish.ok());
  EXPECT_NE(gibberish.undecided.find("no catalogue activation matches 'florp zaxx quibble'"), std::string::npos)
      << gibberish.undecided;
  auto empty = catalogue().resolve("an activation function kernel");
  EXPECT_FALSE(empty.ok());
  EXPECT_NE(empty.undecided.find("empty"), std::string::npos);
}

TEST(KernelDevCatalogue, EntriesAsFunctionsTakeArgumentsAndDefaults) {
  auto e = kd::parse_expression("leaky_relu(x, 0.2)", catalogue().resolver());
  EXPECT_DOUBLE_EQ(kd::eval_f64(e, {{"x", -1.0}}), -0.2);
  e = kd::parse_expression("leaky_relu(x)", catalogue().resolver());
  EXPECT_DOUBLE_EQ(kd::eval_f64(e, {{"x", -1.0}}), -0.01);
  EXPECT_THROW(kd::parse_expression("gelu(x)"), kd::ParseError);  // unknown without the catalogue
}

// ------------------------------------------------------------------------------------------
// PyTorch translation

namespace {
kd::TorchTranslation torch(const std::string& source) { return kd::translate_pytorch(source, catalogue()); }

void expect_same_function(const kd::Program& got, const kd::Expr& expected, const std::string& label) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(-3, 3);
  for (int i = 0; i < 50; ++i) {
    kd::Environment env = default_env(got);
    for (const auto& in : got.inputs) env[in] = dist(rng);
    EXPECT_NEAR(kd::eval_f64(got.expression, env), kd::eval_f64(expected, env), 1e-12) << label;
  }
}
}  // namespace

TEST(KernelDevPyTorch, TranslatesModulesFunctionsAndSnippets) {
  auto t = torch(R"(import torch
import torch.nn as nn
import torch.nn.functional as F

class ReLUSquared(nn.Module):
    """ReLU squared, as in Primer."""
    def __init__(self):
        super().__init__()

    def forward(self, x):
        r = torch.relu(x)
        return r * r
)");
  ASSERT_TRUE(t.elementwise) << t.rejection << " at line " << t.line;
  EXPECT_EQ(t.entry, "ReLUSquared.forward");
  expect_same_function(t.program, kd::parse_expression("relu(x)^2"), "relu2 module");

  t = torch("def mish(x):\n    return x * torch.tanh(F.softplus(x))\n");
  ASSERT_TRUE(t.elementwise) << t.rejection;
  expect_same_function(t.program, catalogue().find("mish")->expression, "mish");

  t = torch("y = F.gelu(x, approximate=\"tanh\")");
  ASSERT_TRUE(t.elementwise) << t.rejection;
  expect_same_function(t.program, catalogue().find("gelu_tanh")->expression, "gelu tanh snippet");

  t = torch("def f(x):\n    return torch.where(x > 0, x, 0.01 * x)\n");
  ASSERT_TRUE(t.elementwise) << t.rejection;
  expect_same_function(t.program, kd::parse_expression("where(x > 0, x, 0.01 * x)"), "where");

  t = torch("def swiglu(a, b):\n    return F.silu(a) * b\n");
  ASSERT_TRUE(t.elementwise) << t.rejection;
  EXPECT_EQ(t.program.inputs, (std::vector<std::string>{"a", "b"}));

  t = torch("def f(x):\n    t = x.pow(2)\n    t += torch.square(x)\n    return t.sigmoid() * x.clamp(min=0)\n");
  ASSERT_TRUE(t.elementwise) << t.rejection;
  expect_same_function(t.program, kd::parse_expression("sigmoid(2 * x^2) * relu(x)"), "methods");
}

TEST(KernelDevPyTorch, LearnableAndModuleParameters) {
  auto t = torch(R"(
class DyT(nn.Module):
    def __init__(self, num_features, alpha_init_value=0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1) * alpha_init_value)
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))

    def forward(self, x):
        x = torch.tanh(self.alpha * x)
        return x * self.weight + self.bias
)");
  ASSERT_TRUE(t.elementwise) << t.rejection << " line " << t.line;
  ASSERT_EQ(t.program.params.size(), 3u);
  EXPECT_EQ(t.program.params[0].name, "alpha");
  EXPECT_EQ(t.program.params[0].shape, kd::ParamShape::Scalar);
  EXPECT_DOUBLE_EQ(t.program.params[0].init, 0.5);
  EXPECT_EQ(t.program.params[1].shape, kd::ParamShape::Channel);
  EXPECT_DOUBLE_EQ(t.program.params[2].init, 0.0);

  t = torch(R"(
class MyLeaky(nn.Module):
    def __init__(self, negative_slope=0.2):
        super().__init__()
        self.negative_slope = negative_slope
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope) + self.act(x)
)");
  ASSERT_TRUE(t.elementwise) << t.rejection << " line " << t.line;
  ASSERT_EQ(t.program.params.size(), 1u);
  EXPECT_FALSE(t.program.params[0].learnable);
  EXPECT_DOUBLE_EQ(t.program.params[0].init, 0.2);
}

TEST(KernelDevPyTorch, RejectsNonElementwiseCodeWithTheLine) {
  // A reduction over the last dimension is translated (Tier 2, tier2_derive.h); over another dim
  // it is refused with the line.
  auto t = torch("class M(nn.Module):\n    def forward(self, x):\n        y = torch.relu(x)\n        return y.sum(dim=-1)\n");
  EXPECT_FALSE(t.elementwise);
  EXPECT_TRUE(t.row_reduction);
  EXPECT_EQ(t.tier_guess, 2);
  t = torch("class M(nn.Module):\n    def forward(self, x):\n        y = torch.relu(x)\n        return y.sum(dim=0)\n");
  EXPECT_FALSE(t.elementwise);
  EXPECT_FALSE(t.row_reduction);
  EXPECT_EQ(t.line, 4);
  EXPECT_EQ(t.offending_line, "return y.sum(dim=0)");
  EXPECT_EQ(t.tier_guess, 2);
  EXPECT_NE(t.rejection.find("reduction"), std::string::npos) << t.rejection;

  t = torch("def f(x, w):\n    h = x @ w\n    return torch.relu(h)\n");
  EXPECT_FALSE(t.elementwise);
  EXPECT_EQ(t.line, 2);
  EXPECT_EQ(t.tier_guess, 3);

  t = torch("def f(x):\n    return F.softmax(x, dim=-1)\n");
  EXPECT_FALSE(t.elementwise);
  EXPECT_EQ(t.tier_guess, 2);

  t = torch("def f(x):\n    return x[:, 0] * 2\n");
  EXPECT_FALSE(t.elementwise);
  EXPECT_NE(t.rejection.find("an index picks one column"), std::string::npos) << t.rejection;

  t = torch("def f(x):\n    if x.mean() > 0:\n        return x\n    return -x\n");
  EXPECT_FALSE(t.elementwise);
  EXPECT_EQ(t.line, 2);

  t = torch("def f(x):\n    return torch.matmul(x, x)\n");
  EXPECT_FALSE(t.elementwise);
  EXPECT_EQ(t.tier_guess, 3);
}

// Python's one-line forms and spellings the reader must take as the block forms (issue 18):
// a body on the def line, ';'-separated statements, lambdas, torch.nn.functional.<f>, and inputs
// named like the default output.
TEST(KernelDevPyTorch, OneLineDefsLambdasAndFullFunctionalPaths) {
  struct Case {
    const char* source;
    const char* expected;
  };
  for (const Case& c : {Case{"def f(x): return x * torch.sigmoid(x)", "x * sigmoid(x)"},
                        Case{"def f(x) -> torch.Tensor: t = torch.tanh(x); return t * x", "tanh(x) * x"},
                        Case{"lambda x: x * torch.tanh(F.softplus(x))", "x * tanh(softplus(x))"},
                        Case{"act = lambda a, b: a * torch.sigmoid(b) + b", "a * sigmoid(b) + b"},
                        Case{"def f(x): return torch.nn.functional.silu(x) * 2", "2 * x * sigmoid(x)"},
                        Case{"class M(torch.nn.Module):\n    def forward(self, x): return torch.nn.functional.relu(x) ** 2",
                             "relu(x)^2"}}) {
    auto t = torch(c.source);
    ASSERT_TRUE(t.elementwise) << c.source << ": " << t.rejection << " at line " << t.line;
    expect_same_function(t.program, kd::parse_expression(c.expected, catalogue().resolver()), c.source);
  }
  // A lambda whose body is not an element-wise function is not misread as one: a row reduction.
  auto t = torch("lambda x: x.sum(dim=-1)");
  EXPECT_FALSE(t.elementwise);
  EXPECT_TRUE(t.row_reduction);
  t = torch("lambda x: x.cumsum(dim=-1)");
  EXPECT_FALSE(t.elementwise);
  EXPECT_FALSE(t.rejection.empty());
}

TEST(KernelDevPyTorch, GradientNamesNeverClashWithInputs) {
  auto t = torch("def f(x, y): return torch.maximum(x, y) * 0.5");
  ASSERT_TRUE(t.elementwise) << t.rejection;
  EXPECT_EQ(t.program.inputs, (std::vector<std::string>{"x", "y"}));
  EXPECT_NE(t.program.output, "y");
  EXPECT_NE(t.program.output, "x");
  // The expression language: an input named like the default output.
  auto p = kd::parse_program("y = relu(y)^2", catalogue().resolver());
  EXPECT_EQ(p.inputs, (std::vector<std::string>{"y"}));
  EXPECT_NE(p.output, "y");
  EXPECT_EQ(kd::unclashing_output_name("y", {"x", "y", "out"}, {}), "z");
  EXPECT_EQ(kd::unclashing_output_name("y", {"dy"}, {}), "out");  // d<output> must not be an input either
  EXPECT_EQ(kd::unclashing_output_name("c", {"a", "b"}, {}), "c");
}
