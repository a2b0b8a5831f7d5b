// Tier 2 from nn.Modules as models write them: helper methods of the module inlined (HF's
// GemmaRMSNorm / Gemma3RMSNorm `_norm`), norm submodules built in __init__ (nn.LayerNorm,
// nn.RMSNorm) with PyTorch's implicit weight and bias, F.rms_norm with the module's weight, the
// refusals (recursion, helpers that cannot be inlined, unknown submodules) with line and column,
// and the op's name taken from what the code computes. CPU only, end to end through Understand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "workflows/kernel_dev/profile.h"
#include "workflows/kernel_dev/row_program.h"
#include "workflows/kernel_dev/tier2_derive.h"

#include "kernel_dev_family.h"

namespace kd = liger::kernel_dev;

namespace {

using liger::testing::family::analyse;
using liger::testing::family::kb;

std::string undecided(const kd::KernelProfile& p) {
  return liger::testing::family::undecided_text(p) + "resolved_from: " + p.resolved_from + "\n";
}

// transformers' Gemma3RMSNorm (models/gemma3/modeling_gemma3.py), as written there: the same file
// the GPU runs give to kernel-dev.
const std::string kGemma3 =
    liger::util::read_file(std::filesystem::path(LIGER_SOURCE_DIR) / "benchmarks/kernel_dev_inputs/gemma3.py");

double rms(const std::vector<double>& x, double eps) {
  double s = 0;
  for (double v : x) s += v * v;
  return std::sqrt(s / static_cast<double>(x.size()) + eps);
}

double mean(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v;
  return s / static_cast<double>(x.size());
}

const std::vector<double> kRow = {0.5, -1.25, 2.0, 0.75, -0.3};

// The fp64 loss sum(dy * y) of `p` on one row, for central differences.
double loss(const kd::KernelProfile& p, const std::vector<double>& x, const std::vector<double>& dy,
            const kd::ColumnValues& w) {
  const auto y = kd::row_forward_f64(p, x, {}, w);
  double s = 0;
  for (std::size_t j = 0; j < y.size(); ++j) s += dy[j] * y[j];
  return s;
}

// The largest relative error of the derived dx and weight gradients against central differences.
double worst_gradient_error(const kd::KernelProfile& p) {
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  const std::size_t cols = kRow.size();
  std::vector<double> dy(cols);
  for (auto& v : dy) v = normal(rng);
  kd::ColumnValues w;
  for (const auto& l : p.learnable_parameters)
    for (std::size_t j = 0; j < cols; ++j) w[l.name].push_back(0.5 + 0.25 * normal(rng));
  const auto dx = kd::row_backward_f64(p, kRow, dy, {}, w);
  const auto dw = kd::row_param_gradients_f64(p, kRow, dy, {}, w);
  double worst = 0;
  auto check = [&](double analytic, double plus, double minus, double h) {
    const double numeric = (plus - minus) / (2 * h);
    worst = std::max(worst, std::fabs(analytic - numeric) / (1 + std::fabs(numeric)));
  };
  for (std::size_t j = 0; j < cols; ++j) {
    auto a = kRow, b = kRow;
    a[j] += 1e-6;
    b[j] -= 1e-6;
    check(dx[j], loss(p, a, dy, w), loss(p, b, dy, w), 1e-6);
    for (const auto& l : p.learnable_parameters) {
      auto wa = w, wb = w;
      wa[l.name][j] += 1e-6;
      wb[l.name][j] -= 1e-6;
      check(dw.at(l.name)[j], loss(p, kRow, dy, wa), loss(p, kRow, dy, wb), 1e-6);
    }
  }
  return worst;
}

std::vector<std::string> learnable_names(const kd::KernelProfile& p) {
  std::vector<std::string> names;
  for (const auto& l : p.learnable_parameters) names.push_back(l.name);
  return names;
}

std::string module(const std::string& init, const std::string& forward, const std::string& params = "d") {
  return "import torch\nfrom torch import nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n"
         "    def __init__(self, " + params + "):\n        super().__init__()\n" + init +
         "\n    def forward(self, x):\n" + forward + "\n";
}

}  // namespace

// ------------------------------------------------------------------------------------ helpers

TEST(KernelDevTier2Modules, Gemma3RmsNormWithItsNormHelperIsDerivedEndToEnd) {
  const auto p = analyse(kGemma3);
  ASSERT_TRUE(p.complete()) << undecided(p);
  EXPECT_EQ(p.tier, 2);
  EXPECT_EQ(p.op_name, "gemma3_rms_norm");
  ASSERT_EQ(p.inputs.size(), 1u);
  EXPECT_EQ(p.inputs[0].name, "x");
  ASSERT_EQ(learnable_names(p), std::vector<std::string>{"weight"});
  EXPECT_EQ(p.learnable_parameters[0].shape, "channel");
  EXPECT_EQ(p.learnable_parameters[0].value, 0.0);  // torch.zeros: the scale is 1 + 0 at init
  ASSERT_EQ(p.module_parameters.size(), 1u);
  EXPECT_EQ(p.module_parameters[0].name, "eps");
  EXPECT_DOUBLE_EQ(p.module_parameters[0].value, 1e-6);
  ASSERT_TRUE(p.row_program);
  // The offset: y = x / rms * (1 + w), at init the normalised row; dw carries no offset.
  const kd::ColumnValues w = {{"weight", {0.5, -0.2, 0.0, 1.5, 0.1}}};
  const auto y = kd::row_forward_f64(p, kRow, {}, w);
  const double r = rms(kRow, 1e-6);
  for (std::size_t j = 0; j < kRow.size(); ++j) EXPECT_NEAR(y[j], kRow[j] / r * (1.0 + w.at("weight")[j]), 1e-12) << j;
  EXPECT_NEAR(kd::row_forward_f64(p, kRow)[2], 2.0 / r, 1e-12);
  EXPECT_LT(worst_gradient_error(p), 1e-6);
  // The same program as the inline Gemma form (benchmarks/kernel_dev_inputs/gemma.py).
  const auto inline_form = analyse(module(
      "        self.eps = eps\n        self.weight = nn.Parameter(torch.zeros(d))",
      "        output = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)\n"
      "        output = output * (1.0 + self.weight.float())\n        return output.type_as(x)",
      "d, eps=1e-6"));
  ASSERT_TRUE(inline_form.row_program) << undecided(inline_form);
  EXPECT_EQ(inline_form.row_program->output, p.row_program->output);
  EXPECT_EQ(inline_form.row_program->grad_input, p.row_program->grad_input);
  // Gemma (v1/v2) has the same text under another class name.
  std::string gemma = kGemma3;
  gemma.replace(gemma.find("Gemma3RMSNorm"), 13, "GemmaRMSNorm");
  EXPECT_EQ(analyse(gemma).op_name, "gemma_rms_norm");
}

TEST(KernelDevTier2Modules, HelpersBindArgumentsAndDefaults) {
  // A keyword argument, a default of the helper, a helper calling a top-level function.
  const std::string source =
      "def centre(v):\n    return v - v.mean(-1, keepdim=True)\n\n"
      "class ScaledNorm(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
      "        self.weight = nn.Parameter(torch.ones(d))\n"
      "    def _norm(self, x, eps=1e-5, power=2):\n        c = centre(x)\n"
      "        return c * torch.rsqrt(c.pow(power).mean(-1, keepdim=True) + eps)\n"
      "    def forward(self, hidden):\n        return self._norm(power=2, x=hidden) * self.weight\n";
  const auto p = analyse(source);
  ASSERT_TRUE(p.complete()) << undecided(p);
  EXPECT_EQ(p.inputs[0].name, "hidden");
  const kd::ColumnValues w = {{"weight", {1.0, 2.0, 0.5, -1.0, 3.0}}};
  const auto y = kd::row_forward_f64(p, kRow, {}, w);
  const double m = mean(kRow);
  std::vector<double> c;
  for (double v : kRow) c.push_back(v - m);
  const double r = rms(c, 1e-5);
  for (std::size_t j = 0; j < kRow.size(); ++j) EXPECT_NEAR(y[j], c[j] / r * w.at("weight")[j], 1e-12) << j;
  EXPECT_LT(worst_gradient_error(p), 1e-6);
  // The helper's default is its own: eps=1e-3 passed by the caller changes the result.
  std::string passed = source;
  passed.replace(passed.find("power=2, x=hidden"), 17, "hidden, 1e-3");
  const auto q = analyse(passed);
  ASSERT_TRUE(q.row_program) << undecided(q);
  EXPECT_GT(std::fabs(kd::row_forward_f64(q, kRow, {}, w)[0] - y[0]), 1e-6);
}

TEST(KernelDevTier2Modules, HelpersThatCannotBeInlinedAreRefusedWithLineAndColumn) {
  struct Case {
    std::string source, says, where;
  };
  const std::string head = "class N(nn.Module):\n    def __init__(self):\n        super().__init__()\n";
  const std::vector<Case> cases = {
      // Recursion through the module's own method, at the call that closes the cycle (the column
      // of the called name, as for every refused call).
      {head + "    def _norm(self, x):\n        return self._norm(x) * 2\n"
              "    def forward(self, x):\n        return torch.softmax(self._norm(x), dim=-1)\n",
       "recursion: self._norm() -> self._norm()", "line 5, column 21"},
      // Mutual recursion between top-level functions.
      {"def a(x):\n    return b(x) + 1\n\ndef b(x):\n    return a(x) * 2\n\ndef f(x):\n    return torch.softmax(a(x), dim=-1)\n",
       "recursion: a() -> b() -> a()", "line 5, column 12"},
      // forward calling itself.
      {head + "    def forward(self, x):\n        return self.forward(x)\n", "recursion: self.forward()",
       "line 5, column 21"},
      // *args cannot be bound.
      {head + "    def _norm(self, *xs):\n        return xs\n    def forward(self, x):\n        return self._norm(x)\n",
       "takes *args or **kwargs", "line 7, column 21"},
      // A helper whose body is outside the subset is refused at its own line, naming the call.
      {head + "    def _norm(self, x):\n        if x.sum() > 0:\n            return x\n        return -x\n"
              "    def forward(self, x):\n        return self._norm(x)\n",
       "in self._norm(), inlined from line 9: control flow", "line 5, column 9"},
      // A wrong argument.
      {head + "    def _norm(self, x):\n        return x\n    def forward(self, x):\n        return self._norm(x, eps=1)\n",
       "self._norm() has no parameter 'eps'", "line 7, column 21"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.source);
    const auto p = analyse(c.source);
    EXPECT_FALSE(p.complete());
    EXPECT_NE(p.resolved_from.find(c.says), std::string::npos) << undecided(p);
    EXPECT_NE(p.resolved_from.find("(" + c.where + ":"), std::string::npos) << undecided(p);
  }
}

// --------------------------------------------------------------------------------- submodules

TEST(KernelDevTier2Modules, NormSubmodulesHavePyTorchsImplicitWeightAndBias) {
  struct Case {
    std::string init, params;
    std::vector<std::string> learnable;
    bool layer;
    double eps;
  };
  const std::vector<Case> cases = {
      {"        self.norm = nn.LayerNorm(d)", "d", {"weight", "bias"}, true, 1e-5},
      {"        self.norm = torch.nn.LayerNorm(d, eps=1e-6)", "d", {"weight", "bias"}, true, 1e-6},
      {"        self.norm = nn.LayerNorm(d, bias=False)", "d", {"weight"}, true, 1e-5},
      {"        self.norm = nn.LayerNorm(d, eps=1e-5, elementwise_affine=False, bias=False)", "d", {}, true, 1e-5},
      {"        self.norm = nn.LayerNorm((d,), 1e-5, False)", "d", {}, true, 1e-5},
      {"        self.norm = nn.RMSNorm(d, eps=1e-6)", "d", {"weight"}, false, 1e-6},
      {"        self.norm = torch.nn.RMSNorm([d], eps=eps)", "d, eps=1e-5", {"weight"}, false, 1e-5},
      {"        self.norm = nn.RMSNorm(d, elementwise_affine=False)", "d", {}, false, 1.1920928955078125e-07},
      // Imported by name (from torch.nn import LayerNorm); device/dtype dropped.
      {"        self.norm = LayerNorm(d, device=None, dtype=torch.float32)", "d", {"weight", "bias"}, true, 1e-5},
  };
  for (const auto& c : cases) {
    const std::string source = module(c.init, "        return self.norm(x)", c.params);
    SCOPED_TRACE(source);
    const auto p = analyse(source);
    ASSERT_TRUE(p.complete()) << undecided(p);
    EXPECT_EQ(learnable_names(p), c.learnable);
    for (const auto& l : p.learnable_parameters) {
      EXPECT_EQ(l.shape, "channel");
      EXPECT_EQ(l.value, l.name == "bias" ? 0.0 : 1.0);
    }
    kd::ColumnValues w;
    if (!c.learnable.empty()) w["weight"] = {0.5, -2.0, 1.5, 1.0, 0.25};
    if (c.learnable.size() == 2) w["bias"] = {0.1, 0.2, -0.3, 0.0, 1.0};
    const auto y = kd::row_forward_f64(p, kRow, {}, w);
    const double m = c.layer ? mean(kRow) : 0.0;
    std::vector<double> centred;
    for (double v : kRow) centred.push_back(v - m);
    const double r = rms(centred, c.eps);
    for (std::size_t j = 0; j < kRow.size(); ++j) {
      double expected = centred[j] / r;
      if (w.count("weight")) expected *= w.at("weight")[j];
      if (w.count("bias")) expected += w.at("bias")[j];
      EXPECT_NEAR(y[j], expected, 1e-9) << j;
    }
    EXPECT_LT(worst_gradient_error(p), 1e-6);
  }
  // nn.RMSNorm without eps: the op declares the fp32 value as its eps, with a note saying so.
  const auto p = analyse(module("        self.norm = nn.RMSNorm(d)", "        return self.norm(x)"));
  ASSERT_EQ(p.module_parameters.size(), 1u);
  EXPECT_EQ(p.module_parameters[0].name, "eps");
  EXPECT_DOUBLE_EQ(p.module_parameters[0].value, 1.1920928955078125e-07);
  bool noted = false;
  for (const auto& n : p.notes) noted = noted || n.find("torch.finfo(x.dtype).eps") != std::string::npos;
  EXPECT_TRUE(noted);
  // An eps read from a config the source does not have: PyTorch's default of the class, declared.
  const auto hf = analyse(module("        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)",
                                 "        return self.norm(x)", "config"));
  ASSERT_TRUE(hf.complete()) << undecided(hf);
  EXPECT_EQ(learnable_names(hf), (std::vector<std::string>{"weight", "bias"}));
  ASSERT_EQ(hf.module_parameters.size(), 1u);
  EXPECT_EQ(hf.module_parameters[0].name, "eps");
  EXPECT_DOUBLE_EQ(hf.module_parameters[0].value, 1e-5);
  noted = false;
  for (const auto& n : hf.notes) noted = noted || n.find("eps=config.layer_norm_eps): the value is not in the source") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(KernelDevTier2Modules, TwoNormsNameTheirWeightsAfterTheAttribute) {
  const auto p = analyse(module("        self.pre = nn.RMSNorm(d, eps=1e-6)\n        self.post = nn.LayerNorm(d)",
                                "        return self.post(self.pre(x))"));
  EXPECT_EQ(learnable_names(p), (std::vector<std::string>{"pre_weight", "post_weight", "post_bias"})) << undecided(p);
  // A module that has a weight of its own keeps it; the norm's are prefixed.
  const auto q = analyse(module("        self.weight = nn.Parameter(torch.ones(d))\n        self.norm = nn.LayerNorm(d)",
                                "        return self.norm(x) * self.weight"));
  EXPECT_EQ(learnable_names(q), (std::vector<std::string>{"weight", "norm_weight", "norm_bias"})) << undecided(q);
}

TEST(KernelDevTier2Modules, FunctionalRmsNormTakesTheModulesWeight) {
  const auto p = analyse(module("        self.weight = nn.Parameter(torch.ones(d))\n        self.eps = eps",
                                "        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)", "d, eps=1e-6"));
  ASSERT_TRUE(p.complete()) << undecided(p);
  EXPECT_EQ(learnable_names(p), std::vector<std::string>{"weight"});
  const kd::ColumnValues w = {{"weight", {0.5, -2.0, 1.5, 1.0, 0.25}}};
  const auto y = kd::row_forward_f64(p, kRow, {}, w);
  const double r = rms(kRow, 1e-6);
  for (std::size_t j = 0; j < kRow.size(); ++j) EXPECT_NEAR(y[j], kRow[j] / r * w.at("weight")[j], 1e-12);
  EXPECT_EQ(p.op_name, "rms_norm_custom");  // Model is no name; the library has rms_norm
}

TEST(KernelDevTier2Modules, UnsupportedSubmodulesAreRefusedWithLineAndColumn) {
  struct Case {
    std::string init, says, where;
  };
  const std::vector<Case> cases = {
      {"        self.norm = nn.LocalResponseNorm(2)", "nn.LocalResponseNorm is not a module the built-in analyser knows",
       "line 8, column 21"},
      {"        self.norm = T5LayerNorm(d)",
       "class T5LayerNorm is neither defined in the source nor one the built-in analyser knows", "line 8, column 21"},
      {"        self.norm = nn.RMSNorm(d, bias=True)", "has no bias argument", "line 8, column 21"},
      {"        self.norm = nn.LayerNorm((4, d))", "normalized_shape has 2 dimensions", "line 8, column 21"},
  };
  for (const auto& c : cases) {
    const std::string source = module(c.init, "        return self.norm(x)");
    SCOPED_TRACE(source);
    const auto p = analyse(source);
    EXPECT_FALSE(p.complete());
    EXPECT_NE(p.resolved_from.find(c.says), std::string::npos) << undecided(p);
    EXPECT_NE(p.resolved_from.find("(" + c.where + ":"), std::string::npos) << undecided(p);
    // The alternative is named.
    if (c.says.find("analyser") != std::string::npos)
      EXPECT_NE(p.resolved_from.find("nn.LayerNorm, nn.RMSNorm"), std::string::npos) << p.resolved_from;
  }
  // A class of the same file is inlined as a submodule (kernel_dev_pytorch_corpus_test.cpp has more).
  const auto nested = analyse("class Inner(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, -1)\n\n" +
                              module("        self.inner = Inner()", "        return self.inner(x) * 2"));
  ASSERT_TRUE(nested.complete()) << undecided(nested);
  EXPECT_NEAR(kd::row_forward_f64(nested, {0.0, 0.0})[0], 1.0, 1e-12);  // 2 * softmax of two equal columns
  // An unknown submodule forward never calls is no reason to refuse.
  const auto unused = analyse(module("        self.drop = nn.AlphaDropout(0.1)\n        self.norm = nn.RMSNorm(d, eps=1e-6)",
                                     "        return self.norm(x)"));
  EXPECT_TRUE(unused.complete()) << undecided(unused);
}

// ------------------------------------------------------------------------------------- naming

TEST(KernelDevTier2Modules, NamesComeFromWhatTheCodeComputes) {
  struct Case {
    std::string source, name;
  };
  const std::string weight = "        self.weight = nn.Parameter(torch.ones(d))\n";
  const std::string zeros = "        self.weight = nn.Parameter(torch.zeros(d))\n";
  const std::string bias = "        self.bias = nn.Parameter(torch.zeros(d))\n";
  const std::string rms = "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)";
  const std::string ln = "F.layer_norm(x, x.shape[-1:])";
  const std::vector<Case> cases = {
      // No meaningful function name: the recognised op, never the library's name.
      {"def f(x): return F.layer_norm(x, x.shape[-1:])", "layer_norm_no_affine"},
      {"def f(x): return " + rms, "rms_norm_no_affine"},
      {"def fn(x, eps=1e-5): return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)", "rms_norm_no_affine"},
      {"y = x / sqrt(mean(x^2) + 1e-6)", "rms_norm_no_affine"},
      {module(weight, "        return " + rms + " * self.weight"), "rms_norm_custom"},
      {module(zeros, "        return " + rms + " * (1 + self.weight)"), "rms_norm_offset"},
      {module(weight + bias, "        return " + rms + " * self.weight + self.bias"), "rms_norm_bias"},
      {module(weight, "        return " + ln + " * self.weight"), "layer_norm_no_bias"},
      {module(weight + bias, "        return self.bias + self.weight * " + ln), "layer_norm_custom"},
      {module(weight, "        return torch.softmax(x, -1) * self.weight"), "softmax_weighted"},
      {"def func2(x): return x / x.norm(p=2, dim=-1, keepdim=True)", "l2_normalize"},
      // Not one of the known ops: the row functions called.
      {"def f(x, t=2.0): return torch.softmax(x / t, dim=-1)", "softmax_custom"},
      {"def f(x, t=1.0): return torch.softmax(x / t, dim=-1)", "softmax_custom"},  // t at 1 is still a parameter
      {"def f(x): return x - x.mean(-1, keepdim=True)", "mean_custom"},
      {"y = x - mean(x)", "mean_custom"},  // an expression: named after its reductions
      {"def f(x): return torch.log_softmax(x, -1) + torch.logsumexp(x, -1, keepdim=True)", "log_softmax_logsumexp_custom"},
      // A meaningful name is kept (acronyms split into words); one the library has is not.
      {"class LlamaRMSNorm(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n" + weight +
           "    def forward(self, x):\n        return self.weight * " + rms + "\n",
       "llama_rms_norm"},
      {"def center_rows(x): return x - x.mean(-1, keepdim=True)", "center_rows"},
      {"def rms_norm(x): return " + rms, "rms_norm_no_affine"},
      {"def layer_norm(x): return " + ln + " * 2", "layer_norm_custom"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.source);
    const auto p = analyse(c.source);
    EXPECT_EQ(p.op_name, c.name) << undecided(p);
    EXPECT_EQ(std::find(kb().tiers.kernels.begin(), kb().tiers.kernels.end(), p.op_name), kb().tiers.kernels.end());
  }
}

TEST(KernelDevTier2Modules, RecognisedVariantsAreNumericNotTextual) {
  // The same op written differently has the same name; a different eps is still the op, a
  // different formula is not.
  kd::Program a = kd::parse_program("y = x * rsqrt(mean(x^2) + 1e-6)", kd::row_reduction_resolver(kb().catalogue.resolver()));
  kd::Program b = kd::parse_program("y = x / sqrt(mean(x * x) + 1e-5)", kd::row_reduction_resolver(kb().catalogue.resolver()));
  kd::Program c = kd::parse_program("y = x * rsqrt(mean(x^2) + 1)", kd::row_reduction_resolver(kb().catalogue.resolver()));
  kd::Program d = kd::parse_program("y = x / sqrt(mean(x^4) + 1e-6)", kd::row_reduction_resolver(kb().catalogue.resolver()));
  EXPECT_EQ(kd::recognised_row_variant(a), "rms_norm_no_affine");
  EXPECT_EQ(kd::recognised_row_variant(b), "rms_norm_no_affine");
  EXPECT_EQ(kd::recognised_row_variant(c), "");
  EXPECT_EQ(kd::recognised_row_variant(d), "");
}

// The Gemma3 module through the whole workflow with --yes (toolchain faked, no GPU): Act writes
// the op under its name and Verify runs its reference tests.
TEST(KernelDevTier2Modules, Gemma3ReachesVerifyWithYes) {
  namespace family = liger::testing::family;
  auto runner = std::make_shared<family::FakeRunner>(3);
  const family::YesRun yes = family::run_with_yes(kGemma3, "gemma3", runner);
  family::expect_op_through_verify(yes, *runner, "gemma3_rms_norm", 2);
  std::filesystem::remove_all(yes.root);
}

// The rendered fp64 references of the submodule forms (two norms' prefixed weights; nn.RMSNorm's
// declared eps) build with g++ and pass their own finite-difference tests.
TEST(KernelDevTier2Modules, SubmoduleReferencesBuildAndPassTheirTests) {
  namespace fs = std::filesystem;
  using namespace liger::testing::rendered;
  const std::string gxx = find_tool({"g++", "c++"});
  if (gxx.empty()) GTEST_SKIP() << "no g++ on PATH: the references were not compiled";
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"pre_post_norm", module("        self.pre = nn.RMSNorm(d, eps=1e-6)\n        self.post = nn.LayerNorm(d)",
                               "        return self.post(self.pre(x))")},
      {"torch_rms_norm", module("        self.norm = nn.RMSNorm(d)", "        return self.norm(x)")},
  };
  for (const auto& [op, text] : variants) {
    SCOPED_TRACE(op);
    const auto p = kd::analyse({text, kd::InputKind::Auto, op}, kb());
    ASSERT_TRUE(p.complete()) << undecided(p);
    const fs::path root = write_tree(kd::render(p, fs::path(LIGER_SOURCE_DIR) / "templates/kernel_dev"), op + "_ref");
    std::string error = build_reference(gxx, root, op);
    ASSERT_TRUE(error.empty()) << error;
    error = run((root / "ref_test").string(), root / "run.log");
    EXPECT_TRUE(error.empty()) << error << liger::util::read_file(root / "run.log");
    EXPECT_NE(liger::util::read_file(root / "run.log").find("[  PASSED  ]"), std::string::npos);
    fs::remove_all(root);
  }
}

// The module files the GPU runs give to kernel-dev are complete profiles under these names.
TEST(KernelDevTier2Modules, BenchmarkInputsAnalyseUnderTheirNames) {
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"llama_rms.py", "llama_rms_norm"}, {"my_ln.py", "my_layer_norm"}, {"ln_wb.py", "layer_norm_wb"},
      {"gemma.py", "gemma_rms_norm"},     {"gemma3.py", "gemma3_rms_norm"}, {"ln_module.py", "pre_norm"}};
  for (const auto& [file, op] : inputs) {
    SCOPED_TRACE(file);
    const auto p = analyse(liger::util::read_file(std::filesystem::path(LIGER_SOURCE_DIR) / "benchmarks/kernel_dev_inputs" / file));
    EXPECT_TRUE(p.complete()) << undecided(p);
    EXPECT_EQ(p.op_name, op);
    EXPECT_FALSE(p.learnable_parameters.empty());
  }
}
