// kernel-dev Tier 3, fused linear + a row loss (issue 18 item 4): recognising the loss over
// logits = x @ w.T in words and in PyTorch (x @ w.T, F.linear, matmul; F.cross_entropy,
// nn.CrossEntropyLoss, nll_loss(log_softmax), F.kl_div of log-softmaxes; options as keyword
// arguments or written out), naming what is not supported; the profile's `fused_linear` section
// (schema, problems, YAML round trip, edits driving the rendered files); the rendered files (nvcc
// -c for sm_90, g++ -fsyntax-only of the GPU test and benchmark, py_compile of the binding, the
// fp64 reference built and its finite-difference tests run for every loss and option, a wrong
// gradient caught); and the workflow through Verify with the toolchain faked.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "liger/config.h"
#include "liger/engine.h"
#include "liger/profile.h"
#include "liger/util.h"
#include "workflows/kernel_dev/render.h"
#include "workflows/kernel_dev/tier3.h"
#include "workflows/kernel_dev/workflow.h"

#include "committed_tree.h"
#include "kernel_dev_family.h"
#include "rendered_tree.h"

namespace kd = liger::kernel_dev;
namespace fs = std::filesystem;
using namespace liger::testing::rendered;  // write_tree, find_tool, run and the compile steps
using liger::testing::family::analyse;

namespace {

const fs::path kSource = LIGER_SOURCE_DIR;

struct Expected {
  std::string text;
  std::string loss;
  double z_loss = 0, softcap = 0, smoothing = 0, temperature = 1, beta = 0.5;
  long long ignore_index = -100;
  std::string reduction;
};

const std::vector<Expected> kRecognised = {
    {"fused linear cross entropy with z-loss 1e-4 and softcap 30", "cross_entropy", 1e-4, 30, 0, 1, 0.5, -100, "mean"},
    {"fused linear JSD distillation beta 0.5", "jsd", 0, 0, 0, 1, 0.5, -100, "batchmean"},
    {"LM head + cross-entropy loss with label smoothing 0.1 and ignore index -1, sum reduction", "cross_entropy", 0, 0, 0.1, 1, 0.5, -1, "sum"},
    {"fused linear KL divergence distillation with temperature 2", "kl_div", 0, 0, 0, 2, 0.5, -100, "batchmean"},
    {"generalized JSD over a linear projection, beta 0.25, temperature 4", "jsd", 0, 0, 0, 4, 0.25, -100, "batchmean"},
    {"Gemma-style LM head loss: cross entropy over final logits soft-capped at 50", "cross_entropy", 0, 50, 0, 1, 0.5, -100, "mean"},
    {"distill a student LM head from a teacher with reverse KL at temperature 2", "jsd", 0, 0, 0, 2, 0.0, -100, "batchmean"},
    {"def f(x, w, target): return F.cross_entropy(x @ w.T, target)", "cross_entropy", 0, 0, 0, 1, 0.5, -100, "mean"},
    {"def loss_fn(h, lm_head, labels):\n    logits = F.linear(h, lm_head)\n"
     "    return torch.nn.functional.cross_entropy(logits.float(), labels, ignore_index=-1, label_smoothing=0.05, reduction='sum')\n",
     "cross_entropy", 0, 0, 0.05, 1, 0.5, -1, "sum"},
    {"def f(x, w, y):\n    logits = torch.matmul(x, w.t())\n    logits = 30.0 * torch.tanh(logits / 30.0)\n"
     "    return F.cross_entropy(logits, y) + 1e-4 * torch.logsumexp(logits, dim=-1).pow(2).mean()\n",
     "cross_entropy", 1e-4, 30, 0, 1, 0.5, -100, "mean"},
    {"class LmLoss(nn.Module):\n    def forward(self, x, w, t):\n        return nn.CrossEntropyLoss(ignore_index=0)(x @ w.t(), t)\n",
     "cross_entropy", 0, 0, 0, 1, 0.5, 0, "mean"},
    {"def f(x, w, t): return F.nll_loss(F.log_softmax(x @ w.T, dim=-1), t)", "cross_entropy", 0, 0, 0, 1, 0.5, -100, "mean"},
    {"def f(x, w, t, wt): return F.kl_div(F.log_softmax(x @ w.T, -1), F.log_softmax(t @ wt.T, -1), log_target=True, reduction=\"batchmean\")",
     "kl_div", 0, 0, 0, 1, 0.5, -100, "batchmean"},
    {"def distill(s, ws, t, wt):\n    return F.kl_div(F.log_softmax(s @ ws.T / 2.0, dim=-1), F.softmax(t @ wt.T / 2.0, dim=-1), reduction='batchmean')\n",
     "kl_div", 0, 0, 0, 2, 0.5, -100, "batchmean"},
    {"def f(x, w, t, wt, temperature=3.0):\n    p = F.log_softmax(x @ w.T / temperature, -1)\n"
     "    q = F.log_softmax(t @ wt.T / temperature, -1)\n    return F.kl_div(p, q, log_target=True, reduction='sum')\n",
     "kl_div", 0, 0, 0, 3, 0.5, -100, "sum"},
};

}  // namespace

TEST(KernelDevTier3, RecognisesSpellingsOfFusedLinearLosses) {
  for (const auto& e : kRecognised) {
    SCOPED_TRACE(e.text);
    const kd::FusedLinearRecognition r = kd::recognise_fused_linear(e.text);
    ASSERT_TRUE(r.matched);
    EXPECT_EQ(r.rejection, "");
    EXPECT_EQ(r.spec.loss, e.loss);
    EXPECT_DOUBLE_EQ(r.spec.z_loss, e.z_loss);
    EXPECT_DOUBLE_EQ(r.spec.softcap, e.softcap);
    EXPECT_DOUBLE_EQ(r.spec.label_smoothing, e.smoothing);
    EXPECT_DOUBLE_EQ(r.spec.temperature, e.temperature);
    EXPECT_DOUBLE_EQ(r.spec.beta, e.beta);
    EXPECT_EQ(r.spec.ignore_index, e.ignore_index);
    EXPECT_EQ(r.spec.reduction, e.reduction);
    const kd::KernelProfile p = analyse(e.text);
    EXPECT_EQ(p.tier, 3);
    ASSERT_TRUE(p.fused_linear.has_value());
    EXPECT_TRUE(p.complete()) << (p.undecided.empty() ? "" : p.undecided.begin()->second);
  }
  // Names: the loss and the options that change the formulas; a descriptive function name is kept.
  EXPECT_EQ(analyse(kRecognised[0].text).op_name, "fused_linear_ce_zloss_softcap");
  EXPECT_EQ(analyse(kRecognised[1].text).op_name, "fused_linear_jsd");
  EXPECT_EQ(analyse(kRecognised[7].text).op_name, "fused_linear_ce");
  EXPECT_EQ(analyse(kRecognised[10].text).op_name, "lm_loss");
  EXPECT_EQ(analyse(kRecognised[7].text, "my_head_loss").op_name, "my_head_loss");
  EXPECT_NE(analyse(kRecognised[7].text).op_name, "fused_linear_cross_entropy");  // the library's own op
}

TEST(KernelDevTier3, LeavesOtherOpsAlone) {
  for (const char* text : {"softmax", "ReLU squared activation function", "layer norm", "cross entropy",
                           "def f(x, t): return F.cross_entropy(x, t)", "exact GELU (erf) gated linear unit",
                           "def f(x): return torch.softmax(x, dim=-1)", "mean pooling over variable-length segments given offsets",
                           "def f(x, w): return x @ w.T", "linear layer"}) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(kd::recognise_fused_linear(text).matched);
    EXPECT_FALSE(analyse(text).fused_linear.has_value());
  }
}

// A loss the generator does not have is named with what is supported; the profile stops there.
TEST(KernelDevTier3, NamesWhatItCannotGenerate) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"def f(x, w, y): return F.mse_loss(x @ w.T, y)", "supported: cross-entropy"},
      {"fused linear focal loss", "supported: cross-entropy"},
      {"def f(x, w, b, y): return F.cross_entropy(F.linear(x, w, b), y)", "has a bias"},
      {"def f(x, w, y): return F.cross_entropy(x @ w, y)", "x @ w.T"},
      {"def f(x, w, y): return F.cross_entropy(x @ w.T, y, reduction='none')", "reduction 'none'"},
      {"def f(x, w, t): return F.kl_div(F.log_softmax(x @ w.T, -1), t, reduction='batchmean')", "teacher's logits"},
  };
  for (const auto& [text, why] : cases) {
    SCOPED_TRACE(text);
    const auto r = kd::recognise_fused_linear(text);
    ASSERT_TRUE(r.matched);
    EXPECT_NE(r.rejection.find(why), std::string::npos) << r.rejection;
    const kd::KernelProfile p = analyse(text);
    ASSERT_TRUE(p.undecided.count("fused_linear"));
    EXPECT_THROW(kd::render(p, kSource / "templates/kernel_dev"), std::invalid_argument);
  }
}

TEST(KernelDevTier3, ProfileValidatesRoundTripsAndEditsDriveTheOutput) {
  const auto schema = liger::profile::Schema::load_file(kSource / "skills/kernel_dev/profile.schema.yaml");
  for (const auto& e : kRecognised) {
    SCOPED_TRACE(e.text);
    const kd::KernelProfile p = analyse(e.text);
    const std::string text = kd::profile_to_text(p);
    const auto report = schema.validate(YAML::Load(text));
    EXPECT_TRUE(report.errors.empty()) << (report.errors.empty() ? "" : report.errors.front().format("profile.yaml"));
    const kd::KernelProfile back = kd::profile_from_yaml(YAML::Load(text));
    ASSERT_TRUE(back.fused_linear.has_value());
    EXPECT_EQ(kd::profile_to_text(back), text);
  }
  // The schema rejects an unknown loss; fused_linear_problems what the schema cannot see.
  YAML::Node bad = YAML::Load(kd::profile_to_text(analyse(kRecognised[0].text)));
  bad["fused_linear"]["loss"] = "hinge";
  EXPECT_FALSE(schema.validate(bad).errors.empty());
  kd::KernelProfile wrong = analyse(kRecognised[0].text);
  wrong.fused_linear->reduction = "batchmean";
  ASSERT_EQ(kd::fused_linear_problems(wrong).size(), 1u);
  EXPECT_THROW(kd::render(wrong, kSource / "templates/kernel_dev"), std::invalid_argument);

  // Every editable field reaches the generated code.
  auto file = [](const kd::KernelProfile& p, const std::string& suffix) {
    for (const auto& f : kd::render(p, kSource / "templates/kernel_dev"))
      if (!f.insert && f.path.size() >= suffix.size() && f.path.compare(f.path.size() - suffix.size(), suffix.size(), suffix) == 0)
        return f.content;
    return std::string();
  };
  kd::KernelProfile p = analyse(kRecognised[0].text);
  const std::string before = file(p, ".cu");
  EXPECT_NE(before.find("constexpr float kZLoss = 0.0001f;"), std::string::npos);
  EXPECT_NE(before.find("constexpr float kSoftcap = 30.0f;"), std::string::npos);
  p.fused_linear->z_loss = 2e-4;
  p.fused_linear->softcap = 15;
  p.fused_linear->label_smoothing = 0.2;
  p.fused_linear->ignore_index = -1;
  p.fused_linear->reduction = "sum";
  p.fused_linear->grad_weight_accumulator = "fp32";
  p.fused_linear->chunk_rows = 512;
  p.tiling->threads_per_block = 512;
  const std::string cu = file(p, ".cu");
  for (const char* want : {"kZLoss = 0.0002f;", "kSoftcap = 15.0f;", "kLabelSmoothing = 0.2f;", "kIgnoreIndex = -1;",
                           "kReduction = 1;", "kFp32Accumulator = true;"})
    EXPECT_NE(cu.find(want), std::string::npos) << want;
  const std::string tuning = file(p, "/tuning.h");
  EXPECT_NE(tuning.find("kChunkRows = 512;"), std::string::npos);
  EXPECT_NE(tuning.find("kThreads = 512;"), std::string::npos);
  p.tiling->vector_bytes = 8;
  EXPECT_NE(file(p, "/tuning.h").find("kVectorBytes = 8;"), std::string::npos);
  p.tiling->vector_bytes = 3;
  EXPECT_THROW(kd::render(p, kSource / "templates/kernel_dev"), std::invalid_argument);
  p.tiling->vector_bytes = 16;
  const std::string ref = file(p, "_ref.cpp");
  EXPECT_NE(ref.find("kZLoss = 0.0002;"), std::string::npos);
  EXPECT_NE(ref.find("kReduction = 1;"), std::string::npos);
  const std::string py = file(p, ".py");
  EXPECT_NE(py.find("\"z_loss\": 0.0002"), std::string::npos);
  EXPECT_NE(py.find("ignore_index=-1"), std::string::npos);
  EXPECT_NE(py.find("z = 15.0 * torch.tanh(z / 15.0)"), std::string::npos);
  EXPECT_NE(py.find("loss = loss + 0.0002 * (torch.logsumexp(z, dim=-1)[keep] ** 2).sum()"), std::string::npos);
  EXPECT_EQ(py.find("loss = loss * "), std::string::npos);  // loss_scale 1: nothing scales the result
  p.fused_linear->loss_scale = 0.25;  // the entry and the reference scale the result; the kernel does not
  const std::string scaled = file(p, ".py");
  EXPECT_NE(scaled.find(") * 0.25\n"), std::string::npos) << scaled;
  EXPECT_NE(scaled.find("    loss = loss * 0.25\n"), std::string::npos) << scaled;
  EXPECT_EQ(file(p, ".cu"), cu);
  p.fused_linear->loss_scale = -1;
  EXPECT_THROW(kd::render(p, kSource / "templates/kernel_dev"), std::invalid_argument);
  p.fused_linear->loss_scale = 1;
  kd::KernelProfile jsd = analyse(kRecognised[1].text);
  jsd.fused_linear->beta = 0.1;
  jsd.fused_linear->temperature = 2;
  jsd.fused_linear->reduction = "sum";
  const std::string jcu = file(jsd, ".cu");
  EXPECT_NE(jcu.find("kBeta = 0.1f;"), std::string::npos);
  EXPECT_NE(jcu.find("kInvTemperature = 0.5f;"), std::string::npos);
  EXPECT_NE(jcu.find("kReduction = 1;"), std::string::npos);
  jsd.fused_linear->loss = "kl_div";
  EXPECT_NE(file(jsd, ".cu").find("constexpr bool kJsd = false;"), std::string::npos);
  EXPECT_NE(file(jsd, "/bench_fused_linear_jsd.cpp").find("make_case(8192, 4096, 128256"), std::string::npos);
}

TEST(KernelDevTier3, RendersTheOpsFiles) {
  const auto files = kd::render(analyse(kRecognised[7].text), kSource / "templates/kernel_dev");
  std::vector<std::string> paths;
  for (const auto& f : files)
    if (!f.insert) paths.push_back(f.path);
  const std::vector<std::string> expected = {
      "kernels/include/liger_kernels/fused_linear_ce.h", "kernels/src/fused_linear_ce/fused_linear_ce.cu",
      "kernels/src/fused_linear_ce/tuning.h",            "kernels/reference/fused_linear_ce_ref.h",
      "kernels/reference/fused_linear_ce_ref.cpp",       "tests/kernels/reference/test_fused_linear_ce_ref.cpp",
      "tests/kernels/gpu/test_fused_linear_ce.cpp",      "benchmarks/bench_fused_linear_ce.cpp",
      "kernels/python/liger_kernels/ops/fused_linear_ce.py", "docs/kernels/fused_linear_ce.md"};
  EXPECT_EQ(paths, expected);
  for (const auto& f : files) {
    EXPECT_EQ(f.content.find("{{"), std::string::npos) << f.path;
    if (f.path.find(".cu") != std::string::npos) {
      EXPECT_NE(f.content.find("cublasGemmEx"), std::string::npos);
      EXPECT_NE(f.content.find("CUBLAS_COMPUTE_32F"), std::string::npos);
    }
  }
}

namespace {

// One op per loss and option that changes the code paths.
const liger::testing::family::Variants kVariants = {
    {"t3_ce", "def f(x, w, target): return F.cross_entropy(x @ w.T, target)"},
    {"t3_ce_all", "fused linear cross entropy with z-loss 1e-3, softcap 3, label smoothing 0.1 and ignore index -1"},
    {"t3_ce_sum", "LM head cross-entropy, sum reduction"},
    {"t3_kl", "def f(x, w, t, wt): return F.kl_div(F.log_softmax(x @ w.T / 2.0, -1), F.log_softmax(t @ wt.T / 2.0, -1), log_target=True, reduction=\"batchmean\")"},
    {"t3_kl_mean", "def f(x, w, t, wt): return F.kl_div(F.log_softmax(x @ w.T, -1), F.softmax(t @ wt.T, -1))"},
    {"t3_jsd", "fused linear JSD distillation beta 0.3 temperature 1.5"},
    {"t3_jsd0", "fused linear JSD distillation beta 0"},
    {"t3_jsd1", "fused linear JSD distillation beta 1, sum"},
};

}  // namespace

// The generated kernel compiles with nvcc for sm_90; the GPU test and the benchmark with g++ against
// the CUDA headers; the binding with python3.
TEST(KernelDevTier3, HostCodePythonAndCudaCompile) {
  const std::string missing = liger::testing::family::compile_variants(kVariants, "-gencode=arch=compute_90,code=sm_90");
  if (!missing.empty()) GTEST_SKIP() << "not compiled, tool missing: " << missing;
}

// The rendered fp64 reference builds and passes its own tests (finite differences of every
// gradient element, a known value) for every loss and option.
TEST(KernelDevTier3, ReferenceBuildsAndPassesItsFiniteDifferenceTests) {
  const std::string gxx = find_tool({"g++", "c++"});
  if (gxx.empty()) GTEST_SKIP() << "no C++ compiler (g++) on PATH: the rendered reference was not compiled";
  liger::testing::family::expect_references_pass(gxx, kVariants, 2);
}

// A wrong gradient rule in the reference is caught by its finite-difference test (the test can fail).
TEST(KernelDevTier3, ReferenceTestCatchesAWrongGradient) {
  const std::string gxx = find_tool({"g++", "c++"});
  if (gxx.empty()) GTEST_SKIP() << "no C++ compiler (g++) on PATH";
  for (const auto& [text, rule, wrong] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"fused linear cross entropy with z-loss 1e-2", "2.0 * kZLoss * lse * p", "kZLoss * lse * p"},
           {"fused linear JSD distillation beta 0.3", "(g[j] - pg)", "(g[j])"}}) {
    SCOPED_TRACE(text);
    const std::string error = liger::testing::family::run_with_wrong_rule(gxx, text, "t3_wrong", rule, wrong);
    EXPECT_NE(error.find("[  FAILED  ] T3WrongReference.GradientsMatchFiniteDifferences"), std::string::npos) << error;
  }
}

// The PyTorch spelling with --yes: Understand decides everything, Act writes the op's files
// and list entries, Verify builds and runs <Camel>Reference.* (toolchain faked).
TEST(KernelDevTier3, CrossEntropySpellingReachesVerifyWithYes) {
  auto runner = std::make_shared<liger::testing::family::FakeRunner>(2);
  const auto yes = liger::testing::family::run_with_yes(kRecognised[7].text, "tier3", runner);
  liger::testing::family::expect_op_through_verify(yes, *runner, "fused_linear_ce", 3);
  std::error_code ec;
  fs::remove_all(yes.root, ec);
}
