// Tier 2 offline: the built-in analyser derives the row program of row reductions written in
// PyTorch or as expressions, with the backward by reverse-mode differentiation through the
// reductions. Each derived gradient is compared with central differences of the derived forward at
// random rows (fp64), each forward with an independent formula, and the named ops' rendered fp64
// reference is compiled and its own finite-difference test run; declined forms name the limit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <unistd.h>

#include "workflows/kernel_dev/profile.h"
#include "workflows/kernel_dev/render.h"
#include "workflows/kernel_dev/row_program.h"
#include "workflows/kernel_dev/tier2_derive.h"

#include "kernel_dev_family.h"

namespace kd = liger::kernel_dev;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = LIGER_SOURCE_DIR;

using liger::testing::family::analyse;
using liger::testing::family::kb;

std::string undecided(const kd::KernelProfile& p) { return liger::testing::family::undecided_text(p); }

using Row = std::vector<double>;
using Reference = std::function<Row(const Row&)>;

double sum(const Row& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
Row map(const Row& v, const std::function<double(double)>& f) {
  Row out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = f(v[i]);
  return out;
}
Row softmax(const Row& x) {
  double m = *std::max_element(x.begin(), x.end());
  Row e = map(x, [&](double v) { return std::exp(v - m); });
  double s = sum(e);
  return map(e, [&](double v) { return v / s; });
}
double mean_of(const Row& x) { return sum(x) / static_cast<double>(x.size()); }
double mean_square(const Row& x) { return sum(map(x, [](double v) { return v * v; })) / static_cast<double>(x.size()); }

struct Form {
  std::string source;
  Reference reference;  // an independent fp64 formula of the forward
};

// Forms from the issue, spelled in several ways, and held-out-style ones.
std::vector<Form> forms() {
  auto l2 = [](const Row& x) {
    double norm = std::sqrt(sum(map(x, [](double v) { return v * v; })));
    return map(x, [&](double v) { return v / norm; });
  };
  auto rms = [](double eps) {
    return [eps](const Row& x) {
      double r = 1 / std::sqrt(mean_square(x) + eps);
      return map(x, [&](double v) { return v * r; });
    };
  };
  auto layer = [](double eps) {
    return [eps](const Row& x) {
      double mu = mean_of(x);
      Row c = map(x, [&](double v) { return v - mu; });
      double r = 1 / std::sqrt(mean_square(c) + eps);
      return map(c, [&](double v) { return v * r; });
    };
  };
  auto log_softmax = [](const Row& x) { return map(softmax(x), [](double v) { return std::log(v); }); };
  return {
      {"def f(x): return torch.softmax(x, dim=-1)", softmax},
      {"def f(x):\n    return F.log_softmax(x, dim=-1)", log_softmax},
      {"def f(x): return x / x.norm(dim=-1, keepdim=True)", l2},
      {"def f(x): return F.normalize(x, dim=-1)", l2},
      {"def f(x): return torch.nn.functional.softmax(x, -1)", softmax},
      {"def f(x): return x.softmax(dim=-1)", softmax},
      {"def f(x): return x - torch.logsumexp(x, dim=-1, keepdim=True)", log_softmax},
      {"y = softmax(x)", softmax},
      {"y = x - logsumexp(x)", log_softmax},
      {"def f(x, t=2.0): return torch.softmax(x / t, dim=-1)",
       [](const Row& x) { return softmax(map(x, [](double v) { return v / 2.0; })); }},
      {"def f(x): return torch.exp(x - x.amax(-1, keepdim=True)) / torch.exp(x - x.amax(-1, keepdim=True)).sum(-1, keepdim=True)",
       softmax},
      {"def f(x): return torch.exp(x - x.max(dim=-1, keepdim=True).values) / torch.exp(x - x.max(-1, keepdim=True)[0]).sum(dim=-1, keepdim=True)",
       softmax},
      {"def f(x): return x - x.mean(-1, keepdim=True)", [](const Row& x) {
         double mu = mean_of(x);
         return map(x, [&](double v) { return v - mu; });
       }},
      {"def f(x): return x * torch.rsqrt((x*x).mean(-1, keepdim=True) + 1e-6)", rms(1e-6)},
      {"class RMSNorm(nn.Module):\n    def __init__(self, eps=1e-6):\n        super().__init__()\n        self.eps = eps\n"
       "    def forward(self, x):\n        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)",
       rms(1e-6)},
      {"def f(x): return F.rms_norm(x, (x.shape[-1],), eps=1e-5)", rms(1e-5)},
      {"def f(x): return F.layer_norm(x, (x.shape[-1],))", layer(1e-5)},
      // normalized_shape as the slice x.shape[-1:] and as a list.
      {"def f(input): return F.layer_norm(input, input.shape[-1:])", layer(1e-5)},
      {"def f(x): return F.rms_norm(x, [x.shape[-1]], eps=1e-5)", rms(1e-5)},
      {"def layer_norm_plain(x, eps=1e-5):\n    mu = x.mean(dim=-1, keepdim=True)\n    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)\n"
       "    return (x - mu) / torch.sqrt(var + eps)",
       layer(1e-5)},
      {"def f(x): return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5)", layer(1e-5)},
      {"def sum_sq(x): return x * (x * x).sum(-1, keepdim=True)", [](const Row& x) {
         double s = sum(map(x, [](double v) { return v * v; }));
         return map(x, [&](double v) { return v * s; });
       }},
      // PolyNorm-style: a sum of normalised powers (fixed coefficients).
      {"def rn(v, eps):\n    return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps)\n\n"
       "def poly_norm(x, eps=1e-6):\n    return 0.5 * rn(x ** 3, eps) + 0.3 * rn(x ** 2, eps) + 0.2 * rn(x, eps)",
       [rms](const Row& x) {
         Row a = rms(1e-6)(map(x, [](double v) { return v * v * v; }));
         Row b = rms(1e-6)(map(x, [](double v) { return v * v; }));
         Row c = rms(1e-6)(x);
         Row out(x.size());
         for (std::size_t i = 0; i < x.size(); ++i) out[i] = 0.5 * a[i] + 0.3 * b[i] + 0.2 * c[i];
         return out;
       }},
      // Softcapped logits, then log-softmax (as Gemma's final logits).
      {"def f(x, cap=30.0):\n    z = cap * torch.tanh(x / cap)\n    return F.log_softmax(z, dim=-1)",
       [log_softmax](const Row& x) { return log_softmax(map(x, [](double v) { return 30.0 * std::tanh(v / 30.0); })); }},
      {"def f(x): return x / x.abs().amax(dim=-1, keepdim=True)", [](const Row& x) {
         double m = 0;
         for (double v : x) m = std::max(m, std::fabs(v));
         return map(x, [&](double v) { return v / m; });
       }},
      {"def f(x): return x - x.min(-1, keepdim=True).values", [](const Row& x) {
         double m = *std::min_element(x.begin(), x.end());
         return map(x, [&](double v) { return v - m; });
       }},
      {"y = x * rsqrt(mean(x^2) + 1e-6)", rms(1e-6)},
      {"y = (x - mean(x)) / std(x, correction=0)", [](const Row& x) {
         double mu = mean_of(x);
         Row c = map(x, [&](double v) { return v - mu; });
         double sd = std::sqrt(mean_square(c));
         return map(c, [&](double v) { return v / sd; });
       }},
      {"y = exp(x - max(x)) / sum(exp(x - max(x)))", softmax},
      {"class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.act = nn.Softmax(dim=-1)\n"
       "    def forward(self, x):\n        return self.act(x)",
       softmax},
      {"class M(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
       "        self.norm = nn.LayerNorm(d, elementwise_affine=False)\n    def forward(self, x):\n        return self.norm(x)",
       layer(1e-5)},
      // Descriptions with input modifiers (tiers.yaml input_modifiers): the request's PyTorch form
      // reads the rewritten input.
      {"softmax with temperature 2", [](const Row& x) {
         Row t = x;
         for (auto& v : t) v /= 2;
         return softmax(t);
       }},
      // An eps set by the description on the form's keyword parameter.
      {"RMSNorm without weight, eps 1e-5", rms(1e-5)},
      // A form with a learnable weight after its input: the modifier still sets eps (the weight
      // starts at 1, so the forward is plain LayerNorm's).
      {"LayerNorm without bias", layer(1e-5)},
      {"layer norm with no bias, eps 1e-6", layer(1e-6)},
      // "unit" restates the L2 normalisation.
      {"normalize each row to unit L2 norm", [](const Row& x) {
         const double n = std::max(std::sqrt(sum(map(x, [](double v) { return v * v; }))), 1e-12);
         return map(x, [&](double v) { return v / n; });
       }},
      {"log softmax with temperature 0.5 and softcap 30", [log_softmax](const Row& x) {
         Row t = x;
         for (auto& v : t) v = 30 * std::tanh(v / 0.5 / 30);
         return log_softmax(t);
       }},
      // Softmax with a fixed z-loss-like penalty folded into the output: log_softmax scaled.
      {"def f(x): return torch.softmax(x, -1) * torch.log_softmax(x, dim=-1)", [log_softmax](const Row& x) {
         Row p = softmax(x), l = log_softmax(x);
         for (std::size_t i = 0; i < x.size(); ++i) p[i] *= l[i];
         return p;
       }},
  };
}

Row random_row(std::mt19937& rng, std::size_t cols, double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  Row x(cols);
  for (auto& v : x) v = normal(rng);
  return x;
}

}  // namespace

TEST(KernelDevTier2Offline, DerivedForwardAndGradientsMatchReferenceAndFiniteDifferences) {
  std::mt19937 rng(7);
  for (const auto& form : forms()) {
    SCOPED_TRACE(form.source);
    const kd::KernelProfile p = analyse(form.source);
    ASSERT_EQ(p.tier, 2) << p.tier_reason << "\n" << undecided(p);
    ASSERT_TRUE(p.complete()) << undecided(p);
    ASSERT_TRUE(p.row_program.has_value());
    EXPECT_TRUE(kd::row_program_problems(p).empty());
    EXPECT_NO_THROW(kd::generate_tier2(p));
    for (std::size_t cols : {1u, 7u, 64u}) {
      for (int trial = 0; trial < 3; ++trial) {
        const Row x = random_row(rng, cols, 1.5);
        const Row dy = random_row(rng, cols, 1.0);
        const Row y = kd::row_forward_f64(p, x);
        const Row expected = form.reference(x);
        // A 1-column row has no spread: normalising by it divides by zero (in PyTorch as well).
        if (std::any_of(expected.begin(), expected.end(), [](double v) { return !std::isfinite(v); })) continue;
        for (std::size_t j = 0; j < cols; ++j) ASSERT_NEAR(y[j], expected[j], 1e-9 * (1 + std::fabs(expected[j])));
        const Row dx = kd::row_backward_f64(p, x, dy);
        // L(x) = sum_j dy_j y_j(x); dL/dx_k by central differences.
        for (std::size_t k = 0; k < cols; ++k) {
          const double h = 1e-6 * std::max(1.0, std::fabs(x[k]));
          Row plus = x, minus = x;
          plus[k] += h;
          minus[k] -= h;
          const Row yp = kd::row_forward_f64(p, plus), ym = kd::row_forward_f64(p, minus);
          double fd = 0;
          for (std::size_t j = 0; j < cols; ++j) fd += dy[j] * (yp[j] - ym[j]) / (2 * h);
          ASSERT_NEAR(dx[k], fd, 1e-5 * (1 + std::fabs(fd))) << "column " << k << " of " << cols;
        }
      }
    }
  }
}

// Outputs of one value per row (logsumexp, z-loss, a row mean): the output shape follows keepdim,
// the forward against an independent formula, the backward (one upstream value per row) against
// central differences of the forward.
TEST(KernelDevTier2Offline, PerRowOutputsAreDerivedWithTheirGradient) {
  auto lse = [](const Row& x) {
    const double m = *std::max_element(x.begin(), x.end());
    return m + std::log(sum(map(x, [&](double v) { return std::exp(v - m); })));
  };
  struct Case {
    std::string source, shape;
    std::function<double(const Row&)> reference;
  };
  const std::vector<Case> cases = {
      {"def f(x): return torch.logsumexp(x, dim=-1)", "[rows]", lse},
      {"def f(x): return torch.logsumexp(x, dim=-1, keepdim=True)", "[rows, 1]", lse},
      {"def z_loss(logits): return torch.logsumexp(logits, dim=-1).pow(2)", "[rows]",
       [lse](const Row& x) { return lse(x) * lse(x); }},
      {"def z_loss(x): return 1e-4 * torch.logsumexp(x, dim=-1) ** 2", "[rows]",
       [lse](const Row& x) { return 1e-4 * lse(x) * lse(x); }},
      {"def f(x): return x.pow(2).mean(-1).sqrt()", "[rows]",
       [](const Row& x) { return std::sqrt(mean_of(map(x, [](double v) { return v * v; }))); }},
      {"def f(x): return torch.var(x, dim=-1, keepdim=True) + x.amax(-1, keepdim=True)", "[rows, 1]",
       [](const Row& x) {
         const double mu = mean_of(x);
         return sum(map(x, [&](double v) { return (v - mu) * (v - mu); })) / static_cast<double>(x.size() - 1) +
                *std::max_element(x.begin(), x.end());
       }},
      {"y = logsumexp(x) - mean(x)", "[rows, 1]", [lse](const Row& x) { return lse(x) - mean_of(x); }},
      // Descriptions (tiers.yaml): the entropy request, and a coefficient on the output.
      {"entropy of the softmax of each row", "[rows]",
       [lse](const Row& x) {
         const double l = lse(x);
         double h = 0;
         for (double v : x) h -= std::exp(v - l) * (v - l);
         return h;
       }},
      {"z-loss with coefficient 1e-4", "[rows]", [lse](const Row& x) { return 1e-4 * lse(x) * lse(x); }},
      {"mean of squares of each row", "[rows]", [](const Row& x) { return mean_square(x); }},
      {"sum of absolute values of each row", "[rows]", [](const Row& x) { return sum(map(x, [](double v) { return std::fabs(v); })); }},
      // The order set by the description on the form's keyword parameter p.
      {"p-norm with p=3 of each row", "[rows]",
       [](const Row& x) { return std::cbrt(sum(map(x, [](double v) { return std::pow(std::fabs(v), 3.0); }))); }},
      // A module parameter in a per-row output.
      {"def smooth_max(x, t=0.5): return t * torch.logsumexp(x / t, dim=-1)", "[rows]",
       [lse](const Row& x) { return 0.5 * lse(map(x, [](double v) { return v / 0.5; })); }},
  };
  std::mt19937 rng(11);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.source);
    const kd::KernelProfile p = analyse(c.source);
    ASSERT_EQ(p.tier, 2) << p.tier_reason << "\n" << undecided(p);
    ASSERT_TRUE(p.complete()) << undecided(p);
    ASSERT_EQ(p.outputs.size(), 1u);
    EXPECT_EQ(p.outputs[0].shape, c.shape);
    EXPECT_TRUE(kd::per_row_output(p));
    EXPECT_TRUE(kd::row_program_problems(p).empty());
    // A per-row y determines no column of x: the backward reads x (and the row statistics it
    // names, which the forward stores).
    ASSERT_FALSE(p.row_program->backward_uses.empty());
    EXPECT_EQ(p.row_program->backward_uses[0], p.inputs[0].name);
    const kd::Tier2Code code = kd::generate_tier2(p);
    EXPECT_TRUE(code.per_row);
    for (std::size_t cols : {2u, 7u, 64u}) {
      for (int trial = 0; trial < 3; ++trial) {
        const Row x = random_row(rng, cols, 1.5);
        const double dy = random_row(rng, 1, 1.0)[0];
        const Row y = kd::row_forward_f64(p, x);
        ASSERT_EQ(y.size(), 1u);
        ASSERT_NEAR(y[0], c.reference(x), 1e-9 * (1 + std::fabs(y[0])));
        const Row dx = kd::row_backward_f64(p, x, {dy});
        ASSERT_EQ(dx.size(), cols);
        for (std::size_t k = 0; k < cols; ++k) {
          const double h = 1e-6 * std::max(1.0, std::fabs(x[k]));
          Row plus = x, minus = x;
          plus[k] += h;
          minus[k] -= h;
          const double fd = dy * (c.reference(plus) - c.reference(minus)) / (2 * h);
          ASSERT_NEAR(dx[k], fd, 1e-5 * (1 + std::fabs(fd))) << "column " << k << " of " << cols;
        }
      }
    }
  }
  // The logsumexp backward needs no backward pass: dx = dy / s * exp(x - m), s and m recomputed.
  const auto p = analyse("def f(x): return torch.logsumexp(x, dim=-1)");
  EXPECT_EQ(p.op_name, "logsumexp");
  EXPECT_TRUE(p.row_program->backward_reductions.empty());
  // A per-row output may not read x per column, nor a backward read the per-row y.
  kd::KernelProfile wrong = p;
  wrong.row_program->output = wrong.inputs[0].name + " + 1";
  EXPECT_FALSE(kd::row_program_problems(wrong).empty());
  wrong = p;
  wrong.row_program->backward_uses = {wrong.outputs[0].name};
  EXPECT_FALSE(kd::row_program_problems(wrong).empty());
}

TEST(KernelDevTier2Offline, NamesTheOpAndAvoidsLibraryNames) {
  EXPECT_EQ(analyse("def f(x): return torch.softmax(x, dim=-1)").op_name, "softmax");
  EXPECT_EQ(analyse("def f(x): return F.log_softmax(x, dim=-1)").op_name, "log_softmax");
  EXPECT_EQ(analyse("def f(x): return x / x.norm(dim=-1, keepdim=True)").op_name, "l2_normalize");
  // The library's rms_norm/layer_norm have a weight: the unweighted ops get another name.
  const auto rms = analyse("def rms_norm(x, eps=1e-6): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)");
  EXPECT_EQ(rms.op_name, "rms_norm_no_affine");
  EXPECT_TRUE(rms.complete()) << undecided(rms);
  const auto ln = analyse("class LayerNorm(nn.Module):\n    def forward(self, x):\n        return F.layer_norm(x, (x.shape[-1],))");
  EXPECT_EQ(ln.op_name, "layer_norm_no_affine");
  // --name is taken as given.
  EXPECT_EQ(kd::analyse({"def f(x): return torch.softmax(x, dim=-1)", kd::InputKind::Auto, "my_softmax"}, kb()).op_name,
            "my_softmax");
  // The temperature is a module parameter with its default.
  const auto t = analyse("def softmax_t(x, temperature=0.7): return torch.softmax(x / temperature, dim=-1)");
  ASSERT_EQ(t.module_parameters.size(), 1u);
  EXPECT_EQ(t.module_parameters[0].name, "temperature");
  EXPECT_DOUBLE_EQ(t.module_parameters[0].value, 0.7);
}

TEST(KernelDevTier2Offline, StableSoftmaxShiftHasNoGradientPass) {
  // The max shift of the lowered softmax family is gradient-free: one backward reduction only.
  const auto p = analyse("def f(x): return torch.softmax(x, dim=-1)");
  ASSERT_TRUE(p.row_program);
  ASSERT_EQ(p.row_program->forward_reductions.size(), 2u);
  EXPECT_EQ(p.row_program->forward_reductions[0].op, "max");
  EXPECT_EQ(p.row_program->backward_reductions.size(), 1u);
  // Large logits stay finite.
  const Row y = kd::row_forward_f64(p, {1000.0, 999.0, -1000.0});
  EXPECT_NEAR(y[0], 1 / (1 + std::exp(-1.0)), 1e-12);
  // A user's own max is differentiated (the indicator over the tie count, as amax), and still gives
  // the right gradient: two backward sums, the ties and the adjoint.
  const auto own = analyse("def f(x): return x - x.amax(-1, keepdim=True)");
  ASSERT_TRUE(own.row_program);
  EXPECT_EQ(own.row_program->backward_reductions.size(), 2u);
  const Row dx = kd::row_backward_f64(own, {0.5, 2.0, -1.0}, {1.0, 1.0, 1.0});
  EXPECT_NEAR(dx[0], 1.0, 1e-12);
  EXPECT_NEAR(dx[1], 1.0 - 3.0, 1e-12);
  EXPECT_NEAR(dx[2], 1.0, 1e-12);
  // Tied maxima share the gradient, as PyTorch's amax: two columns at the max each get half.
  const Row tied = kd::row_backward_f64(own, {2.0, 2.0, -1.0}, {1.0, 1.0, 1.0});
  EXPECT_NEAR(tied[0], 1.0 - 1.5, 1e-12);
  EXPECT_NEAR(tied[1], 1.0 - 1.5, 1e-12);
  EXPECT_NEAR(tied[2], 1.0, 1e-12);
}

TEST(KernelDevTier2Offline, DeclinesWhatTheRowTemplateCannotGenerate) {
  struct Case {
    std::string source, says;
  };
  const std::vector<Case> cases = {
      // (Learnable scalars and several input tensors are generated: kernel_dev_tier2_weights_test.cpp,
      // kernel_dev_tier2_inputs_test.cpp.)
      // A norm module built inside forward: fresh parameters on every call (one built in __init__
      // is generated: kernel_dev_tier2_modules_test.cpp).
      {"def f(x):\n    return nn.LayerNorm(x.shape[-1])(x)", "build it once in __init__"},
      // More input tensors than a row kernel reads.
      {"def f(a, b, c, d, g, h, k, l, q): return torch.softmax(a + b + c + d + g + h + k + l + q, -1)",
       "at most 8"},
      // A per-row value of one input broadcast against the columns of another.
      {"def f(x, t): return torch.softmax(x, dim=-1) - t.sum(-1)", "keepdim=True"},
      // keepdim=False broadcast against the columns, and against a keepdim=True row value.
      {"def f(x): return x - x.mean(-1)", "keepdim=True"},
      {"def f(x): return torch.logsumexp(x, -1, keepdim=True) - x.mean(-1)", "[rows, rows]"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.source);
    const auto p = analyse(c.source);
    EXPECT_EQ(p.tier, 2);
    EXPECT_FALSE(p.complete());
    EXPECT_FALSE(p.row_program.has_value());
    ASSERT_TRUE(p.undecided.count("row_program")) << undecided(p);
    EXPECT_NE(p.undecided.at("row_program").find(c.says), std::string::npos) << undecided(p);
  }
}

TEST(KernelDevTier2Offline, UnsupportedReductionsAreNamedWithTheirLine) {
  struct Case {
    std::string source, says;
  };
  const std::vector<Case> cases = {
      {"def f(x):\n    return x / x.sum(dim=0, keepdim=True)", "dim must be -1"},
      {"def f(x):\n    y = x * 2\n    return torch.softmax(y)", "pass dim=-1"},
      {"def f(x):\n    return x - x.sum()", "pass dim=-1"},
      {"def f(x):\n    return F.normalize(x)", "dim=1 by default"},
      {"def f(x):\n    return torch.cumsum(x, -1)", "scan"},
      {"def f(x):\n    return torch.logcumsumexp(x, -1)", "scan"},
      {"def f(x):\n    return torch.cummax(x, dim=-1).values", "scan"},
  };
  // The column of the refused call, and the alternatives.
  const auto cumsum = analyse("def f(x):\n    return torch.cumsum(x, -1)");
  EXPECT_NE(cumsum.resolved_from.find("line 2, column 18"), std::string::npos) << cumsum.resolved_from;
  EXPECT_NE(cumsum.resolved_from.find("logsumexp, norm"), std::string::npos) << cumsum.resolved_from;
  const auto expression = analyse("y = x - cumsum(x)");
  ASSERT_TRUE(expression.undecided.count("tier"));
  EXPECT_NE(expression.undecided.at("tier").find("column 9"), std::string::npos) << expression.undecided.at("tier");
  EXPECT_NE(expression.undecided.at("tier").find("row reduction (sum, mean"), std::string::npos);
  // A shape slice other than [-1:] is refused at the slice's column.
  const auto slice = analyse("def f(x):\n    return F.layer_norm(x, x.shape[1:])");
  EXPECT_NE(slice.resolved_from.find("line 2, column 35"), std::string::npos) << slice.resolved_from;
  EXPECT_NE(slice.resolved_from.find("only x.shape[-1:]"), std::string::npos) << slice.resolved_from;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.source);
    const auto p = analyse(c.source);
    EXPECT_FALSE(p.complete());
    EXPECT_NE(p.resolved_from.find(c.says), std::string::npos) << p.resolved_from;
    EXPECT_NE(p.resolved_from.find("line "), std::string::npos) << p.resolved_from;
  }
}

// The rendered fp64 reference of the done-when ops and of derived forms with a mean, a module
// parameter and a user-written max: compiled, and its own finite-difference test run.
TEST(KernelDevTier2Offline, RenderedReferenceBuildsAndPassesItsTests) {
  if (std::system("command -v g++ >/dev/null 2>&1") != 0) GTEST_SKIP() << "no g++ on PATH: the reference was not compiled";
  const std::vector<std::string> sources = {
      "def f(x): return torch.softmax(x, dim=-1)", "def f(x): return F.log_softmax(x, dim=-1)",
      "def f(x): return x / x.norm(dim=-1, keepdim=True)",
      "def rms_norm(x, eps=1e-6): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)",
      "def centred_max(x): return x - x.amax(-1, keepdim=True)",
      // Per-row outputs: [rows] and [rows, 1].
      "def f(x): return torch.logsumexp(x, dim=-1)",
      "def z_loss(logits): return torch.logsumexp(logits, dim=-1, keepdim=True).pow(2)",
      "def row_spread(x): return x.var(-1) + x.amax(-1)"};
  for (const auto& source : sources) {
    SCOPED_TRACE(source);
    const auto p = analyse(source);
    ASSERT_TRUE(p.complete()) << undecided(p);
    const auto files = kd::render(p, kSource / "templates/kernel_dev");
    const fs::path root = fs::temp_directory_path() / ("liger_tier2_offline_" + std::to_string(::getpid()) + "_" + p.op_name);
    fs::remove_all(root);
    for (const auto& f : files) {
      if (f.insert) continue;
      fs::create_directories((root / f.path).parent_path());
      std::ofstream(root / f.path) << f.content;
    }
    const std::string op = p.op_name;
    const std::string build = "g++ -std=c++17 -O1 -Wall -Wextra -Werror -I" + (root / "kernels/reference").string() + " " +
                              (root / ("kernels/reference/" + op + "_ref.cpp")).string() + " " +
                              (root / ("tests/kernels/reference/test_" + op + "_ref.cpp")).string() +
                              " -lgtest -lgtest_main -pthread -o " + (root / "ref_test").string() + " >" +
                              (root / "build.log").string() + " 2>&1";
    ASSERT_EQ(std::system(build.c_str()), 0) << std::ifstream(root / "build.log").rdbuf();
    const std::string test = (root / "ref_test").string() + " >" + (root / "run.log").string() + " 2>&1";
    EXPECT_EQ(std::system(test.c_str()), 0) << std::ifstream(root / "run.log").rdbuf();
    fs::remove_all(root);
  }
}
