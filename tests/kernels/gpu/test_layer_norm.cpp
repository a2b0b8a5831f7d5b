// GPU tests of LayerNorm against the fp64 reference: every dtype (and fp32 weights with 16-bit
// activations), with and without bias, odd / large / strided / unaligned shapes, in-place
// backward, explicit tunables (scalar and chunked paths), invalid arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "layer_norm_ref.h"
#include "liger_kernels/layer_norm.h"

namespace {
using namespace liger::test;

std::vector<double> compact(const std::vector<double>& strided, int64_t rows, int64_t cols, int64_t stride,
                            int64_t offset = 0) {
  std::vector<double> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = strided[offset + r * stride + c];
  return out;
}

Tolerance sum_tolerance(liger_dtype weight_dtype, int64_t rows) {
  Tolerance t = base_tolerance(weight_dtype);
  t.atol *= 2.0 * std::sqrt(static_cast<double>(rows < 1 ? 1 : rows));
  t.rtol *= 2.0;
  t.max_relative_l2 *= 2.0;
  t.reason = "dweight/dbias: fp32 sums over rows then one rounding to the weight dtype; atol scaled by 2*sqrt(rows)";
  return t;
}

struct Case {
  liger_dtype dtype;
  bool fp32_weight;
  int64_t rows, cols, stride;
  bool bias;
  bool in_place;
  int64_t misalign;
  liger_tunables tunables;
  bool use_tunables;
};

void check(const Case& c, uint64_t seed) {
  const liger_dtype wdt = c.fp32_weight ? LIGER_DTYPE_FLOAT32 : c.dtype;
  const int64_t rows = c.rows, cols = c.cols, st = c.stride, off = c.misalign;
  const size_t n = static_cast<size_t>(rows * st + off);
  const liger_tunables* t = c.use_tunables ? &c.tunables : nullptr;
  const liger_layer_norm_options options{1e-5f, {0, 0, 0}};
  // A non-zero mean per row so the mean subtraction is exercised.
  auto x_host = random_normal(n, c.dtype, seed, 0.75, 1.5);
  auto w_host = random_values(static_cast<size_t>(cols), wdt, seed + 1, -1.5, 1.5);
  auto b_host = random_values(static_cast<size_t>(cols), wdt, seed + 2, -1.0, 1.0);
  DeviceTensor x(x_host, c.dtype), w(w_host, wdt), b(b_host, wdt), y(n, c.dtype);
  DeviceTensor mean(static_cast<size_t>(rows), LIGER_DTYPE_FLOAT32), rstd(static_cast<size_t>(rows), LIGER_DTYPE_FLOAT32);
  y.poison();
  mean.poison();
  rstd.poison();
  const size_t elem = dtype_bytes(c.dtype);
  auto at = [&](const DeviceTensor& d) { return static_cast<char*>(d.data()) + off * elem; };
  LIGER_ASSERT_OK(liger_layer_norm_forward(at(x), st, w.data(), c.bias ? b.data() : nullptr, wdt, at(y), st,
                                           mean.as<float>(), rstd.as<float>(), rows, cols, c.dtype, &options, t,
                                           nullptr));
  LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
  auto xc = compact(x_host, rows, cols, st, off);
  std::vector<double> y_ref, mean_ref, rstd_ref;
  liger::ref::layer_norm_forward(rows, cols, 1e-5, xc, w_host, c.bias ? b_host : std::vector<double>{}, y_ref,
                                 mean_ref, rstd_ref);
  EXPECT_TRUE(all_close("y", compact(y.download(), rows, cols, st, off), y_ref, base_tolerance(c.dtype)));
  EXPECT_TRUE(all_close("mean", mean.download(), mean_ref, base_tolerance(LIGER_DTYPE_FLOAT32)));
  EXPECT_TRUE(all_close("rstd", rstd.download(), rstd_ref,
                        scaled(base_tolerance(LIGER_DTYPE_FLOAT32), 10.0,
                               "rstd: fp32 variance of cols terms and rsqrtf (2 ulp); 1e-4 relative")));
  EXPECT_EQ(x.download(), x_host) << "forward modified x";

  auto dy_host = random_normal(n, c.dtype, seed + 3);
  DeviceTensor dy(dy_host, c.dtype), dx(c.in_place ? 0 : n, c.dtype);
  std::vector<double> mean_f(mean_ref.size()), rstd_f(rstd_ref.size());
  for (size_t i = 0; i < mean_ref.size(); ++i) {
    mean_f[i] = static_cast<float>(mean_ref[i]);
    rstd_f[i] = static_cast<float>(rstd_ref[i]);
  }
  DeviceTensor mean_in(mean_f, LIGER_DTYPE_FLOAT32), rstd_in(rstd_f, LIGER_DTYPE_FLOAT32);
  DeviceTensor dw(static_cast<size_t>(cols), wdt), db(static_cast<size_t>(cols), wdt);
  size_t ws_bytes = 0;
  LIGER_ASSERT_OK(liger_layer_norm_backward_workspace_size(-1, rows, cols, c.dtype, c.bias ? 1 : 0, t, &ws_bytes));
  DeviceTensor ws((ws_bytes + 3) / 4, LIGER_DTYPE_FLOAT32);
  ws.poison();
  dw.poison();
  db.poison();
  if (!c.in_place) dx.poison();
  char* dx_ptr = c.in_place ? at(dy) : at(dx);
  LIGER_ASSERT_OK(liger_layer_norm_backward(at(dy), st, at(x), st, w.data(), wdt, mean_in.as<float>(),
                                            rstd_in.as<float>(), dx_ptr, st, dw.data(), c.bias ? db.data() : nullptr,
                                            ws.data(), ws_bytes, rows, cols, c.dtype, t, nullptr));
  LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<double> dx_ref, dw_ref, db_ref;
  liger::ref::layer_norm_backward(rows, cols, compact(dy_host, rows, cols, st, off), xc, w_host, mean_f, rstd_f, dx_ref,
                                  dw_ref, db_ref);
  auto dx_got = compact(c.in_place ? dy.download() : dx.download(), rows, cols, st, off);
  // dx = (g - (xhat*c1 + c2)) * rstd subtracts row means of g: in fp32 the cancellation costs
  // a few ulps of |g| * rstd, more than one output rounding for fp32 storage.
  const Tolerance dx_tol = c.dtype == LIGER_DTYPE_FLOAT32
                               ? scaled(base_tolerance(c.dtype), 4.0, "fp32 dx: cancellation in g - mean terms")
                               : base_tolerance(c.dtype);
  EXPECT_TRUE(all_close("dx", dx_got, dx_ref, dx_tol));
  EXPECT_TRUE(all_close("dw", dw.download(), dw_ref, sum_tolerance(wdt, rows)));
  if (c.bias) {
    EXPECT_TRUE(all_close("db", db.download(), db_ref, sum_tolerance(wdt, rows)));
  }
}

class LayerNormTest : public ::testing::TestWithParam<Case> {};

TEST_P(LayerNormTest, ForwardBackward) {
  LIGER_REQUIRE_GPU();
  for (uint64_t seed : {201u, 202u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    check(GetParam(), seed);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  struct T {
    liger_dtype d;
    bool w32;
  };
  const T types[] = {{LIGER_DTYPE_FLOAT32, false},
                     {LIGER_DTYPE_FLOAT16, false},
                     {LIGER_DTYPE_FLOAT16, true},
                     {LIGER_DTYPE_BFLOAT16, false},
                     {LIGER_DTYPE_BFLOAT16, true}};
  struct S {
    int64_t rows, cols, stride;
  };
  const S shapes[] = {{1, 1, 1},         {3, 37, 37},       {7, 123, 123},   {64, 1024, 1024}, {33, 4096, 4096},
                      {5, 4231, 4231},   {4, 8192, 8192},   {2, 16384, 16384}, {2, 65536, 65536}, {300, 256, 264},
                      {2000, 64, 64},    {300, 20000, 20000}};  // last: chunked rows, several per block
  for (const T& t : types)
    for (const S& s : shapes)
      for (bool bias : {true, false}) out.push_back({t.d, t.w32, s.rows, s.cols, s.stride, bias, false, 0, {}, false});
  out.push_back({LIGER_DTYPE_BFLOAT16, false, 17, 4096, 4096, true, true, 0, {}, false});
  out.push_back({LIGER_DTYPE_FLOAT32, false, 6, 2048, 2048, true, false, 1, {}, false});  // unaligned -> scalar
  out.push_back({LIGER_DTYPE_BFLOAT16, false, 6, 2048, 2048, true, true, 3, {}, false});
  const liger_tunables variants[] = {{32, 1, 0, 0, 0, {}}, {256, 8, 16, 3, 0, {}}, {128, 0, 2, 0, 0, {}},
                                     {512, 1, 16, 1, 0, {}}, {64, 4, 0, 500, 0, {}}};
  for (const liger_tunables& v : variants)
    for (int64_t cols : {int64_t{96}, int64_t{4096}, int64_t{12288}})
      out.push_back({LIGER_DTYPE_BFLOAT16, false, 37, cols, cols, true, false, 0, v, true});
  // Backward pipelining (pipeline_depth 1 = no prefetch, 2 = prefetch the next tile; stages 2, 3 =
  // row tiles in flight through shared memory, sm_90): several tiles per block, rows not a
  // multiple of the grid or of rows_per_block, odd (scalar) and aligned columns, fp32 weights, in
  // place.
  for (auto [depth, stages] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{0, 2}, std::pair{0, 3}})
    for (const liger_tunables& v :
         {liger_tunables{0, 0, 0, 7, 0, depth, stages, {}}, liger_tunables{256, 8, 0, 5, 0, depth, stages, {}},
          liger_tunables{64, 4, 0, 3, 0, depth, stages, {}}})
      for (int64_t cols : {int64_t{4096}, int64_t{123}, int64_t{1000}, int64_t{96}})
        for (liger_dtype d : {LIGER_DTYPE_BFLOAT16, LIGER_DTYPE_FLOAT32})
          out.push_back({d, d == LIGER_DTYPE_BFLOAT16 && cols == 1000, cols == 96 ? 37 : 203, cols, cols, cols != 123,
                         cols == 4096, 0, v, true});
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string name = std::string(dtype_label(c.dtype)) + (c.fp32_weight ? "_w32_" : "_") + std::to_string(c.rows) +
                     "x" + std::to_string(c.cols) + "_s" + std::to_string(c.stride) + (c.bias ? "_bias" : "_nobias") +
                     (c.in_place ? "_inplace" : "") + (c.misalign ? "_misaligned" : "");
  if (c.use_tunables)
    name += "_tpb" + std::to_string(c.tunables.threads_per_block) + "_rpb" + std::to_string(c.tunables.rows_per_block) +
            "_vec" + std::to_string(c.tunables.vector_bytes) + "_rb" + std::to_string(c.tunables.reduction_blocks) +
            (c.tunables.pipeline_depth ? "_pd" + std::to_string(c.tunables.pipeline_depth) : "") +
            (c.tunables.stages ? "_st" + std::to_string(c.tunables.stages) : "");
  return name;
}

INSTANTIATE_TEST_SUITE_P(All, LayerNormTest, ::testing::ValuesIn(cases()), case_name);

TEST(LayerNormMisc, InvalidArguments) {
  LIGER_REQUIRE_GPU();
  const auto F = LIGER_DTYPE_FLOAT32;
  DeviceTensor a(64, F), w(8, F), m(8, F);
  EXPECT_EQ(liger_layer_norm_forward(nullptr, 8, w.data(), nullptr, F, a.data(), 8, nullptr, nullptr, 8, 8, F, nullptr,
                                     nullptr, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(liger_layer_norm_forward(a.data(), 8, w.data(), nullptr, F, a.data(), 8, nullptr, nullptr, 8, 8,
                                     static_cast<liger_dtype>(5), nullptr, nullptr, nullptr),
            LIGER_STATUS_UNSUPPORTED_DTYPE);
  const liger_layer_norm_options bad_eps{-1.f, {0, 0, 0}};
  EXPECT_EQ(liger_layer_norm_forward(a.data(), 8, w.data(), nullptr, F, a.data(), 8, nullptr, nullptr, 8, 8, F,
                                     &bad_eps, nullptr, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  const liger_tunables bad{0, 0, 4, 70000, 0, 0, {}};
  EXPECT_EQ(liger_layer_norm_forward(a.data(), 8, w.data(), nullptr, F, a.data(), 8, nullptr, nullptr, 8, 8, F, nullptr,
                                     &bad, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(liger_layer_norm_backward(a.data(), 8, a.data(), 8, w.data(), F, nullptr, m.as<float>(), a.data(), 8,
                                      nullptr, nullptr, nullptr, 0, 8, 8, F, nullptr, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);  // mean NULL
  EXPECT_EQ(liger_layer_norm_backward(a.data(), 8, a.data(), 8, w.data(), F, m.as<float>(), m.as<float>(), a.data(), 8,
                                      w.data(), w.data(), m.data(), 32, 8, 8, F, nullptr, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);  // workspace too small
}

TEST(LayerNormMisc, ChecksCanFail) {
  LIGER_REQUIRE_GPU();
  const int64_t rows = 4, cols = 64;
  auto x = random_normal(rows * cols, LIGER_DTYPE_FLOAT32, 3, 1.0, 1.0);
  auto w = random_values(cols, LIGER_DTYPE_FLOAT32, 4);
  std::vector<double> y, mean, rstd;
  liger::ref::layer_norm_forward(rows, cols, 1e-5, x, w, {}, y, mean, rstd);
  EXPECT_FALSE(all_close("zeros", std::vector<double>(y.size(), 0.0), y, base_tolerance(LIGER_DTYPE_FLOAT32)));
  // Forgetting the mean subtraction (an RMSNorm) must fail.
  DeviceTensor xd(x, LIGER_DTYPE_FLOAT32), wd(w, LIGER_DTYPE_FLOAT32), yd(rows * cols, LIGER_DTYPE_FLOAT32);
  std::vector<double> wrong(y.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) wrong[r * cols + c] = x[r * cols + c] * rstd[r] * w[c];
  EXPECT_FALSE(all_close("no mean", wrong, y, base_tolerance(LIGER_DTYPE_FLOAT32)));
  LIGER_ASSERT_OK(liger_layer_norm_forward(xd.data(), cols, wd.data(), nullptr, LIGER_DTYPE_FLOAT32, yd.data(), cols,
                                           nullptr, nullptr, rows, cols, LIGER_DTYPE_FLOAT32, nullptr, nullptr, nullptr));
  LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
  EXPECT_TRUE(all_close("kernel", yd.download(), y, base_tolerance(LIGER_DTYPE_FLOAT32)));
}

}  // namespace
