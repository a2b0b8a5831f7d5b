// Tier 2 with learnable per-column weights (RMSNorm/LayerNorm with weight and bias, Gemma's 1 + w):
// the derived input and weight gradients against finite differences in fp64 (the row evaluator),
// the profile field that carries the weight gradients, and the rendered reference (its own
// finite-difference test, which must fail for a wrong weight gradient) and kernel (nvcc, no local
// memory). No GPU.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

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

// The user-style module files the GPU runs give to kernel-dev (benchmarks/kernel_dev_inputs/):
// HF's LlamaRMSNorm verbatim but for the docstring, a LayerNorm module calling F.layer_norm, the
// same LayerNorm written out, and Gemma's RMSNorm with its 1 + weight offset.
std::string input_file(const std::string& name) {
  return liger::util::read_file(kSource / "benchmarks/kernel_dev_inputs" / name);
}
const std::string kLlama = input_file("llama_rms.py");
const std::string kLayerNorm = input_file("my_ln.py");
const std::string kLayerNormWritten = input_file("ln_wb.py");
const std::string kGemma = input_file("gemma.py");

std::vector<double> random_row(std::mt19937& rng, std::size_t cols, double mean, double scale) {
  std::normal_distribution<double> normal(mean, scale);
  std::vector<double> v(cols);
  for (auto& x : v) x = normal(rng);
  return v;
}

// Random weights (never the init value: a dropped weight must show).
kd::ColumnValues random_weights(const kd::KernelProfile& p, std::mt19937& rng, std::size_t cols) {
  kd::ColumnValues w;
  for (const auto& l : p.learnable_parameters) w[l.name] = random_row(rng, cols, 0.7, 0.6);
  return w;
}

double loss(const kd::KernelProfile& p, const std::vector<double>& x, const std::vector<double>& dy,
            const kd::ColumnValues& w) {
  const auto y = kd::row_forward_f64(p, x, {}, w);
  double l = 0;
  for (std::size_t j = 0; j < y.size(); ++j) l += dy[j] * y[j];
  return l;
}

// The derived dx and each dw of one row against central differences of L = sum(dy * y); returns
// the worst relative difference.
double worst_gradient_error(const kd::KernelProfile& p, std::uint32_t seed, std::string& where) {
  std::mt19937 rng(seed);
  const std::size_t cols = 13;
  const auto x = random_row(rng, cols, 0.3, 1.5), dy = random_row(rng, cols, 0.0, 1.0);
  const auto w = random_weights(p, rng, cols);
  const auto dx = kd::row_backward_f64(p, x, dy, {}, w);
  const auto dw = kd::row_param_gradients_f64(p, x, dy, {}, w);
  double worst = 0;
  auto check = [&](const std::string& name, double analytic, const std::function<double(double)>& at, double v0) {
    const double h = 1e-6 * (1 + std::fabs(v0));
    const double numeric = (at(v0 + h) - at(v0 - h)) / (2 * h);
    const double e = std::fabs(analytic - numeric) / (1 + std::fabs(numeric));
    if (e > worst) {
      worst = e;
      where = name + ": derived " + std::to_string(analytic) + ", numeric " + std::to_string(numeric);
    }
  };
  for (std::size_t j = 0; j < cols; ++j) {
    auto at = [&](double v) {
      auto probe = x;
      probe[j] = v;
      return loss(p, probe, dy, w);
    };
    check("dx[" + std::to_string(j) + "]", dx[j], at, x[j]);
  }
  for (const auto& l : p.learnable_parameters) {
    EXPECT_TRUE(dw.count(l.name)) << "no gradient for " << l.name;
    if (!dw.count(l.name)) continue;
    for (std::size_t j = 0; j < cols; ++j) {
      auto at = [&](double v) {
        auto probe = w;
        probe[l.name][j] = v;
        return loss(p, x, dy, probe);
      };
      check("d" + l.name + "[" + std::to_string(j) + "]", dw.at(l.name)[j], at, w.at(l.name)[j]);
    }
  }
  return worst;
}

void write_tree(const kd::KernelProfile& p, const fs::path& root) {
  fs::remove_all(root);
  for (const auto& f : kd::render(p, kSource / "templates/kernel_dev")) {
    if (f.insert) continue;
    fs::create_directories((root / f.path).parent_path());
    std::ofstream(root / f.path) << f.content;
  }
}

// Builds and runs the rendered fp64 reference's own test; the exit status of the run (-1: no build).
int run_reference_test(const kd::KernelProfile& p, const std::string& tag, std::string& log) {
  const fs::path root = fs::temp_directory_path() / ("liger_tier2_weights_" + std::to_string(::getpid()) + "_" + tag);
  write_tree(p, root);
  const std::string op = p.op_name;
  const std::string build = "g++ -std=c++17 -O1 -Wall -Wextra -Werror -I" + (root / "kernels/reference").string() + " " +
                            (root / ("kernels/reference/" + op + "_ref.cpp")).string() + " " +
                            (root / ("tests/kernels/reference/test_" + op + "_ref.cpp")).string() +
                            " -lgtest -lgtest_main -pthread -o " + (root / "ref_test").string() + " >" +
                            (root / "build.log").string() + " 2>&1";
  if (std::system(build.c_str()) != 0) {
    std::stringstream text;
    text << std::ifstream(root / "build.log").rdbuf();
    log = text.str();
    return -1;
  }
  const int status = std::system(((root / "ref_test").string() + " >" + (root / "run.log").string() + " 2>&1").c_str());
  std::stringstream text;
  text << std::ifstream(root / "run.log").rdbuf();
  log = text.str();
  fs::remove_all(root);
  return status;
}

const std::vector<std::pair<std::string, std::string>>& sources() {
  static const std::vector<std::pair<std::string, std::string>> s = {
      {"llama_rms_norm", kLlama}, {"layer_norm", kLayerNorm}, {"layer_norm_written", kLayerNormWritten}, {"gemma", kGemma},
      // Plain functions whose extra arguments are named like weights: per-column parameters.
      {"function_weight_argument", "def rms(x, w, eps=1e-6):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w"},
      {"function_weight_bias_arguments",
       "def ln(x, weight, bias): return F.layer_norm(x, x.shape[-1:]) * weight + bias"}};
  return s;
}

// Whether one of the checkpoint notes says `text`.
bool has_note(const kd::KernelProfile& p, const std::string& text) {
  return std::any_of(p.notes.begin(), p.notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

}  // namespace

TEST(KernelDevTier2Weights, ProfilesAreCompleteWithAGradientPerWeight) {
  for (const auto& [label, source] : sources()) {
    SCOPED_TRACE(label);
    const auto p = analyse(source);
    ASSERT_TRUE(p.complete()) << undecided(p);
    ASSERT_TRUE(p.row_program);
    EXPECT_EQ(p.tier, 2);
    ASSERT_FALSE(p.learnable_parameters.empty());
    ASSERT_EQ(p.row_program->param_gradients.size(), p.learnable_parameters.size());
    for (std::size_t i = 0; i < p.learnable_parameters.size(); ++i) {
      EXPECT_EQ(p.learnable_parameters[i].shape, "channel");
      EXPECT_EQ(p.row_program->param_gradients[i].name, p.learnable_parameters[i].name);
    }
    // The weights' gradients need the normalised input: the backward keeps x, and reads the row
    // statistics the forward stored (the mean square, or the mean and variance).
    ASSERT_GE(p.row_program->backward_uses.size(), 2u);
    EXPECT_EQ(p.row_program->backward_uses[0], p.inputs[0].name);
    EXPECT_TRUE(kd::generate_tier2(p).recomputed.empty());
    EXPECT_TRUE(kd::row_program_problems(p).empty());
    bool learnable_gradient = false;
    for (const auto& g : *p.gradients) learnable_gradient = learnable_gradient || (g.kind == "learnable" && g.reduction);
    EXPECT_TRUE(learnable_gradient);
  }
  // LayerNorm: weight and bias, the bias's gradient is dy summed over rows.
  const auto ln = analyse(kLayerNorm);
  ASSERT_EQ(ln.row_program->param_gradients.size(), 2u);
  EXPECT_EQ(ln.row_program->param_gradients[1].name, "bias");
  EXPECT_EQ(ln.row_program->param_gradients[1].expression, "dy");
}

TEST(KernelDevTier2Weights, DerivedGradientsMatchFiniteDifferences) {
  for (const auto& [label, source] : sources()) {
    SCOPED_TRACE(label);
    const auto p = analyse(source);
    ASSERT_TRUE(p.row_program) << undecided(p);
    for (std::uint32_t seed = 1; seed <= 3; ++seed) {
      std::string where;
      EXPECT_LT(worst_gradient_error(p, seed, where), 1e-6) << "seed " << seed << ": " << where;
    }
  }
  // The check can fail: a weight gradient without the normalisation is caught.
  auto wrong = analyse(kLlama);
  wrong.row_program->param_gradients[0].expression = "dy * hidden_states";
  std::string where;
  EXPECT_GT(worst_gradient_error(wrong, 1, where), 1e-3);
}

TEST(KernelDevTier2Weights, WeightNamedArgumentsAreColumnParametersWithANote) {
  const auto p = analyse("def f(x, w): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * (1 + w)");
  ASSERT_TRUE(p.complete()) << undecided(p);
  ASSERT_EQ(p.inputs.size(), 1u);
  ASSERT_EQ(p.learnable_parameters.size(), 1u);
  EXPECT_EQ(p.learnable_parameters[0].name, "w");
  EXPECT_EQ(p.op_name, "rms_norm_offset");  // recognised with the parameter in place
  EXPECT_TRUE(has_note(p, "taken as learnable per-column parameters"));
  // An argument not named like a weight stays a [rows, cols] tensor with its own gradient
  // (kernel_dev_tier2_inputs_test.cpp).
  const auto two = analyse("def f(x, mask): return torch.softmax(x, dim=-1) * mask");
  ASSERT_TRUE(two.complete()) << undecided(two);
  ASSERT_EQ(two.inputs.size(), 2u);
  EXPECT_EQ(two.inputs[1].name, "mask");
  EXPECT_TRUE(two.learnable_parameters.empty());
  ASSERT_EQ(two.row_program->input_gradients.size(), 1u);
  EXPECT_EQ(two.row_program->input_gradients[0].name, "mask");
}

// What F.layer_norm / F.rms_norm are given as weight and bias is [normalized_shape]: one value per
// column whatever the argument is called, positional or keyword, with the role's init (1 / 0).
TEST(KernelDevTier2Weights, NormWeightAndBiasArgumentsAreColumnParametersWhateverTheirNames) {
  for (const std::string source : {"def f(x, g, k): return F.layer_norm(x, x.shape[-1:], g, k, eps=1e-5)",
                                   "def f(x, g, k): return F.layer_norm(x, (x.shape[-1],), weight=g, bias=k)"}) {
    SCOPED_TRACE(source);
    const auto p = analyse(source);
    ASSERT_TRUE(p.complete()) << undecided(p);
    ASSERT_EQ(p.inputs.size(), 1u);
    EXPECT_EQ(p.inputs[0].name, "x");
    ASSERT_EQ(p.learnable_parameters.size(), 2u);
    EXPECT_EQ(p.learnable_parameters[0].name, "g");
    EXPECT_EQ(p.learnable_parameters[0].value, 1.0);
    EXPECT_EQ(p.learnable_parameters[1].name, "k");
    EXPECT_EQ(p.learnable_parameters[1].value, 0.0);
    EXPECT_TRUE(p.row_program->input_gradients.empty());
    EXPECT_TRUE(has_note(p, "weight or bias of a normalisation"));
  }
  const auto rms = analyse("def f(h, s): return F.rms_norm(h, [h.shape[-1]], s, 1e-6)");
  ASSERT_TRUE(rms.complete()) << undecided(rms);
  ASSERT_EQ(rms.inputs.size(), 1u);
  ASSERT_EQ(rms.learnable_parameters.size(), 1u);
  EXPECT_EQ(rms.learnable_parameters[0].name, "s");
  // The same name used as a row tensor elsewhere (not passed to a norm) stays an input.
  const auto mixed = analyse("def f(x, k): return torch.softmax(x, dim=-1) * k");
  ASSERT_EQ(mixed.inputs.size(), 2u);
  EXPECT_TRUE(mixed.learnable_parameters.empty());
}

TEST(KernelDevTier2Weights, GemmaOffsetIsNotAPlainWeight) {
  const auto gemma = analyse(kGemma), llama = analyse(kLlama);
  ASSERT_TRUE(gemma.row_program && llama.row_program);
  ASSERT_EQ(gemma.learnable_parameters.size(), 1u);
  EXPECT_EQ(gemma.learnable_parameters[0].value, 0.0);  // torch.zeros: the identity scale is 1 + 0
  const std::vector<double> x = {0.5, -1.25, 2.0, 0.75};
  const double rms = std::sqrt((0.25 + 1.5625 + 4.0 + 0.5625) / 4 + 1e-6);
  const kd::ColumnValues w = {{"weight", {0.5, -0.2, 0.0, 1.5}}};
  const auto yg = kd::row_forward_f64(gemma, x, {}, w), yl = kd::row_forward_f64(llama, x, {}, w);
  for (std::size_t j = 0; j < x.size(); ++j) {
    EXPECT_NEAR(yg[j], x[j] / rms * (1.0 + w.at("weight")[j]), 1e-12) << j;
    EXPECT_NEAR(yl[j], x[j] / rms * w.at("weight")[j], 1e-12) << j;
  }
  // At its init (zeros) Gemma's output is the normalised row, not zero.
  const auto at_init = kd::row_forward_f64(gemma, x);
  EXPECT_NEAR(at_init[2], 2.0 / rms, 1e-12);
  // dx carries the 1 + w scale, dw does not (d(1 + w)/dw = 1).
  const std::vector<double> dy = {1.0, 0.0, 0.0, 0.0};
  const auto dwg = kd::row_param_gradients_f64(gemma, x, dy, {}, w).at("weight");
  EXPECT_NEAR(dwg[0], 0.5 / rms, 1e-12);
  EXPECT_NE(kd::row_backward_f64(gemma, x, dy, {}, w)[0], kd::row_backward_f64(llama, x, dy, {}, w)[0]);
}

TEST(KernelDevTier2Weights, NamesKeepTheLibraryRule) {
  // The library's rms_norm has a weight: a generated one with a weight is rms_norm_custom.
  const auto p = analyse("class RmsNorm(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
                         "        self.weight = nn.Parameter(torch.ones(d))\n    def forward(self, x):\n"
                         "        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)");
  EXPECT_EQ(p.op_name, "rms_norm_custom");
  EXPECT_TRUE(p.complete()) << undecided(p);
}

// A learnable scalar (PolyNorm's coefficients, a softmax's learnable temperature) goes to the
// kernel as its one element: the kernel reads it once per thread and sums its gradient over rows
// and columns in one fp32 register per thread (no per-column sums, no broadcast copy), and the
// module holds one element.
TEST(KernelDevTier2Weights, LearnableScalarsAreOneElementSummedInTheKernel) {
  const auto p = analyse("class ScaledSoftmax(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                         "        self.scale = nn.Parameter(torch.tensor(1.0))\n    def forward(self, x):\n"
                         "        return torch.softmax(self.scale * x, dim=-1)");
  ASSERT_TRUE(p.complete()) << undecided(p);
  ASSERT_EQ(p.tier, 2);
  ASSERT_EQ(p.learnable_parameters.size(), 1u);
  EXPECT_EQ(p.learnable_parameters[0].shape, "scalar");
  ASSERT_TRUE(p.row_program);
  ASSERT_EQ(p.row_program->param_gradients.size(), 1u);
  EXPECT_EQ(p.row_program->param_gradients[0].name, "scale");
  bool summed_over_both = false;
  for (const auto& g : *p.gradients)
    if (g.wrt == "scale") summed_over_both = g.expression.rfind("sum over rows and columns of (", 0) == 0;
  EXPECT_TRUE(summed_over_both);

  const fs::path root = fs::temp_directory_path() / ("liger_tier2_scalar_py_" + std::to_string(::getpid()));
  write_tree(p, root);
  std::stringstream text;
  text << std::ifstream(root / ("kernels/python/liger_kernels/ops/" + p.op_name + ".py")).rdbuf();
  const std::string py = text.str();
  for (const char* expected : {"scale = _weight(scale, x, cols, \"scale\", scalar=True)",
                               "return w.reshape(1).to(like.dtype).contiguous()",
                               "dscale = torch.empty((1,), dtype=like.dtype, device=device)",
                               "dscale.reshape(scale_shape)", "like.new_empty(scale.shape)",
                               "self.scale = torch.nn.Parameter(torch.full((1,), 1.0))"})
    EXPECT_NE(py.find(expected), std::string::npos) << expected << "\n" << py;
  EXPECT_EQ(py.find("expand(cols)"), std::string::npos) << "the scalar is not broadcast to a column vector";
  EXPECT_EQ(py.find("hidden_size"), std::string::npos) << "no per-column weight: the module takes no width";
  std::stringstream cu_text;
  cu_text << std::ifstream(root / ("kernels/src/" + p.op_name + "/" + p.op_name + ".cu")).rdbuf();
  const std::string cu = cu_text.str();
  for (const char* expected : {"return w == 0 || false;", "scale_scalar_ = to_float(static_cast<const T*>(p.w[0])[0]);",
                               "const float scale = scale_scalar_;", "scalar_sum_[w_] += gw_[w_][k_];"})
    EXPECT_NE(cu.find(expected), std::string::npos) << expected << "\n" << cu;
  EXPECT_EQ(cu.find("scales_[VEC]"), std::string::npos) << "no per-column chunk of a scalar";
  fs::remove_all(root);
}

TEST(KernelDevTier2Weights, ParamGradientsRoundTripAndAreChecked) {
  const auto p = analyse(kLayerNorm);
  const auto back = kd::profile_from_yaml(kd::profile_to_yaml(p));
  ASSERT_TRUE(back.row_program);
  ASSERT_EQ(back.row_program->param_gradients.size(), 2u);
  EXPECT_EQ(back.row_program->param_gradients[0].expression, p.row_program->param_gradients[0].expression);

  auto problems = [](const kd::KernelProfile& q) {
    std::string all;
    for (const auto& s : kd::row_program_problems(q)) all += s + "\n";
    return all;
  };
  auto missing = p;
  missing.row_program->param_gradients.pop_back();
  EXPECT_NE(problems(missing).find("no gradient for the learnable parameter 'bias'"), std::string::npos) << problems(missing);
  auto unknown = p;
  unknown.row_program->param_gradients[1].name = "beta";
  EXPECT_NE(problems(unknown).find("'beta' is not a learnable per-column parameter"), std::string::npos) << problems(unknown);
  auto out_of_scope = p;
  out_of_scope.row_program->param_gradients[0].expression = "dy * q";
  EXPECT_NE(problems(out_of_scope).find("backward.param_gradients[0] (weight): 'dy * q' uses q"), std::string::npos)
      << problems(out_of_scope);
}

TEST(KernelDevTier2Weights, EditedWeightGradientReachesTheRenderedCode) {
  const auto p = analyse(kLlama);
  auto edited = p;
  edited.row_program->param_gradients[0].expression = "dy * hidden_states";
  const auto before = kd::render(p, kSource / "templates/kernel_dev");
  const auto after = kd::render(edited, kSource / "templates/kernel_dev");
  ASSERT_EQ(before.size(), after.size());
  bool kernel_changed = false, reference_changed = false;
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (before[i].path.size() > 3 && before[i].path.substr(before[i].path.size() - 3) == ".cu")
      kernel_changed = kernel_changed || before[i].content != after[i].content;
    if (before[i].path.find("_ref.cpp") != std::string::npos && before[i].path.find("test_") == std::string::npos)
      reference_changed = reference_changed || before[i].content != after[i].content;
  }
  EXPECT_TRUE(kernel_changed);
  EXPECT_TRUE(reference_changed);
}

// The rendered fp64 reference computes dw, and its own finite-difference test passes; with a wrong
// weight gradient in the profile the same test fails.
TEST(KernelDevTier2Weights, RenderedReferenceTestsCheckTheWeightGradient) {
  if (std::system("command -v g++ >/dev/null 2>&1") != 0) GTEST_SKIP() << "no g++ on PATH: the reference was not compiled";
  for (const auto& [label, source] : sources()) {
    SCOPED_TRACE(label);
    const auto p = analyse(source);
    ASSERT_TRUE(p.complete()) << undecided(p);
    std::string log;
    EXPECT_EQ(run_reference_test(p, label, log), 0) << log;
  }
  auto wrong = analyse(kLayerNorm);
  wrong.row_program->param_gradients[0].expression = "dy * (x - mu)";  // the 1/sigma dropped
  std::string log;
  const int status = run_reference_test(wrong, "wrong", log);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(status, -1) << "the reference with a wrong dw must build and fail its test, not fail to build:\n" << log;
  EXPECT_NE(log.find("dweight["), std::string::npos) << log;
}

// The Python binding takes the weights after the input, returns their gradients from autograd, and
// its module owns them as parameters: the rendered file parses, and says so.
TEST(KernelDevTier2Weights, PythonOpTakesTheWeightsAndReturnsTheirGradients) {
  const auto p = analyse(kLayerNorm);
  const fs::path root = fs::temp_directory_path() / ("liger_tier2_weights_py_" + std::to_string(::getpid()));
  write_tree(p, root);
  const fs::path op = root / ("kernels/python/liger_kernels/ops/" + p.op_name + ".py");
  std::stringstream text;
  text << std::ifstream(op).rdbuf();
  const std::string py = text.str();
  EXPECT_NE(py.find("def my_layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = "), std::string::npos) << py;
  EXPECT_NE(py.find("self.weight = torch.nn.Parameter(torch.full((hidden_size,), 1.0))"), std::string::npos) << py;
  EXPECT_NE(py.find("self.bias = torch.nn.Parameter(torch.full((hidden_size,), 0.0))"), std::string::npos) << py;
  EXPECT_NE(py.find("liger_my_layer_norm_backward_workspace_size"), std::string::npos) << py;
  EXPECT_NE(py.find("def reference(x: Tensor, weight: Tensor, bias: Tensor, "), std::string::npos) << py;
  // The saved statistics (the mean and variance) sit between the saved input and the weights, in
  // the autograd function and in both entry points; the ctypes declarations and the calls have as
  // many arguments as the C header's prototypes.
  EXPECT_NE(py.find("ctx.save_for_backward(x, stats, weight, bias, )"), std::string::npos) << py;
  std::stringstream header_text;
  header_text << std::ifstream(root / ("kernels/include/liger_kernels/" + p.op_name + ".h")).rdbuf();
  const std::string header = header_text.str();
  // The non-empty top-level arguments of the first bracketed list at or after `at` in `text`
  // (the templates' lists end in ", ", which adds none).
  auto arity = [](const std::string& text, std::size_t at) {
    const std::size_t begin = text.find_first_of("([", at);
    int depth = 0, count = 0;
    std::string piece;
    auto flush = [&] {
      if (piece.find_first_not_of(" \n") != std::string::npos) ++count;
      piece.clear();
    };
    for (std::size_t i = begin; i < text.size(); ++i) {
      const char c = text[i];
      if (c == '(' || c == '[') {
        if (depth++ == 0) continue;
      } else if (c == ')' || c == ']') {
        if (--depth == 0) break;
      } else if (c == ',' && depth == 1) {
        flush();
        continue;
      }
      piece += c;
    }
    flush();
    return count;
  };
  for (const std::string direction : {"forward", "backward"}) {
    SCOPED_TRACE(direction);
    const std::size_t proto = header.find("liger_" + p.op_name + "_" + direction + "(");
    ASSERT_NE(proto, std::string::npos) << header;
    const int c_arguments = arity(header, proto);
    const std::size_t declared = py.find("_lib.declare(f\"liger_{OP}_" + direction + "\", ST, [");
    ASSERT_NE(declared, std::string::npos) << py;
    EXPECT_EQ(arity(py, py.find('[', declared)), c_arguments);
    const std::string entry = direction == "forward" ? "_lib.call(_FORWARD," : "_lib.call(_BACKWARD,";
    const std::size_t call = py.find(entry);
    ASSERT_NE(call, std::string::npos) << py;
    EXPECT_EQ(arity(py, call), c_arguments + 1);  // + the entry point's name
  }
  if (std::system("command -v python3 >/dev/null 2>&1") == 0) {
    const std::string check = "python3 -c \"import ast,sys; ast.parse(open(sys.argv[1]).read())\" " + op.string() + " >" +
                              (root / "py.log").string() + " 2>&1";
    EXPECT_EQ(std::system(check.c_str()), 0) << std::ifstream(root / "py.log").rdbuf();
  }
  fs::remove_all(root);
}

// The backward with weight gradients keeps the row (and the per-thread weight sums) in registers:
// no stack frame, no spills, in every instantiation; -Werror all-warnings.
TEST(KernelDevTier2Weights, RenderedKernelsCompileWithoutLocalMemory) {
  std::string nvcc;
  for (const std::string candidate : {"nvcc", "/usr/local/cuda/bin/nvcc"}) {
    if (candidate.find('/') != std::string::npos ? fs::exists(candidate)
                                                 : std::system(("command -v " + candidate + " >/dev/null 2>&1").c_str()) == 0) {
      nvcc = candidate;
      break;
    }
  }
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (PATH, /usr/local/cuda/bin): the rendered kernels were not compiled";
  for (const auto& [label, source] : sources()) {
    if (label == "layer_norm_written") continue;  // the same program as layer_norm
    SCOPED_TRACE(label);
    const auto p = analyse(source);
    const fs::path root = fs::temp_directory_path() / ("liger_tier2_weights_nvcc_" + std::to_string(::getpid()) + "_" + label);
    write_tree(p, root);
    std::string out;
    const int status = liger::testing::family::compile_rendered_kernel(nvcc, root, p.op_name, out);
    ASSERT_EQ(status, 0) << out;
    auto count = [&](const std::string& what) {
      std::size_t n = 0;
      for (std::size_t at = out.find(what); at != std::string::npos; at = out.find(what, at + 1)) ++n;
      return n;
    };
    // 2 row kernels x (3 dtypes: 4 + 4 + 3 vector widths) x 5 chunk counts, the prefetching
    // variants (2 kernels x 3 dtypes x 2 chunk counts at the widest vector), plus the weight
    // gradient's second kernel per dtype.
    EXPECT_EQ(count("Compiling entry function"), 125u) << out;
    EXPECT_EQ(count("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"), 125u) << out;
    fs::remove_all(root);
  }
}
