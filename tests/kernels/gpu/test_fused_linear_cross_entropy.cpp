// GPU tests of liger_fused_linear_cross_entropy_forward/backward against the fp64 reference
// (kernels/reference/fused_linear_cross_entropy_ref.h) on small shapes, several chunks each
// (including a partial last chunk), every dtype, the cross-entropy options, two seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fused_linear_cross_entropy_ref.h"
#include "kernel_test_util.h"
#include "liger_kernels/fused_linear_cross_entropy.h"

namespace {

using namespace liger::test;

class DeviceTargets {
 public:
  explicit DeviceTargets(const std::vector<int64_t>& values) {
    if (cudaMalloc(&data_, std::max<std::size_t>(values.size(), 1) * sizeof(int64_t)) != cudaSuccess) data_ = nullptr;
    if (data_ && !values.empty()) cudaMemcpy(data_, values.data(), values.size() * sizeof(int64_t), cudaMemcpyHostToDevice);
  }
  ~DeviceTargets() {
    if (data_) cudaFree(data_);
  }
  const int64_t* data() const { return data_; }

 private:
  int64_t* data_ = nullptr;
};

class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t bytes) {
    if (cudaMalloc(&data_, std::max<std::size_t>(bytes, 1)) != cudaSuccess) data_ = nullptr;
  }
  ~DeviceBytes() {
    if (data_) cudaFree(data_);
  }
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

struct Shape {
  int64_t tokens, hidden, vocab, chunk_rows;
};

enum class Case { kPlain, kBias, kAllOptions, kIgnoredSum, kAllIgnored, kNoneRowScale, kNativeGradWeight, kLossOnly };

const char* case_name(Case c) {
  switch (c) {
    case Case::kPlain: return "plain";
    case Case::kBias: return "bias";
    case Case::kAllOptions: return "all_options";
    case Case::kIgnoredSum: return "ignored_sum";
    case Case::kAllIgnored: return "all_ignored";
    case Case::kNoneRowScale: return "none_row_scale";
    case Case::kNativeGradWeight: return "native_grad_weight";
    case Case::kLossOnly: return "loss_only";
  }
  return "?";
}

struct Param {
  liger_dtype dtype;
  Shape shape;
  Case c;
};

double round_fp32(double v) { return quantize(v, LIGER_DTYPE_FLOAT32); }
double round_fp16(double v) { return quantize(v, LIGER_DTYPE_FLOAT16); }
double round_bf16(double v) { return quantize(v, LIGER_DTYPE_BFLOAT16); }

// The kernel stores the logits chunk and dlogits in the input dtype (as Liger and torch do) and
// contracts dlogits over K = vocab (grad_input) or K = tokens (grad_weight) with fp32
// accumulation: for 16-bit dtypes, each term carries one storage rounding (2^-9 / 2^-12
// relative) and the terms of a softmax gradient partly cancel, so the result's relative error is
// larger than one rounding: 2x the table for 16-bit; for fp32 the K-term fp32 dot products
// (K up to 4099) justify 10x the fp32 row. atol is scaled by the reference's peak magnitude
// (gradients are O(1/tokens)).
Tolerance grad_tolerance(liger_dtype dtype, const std::vector<double>& ref, double extra = 1.0,
                         const char* extra_reason = nullptr) {
  Tolerance t = dtype == LIGER_DTYPE_FLOAT32
                    ? scaled(base_tolerance(dtype), 10.0, "fp32 GEMMs: K-term fp32 dot products, K up to 4099")
                    : scaled(base_tolerance(dtype), 2.0,
                             "dlogits stored once in the 16-bit dtype, then contracted with fp32 accumulation; "
                             "cancelling softmax-gradient terms amplify the relative error");
  if (extra != 1.0) t = scaled(t, extra, extra_reason);
  double peak = 0.0;
  for (double v : ref) peak = std::max(peak, std::fabs(v));
  t.atol *= std::max(peak, 1e-30);
  return t;
}

// The loss is computed from logits that both sides round to the dtype; a rounding decision can
// differ where the fp32-accumulated GEMM and the fp64 product straddle a rounding midpoint, so
// the dtype's row of the table applies (fp32: 10x, for the fp32 GEMM).
Tolerance loss_tolerance(liger_dtype dtype) {
  return dtype == LIGER_DTYPE_FLOAT32 ? scaled(base_tolerance(dtype), 10.0, "fp32 GEMM + fp32 loss")
                                      : base_tolerance(dtype);
}

class FusedLinearCrossEntropyTest : public ::testing::TestWithParam<Param> {};

TEST_P(FusedLinearCrossEntropyTest, ForwardBackwardMatchReference) {
  LIGER_REQUIRE_GPU();
  const Param p = GetParam();
  const int64_t T = p.shape.tokens, H = p.shape.hidden, V = p.shape.vocab;
  for (uint64_t seed : {21u, 22u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 gen(seed * 31 + static_cast<uint64_t>(V));
    liger_cross_entropy_options o;
    liger_cross_entropy_options_init(&o);
    liger::ref::CrossEntropyOptions ro;
    bool with_bias = false, want_grads = true;
    liger_dtype gw_dtype = LIGER_DTYPE_FLOAT32, gb_dtype = LIGER_DTYPE_FLOAT32;
    std::vector<double> weights_v, row_scale;
    switch (p.c) {
      case Case::kBias: with_bias = true; gb_dtype = p.dtype; break;
      case Case::kAllOptions:
        with_bias = true;
        o.label_smoothing = 0.1f;
        o.lse_square_scale = 1e-3f;
        o.softcap = 5.0f;
        weights_v = random_values(static_cast<std::size_t>(V), LIGER_DTYPE_FLOAT32, seed + 9, 0.3, 2.0);
        break;
      case Case::kIgnoredSum: o.reduction = LIGER_REDUCTION_SUM; break;
      case Case::kNoneRowScale:
        o.reduction = LIGER_REDUCTION_NONE;
        row_scale = random_values(static_cast<std::size_t>(T), LIGER_DTYPE_FLOAT32, seed + 3, -2.0, 2.0);
        break;
      case Case::kNativeGradWeight: gw_dtype = p.dtype; break;
      case Case::kLossOnly: want_grads = false; break;
      default: break;
    }
    ro.label_smoothing = o.label_smoothing;
    ro.lse_square_scale = o.lse_square_scale;
    ro.softcap = o.softcap;
    ro.reduction = static_cast<liger::ref::Reduction>(o.reduction);
    ro.class_weight = weights_v;

    auto x = random_normal(static_cast<std::size_t>(T * H), p.dtype, seed, 0.0, 1.0);
    auto w = random_normal(static_cast<std::size_t>(V * H), p.dtype, seed + 1, 0.0, 2.0 / std::sqrt(double(H)));
    std::vector<double> b;
    if (with_bias) b = random_normal(static_cast<std::size_t>(V), p.dtype, seed + 2, 0.0, 0.5);
    std::uniform_int_distribution<int64_t> td(0, V - 1);
    std::vector<int64_t> y(static_cast<std::size_t>(T));
    for (int64_t r = 0; r < T; ++r) {
      y[r] = td(gen);
      if ((p.c == Case::kIgnoredSum || p.c == Case::kPlain) && r % 5 == 2) y[r] = -100;
      if (p.c == Case::kAllIgnored) y[r] = -100;
    }

    DeviceTensor x_dev(x, p.dtype), w_dev(w, p.dtype), b_dev(with_bias ? b : std::vector<double>{0.0}, p.dtype);
    DeviceTensor cw_dev(weights_v.empty() ? std::vector<double>{0.0} : weights_v, LIGER_DTYPE_FLOAT32);
    if (!weights_v.empty()) o.class_weight = cw_dev.as<float>();
    DeviceTensor rs_dev(row_scale.empty() ? std::vector<double>{0.0} : row_scale, LIGER_DTYPE_FLOAT32);
    DeviceTargets y_dev(y);
    const bool none = o.reduction == LIGER_REDUCTION_NONE;
    DeviceTensor loss_dev(none ? T : 1, LIGER_DTYPE_FLOAT32), z_dev(none ? T : 1, LIGER_DTYPE_FLOAT32);
    DeviceTensor gx_dev(static_cast<std::size_t>(T * H), p.dtype), gw_dev(static_cast<std::size_t>(V * H), gw_dtype),
        gb_dev(static_cast<std::size_t>(V), gb_dtype);
    liger_tunables tn{};
    tn.chunk_rows = static_cast<int32_t>(p.shape.chunk_rows);
    size_t ws_bytes = 0;
    LIGER_ASSERT_OK(liger_fused_linear_cross_entropy_workspace_size(T, H, V, p.dtype, &o, &tn, &ws_bytes));
    DeviceBytes ws(ws_bytes);
    ASSERT_TRUE(ws.data() != nullptr);
    cudaMemset(ws.data(), 0xff, ws_bytes);
    loss_dev.poison();
    z_dev.poison();
    gx_dev.poison();
    gw_dev.poison();
    gb_dev.poison();
    LIGER_ASSERT_OK(liger_fused_linear_cross_entropy_forward(
        x_dev.data(), H, w_dev.data(), H, with_bias ? b_dev.data() : nullptr, y_dev.data(),
        row_scale.empty() ? nullptr : rs_dev.as<float>(), loss_dev.as<float>(), z_dev.as<float>(),
        want_grads ? gx_dev.data() : nullptr, H, want_grads ? gw_dev.data() : nullptr, gw_dtype,
        want_grads && with_bias ? gb_dev.data() : nullptr, gb_dtype, T, H, V, p.dtype, &o, ws.data(), ws_bytes, &tn,
        nullptr));
    LIGER_ASSERT_CUDA(cudaDeviceSynchronize());

    double (*rounder)(double) = p.dtype == LIGER_DTYPE_FLOAT32   ? round_fp32
                                : p.dtype == LIGER_DTYPE_FLOAT16 ? round_fp16
                                                                 : round_bf16;
    auto ref = liger::ref::fused_linear_cross_entropy_forward(x, w, b, y, T, H, V, ro, row_scale, rounder);
    EXPECT_TRUE(all_close("loss", loss_dev.download(), ref.loss, loss_tolerance(p.dtype)));
    EXPECT_TRUE(all_close("z_loss", z_dev.download(), ref.z_loss, loss_tolerance(p.dtype)));
    // Inputs unmodified.
    ASSERT_EQ(x_dev.download(), x);
    ASSERT_EQ(w_dev.download(), w);
    if (!want_grads) {
      for (double v : gx_dev.download()) ASSERT_TRUE(std::isnan(v)) << "loss-only call wrote grad_input";
      continue;
    }
    if (p.c == Case::kAllIgnored) {
      for (double v : gx_dev.download()) ASSERT_EQ(v, 0.0);
      for (double v : gw_dev.download()) ASSERT_EQ(v, 0.0);
      ASSERT_EQ(loss_dev.download()[0], 0.0);
      continue;
    }
    EXPECT_TRUE(all_close("grad_input", gx_dev.download(), ref.grad_input, grad_tolerance(p.dtype, ref.grad_input)));
    const bool native = gw_dtype != LIGER_DTYPE_FLOAT32;
    const int64_t chunks = (T + p.shape.chunk_rows - 1) / p.shape.chunk_rows;
    EXPECT_TRUE(all_close("grad_weight", gw_dev.download(), ref.grad_weight,
                          grad_tolerance(p.dtype, ref.grad_weight, native ? std::sqrt(double(chunks)) : 1.0,
                                         "16-bit weight gradient accumulated across chunks: one storage rounding "
                                         "per chunk, random-walk growth sqrt(chunks)")));
    if (with_bias) {
      EXPECT_TRUE(all_close("grad_bias", gb_dev.download(), ref.grad_bias, grad_tolerance(p.dtype, ref.grad_bias)));
    }

    // Backward with a scalar upstream gradient (mean/sum only).
    if (!none) {
      DeviceTensor go(std::vector<double>{-0.75}, LIGER_DTYPE_FLOAT32);
      LIGER_ASSERT_OK(liger_fused_linear_cross_entropy_backward(go.as<float>(), gx_dev.data(), H, T, H, gw_dev.data(),
                                                                gw_dtype, V, with_bias ? gb_dev.data() : nullptr,
                                                                gb_dtype, p.dtype, nullptr));
      LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
      auto scale = [](std::vector<double> v) {
        for (auto& e : v) e *= -0.75;
        return v;
      };
      EXPECT_TRUE(all_close("grad_input after backward", gx_dev.download(), scale(ref.grad_input),
                            grad_tolerance(p.dtype, ref.grad_input)));
      EXPECT_TRUE(all_close("grad_weight after backward", gw_dev.download(), scale(ref.grad_weight),
                            grad_tolerance(p.dtype, ref.grad_weight, native ? std::sqrt(double(chunks)) : 1.0,
                                           "16-bit weight gradient accumulated across chunks")));
    }
  }
}

std::vector<Param> all_params() {
  std::vector<Param> out;
  const Shape shapes[] = {{37, 64, 500, 16}, {130, 96, 1000, 48}, {257, 128, 4099, 100}};
  const Case cases[] = {Case::kPlain,      Case::kBias,         Case::kAllOptions,       Case::kIgnoredSum,
                        Case::kAllIgnored, Case::kNoneRowScale, Case::kNativeGradWeight, Case::kLossOnly};
  for (liger_dtype d : {LIGER_DTYPE_FLOAT32, LIGER_DTYPE_FLOAT16, LIGER_DTYPE_BFLOAT16})
    for (const Shape& s : shapes)
      for (Case c : cases) out.push_back({d, s, c});
  return out;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const Shape& s = info.param.shape;
  return std::string(dtype_label(info.param.dtype)) + "_T" + std::to_string(s.tokens) + "_H" + std::to_string(s.hidden) +
         "_V" + std::to_string(s.vocab) + "_C" + std::to_string(s.chunk_rows) + "_" + case_name(info.param.c);
}

INSTANTIATE_TEST_SUITE_P(All, FusedLinearCrossEntropyTest, ::testing::ValuesIn(all_params()), param_name);

// The default chunking (one chunk for these sizes) agrees with an explicit small chunking.
TEST(FusedLinearCrossEntropyChecks, DefaultChunkingMatchesSmallChunks) {
  LIGER_REQUIRE_GPU();
  const int64_t T = 100, H = 64, V = 333;
  auto x = random_normal(static_cast<std::size_t>(T * H), LIGER_DTYPE_FLOAT32, 1);
  auto w = random_normal(static_cast<std::size_t>(V * H), LIGER_DTYPE_FLOAT32, 2, 0.0, 0.25);
  std::vector<int64_t> y(static_cast<std::size_t>(T));
  for (int64_t r = 0; r < T; ++r) y[r] = (r * 37) % V;
  DeviceTensor xd(x, LIGER_DTYPE_FLOAT32), wd(w, LIGER_DTYPE_FLOAT32), loss(1, LIGER_DTYPE_FLOAT32);
  DeviceTensor g1(static_cast<std::size_t>(T * H), LIGER_DTYPE_FLOAT32), g2(static_cast<std::size_t>(T * H), LIGER_DTYPE_FLOAT32);
  DeviceTargets yd(y);
  std::vector<double> results[2];
  for (int k = 0; k < 2; ++k) {
    liger_tunables tn{};
    tn.chunk_rows = k == 0 ? 0 : 7;
    size_t ws_bytes = 0;
    LIGER_ASSERT_OK(liger_fused_linear_cross_entropy_workspace_size(T, H, V, LIGER_DTYPE_FLOAT32, nullptr, &tn, &ws_bytes));
    DeviceBytes ws(ws_bytes);
    DeviceTensor& g = k == 0 ? g1 : g2;
    g.poison();
    LIGER_ASSERT_OK(liger_fused_linear_cross_entropy_forward(xd.data(), H, wd.data(), H, nullptr, yd.data(), nullptr,
                                                             loss.as<float>(), nullptr, g.data(), H, nullptr,
                                                             LIGER_DTYPE_FLOAT32, nullptr, LIGER_DTYPE_FLOAT32, T, H, V,
                                                             LIGER_DTYPE_FLOAT32, nullptr, ws.data(), ws_bytes, &tn, nullptr));
    LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
    results[k] = g.download();
  }
  auto ref = liger::ref::fused_linear_cross_entropy_forward(x, w, {}, y, T, H, V, {});
  EXPECT_TRUE(all_close("default chunking", results[0], ref.grad_input, grad_tolerance(LIGER_DTYPE_FLOAT32, ref.grad_input)));
  EXPECT_TRUE(all_close("chunk 7", results[1], ref.grad_input, grad_tolerance(LIGER_DTYPE_FLOAT32, ref.grad_input)));
  std::vector<double> zeros(ref.grad_input.size(), 0.0);
  EXPECT_FALSE(all_close("zeros must fail", zeros, ref.grad_input, grad_tolerance(LIGER_DTYPE_FLOAT32, ref.grad_input)));
}

TEST(FusedLinearCrossEntropyChecks, InvalidArgumentsReturnStatus) {
  LIGER_REQUIRE_GPU();
  const int64_t T = 4, H = 8, V = 16;
  DeviceTensor x(static_cast<std::size_t>(T * H), LIGER_DTYPE_BFLOAT16), w(static_cast<std::size_t>(V * H), LIGER_DTYPE_BFLOAT16);
  DeviceTensor loss(1, LIGER_DTYPE_FLOAT32), gb(static_cast<std::size_t>(V), LIGER_DTYPE_FLOAT32);
  DeviceTargets y({1, 2, 3, 4});
  size_t ws_bytes = 0;
  LIGER_ASSERT_OK(liger_fused_linear_cross_entropy_workspace_size(T, H, V, LIGER_DTYPE_BFLOAT16, nullptr, nullptr, &ws_bytes));
  DeviceBytes ws(ws_bytes);
  auto call = [&](const void* xp, const void* wp, void* gbp, liger_dtype gw_dtype, size_t wsb, const liger_tunables* tn,
                  liger_dtype d = LIGER_DTYPE_BFLOAT16) {
    return liger_fused_linear_cross_entropy_forward(xp, H, wp, H, nullptr, y.data(), nullptr, loss.as<float>(), nullptr,
                                                    nullptr, H, nullptr, gw_dtype, gbp, LIGER_DTYPE_FLOAT32, T, H, V, d,
                                                    nullptr, ws.data(), wsb, tn, nullptr);
  };
  EXPECT_EQ(call(nullptr, w.data(), nullptr, LIGER_DTYPE_BFLOAT16, ws_bytes, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(call(x.data(), nullptr, nullptr, LIGER_DTYPE_BFLOAT16, ws_bytes, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(call(x.data(), w.data(), gb.data(), LIGER_DTYPE_BFLOAT16, ws_bytes, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(call(x.data(), w.data(), nullptr, LIGER_DTYPE_BFLOAT16, ws_bytes - 1, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(call(x.data(), w.data(), nullptr, LIGER_DTYPE_BFLOAT16, ws_bytes, nullptr, static_cast<liger_dtype>(5)),
            LIGER_STATUS_UNSUPPORTED_DTYPE);
  liger_tunables tn{};
  tn.chunk_rows = -4;
  EXPECT_EQ(call(x.data(), w.data(), nullptr, LIGER_DTYPE_BFLOAT16, ws_bytes, &tn), LIGER_STATUS_INVALID_ARGUMENT);
  tn = {};
  tn.threads_per_block = 48;
  EXPECT_EQ(call(x.data(), w.data(), nullptr, LIGER_DTYPE_BFLOAT16, ws_bytes, &tn), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(liger_fused_linear_cross_entropy_backward(nullptr, x.data(), H, T, H, nullptr, LIGER_DTYPE_BFLOAT16, V, nullptr,
                                                      LIGER_DTYPE_FLOAT32, LIGER_DTYPE_BFLOAT16, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  liger_tunables d{};
  EXPECT_EQ(liger_fused_linear_cross_entropy_default_tunables(90, 8192, 128256, LIGER_DTYPE_BFLOAT16, &d), LIGER_STATUS_SUCCESS);
  EXPECT_GT(d.chunk_rows, 0);
}

}  // namespace
