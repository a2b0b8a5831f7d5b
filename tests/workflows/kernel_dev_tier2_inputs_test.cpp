// Tier 2 with several input tensors (cosine similarity, KL divergence between two logit rows, a
// per-row loss against a target, softmax of a sum): every input after the first is a [rows, cols]
// tensor read per column with the first, with its own gradient. The derived forward against an
// independent fp64 formula and every input's gradient against central differences (the row
// evaluator); the profile field that carries the other inputs' gradients; the rendered reference
// (its own finite-difference test, which must fail for a wrong gradient of the second input),
// kernel (nvcc, no local memory) and Python binding. No GPU.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "workflows/kernel_dev/input_sampling.h"
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

std::string undecided(const kd::KernelProfile& p) { return liger::testing::family::undecided_text(p); }

using Row = std::vector<double>;
// The forward of one row from every input's row (in the profile's input order).
using Reference = std::function<Row(const std::vector<Row>&)>;

double dot(const Row& a, const Row& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
Row log_softmax(const Row& x) {
  const double m = *std::max_element(x.begin(), x.end());
  double s = 0;
  for (double v : x) s += std::exp(v - m);
  Row out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] - m - std::log(s);
  return out;
}
// KL(softmax(p) || softmax(q)) of two rows of logits.
double kl_of_logits(const Row& p, const Row& q) {
  const Row lp = log_softmax(p), lq = log_softmax(q);
  double s = 0;
  for (std::size_t i = 0; i < lp.size(); ++i) s += std::exp(lp[i]) * (lp[i] - lq[i]);
  return s;
}

struct Form {
  std::string label, source;
  Reference reference;
};

const std::vector<Form>& forms() {
  static const std::vector<Form> f = {
      {"cosine", "def f(a, b): return F.cosine_similarity(a, b, dim=-1)",
       [](const std::vector<Row>& in) { return Row{dot(in[0], in[1]) / std::sqrt(dot(in[0], in[0]) * dot(in[1], in[1]))}; }},
      {"cosine_written",
       "def cos(a, b):\n    return (a * b).sum(-1, keepdim=True) / (a.norm(dim=-1, keepdim=True) * b.norm(dim=-1, keepdim=True))",
       [](const std::vector<Row>& in) { return Row{dot(in[0], in[1]) / std::sqrt(dot(in[0], in[0]) * dot(in[1], in[1]))}; }},
      // KL(softmax(q) || softmax(p)) per row, as distillation writes it (p is renamed: it names the
      // kernel's parameters).
      {"kl_rows",
       "def kl_rows(p, q):\n    return (torch.softmax(q, -1) * (torch.log_softmax(q, -1) - torch.log_softmax(p, -1))).sum(-1)",
       [](const std::vector<Row>& in) { return Row{kl_of_logits(in[1], in[0])}; }},
      // Descriptions (tiers.yaml): KL(softmax(p) || softmax(q)), the first input's distribution first,
      // and a temperature that divides both rows of logits, as distillation applies it.
      {"kl_description", "KL divergence between p and q",
       [](const std::vector<Row>& in) { return Row{kl_of_logits(in[0], in[1])}; }},
      {"kl_temperature_description", "KL divergence with temperature 2",
       [](const std::vector<Row>& in) {
         Row p = in[0], q = in[1];
         for (auto& v : p) v /= 2;
         for (auto& v : q) v /= 2;
         return Row{kl_of_logits(p, q)};
       }},
      {"jsd_description", "Jensen-Shannon divergence between two distributions",
       [](const std::vector<Row>& in) {
         const Row lp = log_softmax(in[0]), lq = log_softmax(in[1]);
         double s = 0;
         for (std::size_t i = 0; i < lp.size(); ++i) {
           const double a = std::exp(lp[i]), b = std::exp(lq[i]), lm = std::log(0.5 * (a + b));
           s += 0.5 * a * (lp[i] - lm) + 0.5 * b * (lq[i] - lm);
         }
         return Row{s};
       }},
      {"soft_target_ce", "def soft_ce(x, t): return -(t * F.log_softmax(x, dim=-1)).sum(-1)",
       [](const std::vector<Row>& in) {
         const Row l = log_softmax(in[0]);
         return Row{-dot(in[1], l)};
       }},
      // A target of probabilities (kl_div's xlogy(t, t) term): t is drawn positive (inputs[].sample).
      {"kl_probability_target", "def f(x, t): return F.kl_div(F.log_softmax(x, -1), t, reduction='none').sum(-1)",
       [](const std::vector<Row>& in) {
         const Row l = log_softmax(in[0]);
         double s = 0;
         for (std::size_t i = 0; i < l.size(); ++i) s += in[1][i] * (std::log(in[1][i]) - l[i]);
         return Row{s};
       }},
      {"pairwise_distance", "def f(a, b): return F.pairwise_distance(a, b)",
       [](const std::vector<Row>& in) {
         double s = 0;
         for (std::size_t i = 0; i < in[0].size(); ++i) s += (in[0][i] - in[1][i] + 1e-6) * (in[0][i] - in[1][i] + 1e-6);
         return Row{std::sqrt(s)};
       }},
      {"mse_rows", "def f(x, t): return ((x - t) ** 2).mean(-1, keepdim=True)",
       [](const std::vector<Row>& in) {
         double s = 0;
         for (std::size_t i = 0; i < in[0].size(); ++i) s += (in[0][i] - in[1][i]) * (in[0][i] - in[1][i]);
         return Row{s / static_cast<double>(in[0].size())};
       }},
      // [rows, cols] outputs of three inputs.
      {"softmax_of_sum", "def f(x, u, v): return torch.softmax(x * v + u, dim=-1)",
       [](const std::vector<Row>& in) {
         Row z(in[0].size());
         for (std::size_t i = 0; i < z.size(); ++i) z[i] = in[0][i] * in[2][i] + in[1][i];
         Row l = log_softmax(z);
         for (auto& v : l) v = std::exp(v);
         return l;
       }},
      {"residual_rms_norm", "def f(x, r): return F.rms_norm(x + r, (x.shape[-1],), eps=1e-6)",
       [](const std::vector<Row>& in) {
         Row h(in[0].size());
         for (std::size_t i = 0; i < h.size(); ++i) h[i] = in[0][i] + in[1][i];
         const double r = 1 / std::sqrt(dot(h, h) / static_cast<double>(h.size()) + 1e-6);
         for (auto& v : h) v *= r;
         return h;
       }},
  };
  return f;
}

Row random_row(std::mt19937& rng, std::size_t cols, double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  Row x(cols);
  for (auto& v : x) v = normal(rng);
  return x;
}

kd::ColumnValues others_of(const kd::KernelProfile& p, const std::vector<Row>& in) {
  kd::ColumnValues c;
  for (std::size_t i = 1; i < p.inputs.size(); ++i) c[p.inputs[i].name] = in[i];
  return c;
}

namespace rt = liger::testing::rendered;

fs::path write_tree(const kd::KernelProfile& p, const std::string& tag) {
  return rt::write_tree(kd::render(p, kSource / "templates/kernel_dev"), "tier2_inputs_" + tag);
}

std::string text_of(const fs::path& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

// Builds and runs the rendered fp64 reference's own test; the exit status of the run (-1: no build).
int run_reference_test(const kd::KernelProfile& p, const std::string& tag, std::string& log) {
  const fs::path root = write_tree(p, tag);
  log = rt::build_reference("g++", root, p.op_name);
  if (!log.empty()) return -1;
  const int status = std::system(((root / "ref_test").string() + " >" + (root / "run.log").string() + " 2>&1").c_str());
  log = text_of(root / "run.log");
  fs::remove_all(root);
  return status;
}

}  // namespace

TEST(KernelDevTier2Inputs, ProfilesHaveAGradientPerInput) {
  for (const auto& form : forms()) {
    SCOPED_TRACE(form.label);
    const auto p = analyse(form.source);
    ASSERT_EQ(p.tier, 2) << p.tier_reason << "\n" << undecided(p);
    ASSERT_TRUE(p.complete()) << undecided(p);
    ASSERT_TRUE(p.row_program);
    EXPECT_TRUE(kd::row_program_problems(p).empty());
    ASSERT_GE(p.inputs.size(), 2u);
    ASSERT_EQ(p.row_program->input_gradients.size(), p.inputs.size() - 1);
    for (std::size_t i = 1; i < p.inputs.size(); ++i) EXPECT_EQ(p.row_program->input_gradients[i - 1].name, p.inputs[i].name);
    // Every input's gradient is listed for the reviewer.
    ASSERT_TRUE(p.gradients);
    for (const auto& in : p.inputs) {
      const bool listed = std::any_of(p.gradients->begin(), p.gradients->end(),
                                      [&](const kd::GradientSpec& g) { return g.wrt == in.name; });
      EXPECT_TRUE(listed) << in.name;
    }
    // The backward reads the first input (the other inputs' gradients are functions of all of them)
    // and, after it, only forward reductions: the row statistics the forward stores.
    ASSERT_FALSE(p.row_program->backward_uses.empty());
    EXPECT_EQ(p.row_program->backward_uses[0], p.inputs[0].name);
    for (std::size_t i = 1; i < p.row_program->backward_uses.size(); ++i) {
      const auto& u = p.row_program->backward_uses[i];
      const bool reduction = std::any_of(p.row_program->forward_reductions.begin(), p.row_program->forward_reductions.end(),
                                         [&](const kd::RowReduction& r) { return r.name == u; });
      EXPECT_TRUE(reduction) << u;
    }
  }
}

TEST(KernelDevTier2Inputs, DerivedForwardAndEveryGradientMatchReferenceAndFiniteDifferences) {
  std::mt19937 rng(11);
  for (const auto& form : forms()) {
    SCOPED_TRACE(form.label);
    const auto p = analyse(form.source);
    ASSERT_TRUE(p.complete()) << undecided(p);
    const bool per_row = kd::per_row_output(p);
    for (std::size_t cols : {3u, 17u, 64u}) {
      for (int trial = 0; trial < 2; ++trial) {
        std::vector<Row> in;
        for (std::size_t i = 0; i < p.inputs.size(); ++i) {
          in.push_back(random_row(rng, cols, 1.5));
          for (auto& v : in.back()) v = kd::sample_value(p.inputs[i].sample, v);
        }
        const Row dy = random_row(rng, per_row ? 1 : cols, 1.0);
        auto forward = [&](const std::vector<Row>& at) { return kd::row_forward_f64(p, at[0], {}, others_of(p, at)); };
        const Row y = forward(in), expected = form.reference(in);
        ASSERT_EQ(y.size(), expected.size());
        for (std::size_t j = 0; j < y.size(); ++j) ASSERT_NEAR(y[j], expected[j], 1e-9 * (1 + std::fabs(expected[j])));
        std::vector<Row> grads = {kd::row_backward_f64(p, in[0], dy, {}, others_of(p, in))};
        const kd::ColumnValues other_grads = kd::row_input_gradients_f64(p, in[0], dy, {}, others_of(p, in));
        for (std::size_t i = 1; i < p.inputs.size(); ++i) grads.push_back(other_grads.at(p.inputs[i].name));
        // L = sum_j dy_j y_j; dL/d(input i, column k) by central differences.
        for (std::size_t i = 0; i < in.size(); ++i) {
          for (std::size_t k = 0; k < cols; ++k) {
            const double h = 1e-6 * std::max(1.0, std::fabs(in[i][k]));
            auto plus = in, minus = in;
            plus[i][k] += h;
            minus[i][k] -= h;
            const Row yp = forward(plus), ym = forward(minus);
            double fd = 0;
            for (std::size_t j = 0; j < yp.size(); ++j) fd += dy[j] * (yp[j] - ym[j]) / (2 * h);
            ASSERT_NEAR(grads[i][k], fd, 1e-5 * (1 + std::fabs(fd)))
                << "d" << p.inputs[i].name << " column " << k << " of " << cols;
          }
        }
      }
    }
  }
}

TEST(KernelDevTier2Inputs, ReservedInputNamesAreRenamedWithANote) {
  const auto p = analyse(forms()[2].source);
  ASSERT_TRUE(p.complete()) << undecided(p);
  EXPECT_EQ(p.inputs[0].name, "p_in");
  EXPECT_EQ(p.inputs[1].name, "q");
  const bool noted = std::any_of(p.notes.begin(), p.notes.end(),
                                 [](const std::string& n) { return n.find("input 'p' is 'p_in'") != std::string::npos; });
  EXPECT_TRUE(noted);
}

TEST(KernelDevTier2Inputs, InputGradientsRoundTripAndAreChecked) {
  const auto p = analyse("def f(x, t): return ((x - t) ** 2).mean(-1, keepdim=True)");
  ASSERT_TRUE(p.complete()) << undecided(p);
  const auto back = kd::profile_from_yaml(kd::profile_to_yaml(p));
  ASSERT_TRUE(back.row_program);
  ASSERT_EQ(back.row_program->input_gradients.size(), 1u);
  EXPECT_EQ(back.row_program->input_gradients[0].expression, p.row_program->input_gradients[0].expression);
  auto problems = [](const kd::KernelProfile& q) {
    std::string all;
    for (const auto& s : kd::row_program_problems(q)) all += s + "\n";
    return all;
  };
  auto missing = p;
  missing.row_program->input_gradients.clear();
  EXPECT_NE(problems(missing).find("no gradient for the input 't'"), std::string::npos) << problems(missing);
  auto unknown = p;
  unknown.row_program->input_gradients[0].name = "u";
  EXPECT_NE(problems(unknown).find("'u' is not one of the inputs after the first"), std::string::npos) << problems(unknown);
  auto out_of_scope = p;
  out_of_scope.row_program->input_gradients[0].expression = "dy * q";
  EXPECT_NE(problems(out_of_scope).find("backward.input_gradients[0] (t): 'dy * q' uses q"), std::string::npos)
      << problems(out_of_scope);
  auto output_only = p;
  output_only.row_program->backward_uses = {"y"};
  EXPECT_FALSE(problems(output_only).empty());
  auto clash = p;
  clash.inputs[1].name = "dx";
  EXPECT_NE(problems(clash).find("clashes"), std::string::npos) << problems(clash);
}

// The rendered fp64 reference computes every input's gradient and its own finite-difference test
// passes; with a wrong gradient of the second input the same test fails, naming it.
TEST(KernelDevTier2Inputs, RenderedReferenceTestsCheckEveryInputGradient) {
  if (std::system("command -v g++ >/dev/null 2>&1") != 0) GTEST_SKIP() << "no g++ on PATH: the reference was not compiled";
  for (const auto& form : forms()) {
    SCOPED_TRACE(form.label);
    const auto p = analyse(form.source);
    ASSERT_TRUE(p.complete()) << undecided(p);
    std::string log;
    EXPECT_EQ(run_reference_test(p, form.label, log), 0) << log;
  }
  auto wrong = analyse("def f(x, t): return ((x - t) ** 2).mean(-1, keepdim=True)");
  wrong.row_program->input_gradients[0].expression = "2 * dy / n * (x - t)";  // the sign of dt dropped
  std::string log;
  const int status = run_reference_test(wrong, "wrong", log);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(status, -1) << "the reference with a wrong dt must build and fail its test, not fail to build:\n" << log;
  EXPECT_NE(log.find("dt[row"), std::string::npos) << log;
}

// The binding takes every input, saves them, and returns a gradient for each.
TEST(KernelDevTier2Inputs, PythonOpTakesEveryInputAndReturnsItsGradient) {
  const auto p = analyse(forms()[2].source);
  const fs::path root = write_tree(p, "py");
  const fs::path op = root / ("kernels/python/liger_kernels/ops/" + p.op_name + ".py");
  const std::string py = text_of(op);
  EXPECT_NE(py.find("def " + p.op_name + "(p_in: Tensor, q: Tensor, ) -> Tensor:"), std::string::npos) << py;
  EXPECT_NE(py.find("ctx.save_for_backward(p_in, stats, q, )"), std::string::npos) << py;
  EXPECT_NE(py.find("def reference(p_in: Tensor, q: Tensor, "), std::string::npos) << py;
  if (std::system("command -v python3 >/dev/null 2>&1") == 0) {
    const std::string check = "python3 -c \"import ast,sys; ast.parse(open(sys.argv[1]).read())\" " + op.string() + " >" +
                              (root / "py.log").string() + " 2>&1";
    EXPECT_EQ(std::system(check.c_str()), 0) << text_of(root / "py.log");
  }
  fs::remove_all(root);
}

// The kernels read the other inputs per pass from their own rows: no stack frame or spills in any
// instantiation; -Werror all-warnings.
TEST(KernelDevTier2Inputs, RenderedKernelsCompileWithoutLocalMemory) {
  const std::string nvcc = rt::find_tool({"nvcc", "/usr/local/cuda/bin/nvcc"});
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (PATH, /usr/local/cuda/bin): the rendered kernels were not compiled";
  for (const char* label : {"kl_rows"}) {
    SCOPED_TRACE(label);
    const auto it = std::find_if(forms().begin(), forms().end(), [&](const Form& f) { return f.label == label; });
    const auto p = analyse(it->source);
    const fs::path root = write_tree(p, std::string("nvcc_") + label);
    std::string out;
    ASSERT_EQ(liger::testing::family::compile_rendered_kernel(nvcc, root, p.op_name, out), 0) << out;
    auto count = [&](const std::string& what) {
      std::size_t n = 0;
      for (std::size_t at = out.find(what); at != std::string::npos; at = out.find(what, at + 1)) ++n;
      return n;
    };
    EXPECT_GT(count("Compiling entry function"), 100u) << out;
    EXPECT_EQ(count("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"), count("Compiling entry function"))
        << out;
    fs::remove_all(root);
  }
}

// The rendered GPU test and benchmark pass every input and gradient through the C ABI: they
// compile (syntax only: no GPU here) against the rendered header, for per-row and per-column outputs.
TEST(KernelDevTier2Inputs, RenderedGpuTestAndBenchmarkCompile) {
  const std::string gxx = rt::find_tool({"g++"});
  const std::string cuda = rt::cuda_include_dir();
  if (gxx.empty() || cuda.empty()) GTEST_SKIP() << "g++ or cuda_runtime.h not found: the host code was not compiled";
  for (const auto& form : forms()) {
    SCOPED_TRACE(form.label);
    const auto p = analyse(form.source);
    ASSERT_TRUE(p.complete()) << undecided(p);
    const fs::path root = write_tree(p, form.label);
    EXPECT_EQ(rt::check_host_code(gxx, cuda, root, p.op_name), "");
    fs::remove_all(root);
  }
}

// Each input's test distribution is chosen from the row program's per-column terms: a target under
// a log is drawn positive, the rest stay normal, and normalisations whose terms collapse to 0 / 0
// in that view keep normal inputs.
TEST(KernelDevTier2Inputs, InputSamplesFollowThePerColumnTerms) {
  const auto kl = analyse("def f(x, t): return F.kl_div(F.log_softmax(x, -1), t, reduction='none').sum(-1)");
  ASSERT_TRUE(kl.complete()) << undecided(kl);
  EXPECT_EQ(kl.inputs[0].sample, "normal");
  EXPECT_EQ(kl.inputs[1].sample, "positive");
  const auto back = kd::profile_from_yaml(kd::profile_to_yaml(kl));
  EXPECT_EQ(back.inputs[1].sample, "positive");
  for (const std::string source : {"def f(x): return (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True)",
                                   "def f(x): return torch.softmax(x, dim=-1)",
                                   "def f(a, b): return F.cosine_similarity(a, b, dim=-1)"}) {
    SCOPED_TRACE(source);
    const auto p = analyse(source);
    ASSERT_TRUE(p.complete()) << undecided(p);
    for (const auto& in : p.inputs) EXPECT_EQ(in.sample, "normal") << in.name;
  }
  // The rendered tests draw t from its distribution.
  const auto files = kd::render(kl, kSource / "templates/kernel_dev");
  bool reference_draws = false, gpu_draws = false;
  for (const auto& f : files) {
    if (f.path.find("tests/kernels/reference/test_") == 0)
      reference_draws = f.content.find("v = (0.1 + std::fabs(normal(rng)));  // inputs[].sample: positive") != std::string::npos;
    if (f.path.find("tests/kernels/gpu/test_") == 0)
      gpu_draws = f.content.find("z = quantize((0.1 + std::fabs(z)), dtype);  // inputs[].sample: positive") != std::string::npos;
  }
  EXPECT_TRUE(reference_draws);
  EXPECT_TRUE(gpu_draws);
}
