// GPU tests of RMSNorm against the fp64 reference: every dtype (and fp32 weights with 16-bit
// activations), casting modes, odd / large / strided / unaligned shapes, in-place backward,
// forced scalar and chunked paths, invalid arguments, and a check that wrong outputs fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "liger_kernels/rms_norm.h"
#include "rms_norm_ref.h"

namespace {
using namespace liger::test;

struct Shape {
  int64_t rows, cols;
};

struct Param {
  liger_dtype dtype;
  bool fp32_weight;
  Shape shape;
  int mode;  // liger_rms_norm_casting
};

std::vector<double> compact(const std::vector<double>& strided, int64_t rows, int64_t cols, int64_t stride) {
  std::vector<double> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = strided[r * stride + c];
  return out;
}

// dw sums `rows` products: its rounding error grows with the reduction length, so the absolute
// bound scales with sqrt(rows) (the magnitude of a sum of random-signed terms).
Tolerance dw_tolerance(liger_dtype weight_dtype, int64_t rows) {
  Tolerance t = base_tolerance(weight_dtype);
  double factor = 2.0 * std::sqrt(static_cast<double>(rows < 1 ? 1 : rows));
  t.atol *= factor;
  t.rtol *= 2.0;
  t.max_relative_l2 *= 2.0;
  t.reason = "dweight: fp32 sum over rows (reassociated across blocks) then one rounding to the weight dtype; "
             "atol scaled by 2*sqrt(rows), the size of a sum of random-signed terms";
  return t;
}

// dx = rstd*m - rstd^3/cols*sum(m*x)*x subtracts two terms of size |rstd*m|. With cols == 1 the
// exact result is rstd*m*eps/(x^2+eps), almost nothing: pure cancellation, so the fp32 error is
// measured against the terms (1e-5 of the largest), and the relative L2 bound is not meaningful.
Tolerance dx_tolerance(liger_dtype dtype, int64_t cols, const std::vector<double>& dy, const std::vector<double>& w,
                       const std::vector<double>& rstd, double offset) {
  if (cols != 1) return base_tolerance(dtype);
  double term = 1.0;
  for (size_t r = 0; r < dy.size(); ++r) term = std::max(term, std::fabs(rstd[r] * dy[r] * (w[0] + offset)));
  Tolerance t = base_tolerance(dtype);
  t.atol = 1e-5 * term;
  t.max_relative_l2 = 1e30;
  t.reason = "cols == 1: dx is pure cancellation of two terms of size |rstd*m|; atol = 1e-5 of the largest term";
  return t;
}

struct NormRun {
  liger_dtype dtype, wdtype;
  int64_t rows, cols, x_stride, dy_stride, dx_stride;
  int mode;
  double offset;
  bool in_place = false;
  int64_t misalign = 0;  // element offset applied to every activation pointer
  const liger_tunables* tunables = nullptr;
};

// Runs forward and backward for one configuration and seed and checks everything.
void check(const NormRun& run, uint64_t seed) {
  const int64_t rows = run.rows, cols = run.cols;
  liger_rms_norm_options options{1e-6f, static_cast<float>(run.offset), run.mode, 0};
  const size_t xs = static_cast<size_t>(rows * run.x_stride + run.misalign);
  auto x_host = random_normal(xs, run.dtype, seed);
  auto w_host = random_values(static_cast<size_t>(cols), run.wdtype, seed + 1, -1.5, 1.5);
  DeviceTensor x(x_host, run.dtype), w(w_host, run.wdtype);
  DeviceTensor y(static_cast<size_t>(rows * run.x_stride + run.misalign), run.dtype);
  DeviceTensor rstd(static_cast<size_t>(rows), LIGER_DTYPE_FLOAT32);
  ASSERT_TRUE(x.allocated() && w.allocated() && y.allocated() && rstd.allocated());
  y.poison();
  rstd.poison();
  const size_t elem = dtype_bytes(run.dtype);
  auto at = [&](const DeviceTensor& t) { return static_cast<char*>(t.data()) + run.misalign * elem; };
  LIGER_ASSERT_OK(liger_rms_norm_forward(at(x), run.x_stride, w.data(), run.wdtype, at(y), run.x_stride,
                                         rstd.as<float>(), rows, cols, run.dtype, &options, run.tunables, nullptr));
  LIGER_ASSERT_CUDA(cudaDeviceSynchronize());

  liger::ref::RmsNormConfig config;
  config.rows = rows;
  config.cols = cols;
  config.eps = 1e-6;
  config.offset = run.offset;
  config.casting_mode = run.mode;
  config.dtype = run.dtype;
  std::vector<double> x_used(x_host.begin() + run.misalign, x_host.end());
  auto xc = compact(x_used, rows, cols, run.x_stride);
  std::vector<double> y_ref, rstd_ref;
  liger::ref::rms_norm_forward(config, xc, w_host, y_ref, rstd_ref);

  auto y_all = y.download();
  std::vector<double> y_got(y_all.begin() + run.misalign, y_all.end());
  EXPECT_TRUE(all_close("y", compact(y_got, rows, cols, run.x_stride), y_ref, base_tolerance(run.dtype)));
  EXPECT_TRUE(all_close("rstd", rstd.download(), rstd_ref,
                        run.mode == LIGER_RMS_NORM_CASTING_NONE ? base_tolerance(run.dtype)
                                                                : base_tolerance(LIGER_DTYPE_FLOAT32)));
  EXPECT_EQ(x.download(), x_host) << "forward modified x";

  // Backward, fed the reference rstd (as fp32) so it is tested on its own.
  const size_t dys = static_cast<size_t>(rows * run.dy_stride + run.misalign);
  auto dy_host = random_normal(dys, run.dtype, seed + 2);
  DeviceTensor dy(dy_host, run.dtype);
  DeviceTensor dx_own(run.in_place ? 0 : static_cast<size_t>(rows * run.dx_stride + run.misalign), run.dtype);
  std::vector<double> rstd_f32(rstd_ref.size());
  for (size_t i = 0; i < rstd_ref.size(); ++i) rstd_f32[i] = static_cast<float>(rstd_ref[i]);
  DeviceTensor rstd_in(rstd_f32, LIGER_DTYPE_FLOAT32);
  DeviceTensor dw(static_cast<size_t>(cols), run.wdtype);
  size_t ws_bytes = 0;
  LIGER_ASSERT_OK(liger_rms_norm_backward_workspace_size(-1, rows, cols, run.dtype, run.tunables, &ws_bytes));
  DeviceTensor ws((ws_bytes + 3) / 4, LIGER_DTYPE_FLOAT32);
  ws.poison();  // the kernel must not depend on the workspace's contents
  dw.poison();
  if (!run.in_place) dx_own.poison();
  char* dx_ptr = run.in_place ? at(dy) : at(dx_own);
  const int64_t dx_stride = run.in_place ? run.dy_stride : run.dx_stride;
  LIGER_ASSERT_OK(liger_rms_norm_backward(at(dy), run.dy_stride, at(x), run.x_stride, w.data(), run.wdtype,
                                          rstd_in.as<float>(), dx_ptr, dx_stride, dw.data(), ws.data(), ws_bytes,
                                          rows, cols, run.dtype, &options, run.tunables, nullptr));
  LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<double> dy_used(dy_host.begin() + run.misalign, dy_host.end());
  auto dyc = compact(dy_used, rows, cols, run.dy_stride);
  std::vector<double> dx_ref, dw_ref;
  liger::ref::rms_norm_backward(config, dyc, xc, w_host, rstd_f32, dx_ref, dw_ref);
  auto dx_all = run.in_place ? dy.download() : dx_own.download();
  std::vector<double> dx_got(dx_all.begin() + run.misalign, dx_all.end());
  EXPECT_TRUE(all_close("dx", compact(dx_got, rows, cols, dx_stride), dx_ref,
                        dx_tolerance(run.dtype, cols, dyc, w_host, rstd_f32, run.offset)));
  // LLAMA: dw sums dy * dtype(x * rstd); x * rstd computed in fp32 may round to the other
  // neighbour of the 16-bit grid than in fp64, so the activation dtype's rounding bounds it.
  const liger_dtype dw_dtype = run.mode == LIGER_RMS_NORM_CASTING_LLAMA ? run.dtype : run.wdtype;
  EXPECT_TRUE(all_close("dw", dw.download(), dw_ref, dw_tolerance(dw_dtype, rows)));
  EXPECT_EQ(x.download(), x_host) << "backward modified x";
  if (!run.in_place) {
    EXPECT_EQ(dy.download(), dy_host) << "backward modified dy";
  }
}

class RmsNormTest : public ::testing::TestWithParam<Param> {};

TEST_P(RmsNormTest, ForwardBackward) {
  LIGER_REQUIRE_GPU();
  const Param p = GetParam();
  NormRun run{};
  run.dtype = p.dtype;
  run.wdtype = p.fp32_weight ? LIGER_DTYPE_FLOAT32 : p.dtype;
  run.rows = p.shape.rows;
  run.cols = p.shape.cols;
  run.x_stride = run.dy_stride = run.dx_stride = p.shape.cols;
  run.mode = p.mode;
  run.offset = p.mode == LIGER_RMS_NORM_CASTING_GEMMA ? 1.0 : 0.0;
  for (uint64_t seed : {11u, 12u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    check(run, seed * 1000 + static_cast<uint64_t>(p.shape.cols));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  static const char* const modes[] = {"llama", "gemma", "none"};
  const Param& p = info.param;
  return std::string(dtype_label(p.dtype)) + (p.fp32_weight ? "_w32_" : "_") + modes[p.mode] + "_" +
         std::to_string(p.shape.rows) + "x" + std::to_string(p.shape.cols);
}

std::vector<Param> all_params() {
  const Shape shapes[] = {{1, 1},    {3, 37},   {7, 123},  {64, 1024}, {33, 4096}, {5, 4231},
                          {4, 8192}, {2, 16384}, {2, 65536}, {300, 256}, {2000, 64},
                          // chunked rows, several per block (the weight gradient adds across them)
                          {300, 20000}};
  std::vector<Param> out;
  struct Types {
    liger_dtype dtype;
    bool fp32_weight;
  };
  const Types types[] = {{LIGER_DTYPE_FLOAT32, false},
                         {LIGER_DTYPE_FLOAT16, false},
                         {LIGER_DTYPE_FLOAT16, true},
                         {LIGER_DTYPE_BFLOAT16, false},
                         {LIGER_DTYPE_BFLOAT16, true}};
  for (const Types& t : types)
    for (const Shape& s : shapes)
      for (int mode : {0, 1, 2}) out.push_back({t.dtype, t.fp32_weight, s, mode});
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, RmsNormTest, ::testing::ValuesIn(all_params()), param_name);

// Layout and path variations, bf16 and fp32.
class RmsNormLayoutTest : public ::testing::TestWithParam<liger_dtype> {};

TEST_P(RmsNormLayoutTest, StridedRows) {
  LIGER_REQUIRE_GPU();
  NormRun run{GetParam(), GetParam(), 19, 4096, 4096 + 64, 4096 + 8, 4096 + 128, 0, 0.0};
  check(run, 21);
}

TEST_P(RmsNormLayoutTest, OddStrideFallsBackToScalar) {
  LIGER_REQUIRE_GPU();
  NormRun run{GetParam(), GetParam(), 9, 1024, 1027, 1029, 1031, 1, 1.0};
  check(run, 22);
}

TEST_P(RmsNormLayoutTest, UnalignedPointers) {
  LIGER_REQUIRE_GPU();
  NormRun run{GetParam(), GetParam(), 6, 2048, 2048, 2048, 2048, 0, 0.0};
  run.misalign = 1;
  check(run, 23);
}

TEST_P(RmsNormLayoutTest, InPlaceBackward) {
  LIGER_REQUIRE_GPU();
  NormRun run{GetParam(), GetParam(), 17, 4096, 4096, 4096, 4096, 0, 0.0};
  run.in_place = true;
  check(run, 24);
  NormRun odd{GetParam(), GetParam(), 5, 4231, 4231, 4231, 4231, 1, 1.0};
  odd.in_place = true;
  check(odd, 25);
}

TEST_P(RmsNormLayoutTest, ExplicitTunables) {
  LIGER_REQUIRE_GPU();
  const int elem = static_cast<int>(dtype_bytes(GetParam()));
  const liger_tunables variants[] = {
      {32, 1, 0, 0, 0, {}},      // one warp per row: long rows go through the chunked path
      {256, 8, 16, 3, 0, {}},    // 8 rows per block, 3 reduction blocks
      {128, 0, elem, 0, 0, {}},  // forced scalar path
      {512, 1, 16, 1, 0, {}},    // one block per row (the backward takes <= 512), single reduction block
      {64, 4, 0, 500, 0, {}},    // 16 threads per row, many reduction blocks
  };
  for (const liger_tunables& t : variants) {
    SCOPED_TRACE("tunables tpb=" + std::to_string(t.threads_per_block) + " rpb=" + std::to_string(t.rows_per_block) +
                 " vec=" + std::to_string(t.vector_bytes) + " rb=" + std::to_string(t.reduction_blocks));
    for (int64_t cols : {int64_t{96}, int64_t{4096}, int64_t{12288}}) {
      NormRun run{GetParam(), GetParam(), 37, cols, cols, cols, cols, 0, 0.0};
      run.tunables = &t;
      check(run, 30 + static_cast<uint64_t>(cols));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RmsNormLayoutTest, ::testing::Values(LIGER_DTYPE_FLOAT32, LIGER_DTYPE_BFLOAT16),
                         [](const ::testing::TestParamInfo<liger_dtype>& info) {
                           return std::string(dtype_label(info.param));
                         });

// Backward pipelining (pipeline_depth 1 = no prefetch, 2 = prefetch the next tile; stages 2 and 3
// = row tiles in flight through shared memory, sm_90, including more stages than a block has
// tiles and stage reuse over many tiles): several tiles per block (few reduction blocks), rows
// not a multiple of the grid or of rows_per_block (inactive rows in the last tile), odd (scalar,
// never staged) and aligned columns, both casting modes that change dw, in place, fp32 weights.
TEST_P(RmsNormLayoutTest, PipelineDepth) {
  LIGER_REQUIRE_GPU();
  const liger_dtype d = GetParam();
  for (auto [depth, stages] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{0, 2}, std::pair{0, 3}}) {
    const liger_tunables variants[] = {
        {0, 0, 0, 7, 0, depth, stages, {}},    // default shape, 7 blocks
        {256, 8, 0, 5, 0, depth, stages, {}},  // 8 rows per block
        {64, 4, 0, 3, 0, depth, stages, {}},   // 16 threads per row
        {512, 1, 0, 2, 0, depth, stages, {}},  // one row per block, 2 blocks
    };
    for (const liger_tunables& t : variants) {
      for (int64_t cols : {int64_t{4096}, int64_t{123}, int64_t{1000}, int64_t{96}, int64_t{2048}}) {
        SCOPED_TRACE("depth " + std::to_string(depth) + " stages " + std::to_string(stages) + " tpb=" + std::to_string(t.threads_per_block) +
                     " rpb=" + std::to_string(t.rows_per_block) + " rb=" + std::to_string(t.reduction_blocks) +
                     " cols=" + std::to_string(cols));
        const int64_t rows = cols == 96 ? 37 : 203;
        NormRun run{d, d, rows, cols, cols, cols, cols, cols == 1000 ? 1 : 0, cols == 1000 ? 1.0 : 0.0};
        run.in_place = cols == 2048;
        if (d == LIGER_DTYPE_BFLOAT16 && cols == 123) run.wdtype = LIGER_DTYPE_FLOAT32;
        run.tunables = &t;
        check(run, 700 + static_cast<uint64_t>(cols) + 10 * static_cast<uint64_t>(depth + 3 * stages));
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(RmsNormMisc, ManyRows) {
  LIGER_REQUIRE_GPU();
  NormRun run{LIGER_DTYPE_BFLOAT16, LIGER_DTYPE_FLOAT32, 70000, 32, 32, 32, 32, 0, 0.0};
  check(run, 41);
}

TEST(RmsNormMisc, ZeroRows) {
  LIGER_REQUIRE_GPU();
  DeviceTensor w(std::vector<double>(8, 1.0), LIGER_DTYPE_FLOAT32), dw(8, LIGER_DTYPE_FLOAT32);
  DeviceTensor dummy(8, LIGER_DTYPE_FLOAT32);
  dw.poison();
  LIGER_ASSERT_OK(liger_rms_norm_forward(dummy.data(), 8, w.data(), LIGER_DTYPE_FLOAT32, dummy.data(), 8, nullptr, 0,
                                         8, LIGER_DTYPE_FLOAT32, nullptr, nullptr, nullptr));
  LIGER_ASSERT_OK(liger_rms_norm_backward(dummy.data(), 8, dummy.data(), 8, w.data(), LIGER_DTYPE_FLOAT32,
                                          dummy.as<float>(), dummy.data(), 8, dw.data(), nullptr, 0, 0, 8,
                                          LIGER_DTYPE_FLOAT32, nullptr, nullptr, nullptr));
  LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(dw.download(), std::vector<double>(8, 0.0));
}

TEST(RmsNormMisc, InvalidArguments) {
  LIGER_REQUIRE_GPU();
  DeviceTensor x(64, LIGER_DTYPE_FLOAT32), w(8, LIGER_DTYPE_FLOAT32), y(64, LIGER_DTYPE_FLOAT32);
  DeviceTensor r(8, LIGER_DTYPE_FLOAT32);
  const auto F = LIGER_DTYPE_FLOAT32;
  auto fwd = [&](const void* xp, int64_t stride, int64_t cols, liger_dtype dt, liger_dtype wdt,
                 const liger_rms_norm_options* o, const liger_tunables* t) {
    return liger_rms_norm_forward(xp, stride, w.data(), wdt, y.data(), stride, r.as<float>(), 8, cols, dt, o, t,
                                  nullptr);
  };
  EXPECT_EQ(fwd(nullptr, 8, 8, F, F, nullptr, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(fwd(x.data(), 4, 8, F, F, nullptr, nullptr), LIGER_STATUS_INVALID_ARGUMENT);  // stride < cols
  EXPECT_EQ(fwd(x.data(), 8, 0, F, F, nullptr, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(fwd(x.data(), 8, 8, static_cast<liger_dtype>(9), F, nullptr, nullptr), LIGER_STATUS_UNSUPPORTED_DTYPE);
  EXPECT_EQ(fwd(x.data(), 8, 8, F, LIGER_DTYPE_BFLOAT16, nullptr, nullptr), LIGER_STATUS_UNSUPPORTED_DTYPE);
  liger_rms_norm_options bad_mode{1e-6f, 0.f, 7, 0}, bad_eps{-1.f, 0.f, 0, 0};
  EXPECT_EQ(fwd(x.data(), 8, 8, F, F, &bad_mode, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(fwd(x.data(), 8, 8, F, F, &bad_eps, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  const liger_tunables bad[] = {{33, 0, 0, 0, 0, {}},   {2048, 0, 0, 0, 0, {}}, {64, 3, 0, 0, 0, {}},
                                {96, 2, 0, 0, 0, {}},   {0, 0, 8, 0, 0, {}},    {0, 0, 0, -1, 0, {}},
                                {0, 0, 0, 70000, 0, {}}, {0, -2, 0, 0, 0, {}}, {0, 0, 0, 0, 0, 3, {}},
                                {0, 0, 0, 0, 0, -1, {}}, {0, 0, 0, 0, 0, 0, 9, {}}, {0, 0, 0, 0, 0, 0, -1, {}}};
  for (const liger_tunables& t : bad) {
    EXPECT_EQ(fwd(x.data(), 8, 8, F, F, nullptr, &t), LIGER_STATUS_INVALID_ARGUMENT)
        << "tpb " << t.threads_per_block << " rpb " << t.rows_per_block << " vec " << t.vector_bytes << " rb "
        << t.reduction_blocks;
    EXPECT_NE(std::string(liger_last_error()), "");
  }
  // vector_bytes=16 with a layout that cannot use it.
  const liger_tunables v16{0, 0, 16, 0, 0, {}};
  EXPECT_EQ(fwd(x.data(), 9, 7, F, F, nullptr, &v16), LIGER_STATUS_INVALID_ARGUMENT);
  // Backward: missing or too small workspace, null rstd, in-place with a different stride.
  DeviceTensor dw(8, F), ws(4, F);
  EXPECT_EQ(liger_rms_norm_backward(y.data(), 8, x.data(), 8, w.data(), F, r.as<float>(), y.data(), 8, dw.data(),
                                    nullptr, 0, 8, 8, F, nullptr, nullptr, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(liger_rms_norm_backward(y.data(), 8, x.data(), 8, w.data(), F, r.as<float>(), y.data(), 8, dw.data(),
                                    ws.data(), 16, 8, 8, F, nullptr, nullptr, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(liger_rms_norm_backward(y.data(), 8, x.data(), 8, w.data(), F, nullptr, y.data(), 8, nullptr, nullptr, 0,
                                    8, 8, F, nullptr, nullptr, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(liger_rms_norm_backward(y.data(), 8, x.data(), 4, w.data(), F, r.as<float>(), y.data(), 4, nullptr,
                                    nullptr, 0, 8, 4, F, nullptr, nullptr, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  size_t bytes = 0;
  EXPECT_EQ(liger_rms_norm_backward_workspace_size(-1, 8, 8, F, nullptr, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  LIGER_ASSERT_OK(liger_rms_norm_backward_workspace_size(-1, 8, 8, F, nullptr, &bytes));
  EXPECT_GT(bytes, 0u);
  liger_tunables defaults{};
  LIGER_ASSERT_OK(liger_rms_norm_default_tunables(90, 16384, 4096, LIGER_DTYPE_BFLOAT16, &defaults));
  EXPECT_EQ(defaults.vector_bytes, 16);
  EXPECT_GE(defaults.pipeline_depth, 1);
  EXPECT_LE(defaults.pipeline_depth, 2);
  EXPECT_GE(defaults.stages, 1);
}

// A staged backward holds stages x rows_per_block x (x, dy) rows in shared memory: 16 KiB rows,
// two per block, three stages (192 KiB) fit an sm_90 block and compute the right gradients; four
// (256 KiB) do not, and asked for explicitly they are refused with the size, not clipped.
TEST(RmsNormMisc, StagesUpToTheSharedMemory) {
  LIGER_REQUIRE_GPU();
  int device = 0, major = 0;
  LIGER_ASSERT_CUDA(cudaGetDevice(&device));
  LIGER_ASSERT_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 9) GTEST_SKIP() << "staging needs the bulk-copy engine (sm_90); this GPU is sm_" << major << "x";
  const auto bf = LIGER_DTYPE_BFLOAT16;
  const int64_t rows = 9, cols = 8192;
  const liger_tunables three{512, 2, 0, 0, 0, 0, 3, {}}, four{512, 2, 0, 0, 0, 0, 4, {}};
  NormRun run{bf, bf, rows, cols, cols, cols, cols, 0, 0.0};
  run.tunables = &three;
  check(run, 4242);
  if (::testing::Test::HasFatalFailure()) return;

  DeviceTensor x(random_normal(rows * cols, bf, 1), bf), dy(random_normal(rows * cols, bf, 2), bf);
  DeviceTensor dx(rows * cols, bf), w(std::vector<double>(cols, 1.0), bf), dw(cols, bf);
  DeviceTensor rstd(std::vector<double>(rows, 1.0), LIGER_DTYPE_FLOAT32);
  size_t bytes = 0;
  LIGER_ASSERT_OK(liger_rms_norm_backward_workspace_size(-1, rows, cols, bf, &four, &bytes));
  DeviceTensor ws(bytes / 4 + 1, LIGER_DTYPE_FLOAT32);
  EXPECT_EQ(liger_rms_norm_backward(dy.data(), cols, x.data(), cols, w.data(), bf, rstd.as<float>(), dx.data(), cols,
                                    dw.data(), ws.data(), bytes, rows, cols, bf, nullptr, &four, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(liger_last_error()).find("stages=4"), std::string::npos) << liger_last_error();
}

// The checks can fail: an all-zero or slightly wrong output is rejected.
TEST(RmsNormMisc, ChecksCanFail) {
  LIGER_REQUIRE_GPU();
  liger::ref::RmsNormConfig config;
  config.rows = 4;
  config.cols = 64;
  config.dtype = LIGER_DTYPE_BFLOAT16;
  auto x = random_normal(256, LIGER_DTYPE_BFLOAT16, 5);
  auto w = random_values(64, LIGER_DTYPE_BFLOAT16, 6);
  std::vector<double> y, rstd;
  liger::ref::rms_norm_forward(config, x, w, y, rstd);
  EXPECT_FALSE(all_close("zeros", std::vector<double>(y.size(), 0.0), y, base_tolerance(LIGER_DTYPE_BFLOAT16)));
  auto wrong = y;
  for (auto& v : wrong) v *= 1.05;  // a 5% scale error (e.g. a wrong eps or mean)
  EXPECT_FALSE(all_close("scaled", wrong, y, base_tolerance(LIGER_DTYPE_BFLOAT16)));
  // And the kernel's own output with the weight off by one element fails too.
  DeviceTensor xd(x, LIGER_DTYPE_BFLOAT16), wd(w, LIGER_DTYPE_BFLOAT16), yd(256, LIGER_DTYPE_BFLOAT16);
  auto w_shift = w;
  w_shift[3] += 0.5;
  DeviceTensor wsd(w_shift, LIGER_DTYPE_BFLOAT16);
  LIGER_ASSERT_OK(liger_rms_norm_forward(xd.data(), 64, wsd.data(), LIGER_DTYPE_BFLOAT16, yd.data(), 64, nullptr, 4,
                                         64, LIGER_DTYPE_BFLOAT16, nullptr, nullptr, nullptr));
  LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
  EXPECT_FALSE(all_close("wrong weight", yd.download(), y, base_tolerance(LIGER_DTYPE_BFLOAT16)));
}

}  // namespace
