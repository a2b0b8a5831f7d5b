// Tier 2 at the roofline: the derived backward reads the saved output when the gradient can be
// written from it (softmax, log-softmax, their hand-written and temperature forms), keeps the
// input where it needs the row's statistics (norms), and the rendered row kernel holds each row in
// registers (a CHUNKS count per instantiation, the multi-pass fallback beside it), counted once
// per tensor by the benchmark.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
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

// The profile as a reviewer who lists only the input in backward.uses leaves it: the backward
// recomputes the forward reductions it names instead of reading them from the forward's stats.
kd::KernelProfile recomputing(kd::KernelProfile p) {
  p.row_program->backward_uses = {p.inputs[0].name};
  return p;
}

std::vector<double> random_row(std::mt19937& rng, std::size_t cols, double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(cols);
  for (auto& x : v) x = normal(rng);
  return v;
}

// Every name a backward expression of `p` uses.
std::set<std::string> backward_names(const kd::KernelProfile& p) {
  std::set<std::string> names = kd::free_symbols(kd::parse_expression(p.row_program->grad_input));
  for (const auto& r : p.row_program->backward_reductions)
    for (const auto& s : kd::free_symbols(kd::parse_expression(r.expression))) names.insert(s);
  return names;
}

const kd::RenderedFile& file(const std::vector<kd::RenderedFile>& files, const std::string& suffix) {
  for (const auto& f : files)
    if (f.path.size() >= suffix.size() && f.path.compare(f.path.size() - suffix.size(), suffix.size(), suffix) == 0)
      return f;
  throw std::runtime_error("no rendered file ends with " + suffix);
}

// The text of the kernel function `name` (from its signature to the next kernel or the host side).
std::string kernel_text(const std::string& cu, const std::string& name) {
  const std::size_t begin = cu.find("__global__ void " + name + "(");
  if (begin == std::string::npos) return "";
  std::size_t end = cu.find("__global__ void ", begin + 1);
  end = std::min(end, cu.find("// Host side.", begin));
  return cu.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(KernelDevTier2Rows, SoftmaxFamilyBackwardReadsTheSavedOutput) {
  struct Case {
    std::string source;
    bool log;  // log-softmax (dx = dy - exp(y) sum(dy)) rather than softmax (dx = y (dy - sum(dy y)))
  };
  const std::vector<Case> cases = {
      {"def f(x): return torch.softmax(x, dim=-1)", false},
      {"def f(x): return torch.exp(x - x.amax(-1, keepdim=True)) / torch.exp(x - x.amax(-1, keepdim=True)).sum(-1, keepdim=True)",
       false},
      {"y = exp(x - max(x)) / sum(exp(x - max(x)))", false},
      {"def f(x): return F.log_softmax(x, dim=-1)", true},
      {"def f(x): return x - torch.logsumexp(x, dim=-1, keepdim=True)", true},
  };
  std::mt19937 rng(11);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.source);
    const auto p = analyse(c.source);
    ASSERT_TRUE(p.complete());
    ASSERT_TRUE(p.row_program);
    EXPECT_EQ(p.row_program->backward_uses, std::vector<std::string>{"y"});
    ASSERT_TRUE(p.saved_for_backward);
    EXPECT_EQ(p.saved_for_backward->saved, std::vector<std::string>{"y"});
    // Nothing of the forward is recomputed: neither x nor a forward statistic appears.
    const auto names = backward_names(p);
    EXPECT_FALSE(names.count("x"));
    for (const auto& r : p.row_program->forward_reductions) EXPECT_FALSE(names.count(r.name)) << r.name;
    EXPECT_EQ(p.row_program->backward_reductions.size(), 1u);
    const auto code = kd::generate_tier2(p);
    EXPECT_TRUE(code.saves_output);
    EXPECT_FALSE(code.saves_input);
    EXPECT_TRUE(code.recomputed.empty());
    // The closed forms, from the derived program's fp64 evaluation.
    for (std::size_t cols : {3u, 40u}) {
      const auto x = random_row(rng, cols, 2.0), dy = random_row(rng, cols, 1.0);
      const auto y = kd::row_forward_f64(p, x), dx = kd::row_backward_f64(p, x, dy);
      double sum_dy = 0, sum_dy_y = 0;
      for (std::size_t j = 0; j < cols; ++j) {
        sum_dy += dy[j];
        sum_dy_y += dy[j] * y[j];
      }
      for (std::size_t j = 0; j < cols; ++j) {
        const double expected = c.log ? dy[j] - std::exp(y[j]) * sum_dy : y[j] * (dy[j] - sum_dy_y);
        EXPECT_NEAR(dx[j], expected, 1e-12 * (1 + std::fabs(expected)));
      }
    }
  }
  // exp of the rounded saved y (log-softmax) widens the 16-bit absolute tolerance; softmax's
  // y * (dy - g) keeps the usual one.
  auto bf16_atol = [](const kd::KernelProfile& p) {
    for (const auto& t : *p.tolerances)
      if (t.dtype == "bf16") return t.atol;
    return 0.0;
  };
  EXPECT_DOUBLE_EQ(bf16_atol(analyse("def f(x): return F.log_softmax(x, dim=-1)")), 3.2e-2);
  EXPECT_DOUBLE_EQ(bf16_atol(analyse("def f(x): return torch.softmax(x, dim=-1)")), 1.6e-2);
  // A temperature is a module parameter: the rewrite holds for any value of it.
  const auto t = analyse("def f(x, t=2.0): return torch.softmax(x / t, dim=-1)");
  ASSERT_TRUE(t.row_program);
  EXPECT_EQ(t.row_program->backward_uses, std::vector<std::string>{"y"});
  const auto x = random_row(rng, 9, 2.0), dy = random_row(rng, 9, 1.0);
  const auto y = kd::row_forward_f64(t, x, {{"t", 0.3}}), dx = kd::row_backward_f64(t, x, dy, {{"t", 0.3}});
  double sum_dy_y = 0;
  for (std::size_t j = 0; j < x.size(); ++j) sum_dy_y += dy[j] * y[j];
  for (std::size_t j = 0; j < x.size(); ++j) EXPECT_NEAR(dx[j], y[j] * (dy[j] - sum_dy_y) / 0.3, 1e-12);
}

TEST(KernelDevTier2Rows, BackwardsThatNeedTheRowStatisticsKeepTheInput) {
  // Their gradients need the row's norm / RMS / variance, which y alone does not determine (eps):
  // x is saved, and so are the statistics (fp32 per row), which the backward then reads rather
  // than recomputing. A reviewer who lists only x in backward.uses gets them recomputed instead.
  for (const std::string source : {"def f(x): return x / x.norm(dim=-1, keepdim=True)",
                                   "def f(x): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)",
                                   "def f(x): return F.layer_norm(x, (x.shape[-1],))",
                                   "def f(x): return torch.softmax(x, -1) * torch.log_softmax(x, dim=-1)",
                                   "def f(x, cap=30.0):\n    z = cap * torch.tanh(x / cap)\n    return F.log_softmax(z, dim=-1)"}) {
    SCOPED_TRACE(source);
    const auto p = analyse(source);
    ASSERT_TRUE(p.row_program);
    ASSERT_GE(p.row_program->backward_uses.size(), 2u);
    EXPECT_EQ(p.row_program->backward_uses[0], "x");
    ASSERT_TRUE(p.saved_for_backward);
    EXPECT_EQ(p.saved_for_backward->saved[0], "x");
    const auto saving = kd::generate_tier2(p);
    EXPECT_TRUE(saving.recomputed.empty());
    EXPECT_EQ(saving.saved_stats,
              std::vector<std::string>(p.row_program->backward_uses.begin() + 1, p.row_program->backward_uses.end()));
    auto recomputing = p;
    recomputing.row_program->backward_uses = {"x"};
    const auto recomputed = kd::generate_tier2(recomputing);
    EXPECT_FALSE(recomputed.recomputed.empty());
    EXPECT_TRUE(recomputed.saved_stats.empty());
    // Every pass the statistics took is gone from the backward (softmax's max and sum: two).
    EXPECT_LE(saving.backward_groups.size(), recomputed.backward_groups.size());
    std::size_t saved_members = 0, recomputed_members = 0;
    for (const auto& g : saving.backward_groups) saved_members += g.size();
    for (const auto& g : recomputed.backward_groups) recomputed_members += g.size();
    EXPECT_LT(saved_members, recomputed_members);
  }
  // A user's own max that the output depends on keeps its gradient (the indicator over the tie
  // count); written from y.
  const auto own = analyse("def f(x): return x - x.amax(-1, keepdim=True)");
  ASSERT_TRUE(own.row_program);
  EXPECT_EQ(own.row_program->backward_reductions.size(), 2u);
  EXPECT_NE(own.row_program->grad_input.find("where(y == 0"), std::string::npos) << own.row_program->grad_input;
}

TEST(KernelDevTier2Rows, SavedOutputRewriteIsCheckedNotAssumed) {
  using R = kd::RowStructure;
  auto x = kd::sym("x"), dy = kd::sym("dy");
  // L2 normalise: y = x / sqrt(s). Its backward depends on s (the rewrite with s fixed to 1 would
  // give dy - y sum(dy y), off by the factor 1/sqrt(s)): refused.
  R l2;
  l2.x = "x";
  l2.y = "y";
  l2.dy = "dy";
  l2.forward = {{"s", "sum", kd::pow(x, kd::num(2))}};
  l2.output = kd::div(x, kd::call("sqrt", {kd::sym("s")}));
  l2.backward = {{"gs", "sum", kd::simplify(kd::mul(dy, kd::differentiate(l2.output, "s")))}};
  l2.grad = kd::simplify(kd::add(kd::mul(dy, kd::differentiate(l2.output, "x")), kd::mul(kd::sym("gs"), kd::mul(kd::num(2), x))));
  EXPECT_FALSE(kd::backward_from_output(l2).has_value());
  // y = exp(x - m) / s (softmax): accepted, and free of x, m and s.
  R soft;
  soft.x = "x";
  soft.y = "y";
  soft.dy = "dy";
  soft.forward = {{"m", "shift", x}, {"s", "sum", kd::call("exp", {kd::sub(x, kd::sym("m"))})}};
  soft.output = kd::div(kd::call("exp", {kd::sub(x, kd::sym("m"))}), kd::sym("s"));
  soft.backward = {{"gs", "sum", kd::simplify(kd::mul(dy, kd::differentiate(soft.output, "s")))}};
  soft.grad = kd::simplify(kd::add(kd::mul(dy, kd::differentiate(soft.output, "x")),
                                   kd::mul(kd::sym("gs"), kd::differentiate(soft.forward[1].argument, "x"))));
  const auto rewritten = kd::backward_from_output(soft);
  ASSERT_TRUE(rewritten.has_value());
  for (const auto& name : kd::free_symbols(rewritten->grad)) EXPECT_TRUE(name == "y" || name == "dy" || name == "gs") << name;
  // Exact but ill-conditioned: dx = dy * (x - m - log(s)) is dy * log(y), which a bf16 y would
  // ruin near y = 0 (log of a rounded probability): refused although it is exact in fp64.
  R logged = soft;
  logged.backward = {};
  logged.grad = kd::mul(dy, kd::sub(kd::sub(x, kd::sym("m")), kd::call("log", {kd::sym("s")})));
  EXPECT_FALSE(kd::backward_from_output(logged).has_value());
  // The same with the conditioning in order (dy * exp(x - m) / s = dy * y) is accepted.
  logged.grad = kd::mul(dy, soft.output);
  ASSERT_TRUE(kd::backward_from_output(logged).has_value());
  EXPECT_EQ(kd::to_string(kd::backward_from_output(logged)->grad), "dy * y");
}

TEST(KernelDevTier2Rows, RenderedRowKernelHoldsTheRowInRegisters) {
  const auto softmax = kd::render(analyse("def f(x): return torch.softmax(x, dim=-1)"), kSource / "templates/kernel_dev");
  const std::string cu = file(softmax, "softmax/softmax.cu").content;
  for (const char* expected :
       {"template <typename T, int VEC, int CHUNKS, int PREFETCH, bool WARP = false>\n__global__ void softmax_forward_kernel(Params p)",
        "template <typename T, int VEC, int CHUNKS, int PREFETCH>\n__global__ void softmax_backward_kernel(Params p)",
        "const int chunks = resident_chunks(p.cols, threads, vec, elem, tensors_held);",
        "case 1: return go(std::integral_constant<int, 1>{});", "case 8: return go(std::integral_constant<int, 8>{});",
        "default: return go(std::integral_constant<int, 0>{});", "static const int largest_resident = max_block(resident);",
        "const int chosen_chunks = stages == 1 ? 0 : chunks;",
        "regs[i] = load_vector<T, VEC>(row + c);"})
    EXPECT_NE(cu.find(expected), std::string::npos) << expected;
  // Forward: x is loaded once per row into registers; the two passes (the online max and sum, then
  // the output) read the chunks from there (chunk_values), and neither loads from global memory
  // itself. The online pass combines the row's max, then the sums moved to it.
  const std::string forward = kernel_text(cu, "softmax_forward_kernel");
  ASSERT_FALSE(forward.empty());
  EXPECT_EQ(count(forward, "take_row<T, VEC, kSlots, PREFETCH>("), 1u) << forward;
  EXPECT_EQ(count(forward, "chunk_values<T, VEC, CHUNKS>(xr_, x_row_"), 2u) << forward;
  EXPECT_EQ(count(forward, "load_chunk<"), 0u) << forward;
  EXPECT_EQ(count(forward, "row_all_reduce<WARP, "), 2u);
  EXPECT_EQ(count(forward, "row_all_reduce<WARP, Reduce::kMax>(row_max_, shared_);"), 1u) << forward;
  // Two passes: the block keeps the row (a warp per row would read it from DRAM twice).
  EXPECT_EQ(cu.find("_forward_kernel<T, VEC, 0, 0, true>"), std::string::npos);
  EXPECT_EQ(count(forward, "rescale_("), 2u) << forward;  // per chunk, and to the row's max
  // Backward: dy and the saved y, one load each; no x, no recomputed statistic.
  const std::string backward = kernel_text(cu, "softmax_backward_kernel");
  ASSERT_FALSE(backward.empty());
  EXPECT_EQ(count(backward, "take_row<T, VEC, kSlots, PREFETCH>("), 2u) << backward;
  EXPECT_NE(backward.find("take_row<T, VEC, kSlots, PREFETCH>(p.y, p.y_stride, row_, p.rows, p.cols, yr_, yn_);"), std::string::npos) << backward;
  EXPECT_EQ(backward.find("x_row_"), std::string::npos) << backward;
  EXPECT_EQ(count(backward, "block_all_reduce<"), 1u) << backward;
  EXPECT_EQ(cu.find("{{"), std::string::npos);
  // The C API and the autograd wrapper save y.
  EXPECT_NE(file(softmax, "include/liger_kernels/softmax.h").content.find("liger_softmax_backward(const void* dy, int64_t dy_row_stride, const void* y, int64_t y_row_stride, void* dx"),
            std::string::npos);
  EXPECT_NE(file(softmax, "ops/softmax.py").content.find("ctx.save_for_backward(y, )"), std::string::npos);

  // An op that keeps x: the forward stores its statistic per row and the backward reads it (one
  // fp32 word per row, no pass); x is taken from the registers.
  auto l2_profile = analyse("def f(x): return x / x.norm(dim=-1, keepdim=True)");
  const auto l2 = kd::render(l2_profile, kSource / "templates/kernel_dev");
  const std::string l2_cu = file(l2, "l2_normalize/l2_normalize.cu").content;
  const std::string l2_backward = kernel_text(l2_cu, "l2_normalize_backward_kernel");
  EXPECT_NE(l2_backward.find("const float s = p.stats_in[row_ * kStats + 0];"), std::string::npos) << l2_backward;
  EXPECT_EQ(l2_backward.find("float s;  // sum over the row of x^2"), std::string::npos) << l2_backward;
  EXPECT_NE(kernel_text(l2_cu, "l2_normalize_forward_kernel").find("p.stats_out[row_ * kStats + 0] = s;"), std::string::npos);
  EXPECT_NE(l2_backward.find("take_row<T, VEC, kSlots, PREFETCH>(p.x, p.x_stride, row_, p.rows, p.cols, xr_, xn_);"), std::string::npos);
  EXPECT_EQ(count(l2_backward, "load_chunk<"), 0u);
  EXPECT_NE(file(l2, "include/liger_kernels/l2_normalize.h").content.find("void* y, int64_t y_row_stride, float* stats_, int64_t rows"),
            std::string::npos);
  EXPECT_NE(file(l2, "ops/l2_normalize.py").content.find("ctx.save_for_backward(x, stats, )"), std::string::npos);
  // The reviewer's choice in the profile: only x in backward.uses recomputes the statistic from
  // the registers, and the C API has no statistics.
  l2_profile.row_program->backward_uses = {"x"};
  const auto l2_recomputing = kd::render(l2_profile, kSource / "templates/kernel_dev");
  const std::string recomputing_backward =
      kernel_text(file(l2_recomputing, "l2_normalize/l2_normalize.cu").content, "l2_normalize_backward_kernel");
  EXPECT_NE(recomputing_backward.find("float s;  // sum over the row of x^2"), std::string::npos) << recomputing_backward;
  EXPECT_EQ(file(l2_recomputing, "include/liger_kernels/l2_normalize.h").content.find("stats_"), std::string::npos);
}

TEST(KernelDevTier2Rows, IndependentReductionsShareAPass) {
  // PolyNorm-style: three means of different powers, independent of each other -> one pass and one
  // block combine of three values; the backward's three adjoint sums (their loops read dy and
  // powers of x; the saved means only scale them after the combine) -> one pass of three values,
  // and with the means recomputed (the reviewer's choice) one pass of six.
  const auto poly = analyse(
      "def rn(v, eps):\n    return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps)\n\n"
      "def poly_norm(x, eps=1e-6):\n    return 0.5 * rn(x ** 3, eps) + 0.3 * rn(x ** 2, eps) + 0.2 * rn(x, eps)");
  ASSERT_TRUE(poly.complete());
  const auto code = kd::generate_tier2(poly);
  ASSERT_EQ(code.forward_groups.size(), 1u);
  EXPECT_EQ(code.forward_groups[0].size(), 3u);
  ASSERT_EQ(code.backward_groups.size(), 1u);
  EXPECT_EQ(code.backward_groups[0].size(), 3u);
  const auto poly_recomputing = kd::generate_tier2(recomputing(poly));
  ASSERT_EQ(poly_recomputing.backward_groups.size(), 1u);
  EXPECT_EQ(poly_recomputing.backward_groups[0].size(), 6u);
  const std::string cu = file(kd::render(poly, kSource / "templates/kernel_dev"), "poly_norm/poly_norm.cu").content;
  const std::string forward = kernel_text(cu, "poly_norm_forward_kernel");
  EXPECT_EQ(count(forward, "row_all_reduce<WARP, "), 1u) << forward;
  EXPECT_NE(forward.find("row_all_reduce<WARP, Reduce::kSum, Reduce::kSum, Reduce::kSum>(all_, shared_);"), std::string::npos);
  EXPECT_EQ(count(kernel_text(cu, "poly_norm_backward_kernel"), "block_all_reduce<"), 1u);
  // Layer norm's backward with the statistics recomputed: the mean, then one pass for the variance
  // and both gradient sums. The sum that mixes two row factors, one of them another gradient sum
  // (gvar), is split into the sums of its terms, scaled and added after the combine; the fp64
  // reference keeps it whole. With the mean and variance saved (the default), one pass.
  EXPECT_EQ(kd::generate_tier2(analyse("def f(x): return F.layer_norm(x, x.shape[-1:])")).backward_groups.size(), 1u);
  const auto ln_code = kd::generate_tier2(recomputing(analyse("def f(x): return F.layer_norm(x, x.shape[-1:])")));
  ASSERT_EQ(ln_code.backward_groups.size(), 2u);
  EXPECT_EQ(ln_code.backward_groups[0].size(), 1u);
  std::size_t combined = 0;
  for (const auto& part : ln_code.backward_groups[1]) combined += part.combined.empty() ? 0 : 1;
  EXPECT_EQ(combined, 1u);
  for (const auto& r : ln_code.backward_reductions) EXPECT_TRUE(r.combined.empty()) << r.name;
  const auto ln_profile = recomputing(analyse("def f(x): return F.layer_norm(x, x.shape[-1:])"));
  const std::string& ln_op = ln_profile.op_name;
  const std::string ln_backward = kernel_text(
      file(kd::render(ln_profile, kSource / "templates/kernel_dev"), ln_op + "/" + ln_op + ".cu").content,
      ln_op + "_backward_kernel");
  EXPECT_EQ(count(ln_backward, "block_all_reduce<"), 2u) << ln_backward;
  // Layer norm's variance needs the mean first: two passes. Softmax's sum needs the max first, but
  // it moves with a running max (row_online.cpp): the max folds into the sum's pass.
  const auto ln = kd::generate_tier2(analyse("def f(x): return F.layer_norm(x, (x.shape[-1],))"));
  EXPECT_EQ(ln.forward_groups.size(), 2u);
  const auto softmax = kd::generate_tier2(analyse("def f(x): return torch.softmax(x, dim=-1)"));
  ASSERT_EQ(softmax.forward_groups.size(), 1u);
  ASSERT_EQ(softmax.forward_online.size(), 1u);
  EXPECT_EQ(softmax.forward_online[0].size(), 1u);
}

// A sum whose loop would wait on the pass before it is split by linearity (sum(c * (f + r)) =
// sum(c * f) + r * sum(c)), and each reduction's pass is the earliest its loop allows: a row's
// entropy takes the max, then one pass for the sum of exponentials and the two parts of the
// entropy (3 passes before); KL between rows takes both maxima, then both sums and the two parts
// of the divergence (4 before); their backwards likewise. The fp64 reference keeps each reduction
// whole.
TEST(KernelDevTier2Rows, SumsSplitByLinearityToSkipAPass) {
  const auto entropy = analyse("def entropy_rows(logits):\n    p = logits.softmax(-1)\n"
                               "    return -(p * logits.log_softmax(-1)).sum(-1)");
  ASSERT_TRUE(entropy.complete());
  const auto e = kd::generate_tier2(entropy);
  // The max folds into the pass of the sums (an online pass): one pass, not two.
  ASSERT_EQ(e.forward_groups.size(), 1u);
  ASSERT_EQ(e.forward_online.size(), 1u);
  EXPECT_EQ(e.forward_online[0].size(), 1u);
  ASSERT_EQ(e.forward_groups[0].size(), 3u);
  EXPECT_EQ(e.forward_groups[0][2].combined, e.forward_reductions.back().name);
  for (const auto& r : e.forward_reductions) EXPECT_TRUE(r.combined.empty()) << r.name;
  // The split parts read only the max in their loops; the sum of exponentials only scales them.
  for (std::size_t k = 1; k < 3; ++k) {
    EXPECT_EQ(e.forward_groups[0][k].column_uses.count(e.forward_groups[0][0].name), 0u) << e.forward_groups[0][k].expression;
    EXPECT_EQ(e.forward_groups[0][k].post_uses.count(e.forward_groups[0][0].name), 1u) << e.forward_groups[0][k].expression;
  }
  // Recomputing its statistics, the backward takes the max, then the sum of exponentials and its
  // gradient sum's parts in one pass (3 passes before the split): sum(dy * e * (l - m)) and
  // sum(dy * e) read only m. Reading them from the forward's stats (the default): one pass.
  const auto e_recomputing = kd::generate_tier2(recomputing(entropy));
  ASSERT_EQ(e_recomputing.backward_groups.size(), 2u);
  EXPECT_EQ(e_recomputing.backward_groups[0].size(), 1u);
  EXPECT_EQ(e.backward_groups.size(), 1u);

  const auto kl = analyse("def kl_rows(p, q): return (torch.softmax(q, -1) * (torch.log_softmax(q, -1) - "
                          "torch.log_softmax(p, -1))).sum(-1)");
  ASSERT_TRUE(kl.complete());
  const auto k = kd::generate_tier2(kl);
  // Both maxima fold into the pass of the sums: the divergence's (q - mq) - (p - mp) term moves
  // with mq as exp(-mq) times a shift and with mp by a shift alone.
  ASSERT_EQ(k.forward_groups.size(), 1u);
  EXPECT_EQ(k.forward_online[0].size(), 2u);
  for (const auto& r : k.forward_online[0]) EXPECT_EQ(r.op, "max");
  EXPECT_EQ(k.forward_groups[0].size(), 4u);
  EXPECT_EQ(kd::generate_tier2(recomputing(kl)).backward_groups.size(), 2u);  // 4 before the split
  EXPECT_EQ(k.backward_groups.size(), 1u);  // the maxima and sums read from the forward's stats
  const std::string cu = file(kd::render(kl, kSource / "templates/kernel_dev"), kl.op_name + "/" + kl.op_name + ".cu").content;
  EXPECT_EQ(count(kernel_text(cu, kl.op_name + "_forward_kernel"), "row_all_reduce<WARP, "), 2u);

  // The row values inside an exponential or a power come out first: the entropy written with
  // exp(log_softmax) (exp(l - m - log(s)) = exp(l - m) / s) and a softmax squared
  // ((e / s)^2 = e^2 / s^2) take two passes each way too (recomputing the statistics in the
  // backward; one pass reading them).
  for (const char* source : {"def entropy(logits):\n    logp = F.log_softmax(logits, dim=-1)\n"
                             "    return -(logp.exp() * logp).sum(dim=-1)",
                             "def tsallis(x):\n    p = torch.softmax(x, -1)\n    return 1 - (p ** 2).sum(-1)"}) {
    const auto code = kd::generate_tier2(analyse(source));
    EXPECT_EQ(code.forward_groups.size() + (code.forward_online[0].empty() ? 0 : 1), 2u) << source;
    EXPECT_EQ(code.backward_groups.size(), 1u) << source;
    EXPECT_EQ(kd::generate_tier2(recomputing(analyse(source))).backward_groups.size(), 2u) << source;
  }

  // A pass computes what its reductions share once per element: the entropy's second pass sums
  // exp(l - m) and exp(l - m) * (l - m) with one exponential, and its split part that sums
  // exp(l - m) again (scaled by -log(s) / s after the combine) takes the sum of exponentials' slot.
  {
    const std::string cu = file(kd::render(entropy, kSource / "templates/kernel_dev"), entropy.op_name + "/" +
                                entropy.op_name + ".cu").content;
    const std::string forward = kernel_text(cu, entropy.op_name + "_forward_kernel");
    EXPECT_EQ(count(forward, "M::exp("), 2u) << forward;  // the element's and the online rescale's
    EXPECT_EQ(count(forward, "row_all_reduce<WARP, Reduce::kSum, Reduce::kSum>(all_, shared_)"), 1u) << forward;
    // One pass and one value per row: the forward also has the warp-per-row form.
    EXPECT_NE(cu.find(entropy.op_name + "_forward_kernel<T, VEC, 0, 0, true>"), std::string::npos);
    EXPECT_EQ(count(forward, "float all_[3]"), 0u) << forward;
    const std::string backward = kernel_text(cu, entropy.op_name + "_backward_kernel");
    EXPECT_EQ(count(backward, "float all_[3]"), 0u) << backward;
  }

  // Nothing to gain, nothing split: a sum of squared deviations keeps its loop on the mean (moving
  // the mean out would cancel large sums), and the variance still follows the mean.
  const auto sd = kd::generate_tier2(analyse("def f(x): return torch.std(x, dim=-1, keepdim=True)"));
  ASSERT_EQ(sd.forward_groups.size(), 2u);
  for (const auto& g : sd.forward_groups)
    for (const auto& r : g) EXPECT_TRUE(r.combined.empty() && r.name.find("_t") == std::string::npos) << r.name;
  const auto product = kd::generate_tier2(analyse("def f(x):\n    d = x - x.mean(-1, keepdim=True)\n"
                                                  "    return (d * d).sum(-1, keepdim=True)"));
  for (const auto& g : product.forward_groups)
    for (const auto& r : g) EXPECT_TRUE(r.combined.empty()) << r.name << " = " << r.expression;
  // LayerNorm's gradient sums already share the variance's pass (recomputed): x - mu is not taken
  // apart there.
  const auto ln = kd::generate_tier2(recomputing(analyse("def f(x): return F.layer_norm(x, (x.shape[-1],))")));
  ASSERT_EQ(ln.backward_groups.size(), 2u);
  for (const auto& r : ln.backward_groups[1])
    EXPECT_EQ(r.expression.find("x * "), std::string::npos) << r.name << " = " << r.expression;
}

// The column loops do per-element work only: values that are one per row (a reciprocal of a row
// sum, rsqrt(var + eps), a norm's powers) are computed once per row before the loop, and a row
// factor of a summed product scales the combined sum instead of every term. The fp64 reference
// keeps the formulas as written, so the reference tests check the rewriting.
// A reduction of an earlier reduction's argument shifted by a row value is that reduction,
// shifted: a standardisation written x - mean(x) then .std() takes no mean of x - mu, a softmax of
// x - max(x) no second max. Without an earlier reduction to reuse, nothing changes.
TEST(KernelDevTier2Rows, ReductionsOfAShiftedArgumentReuseTheEarlierOne) {
  std::mt19937 rng(7);
  const auto x = random_row(rng, 37, 3.0);
  {
    const auto p = analyse("def f(x):\n    x = x - x.mean(-1, keepdim=True)\n    return x / (x.std(-1, keepdim=True) + 1e-5)");
    ASSERT_TRUE(p.complete());
    ASSERT_EQ(p.row_program->forward_reductions.size(), 2u);
    EXPECT_EQ(p.row_program->forward_reductions[0].op, "mean");
    EXPECT_EQ(p.row_program->forward_reductions[1].op, "sum");
    double mean = 0, ss = 0;
    for (double v : x) mean += v / x.size();
    for (double v : x) ss += (v - mean) * (v - mean);
    const double sd = std::sqrt(ss / (x.size() - 1));
    const auto y = kd::row_forward_f64(p, x);
    for (std::size_t j = 0; j < x.size(); ++j) EXPECT_NEAR(y[j], (x[j] - mean) / (sd + 1e-5), 1e-12) << j;
  }
  {
    const auto p = analyse("def f(x):\n    return torch.softmax(x - x.amax(-1, keepdim=True), dim=-1)");
    ASSERT_TRUE(p.complete());
    ASSERT_EQ(p.row_program->forward_reductions.size(), 2u);
    EXPECT_EQ(p.row_program->forward_reductions[0].op, "max");
    const double m = *std::max_element(x.begin(), x.end());
    double s = 0;
    for (double v : x) s += std::exp(v - m);
    const auto y = kd::row_forward_f64(p, x);
    for (std::size_t j = 0; j < x.size(); ++j) EXPECT_NEAR(y[j], std::exp(x[j] - m) / s, 1e-14) << j;
  }
  {
    // A max whose gradient counts is never written with a softmax's gradient-free shift of x.
    const auto p = analyse("def f(x):\n    return torch.softmax(x, -1) * (x - 0.5).amax(-1, keepdim=True)");
    ASSERT_TRUE(p.complete());
    std::mt19937 g(3);
    const auto row = random_row(g, 11, 2.0), dy = random_row(g, 11, 1.0);
    const auto dx = kd::row_backward_f64(p, row, dy);
    const double h = 1e-6;
    for (std::size_t j = 0; j < row.size(); ++j) {
      auto plus = row, minus = row;
      plus[j] += h;
      minus[j] -= h;
      const auto yp = kd::row_forward_f64(p, plus), ym = kd::row_forward_f64(p, minus);
      double numeric = 0;
      for (std::size_t k = 0; k < row.size(); ++k) numeric += dy[k] * (yp[k] - ym[k]) / (2 * h);
      EXPECT_NEAR(dx[j], numeric, 1e-5) << j;
    }
  }
  {
    const auto p = analyse("def f(x):\n    return (x - 1.5).sum(-1, keepdim=True) * x");
    ASSERT_TRUE(p.complete());
    ASSERT_EQ(p.row_program->forward_reductions.size(), 1u);
    EXPECT_NE(p.row_program->forward_reductions[0].expression.find("1.5"), std::string::npos);
  }
}

TEST(KernelDevTier2Rows, RowValuesLeaveTheColumnLoop) {
  const auto l2 = kd::generate_tier2(analyse("def f(x): return x / x.norm(dim=-1, keepdim=True)"));
  EXPECT_NE(l2.forward_output.row_cuda.find("y_r0_ = M::div(1.0f, sqrtf(s));"), std::string::npos) << l2.forward_output.row_cuda;
  EXPECT_NE(l2.forward_output.cuda.find("y = (x * y_r0_);"), std::string::npos) << l2.forward_output.cuda;
  ASSERT_EQ(l2.backward_reductions.size(), 1u);
  const auto& g = l2.backward_reductions[0];
  EXPECT_NE(g.cuda.find("v_ = (dy * x);"), std::string::npos) << g.cuda;  // -0.5 / sqrt(s)^3 factored out
  EXPECT_FALSE(g.post_scale.empty());
  EXPECT_NE(g.post_cuda.find(g.post_scale + " = "), std::string::npos) << g.post_cuda;
  EXPECT_NE(g.reference.find("sqrt"), std::string::npos) << g.reference;  // the reference is as written
  // No square root or division is left per element in the backward's gradient pass.
  EXPECT_EQ(l2.grad_input.cuda.find("sqrt"), std::string::npos) << l2.grad_input.cuda;
  EXPECT_EQ(l2.grad_input.cuda.find("M::div"), std::string::npos) << l2.grad_input.cuda;
  // A factor that depends on the column stays inside: max passes are never rescaled.
  const auto softmax = kd::generate_tier2(analyse("def f(x): return torch.softmax(x, dim=-1)"));
  EXPECT_TRUE(softmax.forward_reductions[0].post_scale.empty());
  EXPECT_NE(softmax.forward_reductions[1].cuda.find("M::exp((x - m))"), std::string::npos);
  // Layer norm: rsqrt(var + eps) once per row, not per element.
  const auto ln = kd::generate_tier2(analyse("def f(x): return F.layer_norm(x, (x.shape[-1],))"));
  EXPECT_EQ(ln.forward_output.cuda.find("sqrt"), std::string::npos) << ln.forward_output.cuda;
  EXPECT_NE(ln.forward_output.row_cuda.find("sqrt"), std::string::npos) << ln.forward_output.row_cuda;
  // The rendered kernel declares the row values before the column loop of their pass.
  const std::string cu = file(kd::render(recomputing(analyse("def f(x): return x / x.norm(dim=-1, keepdim=True)")),
                                         kSource / "templates/kernel_dev"),
                              "l2_normalize/l2_normalize.cu").content;
  const std::string backward = kernel_text(cu, "l2_normalize_backward_kernel");
  // s = sum(x^2) recomputed (the reviewer's choice) and gs, which sums dy * x scaled by a power of
  // s after the combine, share one pass and one block combine.
  EXPECT_EQ(count(backward, "block_all_reduce<"), 1u) << backward;
  EXPECT_NE(backward.find("gs = all_[1];"), std::string::npos) << backward;
  EXPECT_LT(backward.find("gs = all_[1];"), backward.find("gs *= " + g.post_scale + ";")) << backward;
  EXPECT_LT(backward.find("float dx_r0_"), backward.rfind("for (int64_t b_ = 0;")) << backward;
}

// An input named like the binding's row statistics is renamed, so the saved statistics never
// shadow it.
TEST(KernelDevTier2Rows, AnInputNamedStatsIsRenamed) {
  const auto p = analyse("def f(stats): return torch.logsumexp(stats, dim=-1)");
  ASSERT_TRUE(p.complete());
  ASSERT_EQ(p.inputs.size(), 1u);
  EXPECT_EQ(p.inputs[0].name, "stats_in");
  const auto files = kd::render(p, kSource / "templates/kernel_dev");
  const std::string py = file(files, "ops/" + p.op_name + ".py").content;
  EXPECT_NE(py.find("ctx.save_for_backward(stats_in, stats, )"), std::string::npos) << py;
}

TEST(KernelDevTier2Rows, BenchmarkCountsEachTensorOnce) {
  const auto softmax = kd::render(analyse("def f(x): return torch.softmax(x, dim=-1)"), kSource / "templates/kernel_dev");
  const std::string bench = file(softmax, "benchmarks/bench_softmax.cpp").content;
  EXPECT_NE(bench.find("const double others = 0;"), std::string::npos) << bench;
  EXPECT_NE(bench.find("const double forward_tensors = 2 + others, backward_tensors = 2 + 1 + 2 * others, full_tensors = 4 + 2 * others;"),
            std::string::npos)
      << bench;
  EXPECT_NE(bench.find("(m == \"forward\" ? forward_tensors : m == \"backward\" ? backward_tensors : full_tensors) * n * e"),
            std::string::npos);
  // The backward timed alone reads y: it is filled, not left as uninitialised memory.
  EXPECT_NE(bench.find("void* y = m == \"backward\" ? ctx.random(count, dtype) : ctx.alloc(bytes);"), std::string::npos);
  EXPECT_NE(bench.find("liger_softmax_backward(dy, cols, y, cols, dx, cols"), std::string::npos);
  // A per-row output: the input once and one value per row (forward), dy per row (backward).
  const auto lse = kd::render(analyse("def f(x): return torch.logsumexp(x, dim=-1)"), kSource / "templates/kernel_dev");
  const std::string lse_bench = file(lse, "benchmarks/bench_logsumexp.cpp").content;
  EXPECT_NE(lse_bench.find("per_row = static_cast<double>(rows), others = 0;"), std::string::npos) << lse_bench;
  EXPECT_NE(lse_bench.find("(m == \"forward\" ? (1 + others) * n + per_row\n                                : m == \"backward\" ? (2 + 2 * others) * n + per_row : (2 + 2 * others) * n + 2 * per_row) * e"),
            std::string::npos) << lse_bench;
  EXPECT_EQ(lse_bench.find("forward_tensors"), std::string::npos);
  EXPECT_NE(lse_bench.find("liger_logsumexp_forward(x, cols, y, 1, stats, rows, cols"), std::string::npos);
  EXPECT_NE(lse_bench.find("liger_logsumexp_backward(dy, 1, x, cols, stats, dx, cols"), std::string::npos);
  // ... and the row statistics it saves (m and s, fp32): written forward, read backward.
  EXPECT_NE(lse_bench.find("const double stats_bytes = static_cast<double>(rows) * 2 * 4;"), std::string::npos) << lse_bench;
  EXPECT_NE(lse_bench.find("c.min_bytes += m == \"full\" ? 2 * stats_bytes : stats_bytes;"), std::string::npos);
  // The kernel stores one value per row and reads one upstream value per row.
  const std::string kernel = file(lse, "kernels/src/logsumexp/logsumexp.cu").content;
  EXPECT_NE(kernel.find("out_row_[0] = from_float<T>(y);"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find("const float dy = to_float(dy_row_[0]);"), std::string::npos);
  EXPECT_EQ(kernel.find("dyr_"), std::string::npos);
  const std::string op = file(lse, "kernels/python/liger_kernels/ops/logsumexp.py").content;
  EXPECT_NE(op.find("return tuple(x.shape[:-1])\n"), std::string::npos) << op;
}

// The resident rows must stay in registers: ptxas reports no stack frame and no spills for any
// instantiation (a register array indexed by a non-constant lands in local memory, and the kernel
// would run at a fraction of the bandwidth while still passing every test).
TEST(KernelDevTier2Rows, RenderedKernelsCompileWithoutLocalMemory) {
  std::string nvcc;
  for (const std::string candidate : {"nvcc", "/usr/local/cuda/bin/nvcc"}) {
    if (candidate.find('/') != std::string::npos ? fs::exists(candidate)
                                                 : std::system(("command -v " + candidate + " >/dev/null 2>&1").c_str()) == 0) {
      nvcc = candidate;
      break;
    }
  }
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (PATH, /usr/local/cuda/bin): the rendered kernels were not compiled";
  for (const std::string source : {"def f(x): return F.log_softmax(x, dim=-1)",
                                   "def f(x): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)",
                                   // A per-row output whose backward has a sum pass over dy (one per row) and x.
                                   "def row_spread(x): return x.var(-1, keepdim=True) + x.amax(-1, keepdim=True)"}) {
    SCOPED_TRACE(source);
    const auto p = analyse(source);
    const fs::path root = fs::temp_directory_path() / ("liger_tier2_rows_" + std::to_string(::getpid()) + "_" + p.op_name);
    fs::remove_all(root);
    for (const auto& f : kd::render(p, kSource / "templates/kernel_dev")) {
      if (f.insert) continue;
      fs::create_directories((root / f.path).parent_path());
      std::ofstream(root / f.path) << f.content;
    }
    std::string out;
    const int status = liger::testing::family::compile_rendered_kernel(nvcc, root, p.op_name, out);
    ASSERT_EQ(status, 0) << out;
    // 2 kernels x (3 dtypes: 4 + 4 + 3 vector widths) x 5 chunk counts, and the prefetching
    // variants: 2 kernels x 3 dtypes x the chunk counts 1 and 2 at the widest vector.
    EXPECT_EQ(count(out, "Compiling entry function"), 122u) << out;
    EXPECT_EQ(count(out, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"), 122u) << out;
    fs::remove_all(root);
  }
}
