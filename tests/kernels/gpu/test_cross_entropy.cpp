// GPU tests of liger_cross_entropy_forward/backward against the fp64 reference
// (kernels/reference/cross_entropy_ref.h): dtype x vocab x options, two seeds each, outputs
// poisoned with NaN before every launch, inputs and row padding checked unmodified.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cross_entropy_ref.h"
#include "kernel_test_util.h"
#include "liger_kernels/cross_entropy.h"

namespace {

using namespace liger::test;

// int64 device buffer (DeviceTensor only knows the floating dtypes).
class DeviceTargets {
 public:
  explicit DeviceTargets(const std::vector<int64_t>& values) : count_(values.size()) {
    if (cudaMalloc(&data_, std::max<std::size_t>(count_, 1) * sizeof(int64_t)) != cudaSuccess) data_ = nullptr;
    if (data_ && count_) cudaMemcpy(data_, values.data(), count_ * sizeof(int64_t), cudaMemcpyHostToDevice);
  }
  ~DeviceTargets() {
    if (data_) cudaFree(data_);
  }
  const int64_t* data() const { return data_; }

 private:
  int64_t* data_ = nullptr;
  std::size_t count_;
};

class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t bytes) {
    if (cudaMalloc(&data_, std::max<std::size_t>(bytes, 1)) != cudaSuccess) data_ = nullptr;
    bytes_ = bytes;
  }
  ~DeviceBytes() {
    if (data_) cudaFree(data_);
  }
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

enum class Case {
  kPlain,          // mean, separate gradient buffer
  kInPlace,        // mean, gradient written over the logits
  kIgnoredSum,     // a third of the rows ignored, sum
  kAllIgnored,     // every row ignored: loss 0, gradient 0, no NaN
  kExtreme,        // logits of +-1e4 mixed in
  kSoftcap,        // soft-capping 30 (fp32 logits scaled up so tanh bends)
  kSmoothing,      // label smoothing 0.1
  kZLoss,          // lse_square_scale 1e-4 with z_loss output
  kWeights,        // class weights + smoothing, mean divides by the target weights
  kNone,           // reduction none, per-row grad_output in backward, z output per row
  kStrided,        // row stride vocab + 5 for logits and gradient (unaligned rows), ignore_index 0
  kMixedStride,    // logits stride vocab + 3, gradient stride vocab: scalar path
};

const char* case_name(Case c) {
  switch (c) {
    case Case::kPlain: return "plain";
    case Case::kInPlace: return "inplace";
    case Case::kIgnoredSum: return "ignored_sum";
    case Case::kAllIgnored: return "all_ignored";
    case Case::kExtreme: return "extreme";
    case Case::kSoftcap: return "softcap";
    case Case::kSmoothing: return "smoothing";
    case Case::kZLoss: return "zloss";
    case Case::kWeights: return "weights";
    case Case::kNone: return "none";
    case Case::kStrided: return "strided";
    case Case::kMixedStride: return "mixed_stride";
  }
  return "?";
}

struct Param {
  liger_dtype dtype;
  int64_t vocab;
  Case c;
};

int64_t rows_for(int64_t vocab) {
  if (vocab <= 64) return 67;
  if (vocab <= 2048) return 33;
  if (vocab <= 40000) return 9;
  if (vocab <= 140000) return 4;
  return 3;
}

// The loss is fp32 for every dtype, computed with ex2.approx (2^-22 relative) and fp32 sums of
// up to 262144 terms (error ~ sqrt(n) * 2^-24 ~ 3e-5 relative in the worst case): the fp32 row of
// the base table times 10.
Tolerance loss_tolerance() {
  return scaled(base_tolerance(LIGER_DTYPE_FLOAT32), 10.0,
                "fp32 loss: ex2.approx/logf and fp32 sums over up to 262144 logits (~sqrt(n)*2^-24)");
}

// Gradients are O(1/(rows*vocab)) except at the target: an absolute bound of the table's atol
// would accept anything, so atol is scaled by the largest reference magnitude (rtol and the
// relative-L2 bound stay as in the table).
Tolerance grad_tolerance(liger_dtype dtype, const std::vector<double>& ref) {
  Tolerance t = base_tolerance(dtype);
  double peak = 0.0;
  for (double v : ref) peak = std::max(peak, std::fabs(v));
  t.atol *= std::max(peak, 1e-30);
  return t;
}

class CrossEntropyTest : public ::testing::TestWithParam<Param> {};

TEST_P(CrossEntropyTest, ForwardBackwardMatchReference) {
  LIGER_REQUIRE_GPU();
  const Param p = GetParam();
  const int64_t V = p.vocab, R = rows_for(V);
  for (uint64_t seed : {11u, 12u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 gen(seed * 7919 + static_cast<uint64_t>(V));
    liger_cross_entropy_options o;
    liger_cross_entropy_options_init(&o);
    liger::ref::CrossEntropyOptions ro;
    int64_t lstride = V, gstride = V;
    bool in_place = false;
    double logit_scale = 2.0;
    switch (p.c) {
      case Case::kInPlace: in_place = true; break;
      case Case::kIgnoredSum: o.reduction = LIGER_REDUCTION_SUM; break;
      case Case::kSoftcap: o.softcap = 30.0f; logit_scale = 25.0; break;
      case Case::kSmoothing: o.label_smoothing = 0.1f; break;
      case Case::kZLoss: o.lse_square_scale = 1e-4f; break;
      case Case::kWeights: o.label_smoothing = 0.05f; break;
      case Case::kNone: o.reduction = LIGER_REDUCTION_NONE; o.lse_square_scale = 1e-3f; break;
      case Case::kStrided: lstride = gstride = V + 5; o.ignore_index = 0; break;
      case Case::kMixedStride: lstride = V + 3; gstride = V; break;
      default: break;
    }
    ro.ignore_index = o.ignore_index;
    ro.label_smoothing = o.label_smoothing;
    ro.lse_square_scale = o.lse_square_scale;
    ro.softcap = o.softcap;
    ro.reduction = static_cast<liger::ref::Reduction>(o.reduction);

    // Logits (quantised to the dtype), targets, optional class weights.
    std::vector<double> logits = random_normal(static_cast<std::size_t>(R * V), p.dtype, seed, 0.0, logit_scale);
    if (p.c == Case::kExtreme) {
      std::uniform_int_distribution<int64_t> pick(0, R * V - 1);
      for (int k = 0; k < 3 * R; ++k) logits[pick(gen)] = quantize(k % 2 ? 1e4 : -1e4, p.dtype);
    }
    std::uniform_int_distribution<int64_t> target_dist(0, V - 1);
    std::vector<int64_t> targets(static_cast<std::size_t>(R));
    for (int64_t r = 0; r < R; ++r) {
      targets[r] = target_dist(gen);
      if (p.c == Case::kIgnoredSum && r % 3 == 1) targets[r] = o.ignore_index;
      if (p.c == Case::kAllIgnored) targets[r] = o.ignore_index;
      if ((p.c == Case::kPlain || p.c == Case::kStrided) && r == R - 1) targets[r] = o.ignore_index;
      if (p.c == Case::kExtreme && r == 0) logits[static_cast<std::size_t>(r * V + targets[r])] = quantize(1e4, p.dtype);
    }
    std::vector<double> weights;
    if (p.c == Case::kWeights) {
      weights = random_values(static_cast<std::size_t>(V), LIGER_DTYPE_FLOAT32, seed + 100, 0.25, 2.0);
      ro.class_weight = weights;
    }
    DeviceTensor weight_dev(weights.empty() ? std::vector<double>{0.0} : weights, LIGER_DTYPE_FLOAT32);
    if (!weights.empty()) o.class_weight = weight_dev.as<float>();

    // Strided device logits; the padding holds 7.0 and must survive.
    std::vector<double> padded(static_cast<std::size_t>(R * lstride), 7.0);
    for (int64_t r = 0; r < R; ++r)
      std::copy_n(&logits[r * V], V, &padded[r * lstride]);
    DeviceTensor logits_dev(padded, p.dtype);
    DeviceTensor grad_dev(in_place ? 1 : static_cast<std::size_t>(R * gstride), p.dtype);
    DeviceTargets targets_dev(targets);
    const bool none = o.reduction == LIGER_REDUCTION_NONE;
    const bool want_z = p.c == Case::kZLoss || p.c == Case::kNone;
    DeviceTensor loss_dev(none ? R : 1, LIGER_DTYPE_FLOAT32), z_dev(none ? R : 1, LIGER_DTYPE_FLOAT32);
    size_t ws_bytes = 0;
    LIGER_ASSERT_OK(liger_cross_entropy_workspace_size(R, V, &o, &ws_bytes));
    DeviceBytes ws(ws_bytes);
    ASSERT_TRUE(logits_dev.allocated() && grad_dev.allocated() && ws.data());
    grad_dev.poison();
    loss_dev.poison();
    z_dev.poison();
    cudaMemset(ws.data(), 0xff, ws_bytes);
    void* grad_ptr = in_place ? logits_dev.data() : grad_dev.data();
    LIGER_ASSERT_OK(liger_cross_entropy_forward(logits_dev.data(), lstride, targets_dev.data(), grad_ptr,
                                                in_place ? lstride : gstride, loss_dev.as<float>(),
                                                want_z ? z_dev.as<float>() : nullptr, R, V, p.dtype, &o, ws.data(),
                                                ws_bytes, nullptr, nullptr));
    LIGER_ASSERT_CUDA(cudaDeviceSynchronize());

    auto ref = liger::ref::cross_entropy_forward(logits, targets, R, V, ro);
    EXPECT_TRUE(all_close("loss", loss_dev.download(), ref.loss, loss_tolerance()));
    if (want_z) EXPECT_TRUE(all_close("z_loss", z_dev.download(), ref.z_loss, loss_tolerance()));
    for (double v : loss_dev.download()) ASSERT_TRUE(std::isfinite(v)) << "loss not finite";

    // The gradient (dense, without the padding); padding of the in-place buffer untouched.
    std::vector<double> got_padded = in_place ? logits_dev.download() : grad_dev.download();
    const int64_t got_stride = in_place ? lstride : gstride;
    std::vector<double> grad(static_cast<std::size_t>(R * V));
    for (int64_t r = 0; r < R; ++r) {
      std::copy_n(&got_padded[r * got_stride], V, &grad[r * V]);
      for (int64_t i = V; i < got_stride && in_place; ++i) ASSERT_EQ(got_padded[r * got_stride + i], 7.0);
    }
    const Tolerance gt = grad_tolerance(p.dtype, ref.grad);
    if (p.c == Case::kAllIgnored) {
      for (double v : grad) ASSERT_EQ(v, 0.0);
      ASSERT_EQ(loss_dev.download()[0], 0.0);
    } else {
      EXPECT_TRUE(all_close("grad_logits", grad, ref.grad, gt));
    }
    if (!in_place) {
      std::vector<double> after = logits_dev.download();
      ASSERT_EQ(after, decode(encode(padded, p.dtype), p.dtype)) << "logits modified by an out-of-place forward";
    }

    // Backward: scale by grad_output (per row for none).
    std::vector<double> go = none ? random_values(static_cast<std::size_t>(R), LIGER_DTYPE_FLOAT32, seed + 5, -2.0, 2.0)
                                  : std::vector<double>{0.37};
    DeviceTensor go_dev(go, LIGER_DTYPE_FLOAT32);
    LIGER_ASSERT_OK(liger_cross_entropy_backward(grad_ptr, got_stride, R, V, p.dtype, go_dev.as<float>(), none ? 1 : 0,
                                                 nullptr, nullptr));
    LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
    std::vector<double> scaled_padded = in_place ? logits_dev.download() : grad_dev.download();
    std::vector<double> scaled_grad(static_cast<std::size_t>(R * V));
    for (int64_t r = 0; r < R; ++r) std::copy_n(&scaled_padded[r * got_stride], V, &scaled_grad[r * V]);
    auto ref_bwd = liger::ref::cross_entropy_backward(ref.grad, R, V, go, none);
    if (p.c != Case::kAllIgnored) {
      EXPECT_TRUE(all_close("grad_logits after backward", scaled_grad, ref_bwd, grad_tolerance(p.dtype, ref_bwd)));
    }
  }
}

std::vector<Param> all_params() {
  std::vector<Param> out;
  const Case cases[] = {Case::kPlain,   Case::kInPlace, Case::kIgnoredSum, Case::kAllIgnored,
                        Case::kExtreme, Case::kSoftcap, Case::kSmoothing,  Case::kZLoss,
                        Case::kWeights, Case::kNone,    Case::kStrided,    Case::kMixedStride};
  for (liger_dtype d : {LIGER_DTYPE_FLOAT32, LIGER_DTYPE_FLOAT16, LIGER_DTYPE_BFLOAT16})
    for (int64_t v : {int64_t{37}, int64_t{1000}, int64_t{32000}, int64_t{128256}, int64_t{262144}})
      for (Case c : cases) out.push_back({d, v, c});
  return out;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(dtype_label(info.param.dtype)) + "_V" + std::to_string(info.param.vocab) + "_" +
         case_name(info.param.c);
}

INSTANTIATE_TEST_SUITE_P(All, CrossEntropyTest, ::testing::ValuesIn(all_params()), param_name);

// Every tunable combination this op accepts gives the same result (one mid-size shape).
TEST(CrossEntropyTunables, VectorWidthsAndBlockSizesAgree) {
  LIGER_REQUIRE_GPU();
  const int64_t R = 5, V = 4231;
  for (liger_dtype d : {LIGER_DTYPE_FLOAT32, LIGER_DTYPE_BFLOAT16}) {
    std::vector<double> logits = random_normal(static_cast<std::size_t>(R * V), d, 3);
    std::vector<int64_t> targets = {0, 4230, 17, -100, 2000};
    liger::ref::CrossEntropyOptions ro;
    auto ref = liger::ref::cross_entropy_forward(logits, targets, R, V, ro);
    DeviceTensor x(logits, d), g(static_cast<std::size_t>(R * V), d), loss(1, LIGER_DTYPE_FLOAT32);
    DeviceTargets t(targets);
    size_t ws_bytes = 0;
    LIGER_ASSERT_OK(liger_cross_entropy_workspace_size(R, V, nullptr, &ws_bytes));
    DeviceBytes ws(ws_bytes);
    for (int threads : {32, 96, 256, 1024}) {
      for (int vb : {16, 8, 4, 2}) {
        // pipeline_depth: vector loads in flight per thread (batches that end past the row's last
        // vector, with V = 4231 not a multiple of any vector width, exercise the guards).
        for (int depth : {1, 2, 4}) {
          if (vb < static_cast<int>(dtype_bytes(d))) continue;
          liger_tunables tn{};
          tn.threads_per_block = threads;
          tn.vector_bytes = vb;
          tn.pipeline_depth = depth;
          g.poison();
          loss.poison();
          LIGER_ASSERT_OK(liger_cross_entropy_forward(x.data(), V, t.data(), g.data(), V, loss.as<float>(), nullptr, R, V,
                                                      d, nullptr, ws.data(), ws_bytes, &tn, nullptr));
          LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
          const std::string what =
              " t=" + std::to_string(threads) + " v=" + std::to_string(vb) + " depth=" + std::to_string(depth);
          EXPECT_TRUE(all_close("loss" + what, loss.download(), ref.loss, loss_tolerance()));
          EXPECT_TRUE(all_close("grad" + what, g.download(), ref.grad, grad_tolerance(d, ref.grad)));
        }
      }
    }
  }
}

// The comparison can fail: zeros or a perturbed gradient do not pass.
TEST(CrossEntropyChecks, GarbageFailsAllClose) {
  LIGER_REQUIRE_GPU();
  const int64_t R = 4, V = 1000;
  std::vector<double> logits = random_normal(static_cast<std::size_t>(R * V), LIGER_DTYPE_BFLOAT16, 5);
  std::vector<int64_t> targets = {1, 2, 3, 4};
  auto ref = liger::ref::cross_entropy_forward(logits, targets, R, V, {});
  std::vector<double> zeros(ref.grad.size(), 0.0);
  EXPECT_FALSE(all_close("zeros", zeros, ref.grad, grad_tolerance(LIGER_DTYPE_BFLOAT16, ref.grad)));
  std::vector<double> off = ref.grad;
  for (auto& v : off) v *= 1.05;
  EXPECT_FALSE(all_close("5% off", off, ref.grad, grad_tolerance(LIGER_DTYPE_BFLOAT16, ref.grad)));
  EXPECT_FALSE(all_close("loss off", {ref.loss[0] * 1.001}, ref.loss, loss_tolerance()));
}

TEST(CrossEntropyChecks, InvalidArgumentsReturnStatus) {
  LIGER_REQUIRE_GPU();
  const int64_t R = 2, V = 10;
  DeviceTensor x(static_cast<std::size_t>(R * V), LIGER_DTYPE_FLOAT32), loss(1, LIGER_DTYPE_FLOAT32);
  DeviceTargets t({1, 2});
  size_t ws_bytes = 0;
  LIGER_ASSERT_OK(liger_cross_entropy_workspace_size(R, V, nullptr, &ws_bytes));
  DeviceBytes ws(ws_bytes);
  auto call = [&](const void* logits, const int64_t* tg, float* l, liger_dtype d, const liger_cross_entropy_options* o,
                  const liger_tunables* tn, size_t wsb, int64_t stride = 10) {
    return liger_cross_entropy_forward(logits, stride, tg, nullptr, V, l, nullptr, R, V, d, o, ws.data(), wsb, tn, nullptr);
  };
  EXPECT_EQ(call(nullptr, t.data(), loss.as<float>(), LIGER_DTYPE_FLOAT32, nullptr, nullptr, ws_bytes),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(call(x.data(), nullptr, loss.as<float>(), LIGER_DTYPE_FLOAT32, nullptr, nullptr, ws_bytes),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(call(x.data(), t.data(), nullptr, LIGER_DTYPE_FLOAT32, nullptr, nullptr, ws_bytes), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(call(x.data(), t.data(), loss.as<float>(), static_cast<liger_dtype>(9), nullptr, nullptr, ws_bytes),
            LIGER_STATUS_UNSUPPORTED_DTYPE);
  EXPECT_EQ(call(x.data(), t.data(), loss.as<float>(), LIGER_DTYPE_FLOAT32, nullptr, nullptr, ws_bytes - 1),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(call(x.data(), t.data(), loss.as<float>(), LIGER_DTYPE_FLOAT32, nullptr, nullptr, ws_bytes, V - 1),
            LIGER_STATUS_INVALID_ARGUMENT);
  liger_cross_entropy_options o;
  liger_cross_entropy_options_init(&o);
  o.label_smoothing = 1.5f;
  EXPECT_EQ(call(x.data(), t.data(), loss.as<float>(), LIGER_DTYPE_FLOAT32, &o, nullptr, ws_bytes), LIGER_STATUS_INVALID_ARGUMENT);
  liger_cross_entropy_options_init(&o);
  o.softcap = -1.0f;
  EXPECT_EQ(call(x.data(), t.data(), loss.as<float>(), LIGER_DTYPE_FLOAT32, &o, nullptr, ws_bytes), LIGER_STATUS_INVALID_ARGUMENT);
  liger_cross_entropy_options_init(&o);
  o.reduction = 7;
  EXPECT_EQ(call(x.data(), t.data(), loss.as<float>(), LIGER_DTYPE_FLOAT32, &o, nullptr, ws_bytes), LIGER_STATUS_INVALID_ARGUMENT);
  liger_tunables tn{};
  tn.threads_per_block = 33;
  EXPECT_EQ(call(x.data(), t.data(), loss.as<float>(), LIGER_DTYPE_FLOAT32, nullptr, &tn, ws_bytes),
            LIGER_STATUS_INVALID_ARGUMENT);
  tn = {};
  tn.vector_bytes = 2;  // smaller than an fp32 element
  EXPECT_EQ(call(x.data(), t.data(), loss.as<float>(), LIGER_DTYPE_FLOAT32, nullptr, &tn, ws_bytes),
            LIGER_STATUS_INVALID_ARGUMENT);
  tn.vector_bytes = 32;
  EXPECT_EQ(call(x.data(), t.data(), loss.as<float>(), LIGER_DTYPE_FLOAT32, nullptr, &tn, ws_bytes),
            LIGER_STATUS_INVALID_ARGUMENT);
  tn = {};
  tn.pipeline_depth = 3;  // loads in flight: 1, 2 or 4
  EXPECT_EQ(call(x.data(), t.data(), loss.as<float>(), LIGER_DTYPE_FLOAT32, nullptr, &tn, ws_bytes),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(liger_cross_entropy_backward(x.data(), V, R, V, LIGER_DTYPE_FLOAT32, nullptr, 0, nullptr, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(liger_cross_entropy_backward(x.data(), V, R, V, LIGER_DTYPE_FLOAT32, loss.as<float>(), 2, nullptr, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(liger_cross_entropy_workspace_size(R, V, nullptr, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(liger_last_error()), "");
}

TEST(CrossEntropyChecks, OptionsInitAndDefaultTunables) {
  LIGER_REQUIRE_GPU();
  liger_cross_entropy_options o;
  liger_cross_entropy_options_init(&o);
  EXPECT_EQ(o.ignore_index, -100);
  EXPECT_EQ(o.reduction, LIGER_REDUCTION_MEAN);
  EXPECT_EQ(o.class_weight, nullptr);
  liger_tunables t{};
  ASSERT_EQ(liger_cross_entropy_default_tunables(90, 8192, 128256, LIGER_DTYPE_BFLOAT16, &t), LIGER_STATUS_SUCCESS);
  EXPECT_GE(t.threads_per_block, 32);
  // Any launch shape the kernel accepts: kernel-perf rewrites this table and runs these tests as
  // its smoke test, so they check validity, not the tuned values.
  EXPECT_TRUE(t.vector_bytes == 4 || t.vector_bytes == 8 || t.vector_bytes == 16) << t.vector_bytes;
  EXPECT_EQ(t.threads_per_block % 32, 0);
  EXPECT_EQ(liger_cross_entropy_default_tunables(90, 1, 0, LIGER_DTYPE_BFLOAT16, &t), LIGER_STATUS_INVALID_ARGUMENT);
}

}  // namespace
