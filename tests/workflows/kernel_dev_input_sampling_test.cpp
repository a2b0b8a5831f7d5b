// kernel-dev on PyTorch's element-wise functions of several tensors and on ops defined on part of
// the line: each input's test distribution (inputs[].sample) is the widest one on which the
// forward and the gradients are finite; the forward equals an independent spelling there; the
// rendered reference and GPU tests draw from it; a Tier-2 profile cannot claim one.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "workflows/kernel_dev/input_sampling.h"
#include "workflows/kernel_dev/profile.h"
#include "workflows/kernel_dev/render.h"

#include "kernel_dev_family.h"

namespace kd = liger::kernel_dev;

namespace {

using liger::testing::family::kb;

struct Case {
  const char* input;
  std::map<std::string, std::string> samples;  // input -> expected inputs[].sample
  const char* same_as;                         // the forward, spelt independently
};

// Both spellings agree, and the forward and every gradient are finite, at points drawn from the
// profile's own distributions.
void expect_forward_on_samples(const kd::KernelProfile& p, const std::string& expected, const std::string& label) {
  ASSERT_TRUE(p.forward.has_value() && p.gradients.has_value()) << label;
  const kd::Expr got = kd::parse_program("y = " + p.forward->expression, kb().catalogue.resolver()).expression;
  const kd::Expr want = kd::parse_program("y = " + expected, kb().catalogue.resolver()).expression;
  std::vector<kd::Expr> gradients;
  for (const auto& g : *p.gradients)
    gradients.push_back(kd::parse_program("y = " + g.expression, kb().catalogue.resolver()).expression);
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0.0, 2.0);
  kd::Environment env;
  for (const auto& param : p.module_parameters) env[param.name] = param.value;
  for (int i = 0; i < 64; ++i) {
    for (const auto& t : p.inputs) env[t.name] = kd::sample_value(t.sample, normal(rng));
    const double value = kd::eval_f64(got, env);
    EXPECT_TRUE(std::isfinite(value)) << label << " at point " << i;
    EXPECT_NEAR(value, kd::eval_f64(want, env), 1e-9 * (1 + std::fabs(value)))
        << label << ": profile forward '" << p.forward->expression << "' vs '" << expected << "'";
    for (std::size_t g = 0; g < gradients.size(); ++g)
      EXPECT_TRUE(std::isfinite(kd::eval_f64(gradients[g], env))) << label << ": d/d" << (*p.gradients)[g].wrt << " at point " << i;
  }
}

}  // namespace

TEST(KernelDevInputSampling, PyTorchFunctionsOfSeveralTensorsAndRestrictedDomains) {
  const std::vector<Case> cases = {
      // Functions of two or three tensors, on the whole line.
      {"def f(x, y): return torch.logaddexp(x, y)", {{"x", "normal"}, {"y", "normal"}}, "log(exp(x) + exp(y))"},
      {"def f(x, y): return torch.logaddexp2(x, y)", {{"x", "normal"}, {"y", "normal"}}, "log(2^x + 2^y) / log(2)"},
      {"def f(x, y): return torch.hypot(x, y)", {{"x", "normal"}, {"y", "normal"}}, "sqrt(x * x + y * y)"},
      {"def f(y, x): return torch.atan2(y, x)", {{"y", "normal"}, {"x", "normal"}},
       "atan(y / x) + where(x < 0, where(y >= 0, pi, -pi), 0)"},
      {"def f(a, b, w): return torch.lerp(a, b, w)", {{"a", "normal"}, {"b", "normal"}, {"w", "normal"}}, "(1 - w) * a + w * b"},
      {"def f(a, b): return a.lerp(b, 0.25)", {{"a", "normal"}, {"b", "normal"}}, "0.75 * a + 0.25 * b"},
      {"def f(x, a, b): return torch.addcmul(x, a, b, value=0.5)", {{"x", "normal"}, {"a", "normal"}, {"b", "normal"}},
       "x + a * b / 2"},
      {"def f(a, b): return torch.copysign(a, b)", {{"a", "normal"}, {"b", "normal"}}, "abs(a) * sign(b)"},
      {"def f(x): return torch.arctan(x)", {{"x", "normal"}}, "2 * atan(x / (1 + sqrt(1 + x^2)))"},
      {"def f(x): return torch.asin(torch.tanh(x))", {{"x", "normal"}}, "atan((exp(x) - exp(-x)) / 2)"},
      {"def f(x): return x * torch.special.ndtr(x)", {{"x", "normal"}}, "x * (1 + erf(x / sqrt(2))) / 2"},
      {"def f(x): return torch.special.erfc(x)", {{"x", "normal"}}, "1 - erf(x)"},
      {"def f(x): return F.hardshrink(x, 0.3)", {{"x", "normal"}}, "x * step(abs(x) - 0.3)"},
      {"def f(x): return F.softshrink(x, lambd=0.2)", {{"x", "normal"}}, "relu(x - 0.2) - relu(-x - 0.2)"},
      {"def f(x): return F.threshold(x, 0.1, 20.0)", {{"x", "normal"}}, "where(x <= 0.1, 20, x)"},
      {"def f(x, t): return F.kl_div(x, t, reduction='none', log_target=True)", {{"x", "normal"}, {"t", "normal"}},
       "exp(t) * t - exp(t) * x"},
      {"def f(x, t): return F.poisson_nll_loss(x, t, reduction='none')", {{"x", "normal"}, {"t", "normal"}}, "exp(x) - t * x"},
      // Defined on part of the line: the tests move there.
      {"def f(x): return torch.log(x)", {{"x", "positive"}}, "log(x)"},
      {"def f(x): return torch.sqrt(x) * x", {{"x", "positive"}}, "x^1.5"},
      {"def f(x, y): return torch.xlogy(x, y)", {{"x", "normal"}, {"y", "positive"}}, "x * log(y)"},
      {"def f(x): return torch.special.entr(x)", {{"x", "positive"}}, "-x * log(x)"},
      {"def f(x, t): return F.kl_div(x, t, reduction='none')", {{"x", "normal"}, {"t", "positive"}}, "t * (log(t) - x)"},
      {"def f(x): return torch.asin(x)", {{"x", "symmetric_unit"}}, "atan(x / sqrt(1 - x^2))"},
      {"def f(x): return torch.atanh(x)", {{"x", "symmetric_unit"}}, "0.5 * log((1 + x) / (1 - x))"},
      {"def f(x): return torch.logit(x)", {{"x", "unit"}}, "log(x / (1 - x))"},
      // The target is finite anywhere, but PyTorch documents (and its CUDA kernel asserts) [0, 1].
      {"def f(p, t): return F.binary_cross_entropy(p, t, reduction='none')", {{"p", "unit"}, {"t", "unit"}},
       "-t * log(p) - (1 - t) * log(1 - p)"},
      {"def f(x): return torch.acosh(x)", {{"x", "above_one"}}, "log(x + sqrt(x * x - 1))"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.input);
    const kd::KernelProfile p = kd::analyse({c.input, kd::InputKind::Auto, ""}, kb());
    ASSERT_TRUE(p.complete()) << c.input;
    ASSERT_EQ(p.tier, 1);
    std::map<std::string, std::string> samples;
    for (const auto& t : p.inputs) samples[t.name] = t.sample;
    EXPECT_EQ(samples, c.samples) << c.input;
    expect_forward_on_samples(p, c.same_as, c.input);
  }
}

TEST(KernelDevInputSampling, ReductionsOverEveryElementAndFlagsThatAreNotLiteralsAreRefused) {
  const auto kl = kd::analyse({"def f(x, t): return F.kl_div(x, t, reduction='batchmean')", kd::InputKind::Auto, ""}, kb());
  EXPECT_FALSE(kl.complete());
  const auto full = kd::analyse({"def f(x, t): return F.poisson_nll_loss(x, t, full=True, reduction='none')", kd::InputKind::Auto, ""}, kb());
  EXPECT_FALSE(full.complete());
  std::string reasons;
  for (const auto& [field, why] : full.undecided) reasons += why;
  EXPECT_NE(reasons.find("Stirling"), std::string::npos) << reasons;
}

// The chooser itself: an op finite everywhere stays normal; one that overflows fp16 on the wide
// draws moves to a narrower range; one that no range makes finite says so.
TEST(KernelDevInputSampling, ChooserPrefersTheWidestRangeAndSaysWhenNoneWorks) {
  const auto parse = [](const std::string& text) { return kd::parse_program("y = " + text, kb().catalogue.resolver()).expression; };
  auto choose = [&](const std::string& forward) {
    const kd::Expr f = parse(forward);
    return kd::choose_input_samples(f, {kd::derivative(f, "x")}, {"x"}, {});
  };
  EXPECT_EQ(choose("tanh(x) * x").kind.at("x"), "normal");
  EXPECT_EQ(choose("exp(4 * x)").kind.at("x"), "symmetric_unit");  // e^(4 * 6) is beyond fp16
  const auto none = choose("log(x - 5) + log(-x - 5)");             // empty domain
  EXPECT_FALSE(none.problem.empty());
  EXPECT_EQ(none.failing, none.points);
  // Understand refuses a forward that is finite nowhere, naming it; one finite somewhere is kept.
  for (const char* request : {"y = x / 0", "def f(x): return torch.log(-torch.abs(x) - 1)"}) {
    const auto p = kd::analyse({request, kd::InputKind::Auto, ""}, kb());
    EXPECT_FALSE(p.complete()) << request;
    ASSERT_TRUE(p.undecided.count("forward")) << request;
    EXPECT_NE(p.undecided.at("forward").find("not finite at any of 256"), std::string::npos) << p.undecided.at("forward");
  }
  EXPECT_TRUE(kd::analyse({"y = sqrt(x)", kd::InputKind::Auto, ""}, kb()).complete());
}

TEST(KernelDevInputSampling, RenderedTestsDrawFromTheProfilesDistribution) {
  kd::KernelProfile p = kd::analyse({"def f(x, y): return torch.xlogy(x, y)", kd::InputKind::Auto, ""}, kb());
  const auto files = kd::render(p, std::filesystem::path(LIGER_SOURCE_DIR) / "templates/kernel_dev");
  std::string reference, gpu;
  for (const auto& f : files) {
    if (f.path.find("test_" + p.op_name + "_ref.cpp") != std::string::npos) reference = f.content;
    if (f.path == "tests/kernels/gpu/test_" + p.op_name + ".cpp") gpu = f.content;
  }
  ASSERT_FALSE(reference.empty());
  ASSERT_FALSE(gpu.empty());
  EXPECT_NE(reference.find("v = (0.1 + std::fabs(z));"), std::string::npos) << reference;
  EXPECT_NE(reference.find("in.y = { 1e-6, 0.1, 1.0, 80.0 };"), std::string::npos) << reference;
  EXPECT_NE(reference.find("in.x = { -80.0, -1e-30, 0.0, 80.0 };"), std::string::npos) << reference;
  EXPECT_NE(gpu.find("quantize((0.1 + std::fabs(z)), dtype);  // inputs[].sample: positive"), std::string::npos) << gpu;
  // An edited sample reaches the tests; an unknown one is refused by name.
  p.inputs[0].sample = "unit";
  for (const auto& f : kd::render(p, std::filesystem::path(LIGER_SOURCE_DIR) / "templates/kernel_dev"))
    if (f.path.find("test_" + p.op_name + "_ref.cpp") != std::string::npos)
      EXPECT_NE(f.content.find("(0.05 + 0.9 / (1.0 + std::exp(-(z))))"), std::string::npos);
  p.inputs[0].sample = "lognormal";
  EXPECT_THROW(kd::render(p, std::filesystem::path(LIGER_SOURCE_DIR) / "templates/kernel_dev"), std::invalid_argument);
}

// Tier-1 and Tier-2 row profiles carry inputs[].sample (a row program's is chosen from its
// per-column terms); segment and fused-loss profiles, whose tests draw normal inputs, refuse one.
TEST(KernelDevInputSampling, RowAndElementWiseProfilesCarryASampleOthersRefuseOne) {
  YAML::Node row = kd::profile_to_yaml(kd::analyse({"def f(x): return torch.softmax(x, dim=-1)", kd::InputKind::Auto, ""}, kb()));
  EXPECT_EQ(row["inputs"][0]["sample"].as<std::string>(), "normal");
  row["inputs"][0]["sample"] = "positive";
  EXPECT_EQ(kd::profile_from_yaml(row).inputs[0].sample, "positive");
  YAML::Node segment = kd::profile_to_yaml(kd::analyse({"max pooling over jagged rows given offsets", kd::InputKind::Auto, ""}, kb()));
  ASSERT_TRUE(segment["segment"]);
  EXPECT_FALSE(segment["inputs"][0]["sample"]);
  segment["inputs"][0]["sample"] = "positive";
  try {
    kd::profile_from_yaml(segment);
    ADD_FAILURE() << "a segment profile with inputs[].sample was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("segment and fused-loss tests draw normal inputs"), std::string::npos) << e.what();
  }
  const YAML::Node tier1 = kd::profile_to_yaml(kd::analyse({"def f(x): return torch.log(x)", kd::InputKind::Auto, ""}, kb()));
  EXPECT_EQ(tier1["inputs"][0]["sample"].as<std::string>(), "positive");
  EXPECT_EQ(kd::profile_from_yaml(tier1).inputs[0].sample, "positive");
}

// Rounding is piecewise constant and detach() cuts the gradient: PyTorch's gradients through them
// are 0, and a straight-through estimator (x + (q(x) - x).detach()) has q's values and x's
// gradient. Dropping detach() as if it were a cast would give the op a gradient PyTorch lacks.
TEST(KernelDevInputSampling, RoundingAndDetachKeepPyTorchsGradients) {
  struct GradientCase {
    const char* input;
    const char* forward;                        // spelt independently
    std::map<std::string, std::string> grads;  // input -> d forward / d input, spelt independently
  };
  const std::vector<GradientCase> cases = {
      {"def fake_quant(x): return x + (torch.round(x * 4) / 4 - x).detach()", "round(4 * x) / 4", {{"x", "1"}}},
      {"def f(x, y): return x * y.detach()", "x * y", {{"x", "y"}, {"y", "0"}}},
      {"def f(x): return x * torch.sigmoid(x).detach()", "x / (1 + exp(-x))", {{"x", "1 / (1 + exp(-x))"}}},
      {"def f(x): return torch.floor(x) + torch.ceil(x) * x", "floor(x) + ceil(x) * x", {{"x", "ceil(x)"}}},
      {"def f(x): return torch.frac(x) + x.trunc()", "x", {{"x", "1"}}},
      {"def f(x): return torch.round(x, decimals=2)", "round(100 * x) / 100", {{"x", "0"}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.input);
    const kd::KernelProfile p = kd::analyse({c.input, kd::InputKind::Auto, ""}, kb());
    ASSERT_TRUE(p.complete() && p.gradients.has_value()) << c.input;
    EXPECT_NE(p.op_name, "silu") << "a detached gate is not silu";
    expect_forward_on_samples(p, c.forward, c.input);
    for (const auto& g : *p.gradients) {
      ASSERT_TRUE(c.grads.count(g.wrt)) << g.wrt;
      const kd::Expr got = kd::parse_program("y = " + g.expression, kb().catalogue.resolver()).expression;
      const kd::Expr want = kd::parse_program("y = " + c.grads.at(g.wrt), kb().catalogue.resolver()).expression;
      std::mt19937_64 rng(9);
      std::uniform_real_distribution<double> dist(-3.0, 3.0);
      for (int i = 0; i < 32; ++i) {
        kd::Environment env;
        for (const auto& t : p.inputs) env[t.name] = dist(rng);
        EXPECT_NEAR(kd::eval_f64(got, env), kd::eval_f64(want, env), 1e-9) << "d/d" << g.wrt << " = " << g.expression;
      }
    }
  }
  // A detached gradient cannot be checked by finite differences of the values: the rendered
  // reference tests (element-wise and row) say so and skip that check; others keep it.
  auto reference_test = [](const std::string& request) {
    const auto profile = kd::analyse({request, kd::InputKind::Auto, ""}, kb());
    for (const auto& f : kd::render(profile, std::filesystem::path(LIGER_SOURCE_DIR) / "templates/kernel_dev"))
      if (f.path.find("tests/kernels/reference/test_") != std::string::npos) return f.content;
    return std::string();
  };
  EXPECT_NE(reference_test("def f(x): return x + (torch.round(x) - x).detach()").find("GTEST_SKIP() << \"the forward holds detach()"),
            std::string::npos);
  EXPECT_NE(reference_test("def f(x): return torch.exp(x - x.max(-1, keepdim=True).values.detach())").find("GTEST_SKIP()"),
            std::string::npos);
  EXPECT_EQ(reference_test("def f(x): return torch.exp(x - x.max(-1, keepdim=True).values)").find("GTEST_SKIP()"),
            std::string::npos);
  // xlogy's x-gradient at x = 0 is PyTorch's log(y) (0 only where y <= 0).
  const auto xl = kd::analyse({"def f(x, y): return torch.xlogy(x, y)", kd::InputKind::Auto, ""}, kb());
  ASSERT_TRUE(xl.gradients.has_value());
  const kd::Expr dx = kd::parse_program("y = " + xl.gradients->at(0).expression, kb().catalogue.resolver()).expression;
  EXPECT_NEAR(kd::eval_f64(dx, {{"x", 0.0}, {"y", 2.0}}), std::log(2.0), 1e-12) << xl.gradients->at(0).expression;
  EXPECT_EQ(kd::eval_f64(dx, {{"x", 0.0}, {"y", 0.0}}), 0.0);
  const kd::Expr value = kd::parse_program("y = " + xl.forward->expression, kb().catalogue.resolver()).expression;
  EXPECT_EQ(kd::eval_f64(value, {{"x", 0.0}, {"y", 0.0}}), 0.0);
  // atan2 at an exact x = 0 (randn draws a few): value sign(y) pi/2, PyTorch's gradients (-1/y, 0).
  const auto at2 = kd::analyse({"def f(y, x): return torch.atan2(y, x)", kd::InputKind::Auto, ""}, kb());
  ASSERT_TRUE(at2.gradients.has_value() && at2.gradients->size() == 2u);
  const auto at2_expr = [&](const std::string& text) {
    return kd::parse_program("y = " + text, kb().catalogue.resolver()).expression;
  };
  EXPECT_NEAR(kd::eval_f64(at2_expr(at2.forward->expression), {{"y", 0.5}, {"x", 0.0}}), M_PI / 2, 1e-12);
  EXPECT_NEAR(kd::eval_f64(at2_expr(at2.gradients->at(0).expression), {{"y", 0.5}, {"x", 0.0}}), 0.0, 1e-12);
  EXPECT_NEAR(kd::eval_f64(at2_expr(at2.gradients->at(1).expression), {{"y", 0.5}, {"x", 0.0}}), -2.0, 1e-12);
  EXPECT_NEAR(kd::eval_f64(at2_expr(at2.gradients->at(1).expression), {{"y", -0.25}, {"x", 0.0}}), 4.0, 1e-12);
  // The origin: 0 as torch.atan2(0, 0), and finite gradients (the reference test's extremes
  // evaluate every input at 0 together; found on the H100).
  EXPECT_EQ(kd::eval_f64(at2_expr(at2.forward->expression), {{"y", 0.0}, {"x", 0.0}}), 0.0);
  for (const auto& g : *at2.gradients)
    EXPECT_TRUE(std::isfinite(kd::eval_f64(at2_expr(g.expression), {{"y", 0.0}, {"x", 0.0}}))) << g.expression;
  // Every function of several tensors stays finite at the extremes the rendered reference test
  // uses (all inputs at -80, -1e-30, 0 and 80 together).
  for (const char* request : {"def f(y, x): return torch.atan2(y, x)", "def f(x, y): return torch.logaddexp(x, y)",
                              "def f(x, y): return torch.hypot(x, y) + torch.copysign(x, y)",
                              "def f(a, b, w): return torch.lerp(a, b, w)"}) {
    const auto op = kd::analyse({request, kd::InputKind::Auto, ""}, kb());
    ASSERT_TRUE(op.complete()) << request;
    for (double v : {-80.0, -1e-30, 0.0, 80.0}) {
      kd::Environment env;
      for (const auto& t : op.inputs) env[t.name] = v;
      EXPECT_TRUE(std::isfinite(kd::eval_f64(at2_expr(op.forward->expression), env))) << request << " at " << v;
      for (const auto& g : *op.gradients)
        EXPECT_TRUE(std::isfinite(kd::eval_f64(at2_expr(g.expression), env))) << request << " d/d" << g.wrt << " at " << v;
    }
  }
  // Half-way cases round to even, as torch.round.
  const auto p = kd::analyse({"def f(x): return torch.round(x)", kd::InputKind::Auto, ""}, kb());
  const kd::Expr forward = kd::parse_program("y = " + p.forward->expression, kb().catalogue.resolver()).expression;
  EXPECT_EQ(kd::eval_f64(forward, {{"x", 2.5}}), 2.0);
  EXPECT_EQ(kd::eval_f64(forward, {{"x", -0.5}}), 0.0);
  EXPECT_NE(p.forward->cuda.find("rintf("), std::string::npos) << p.forward->cuda;
}
