// GPU tests of GeGLU (forward, backward, in-place backward) against the fp64 reference, over
// dtype x shape x layout, several seeds, poisoned outputs, untouched inputs and row padding.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kernel_test_util.h"
#include "liger_kernels/geglu.h"
#include "geglu_ref.h"

#define GLU_FORWARD liger_geglu_forward
#define GLU_BACKWARD liger_geglu_backward
#define GLU_DEFAULTS liger_geglu_default_tunables
#define GLU_REF_FORWARD liger::ref::geglu_forward
#define GLU_REF_BACKWARD liger::ref::geglu_backward
#define GLU_SUITE GeGLU

namespace {

using namespace liger::test;

enum class Layout { kContiguous, kFused, kPadded, kOffset };

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::kContiguous: return "contig";
    case Layout::kFused: return "fusedgateup";
    case Layout::kPadded: return "padded";
    case Layout::kOffset: return "misaligned";
  }
  return "?";
}

// A [rows, cols] view inside a device buffer: `offset` elements in, row stride `stride`.
struct View {
  DeviceTensor* buffer;
  std::size_t offset;
  int64_t stride;
  void* ptr() const {
    return static_cast<uint8_t*>(buffer->data()) + offset * dtype_bytes(buffer->dtype());
  }
};

// Writes `values` ([rows, cols] dense) into a host image of the buffer at the view.
void place(std::vector<double>& image, const View& v, const std::vector<double>& values, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) image[v.offset + r * v.stride + c] = values[r * cols + c];
}
std::vector<double> extract(const std::vector<double>& image, const View& v, int64_t rows, int64_t cols) {
  std::vector<double> out(static_cast<std::size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = image[v.offset + r * v.stride + c];
  return out;
}

// Everything outside the view must still be what it was.
::testing::AssertionResult outside_unchanged(const std::vector<double>& before, const std::vector<double>& after,
                                             const std::vector<View>& views, int64_t rows, int64_t cols) {
  std::vector<char> inside(before.size(), 0);
  for (const auto& v : views)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) inside[v.offset + r * v.stride + c] = 1;
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (inside[i]) continue;
    bool same = (std::isnan(before[i]) && std::isnan(after[i])) || before[i] == after[i];
    if (!same) return ::testing::AssertionFailure() << "element " << i << " outside the view was written";
  }
  return ::testing::AssertionSuccess();
}

using Shape = std::tuple<int64_t, int64_t>;
using Param = std::tuple<liger_dtype, Shape, Layout>;

class GLU_SUITE : public ::testing::TestWithParam<Param> {};

// Builds the a/b input buffer(s) for the layout. Fused: one buffer [rows, 2*cols] with a the
// left half, b the right half. Padded: stride cols + 3. Offset: +1 element (misaligned vectors).
struct Inputs {
  DeviceTensor ab_buffer, a_buffer, b_buffer;
  View a, b;
  std::vector<double> ab_image, a_image, b_image;
};

void make_inputs(Inputs& in, Layout layout, liger_dtype dtype, int64_t rows, int64_t cols,
                 const std::vector<double>& a, const std::vector<double>& b, uint64_t seed) {
  if (layout == Layout::kFused) {
    std::size_t n = static_cast<std::size_t>(rows * 2 * cols);
    in.ab_buffer = DeviceTensor(n, dtype);
    in.a = View{&in.ab_buffer, 0, 2 * cols};
    in.b = View{&in.ab_buffer, static_cast<std::size_t>(cols), 2 * cols};
    in.ab_image = random_values(n, dtype, seed + 99);
    place(in.ab_image, in.a, a, rows, cols);
    place(in.ab_image, in.b, b, rows, cols);
    in.ab_buffer.upload(in.ab_image);
    return;
  }
  int64_t stride = layout == Layout::kPadded ? cols + 3 : cols;
  std::size_t offset = layout == Layout::kOffset ? 1 : 0;
  std::size_t n = offset + static_cast<std::size_t>(rows * stride);
  in.a_buffer = DeviceTensor(n, dtype);
  in.b_buffer = DeviceTensor(n, dtype);
  in.a = View{&in.a_buffer, offset, stride};
  in.b = View{&in.b_buffer, offset, stride};
  in.a_image = random_values(n, dtype, seed + 98);
  in.b_image = random_values(n, dtype, seed + 97);
  place(in.a_image, in.a, a, rows, cols);
  place(in.b_image, in.b, b, rows, cols);
  in.a_buffer.upload(in.a_image);
  in.b_buffer.upload(in.b_image);
}

// An output view with the same layout family as the inputs (padded/offset), poisoned.
struct Output {
  DeviceTensor buffer;
  View view;
  void make(Layout layout, liger_dtype dtype, int64_t rows, int64_t cols) {
    int64_t stride = layout == Layout::kPadded ? cols + 3 : cols;
    std::size_t offset = layout == Layout::kOffset ? 1 : 0;
    buffer = DeviceTensor(offset + static_cast<std::size_t>(rows * stride), dtype);
    view = View{&buffer, offset, stride};
    buffer.poison();
  }
};

TEST_P(GLU_SUITE, ForwardAndBackwardMatchReference) {
  LIGER_REQUIRE_GPU();
  const auto [dtype, shape, layout] = GetParam();
  const auto [rows, cols] = shape;
  const Tolerance tolerance = base_tolerance(dtype);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::size_t n = static_cast<std::size_t>(rows * cols);
    auto a = random_normal(n, dtype, seed * 11, 0.0, 2.0);
    auto b = random_normal(n, dtype, seed * 13, 0.0, 1.0);
    auto dc = random_normal(n, dtype, seed * 17, 0.0, 1.0);
    Inputs in;
    make_inputs(in, layout, dtype, rows, cols, a, b, seed);
    ASSERT_TRUE(in.a.buffer->allocated() && in.b.buffer->allocated());

    // Forward.
    Output c;
    c.make(layout, dtype, rows, cols);
    auto c_before = c.buffer.download();
    LIGER_ASSERT_OK(GLU_FORWARD(in.a.ptr(), in.a.stride, in.b.ptr(), in.b.stride, c.view.ptr(), c.view.stride, rows,
                                cols, dtype, nullptr, nullptr));
    LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
    auto c_after = c.buffer.download();
    EXPECT_TRUE(all_close("c", extract(c_after, c.view, rows, cols), GLU_REF_FORWARD(a, b), tolerance));
    EXPECT_TRUE(outside_unchanged(c_before, c_after, {c.view}, rows, cols));
    // Inputs unmodified.
    if (layout == Layout::kFused) {
      EXPECT_EQ(in.ab_buffer.download(), in.ab_image);
    } else {
      EXPECT_EQ(in.a_buffer.download(), in.a_image);
      EXPECT_EQ(in.b_buffer.download(), in.b_image);
    }

    // Backward, out of place.
    std::vector<double> da_ref, db_ref;
    GLU_REF_BACKWARD(dc, a, b, da_ref, db_ref);
    Output dcv, da, db;
    dcv.make(layout, dtype, rows, cols);
    {
      auto image = dcv.buffer.download();
      place(image, dcv.view, dc, rows, cols);
      dcv.buffer.upload(image);
    }
    da.make(layout, dtype, rows, cols);
    db.make(layout, dtype, rows, cols);
    auto da_before = da.buffer.download();
    LIGER_ASSERT_OK(GLU_BACKWARD(dcv.view.ptr(), dcv.view.stride, in.a.ptr(), in.a.stride, in.b.ptr(), in.b.stride,
                                 da.view.ptr(), da.view.stride, db.view.ptr(), db.view.stride, rows, cols, 0, dtype,
                                 nullptr, nullptr));
    LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
    auto da_after = da.buffer.download();
    EXPECT_TRUE(all_close("da", extract(da_after, da.view, rows, cols), da_ref, tolerance));
    EXPECT_TRUE(all_close("db", extract(db.buffer.download(), db.view, rows, cols), db_ref, tolerance));
    EXPECT_TRUE(outside_unchanged(da_before, da_after, {da.view}, rows, cols));
    if (layout == Layout::kFused) {
      EXPECT_EQ(in.ab_buffer.download(), in.ab_image);
    } else {
      EXPECT_EQ(in.a_buffer.download(), in.a_image);
    }

    // Backward, in place: da into a's buffer, db into b's.
    LIGER_ASSERT_OK(GLU_BACKWARD(dcv.view.ptr(), dcv.view.stride, in.a.ptr(), in.a.stride, in.b.ptr(), in.b.stride,
                                 nullptr, 0, nullptr, 0, rows, cols, 1, dtype, nullptr, nullptr));
    LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
    if (layout == Layout::kFused) {
      auto image = in.ab_buffer.download();
      EXPECT_TRUE(all_close("da in place", extract(image, in.a, rows, cols), da_ref, tolerance));
      EXPECT_TRUE(all_close("db in place", extract(image, in.b, rows, cols), db_ref, tolerance));
      EXPECT_TRUE(outside_unchanged(in.ab_image, image, {in.a, in.b}, rows, cols));
    } else {
      auto a_image = in.a_buffer.download();
      auto b_image = in.b_buffer.download();
      EXPECT_TRUE(all_close("da in place", extract(a_image, in.a, rows, cols), da_ref, tolerance));
      EXPECT_TRUE(all_close("db in place", extract(b_image, in.b, rows, cols), db_ref, tolerance));
      EXPECT_TRUE(outside_unchanged(in.a_image, a_image, {in.a}, rows, cols));
      EXPECT_TRUE(outside_unchanged(in.b_image, b_image, {in.b}, rows, cols));
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [dtype, shape, layout] = info.param;
  return std::string(dtype_label(dtype)) + "_" + std::to_string(std::get<0>(shape)) + "x" +
         std::to_string(std::get<1>(shape)) + "_" + layout_name(layout);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GLU_SUITE,
                         ::testing::Combine(::testing::Values(LIGER_DTYPE_FLOAT32, LIGER_DTYPE_FLOAT16,
                                                              LIGER_DTYPE_BFLOAT16),
                                            ::testing::Values(Shape{1, 1}, Shape{3, 37}, Shape{7, 123},
                                                              Shape{2, 4231}, Shape{64, 1024}, Shape{33, 4104}),
                                            ::testing::Values(Layout::kContiguous, Layout::kFused, Layout::kPadded,
                                                              Layout::kOffset)),
                         param_name);

// Every valid tunables combination gives the reference result.
TEST(GLU_SUITE, TunablesSweep) {
  LIGER_REQUIRE_GPU();
  const int64_t rows = 19, cols = 1000;
  for (liger_dtype dtype : {LIGER_DTYPE_FLOAT32, LIGER_DTYPE_BFLOAT16}) {
    const std::size_t n = rows * cols;
    auto a = random_normal(n, dtype, 5, 0.0, 2.0), b = random_normal(n, dtype, 6), dc = random_normal(n, dtype, 7);
    auto c_ref = GLU_REF_FORWARD(a, b);
    std::vector<double> da_ref, db_ref;
    GLU_REF_BACKWARD(dc, a, b, da_ref, db_ref);
    DeviceTensor da_(a, dtype), db_(b, dtype), dcd(dc, dtype), c(n, dtype), ga(n, dtype), gb(n, dtype);
    const int elem = static_cast<int>(dtype_bytes(dtype));
    // 512/1024 threads: a variant whose registers do not allow it must refuse (INVALID_ARGUMENT with
    // the reason), never fail at launch; when it does launch, the result must be right.
    for (int threads : {64, 96, 256, 512, 1024}) {
      for (int vector : {16, 8, 4, 2}) {
        if (vector < elem) continue;
        SCOPED_TRACE(std::string(dtype_label(dtype)) + " threads " + std::to_string(threads) + " vector " +
                     std::to_string(vector));
        liger_tunables t{};
        t.threads_per_block = threads;
        t.vector_bytes = vector;
        c.poison();
        ga.poison();
        gb.poison();
        liger_status fwd = GLU_FORWARD(da_.data(), cols, db_.data(), cols, c.data(), cols, rows, cols, dtype, &t, nullptr);
        if (threads >= 512 && fwd == LIGER_STATUS_INVALID_ARGUMENT) {
          EXPECT_NE(std::string(liger_last_error()).find("exceeds"), std::string::npos) << liger_last_error();
          continue;
        }
        LIGER_ASSERT_OK(fwd);
        liger_status bwd = GLU_BACKWARD(dcd.data(), cols, da_.data(), cols, db_.data(), cols, ga.data(), cols,
                                        gb.data(), cols, rows, cols, 0, dtype, &t, nullptr);
        if (threads >= 512 && bwd == LIGER_STATUS_INVALID_ARGUMENT) {
          EXPECT_NE(std::string(liger_last_error()).find("exceeds"), std::string::npos) << liger_last_error();
          LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
          EXPECT_TRUE(all_close("c", c.download(), c_ref, base_tolerance(dtype)));
          continue;
        }
        LIGER_ASSERT_OK(bwd);
        LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
        EXPECT_TRUE(all_close("c", c.download(), c_ref, base_tolerance(dtype)));
        EXPECT_TRUE(all_close("da", ga.download(), da_ref, base_tolerance(dtype)));
        EXPECT_TRUE(all_close("db", gb.download(), db_ref, base_tolerance(dtype)));
      }
    }
  }
}

TEST(GLU_SUITE, InvalidArgumentsReturnStatus) {
  LIGER_REQUIRE_GPU();
  DeviceTensor a(64, LIGER_DTYPE_BFLOAT16), b(64, LIGER_DTYPE_BFLOAT16), c(64, LIGER_DTYPE_BFLOAT16);
  const auto bf = LIGER_DTYPE_BFLOAT16;
  EXPECT_EQ(GLU_FORWARD(nullptr, 8, b.data(), 8, c.data(), 8, 8, 8, bf, nullptr, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(GLU_FORWARD(a.data(), 8, b.data(), 8, nullptr, 8, 8, 8, bf, nullptr, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(GLU_FORWARD(a.data(), 8, b.data(), 8, c.data(), 8, 8, 8, static_cast<liger_dtype>(7), nullptr, nullptr),
            LIGER_STATUS_UNSUPPORTED_DTYPE);
  EXPECT_EQ(GLU_FORWARD(a.data(), 4, b.data(), 8, c.data(), 8, 8, 8, bf, nullptr, nullptr), LIGER_STATUS_INVALID_ARGUMENT)
      << "row stride below cols";
  EXPECT_EQ(GLU_FORWARD(a.data(), 8, b.data(), 8, c.data(), 8, -1, 8, bf, nullptr, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  liger_tunables t{};
  t.threads_per_block = 33;
  EXPECT_EQ(GLU_FORWARD(a.data(), 8, b.data(), 8, c.data(), 8, 8, 8, bf, &t, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  t = liger_tunables{};
  t.vector_bytes = 3;
  EXPECT_EQ(GLU_FORWARD(a.data(), 8, b.data(), 8, c.data(), 8, 8, 8, bf, &t, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  t.vector_bytes = 16;  // misaligned pointer: 16-byte vectors impossible -> refused, not silently narrowed
  EXPECT_EQ(GLU_FORWARD(static_cast<uint16_t*>(a.data()) + 1, 8, b.data(), 8, c.data(), 8, 7, 8, bf, &t, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(liger_last_error()), "");
  EXPECT_EQ(GLU_BACKWARD(c.data(), 8, a.data(), 8, b.data(), 8, c.data(), 8, b.data(), 8, 8, 8, 1, bf, nullptr, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT)
      << "in_place with explicit da/db";
  EXPECT_EQ(GLU_BACKWARD(nullptr, 8, a.data(), 8, b.data(), 8, c.data(), 8, b.data(), 8, 8, 8, 0, bf, nullptr, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  // Zero-size: success, no launch.
  EXPECT_EQ(GLU_FORWARD(nullptr, 0, nullptr, 0, nullptr, 0, 0, 8, bf, nullptr, nullptr), LIGER_STATUS_SUCCESS);
  liger_tunables out{};
  EXPECT_EQ(GLU_DEFAULTS(90, 16384, 14336, bf, &out), LIGER_STATUS_SUCCESS);
  EXPECT_GT(out.threads_per_block, 0);
  EXPECT_GT(out.vector_bytes, 0);
  EXPECT_EQ(GLU_DEFAULTS(90, 1, 1, bf, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
}

// The checks can fail: an all-zero or slightly wrong output does not pass.
TEST(GLU_SUITE, ChecksRejectWrongOutputs) {
  LIGER_REQUIRE_GPU();
  auto a = random_normal(1000, LIGER_DTYPE_BFLOAT16, 1, 0.0, 2.0), b = random_normal(1000, LIGER_DTYPE_BFLOAT16, 2);
  auto ref = GLU_REF_FORWARD(a, b);
  EXPECT_FALSE(all_close("zeros", std::vector<double>(ref.size(), 0.0), ref, base_tolerance(LIGER_DTYPE_BFLOAT16)));
  auto shifted = ref;
  for (auto& v : shifted) v *= 1.05;
  EXPECT_FALSE(all_close("5% off", shifted, ref, base_tolerance(LIGER_DTYPE_BFLOAT16)));
  auto swapped = GLU_REF_FORWARD(b, a);
  EXPECT_FALSE(all_close("a/b swapped", swapped, ref, base_tolerance(LIGER_DTYPE_BFLOAT16)));
}

}  // namespace
