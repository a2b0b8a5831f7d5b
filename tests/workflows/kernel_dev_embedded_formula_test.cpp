// A description that carries its own formula (embedded_formula.h): the formula defines the op, the
// words before it name it, and text that only looks like one ("z-loss", "softplus beta=2",
// "ELU(0.5)") stays words.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "workflows/kernel_dev/embedded_formula.h"
#include "workflows/kernel_dev/profile.h"
#include "workflows/kernel_dev/tier2_derive.h"

namespace kd = liger::kernel_dev;

namespace {

const kd::KnowledgeBase& kb() {
  static const kd::KnowledgeBase k = kd::KnowledgeBase::load(LIGER_SOURCE_DIR);
  return k;
}

std::optional<kd::EmbeddedFormula> find(const std::string& text) {
  return kd::find_embedded_formula(text, kd::row_reduction_resolver(kb().catalogue.resolver()));
}

double forward_at(const kd::KernelProfile& p, double x) {
  const kd::Program program = p.program();
  kd::Environment env;
  for (const auto& q : program.params) env[q.name] = q.init;
  env[program.inputs.front()] = x;
  return kd::eval_f64(program.expression, env);
}

}  // namespace

TEST(KernelDevEmbeddedFormula, ImplicitProductsBecomeExplicit) {
  EXPECT_EQ(kd::explicit_products("1.7159 * tanh(2/3 x)"), "1.7159 * tanh(2/3 * x)");
  EXPECT_EQ(kd::explicit_products("0.5 x (1 + tanh(0.79 (x + 0.044715 x^3)))"),
            "0.5 * x * (1 + tanh(0.79 * (x + 0.044715 * x^3)))");
  EXPECT_EQ(kd::explicit_products("2x + 1e-5"), "2 * x + 1e-5");   // an exponent stays a number
  EXPECT_EQ(kd::explicit_products("(x + 1) (x - 1)"), "(x + 1) * (x - 1)");
  EXPECT_EQ(kd::explicit_products("tanh(x) * log1p(x)"), "tanh(x) * log1p(x)");  // names with digits untouched
  EXPECT_EQ(kd::explicit_products("x * sigmoid(1.702 * x)"), "x * sigmoid(1.702 * x)");
}

TEST(KernelDevEmbeddedFormula, TheFormulaAfterTheWordsIsFound) {
  auto f = find("scaled tanh: 1.7159 * tanh(2/3 x)");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->as_written, "1.7159 * tanh(2/3 x)");
  EXPECT_EQ(f->name_words, "scaled tanh");
  f = find("soft clamp, y = 30 * tanh(x / 30).");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->as_written, "y = 30 * tanh(x / 30)");
  EXPECT_EQ(f->name_words, "soft clamp");
  f = find("mish activation defined as x * tanh(softplus(x))");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->name_words, "mish");
  // A word of the op's name before '=' is prose; the formula follows it.
  f = find("bipolar sigmoid = 2 * sigmoid(x) - 1");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->as_written, "2 * sigmoid(x) - 1");
  EXPECT_EQ(f->name_words, "bipolar sigmoid");
  // The whole formula, never a tail that drops a leading factor.
  f = find("GELU, f(x) = 0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3)))");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->as_written, "0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3)))");
  EXPECT_EQ(f->name_words, "gelu");
}

TEST(KernelDevEmbeddedFormula, WordsThatOnlyLookLikeAFormulaStayWords) {
  for (const char* text : {"z-loss", "log-sum-exp of each row", "softplus beta=2", "ELU(0.5)", "leaky relu with negative slope 0.2",
                           "hard tanh clipped to [-2, 2]", "GELU (tanh approximation)", "x * sigmoid(x)", "ReLU squared",
                           "GELU (erf) activation", "Dynamic Tanh (DyT) layer", "swish (x sigmoid x) function"})
    EXPECT_FALSE(find(text)) << text;
}

TEST(KernelDevEmbeddedFormula, TheProfileIsTheFormulasAndNamedFromTheWords) {
  const kd::KernelProfile p = kd::analyse({"scaled tanh: 1.7159 * tanh(2/3 x)", kd::InputKind::Auto, ""}, kb());
  ASSERT_TRUE(p.complete()) << p.undecided.begin()->first << ": " << p.undecided.begin()->second;
  EXPECT_EQ(p.tier, 1);
  EXPECT_EQ(p.op_name, "scaled_tanh");
  EXPECT_EQ(p.source_kind, "words");
  EXPECT_EQ(p.source_text, "scaled tanh: 1.7159 * tanh(2/3 x)");
  for (double x : {-2.0, -0.3, 0.0, 0.7, 3.0}) EXPECT_NEAR(forward_at(p, x), 1.7159 * std::tanh(2.0 / 3.0 * x), 1e-12) << x;
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes.front().find("read as '1.7159 * tanh(2/3 * x)'"), std::string::npos) << p.notes.front();
  // --name wins over the words.
  EXPECT_EQ(kd::analyse({"scaled tanh: 1.7159 * tanh(2/3 x)", kd::InputKind::Auto, "lecun_tanh"}, kb()).op_name, "lecun_tanh");
  // Words that name a library op never give the new op that name.
  const kd::KernelProfile rms = kd::analyse({"rms norm: y = x / sqrt(mean(x^2) + 1e-6)", kd::InputKind::Auto, ""}, kb());
  EXPECT_EQ(rms.tier, 2);
  EXPECT_NE(rms.op_name, "rms_norm");
  EXPECT_NE(rms.notes.front().find("the library's op 'rms_norm'"), std::string::npos) << rms.notes.front();
  // No usage error for it either.
  EXPECT_FALSE(kd::input_problem({"scaled tanh: 1.7159 * tanh(2/3 x)", kd::InputKind::Auto, ""}, kb(), false));
}

TEST(KernelDevEmbeddedFormula, AnOpAndItsParameterWrittenAsACallAreWords) {
  // "ELU(0.5)" parses as a call with no input: the catalogue entry with its one parameter.
  EXPECT_EQ(kd::detect_input_kind("ELU(0.5)", kb().catalogue), kd::InputKind::Words);
  const kd::KernelProfile p = kd::analyse({"ELU(0.5)", kd::InputKind::Auto, ""}, kb());
  ASSERT_TRUE(p.complete());
  EXPECT_EQ(p.op_name, "elu");
  ASSERT_EQ(p.module_parameters.size(), 1u);
  EXPECT_DOUBLE_EQ(p.module_parameters.front().value, 0.5);
}

// Words that compose functions ("the square of the tanh of x") are read as the composition, the
// derivative by the symbolic engine; a word that is no function leaves the text to the other rules.
TEST(KernelDevEmbeddedFormula, WordsThatComposeFunctionsAreTheComposition) {
  const auto resolver = kd::row_reduction_resolver(kb().catalogue.resolver());
  auto composed = [&](const std::string& text) {
    const auto found = kd::find_composition_in_words(text, resolver);
    return found ? found->formula : std::string("(none)");
  };
  EXPECT_EQ(composed("the square of the tanh of x"), "y = (tanh(x))^2");
  EXPECT_EQ(composed("The reciprocal of the softplus of x."), "y = 1 / (softplus(x))");
  EXPECT_EQ(composed("the log of the sigmoid of the input"), "y = log(sigmoid(x))");
  EXPECT_EQ(composed("the square of the hard sigmoid of z"), "y = (hard_sigmoid(z))^2");
  EXPECT_EQ(composed("the cube of tanh"), "y = (tanh(x))^3");  // no input named: x
  EXPECT_EQ(composed("the sum of the exponentials of x"), "y = sum(exp(x))");  // plurals: each element
  // One function is a name, not a composition; unknown words and formulas are not this rule's.
  EXPECT_EQ(composed("the tanh of x"), "(none)");
  EXPECT_EQ(composed("the frobnication of the tanh of x"), "(none)");
  EXPECT_EQ(composed("the square of tanh(x)"), "(none)");
  EXPECT_EQ(composed("cross entropy of the logits"), "(none)");

  const kd::KernelProfile sq = kd::analyse({"the square of the tanh of x", kd::InputKind::Auto, ""}, kb());
  ASSERT_TRUE(sq.complete()) << sq.undecided.begin()->first << ": " << sq.undecided.begin()->second;
  EXPECT_EQ(sq.tier, 1);
  EXPECT_EQ(sq.op_name, "square_tanh");
  for (double x : {-2.0, -0.3, 0.0, 0.7, 3.0}) EXPECT_NEAR(forward_at(sq, x), std::tanh(x) * std::tanh(x), 1e-12) << x;
  EXPECT_NE(sq.notes.front().find("composes functions"), std::string::npos) << sq.notes.front();
  EXPECT_FALSE(kd::input_problem({"the square of the tanh of x", kd::InputKind::Auto, ""}, kb(), false));
  // The derivative is differentiated, never dropped (it used to give plain tanh).
  const kd::KernelProfile d = kd::analyse({"the derivative of the tanh of x", kd::InputKind::Auto, ""}, kb());
  ASSERT_TRUE(d.complete());
  for (double x : {-2.0, -0.3, 0.0, 0.7, 3.0}) EXPECT_NEAR(forward_at(d, x), 1.0 - std::tanh(x) * std::tanh(x), 1e-12) << x;
  // A row reduction outermost is a Tier-2 op: the mean of the square is a row's mean square.
  EXPECT_EQ(kd::analyse({"the mean of the square of x", kd::InputKind::Auto, ""}, kb()).tier, 2);
}

// Arithmetic said in words (words_formula.cpp): operators with their precedence, heads of two
// operands, bare functions before an operator, a constant operand extending to the sum, a comma
// closing what came before. Each reading is checked by value, not by its text.
TEST(KernelDevEmbeddedFormula, ArithmeticInWordsIsReadWithItsPrecedence) {
  struct Case {
    const char* words;
    double (*f)(double);
  };
  const Case cases[] = {
      {"the maximum of x and zero", [](double x) { return std::max(x, 0.0); }},
      {"sigmoid of x times x", [](double x) { return x / (1.0 + std::exp(-x)); }},
      {"the product of x and the tanh of x", [](double x) { return x * std::tanh(x); }},
      {"the sum of x and the square of x", [](double x) { return x + x * x; }},
      {"x divided by one plus the absolute value of x", [](double x) { return x / (1.0 + std::fabs(x)); }},
      {"the exponential of x minus one", [](double x) { return std::exp(x) - 1.0; }},
      {"the log of one plus the exponential of x", [](double x) { return std::log1p(std::exp(x)); }},
      {"x times the tanh of the log of one plus the exponential of x",
       [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }},
      {"the square of x plus one", [](double x) { return x * x + 1.0; }},
      {"x to the power of 3", [](double x) { return x * x * x; }},
      {"the maximum of x and zero, squared", [](double x) { return std::max(x, 0.0) * std::max(x, 0.0); }},
      {"x minus the tanh of x, divided by two", [](double x) { return (x - std::tanh(x)) / 2.0; }},
      {"0.5 times x times one plus the tanh of x", [](double x) { return 0.5 * x * 1.0 + std::tanh(x); }},
  };
  for (const auto& c : cases) {
    const kd::KernelProfile p = kd::analyse({c.words, kd::InputKind::Auto, ""}, kb());
    ASSERT_TRUE(p.complete()) << c.words << ": " << (p.undecided.empty() ? "" : p.undecided.begin()->second);
    EXPECT_EQ(p.tier, 1) << c.words;
    ASSERT_EQ(p.inputs.size(), 1u) << c.words;
    for (double x : {-2.0, -0.3, 0.4, 1.7}) EXPECT_NEAR(forward_at(p, x), c.f(x), 1e-9) << c.words << " at " << x;
    ASSERT_FALSE(p.notes.empty());
    EXPECT_NE(p.notes.front().find("is read as"), std::string::npos) << p.notes.front();
  }
  // "each row" is the input a row reduction around it reduces.
  EXPECT_EQ(kd::find_composition_in_words("the sum of the squares of each row", kd::row_reduction_resolver(kb().catalogue.resolver()))->formula,
            "y = sum((x)^2)");
  // Two inputs: both are the op's, and the output never takes an input's name.
  const kd::KernelProfile two = kd::analyse({"the minimum of x and y", kd::InputKind::Auto, ""}, kb());
  ASSERT_TRUE(two.complete());
  EXPECT_EQ(two.inputs.size(), 2u);
  for (const auto& out : two.outputs) EXPECT_NE(out.name, "y");
  // Past a description's length the reader does not read (its recursion stays shallow on any input).
  std::string nested;
  for (int i = 0; i < 40; ++i) nested += "the square of ";
  EXPECT_FALSE(kd::find_composition_in_words(nested + "x", kd::row_reduction_resolver(kb().catalogue.resolver())));
  // "a" is an article, unless it is an operand.
  const kd::KernelProfile ab = kd::analyse({"the maximum of a and b", kd::InputKind::Auto, ""}, kb());
  ASSERT_TRUE(ab.complete());
  ASSERT_EQ(ab.inputs.size(), 2u);
  EXPECT_EQ(ab.inputs[0].name, "a");
  EXPECT_EQ(ab.inputs[1].name, "b");
  // Not arithmetic in words: left to the catalogue and the other rules.
  const auto resolver = kd::row_reduction_resolver(kb().catalogue.resolver());
  for (const char* other : {"relu squared", "gelu with the tanh approximation", "two plus three", "x plus",
                            "the sum of x and", "leaky relu with slope 0.1", "the maximum of each row"})
    EXPECT_FALSE(kd::find_composition_in_words(other, resolver)) << other;
}
