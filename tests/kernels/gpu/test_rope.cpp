// GPU tests of RoPE (q and k in one launch) against the fp64 reference: dtype x shape x layout x
// cos batch x in/out of place, forward and backward, several seeds, poisoned outputs, bytes outside
// the views untouched, inputs untouched when out of place.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "kernel_test_util.h"
#include "liger_kernels/rope.h"
#include "rope_ref.h"
#include "rope_variants.h"

namespace {

using namespace liger::test;

enum class Layout { kContiguous, kHF, kPadded };
const char* layout_name(Layout l) {
  return l == Layout::kContiguous ? "bhtd" : l == Layout::kHF ? "hfbthd" : "padded";
}

struct Shape {
  int64_t batch, q_heads, kv_heads, seq, dim;
};

// Strides {batch, head, seq} of a [B, H, T, D] view and the buffer size (+ offset) it needs.
struct Strided {
  std::array<int64_t, 3> strides;
  std::size_t offset;
  std::size_t size;
};
Strided layout_for(Layout l, int64_t B, int64_t H, int64_t T, int64_t D) {
  switch (l) {
    case Layout::kContiguous: return {{H * T * D, T * D, D}, 0, static_cast<std::size_t>(B * H * T * D)};
    case Layout::kHF: return {{T * H * D, D, H * D}, 0, static_cast<std::size_t>(B * T * H * D)};
    case Layout::kPadded: {
      // [B, T, H, D+2] storage, offset by one element: odd alignment, padding between heads.
      int64_t Dp = D + 2;
      return {{T * H * Dp, Dp, H * Dp}, 1, static_cast<std::size_t>(1 + B * T * H * Dp)};
    }
  }
  return {};
}

void place(std::vector<double>& image, const Strided& s, const std::vector<double>& dense, int64_t B, int64_t H,
           int64_t T, int64_t D) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d)
          image[s.offset + b * s.strides[0] + h * s.strides[1] + t * s.strides[2] + d] =
              dense[((b * H + h) * T + t) * D + d];
}
std::vector<double> extract(const std::vector<double>& image, const Strided& s, int64_t B, int64_t H, int64_t T,
                            int64_t D) {
  std::vector<double> dense(static_cast<std::size_t>(B * H * T * D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d)
          dense[((b * H + h) * T + t) * D + d] =
              image[s.offset + b * s.strides[0] + h * s.strides[1] + t * s.strides[2] + d];
  return dense;
}
// Marks the view's elements in `mask`; everything unmarked must be bit-identical (NaN == NaN).
bool outside_same(const std::vector<double>& before, const std::vector<double>& after, const Strided& s, int64_t B,
                  int64_t H, int64_t T, int64_t D) {
  std::vector<double> b2 = before;
  std::vector<double> a2 = after;
  std::vector<double> zeros(static_cast<std::size_t>(B * H * T * D), 0.0);
  place(b2, s, zeros, B, H, T, D);
  place(a2, s, zeros, B, H, T, D);
  for (std::size_t i = 0; i < b2.size(); ++i) {
    if (std::isnan(b2[i]) && std::isnan(a2[i])) continue;
    if (b2[i] != a2[i]) return false;
  }
  return true;
}

using Param = std::tuple<liger_dtype, int, Layout, bool /*batch cos*/, bool /*in place*/>;
const std::vector<Shape> kShapes = {
    {1, 1, 1, 1, 2}, {2, 3, 1, 5, 6}, {2, 4, 2, 7, 64}, {1, 32, 8, 13, 128}, {3, 5, 0, 4, 16}, {2, 2, 2, 3, 130},
};

class Rope : public ::testing::TestWithParam<Param> {};

TEST_P(Rope, ForwardAndBackwardMatchReference) {
  LIGER_REQUIRE_GPU();
  const auto [dtype, shape_index, layout, batch_cos, in_place] = GetParam();
  const Shape sh = kShapes[shape_index];
  const int64_t B = sh.batch, Hq = sh.q_heads, Hk = sh.kv_heads, T = sh.seq, D = sh.dim;
  const int64_t cos_batch = batch_cos ? B : 1;
  const Tolerance tolerance = base_tolerance(dtype);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    // cos/sin rows of D (+2 padding in the padded layout); only the first D/2 are meaningful to
    // the op: the second half holds junk, so reading it would fail the test.
    const int64_t cos_row = layout == Layout::kPadded ? D + 2 : D;
    std::vector<double> cos_image(static_cast<std::size_t>(cos_batch * T * cos_row));
    std::vector<double> sin_image(cos_image.size());
    std::vector<double> cos_dense(static_cast<std::size_t>(cos_batch * T * D)), sin_dense(cos_dense.size());
    auto junk = random_values(cos_image.size(), dtype, seed * 31, 5.0, 9.0);
    auto angles = random_values(cos_dense.size(), LIGER_DTYPE_FLOAT32, seed * 37, -3.2, 3.2);
    for (int64_t r = 0; r < cos_batch * T; ++r)
      for (int64_t d = 0; d < cos_row; ++d) {
        std::size_t i = static_cast<std::size_t>(r * cos_row + d);
        if (d < D / 2) {
          double angle = angles[r * D + d];
          cos_image[i] = quantize(std::cos(angle), dtype);
          sin_image[i] = quantize(std::sin(angle), dtype);
          cos_dense[r * D + d] = cos_dense[r * D + d + D / 2] = cos_image[i];
          sin_dense[r * D + d] = sin_dense[r * D + d + D / 2] = sin_image[i];
        } else {
          cos_image[i] = junk[i];
          sin_image[i] = -junk[i];
        }
      }
    DeviceTensor cos_buf(cos_image, dtype), sin_buf(sin_image, dtype);

    const Strided qs = layout_for(layout, B, Hq, T, D), ks = layout_for(layout, B, Hk, T, D);
    auto q = random_normal(static_cast<std::size_t>(B * Hq * T * D), dtype, seed * 41);
    auto k = random_normal(static_cast<std::size_t>(B * Hk * T * D), dtype, seed * 43);
    auto q_image = random_values(qs.size, dtype, seed * 47);
    auto k_image = random_values(ks.size, dtype, seed * 53);
    place(q_image, qs, q, B, Hq, T, D);
    place(k_image, ks, k, B, Hk, T, D);

    for (bool backward : {false, true}) {
      SCOPED_TRACE(backward ? "backward" : "forward");
      DeviceTensor q_buf(q_image, dtype), k_buf(k_image, dtype);
      DeviceTensor qo_buf(qs.size, dtype), ko_buf(ks.size, dtype);
      qo_buf.poison();
      ko_buf.poison();
      auto qo_before = qo_buf.download();
      auto ko_before = ko_buf.download();
      auto ptr = [&](DeviceTensor& t, const Strided& s) -> void* {
        return t.data() ? static_cast<uint8_t*>(t.data()) + s.offset * dtype_bytes(dtype) : nullptr;
      };
      void* qp = Hq ? ptr(q_buf, qs) : nullptr;
      void* kp = Hk ? ptr(k_buf, ks) : nullptr;
      void* qop = in_place || !Hq ? nullptr : ptr(qo_buf, qs);
      void* kop = in_place || !Hk ? nullptr : ptr(ko_buf, ks);
      auto fn = backward ? liger_rope_backward : liger_rope_forward;
      LIGER_ASSERT_OK(fn(qp, qs.strides.data(), qop, qs.strides.data(), Hq, kp, ks.strides.data(), kop,
                         ks.strides.data(), Hk, cos_buf.data(), sin_buf.data(), cos_batch,
                         T * cos_row, cos_row, B, T, D, dtype, nullptr, nullptr));
      LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
      auto q_ref = liger::ref::rope_apply(q, B, Hq, T, D, cos_dense, sin_dense, cos_batch, backward);
      auto k_ref = liger::ref::rope_apply(k, B, Hk, T, D, cos_dense, sin_dense, cos_batch, backward);
      if (in_place) {
        auto qa = q_buf.download(), ka = k_buf.download();
        if (Hq) EXPECT_TRUE(all_close("q in place", extract(qa, qs, B, Hq, T, D), q_ref, tolerance));
        if (Hk) EXPECT_TRUE(all_close("k in place", extract(ka, ks, B, Hk, T, D), k_ref, tolerance));
        EXPECT_TRUE(outside_same(q_image, qa, qs, B, Hq, T, D)) << "q padding written";
        EXPECT_TRUE(outside_same(k_image, ka, ks, B, Hk, T, D)) << "k padding written";
      } else {
        auto qa = qo_buf.download(), ka = ko_buf.download();
        if (Hq) EXPECT_TRUE(all_close("q out", extract(qa, qs, B, Hq, T, D), q_ref, tolerance));
        if (Hk) EXPECT_TRUE(all_close("k out", extract(ka, ks, B, Hk, T, D), k_ref, tolerance));
        EXPECT_TRUE(outside_same(qo_before, qa, qs, B, Hq, T, D)) << "q_out padding written";
        EXPECT_TRUE(outside_same(ko_before, ka, ks, B, Hk, T, D)) << "k_out padding written";
        EXPECT_EQ(q_buf.download(), q_image) << "q modified by an out-of-place call";
        EXPECT_EQ(k_buf.download(), k_image) << "k modified by an out-of-place call";
      }
      EXPECT_EQ(cos_buf.download(), cos_image);
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [dtype, shape_index, layout, batch_cos, in_place] = info.param;
  const Shape s = kShapes[shape_index];
  return std::string(dtype_label(dtype)) + "_B" + std::to_string(s.batch) + "Hq" + std::to_string(s.q_heads) + "Hk" +
         std::to_string(s.kv_heads) + "T" + std::to_string(s.seq) + "D" + std::to_string(s.dim) + "_" +
         layout_name(layout) + (batch_cos ? "_cosB" : "_cos1") + (in_place ? "_inplace" : "_outofplace");
}

INSTANTIATE_TEST_SUITE_P(Shapes, Rope,
                         ::testing::Combine(::testing::Values(LIGER_DTYPE_FLOAT32, LIGER_DTYPE_FLOAT16,
                                                              LIGER_DTYPE_BFLOAT16),
                                            ::testing::Range(0, 6),
                                            ::testing::Values(Layout::kContiguous, Layout::kHF, Layout::kPadded),
                                            ::testing::Bool(), ::testing::Bool()),
                         param_name);

// q and k of [B, H, T, D] placed in HF's layout ([B, T, H, D] storage), with HF's rotary tables
// [T, D] (both halves of a row equal), rounded to dtype.
struct HfInputs {
  std::vector<double> cos, sin;
  Strided qs, ks;
  std::vector<double> qi, ki;
};
HfInputs hf_inputs(int64_t B, int64_t Hq, int64_t Hk, int64_t T, int64_t D, liger_dtype dtype,
                   const std::vector<double>& q, const std::vector<double>& k) {
  HfInputs in;
  in.cos.assign(static_cast<std::size_t>(T * D), 0.0);
  in.sin.assign(static_cast<std::size_t>(T * D), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t d = 0; d < D; ++d) {
      const double angle = t * std::pow(10000.0, -2.0 * (d % (D / 2)) / D);
      in.cos[t * D + d] = quantize(std::cos(angle), dtype);
      in.sin[t * D + d] = quantize(std::sin(angle), dtype);
    }
  in.qs = layout_for(Layout::kHF, B, Hq, T, D);
  in.ks = layout_for(Layout::kHF, B, Hk, T, D);
  in.qi.assign(in.qs.size, 0.0);
  in.ki.assign(in.ks.size, 0.0);
  place(in.qi, in.qs, q, B, Hq, T, D);
  place(in.ki, in.ks, k, B, Hk, T, D);
  return in;
}

// Forward then backward returns the input (rotation then inverse rotation), every tunable combination.
TEST(RopeTunables, SweepRoundTrip) {
  LIGER_REQUIRE_GPU();
  const int64_t B = 2, Hq = 6, Hk = 2, T = 9, D = 64;
  const auto dtype = LIGER_DTYPE_FLOAT32;
  auto q = random_normal(B * Hq * T * D, dtype, 3), k = random_normal(B * Hk * T * D, dtype, 4);
  const HfInputs in = hf_inputs(B, Hq, Hk, T, D, dtype, q, k);
  const auto &cos = in.cos, &sin = in.sin, &qi = in.qi, &ki = in.ki;
  const Strided &qs = in.qs, &ks = in.ks;
  DeviceTensor cb(cos, dtype), sb(sin, dtype);
  auto q_ref = liger::ref::rope_forward(q, B, Hq, T, D, cos, sin, 1);
  for (int stages : {1, 3})
  for (int threads : {32, 64, 128, 256, 512, 1024}) {
    for (int rows : {1, 2, 4}) {
      for (int vector : {16, 8, 4}) {
        const int lanes_needed = D / 2 / (vector / 4);
        if (threads % rows != 0 || threads / rows < lanes_needed) continue;
        // Heads in flight per lane: each value over the shapes, so a lane's last partial pass
        // (fewer heads left than in flight) is exercised too.
        const int depth = 1 << ((threads / 32 + rows + vector) % 3);
        SCOPED_TRACE("threads " + std::to_string(threads) + " rows " + std::to_string(rows) + " vector " +
                     std::to_string(vector) + " pipeline_depth " + std::to_string(depth) + " stages " +
                     std::to_string(stages));
        liger_tunables t{};
        t.stages = stages;
        t.threads_per_block = threads;
        t.rows_per_block = rows;
        t.vector_bytes = vector;
        t.pipeline_depth = depth;
        DeviceTensor qb(qi, dtype), kb(ki, dtype);
        liger_status fwd = liger_rope_forward(qb.data(), qs.strides.data(), nullptr, nullptr, Hq, kb.data(),
                                              ks.strides.data(), nullptr, nullptr, Hk, cb.data(), sb.data(), 1, T * D,
                                              D, B, T, D, dtype, &t, nullptr);
        if (threads >= 512 && fwd == LIGER_STATUS_INVALID_ARGUMENT) {  // register-limited variant: refused, not crashed
          EXPECT_NE(std::string(liger_last_error()).find("exceeds"), std::string::npos) << liger_last_error();
          continue;
        }
        LIGER_ASSERT_OK(fwd);
        LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
        EXPECT_TRUE(all_close("q fwd", extract(qb.download(), qs, B, Hq, T, D), q_ref, base_tolerance(dtype)));
        LIGER_ASSERT_OK(liger_rope_backward(qb.data(), qs.strides.data(), nullptr, nullptr, Hq, kb.data(),
                                            ks.strides.data(), nullptr, nullptr, Hk, cb.data(), sb.data(), 1, T * D, D,
                                            B, T, D, dtype, &t, nullptr));
        LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
        EXPECT_TRUE(all_close("q roundtrip", extract(qb.download(), qs, B, Hq, T, D), q, base_tolerance(dtype)));
        EXPECT_TRUE(all_close("k roundtrip", extract(kb.download(), ks, B, Hk, T, D), k, base_tolerance(dtype)));
      }
    }
  }
}

bool has_bulk_copies() {
  int device = 0, major = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major >= 9;
}

// The staged kernel (heads contiguous in a token, 16-byte vectors, sm_90): many token tiles per
// block, so every stage is reused with both barrier parities; a last tile with fewer tokens than
// rows_per_block; more stages than some blocks have tiles; in place and into separate outputs
// (inputs untouched); forward against the reference, then backward back to the input.
TEST(RopeStaged, ManyTilesInAndOutOfPlace) {
  LIGER_REQUIRE_GPU();
  if (!has_bulk_copies()) GTEST_SKIP() << "staging needs the bulk-copy engine (sm_90)";
  const int64_t B = 3, Hq = 8, Hk = 2, T = 257, D = 128;
  for (liger_dtype dtype : {LIGER_DTYPE_BFLOAT16, LIGER_DTYPE_FLOAT32}) {
    auto q = random_normal(B * Hq * T * D, dtype, 31), k = random_normal(B * Hk * T * D, dtype, 32);
    const HfInputs in = hf_inputs(B, Hq, Hk, T, D, dtype, q, k);
    const auto &cos = in.cos, &sin = in.sin, &qi = in.qi, &ki = in.ki;
    const Strided &qs = in.qs, &ks = in.ks;
    DeviceTensor cb(cos, dtype), sb(sin, dtype);
    const auto q_ref = liger::ref::rope_forward(q, B, Hq, T, D, cos, sin, 1);
    const auto k_ref = liger::ref::rope_forward(k, B, Hk, T, D, cos, sin, 1);
    for (int stages : {2, 3, 8})
      for (int rows : {1, 2, 4})
        for (bool in_place : {true, false}) {
          SCOPED_TRACE(std::string(dtype_label(dtype)) + " stages " + std::to_string(stages) + " rows " +
                       std::to_string(rows) + (in_place ? " in place" : " out of place"));
          liger_tunables t{};
          t.threads_per_block = 64 * rows;
          t.rows_per_block = rows;
          t.stages = stages;
          DeviceTensor qb(qi, dtype), kb(ki, dtype), qo(qs.size, dtype), ko(ks.size, dtype);
          qo.poison();
          ko.poison();
          void* q_out = in_place ? nullptr : qo.data();
          void* k_out = in_place ? nullptr : ko.data();
          LIGER_ASSERT_OK(liger_rope_forward(qb.data(), qs.strides.data(), q_out, qs.strides.data(), Hq, kb.data(),
                                             ks.strides.data(), k_out, ks.strides.data(), Hk, cb.data(), sb.data(), 1,
                                             T * D, D, B, T, D, dtype, &t, nullptr));
          LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
          const DeviceTensor& qr = in_place ? qb : qo;
          const DeviceTensor& kr = in_place ? kb : ko;
          EXPECT_TRUE(all_close("q fwd", extract(qr.download(), qs, B, Hq, T, D), q_ref, base_tolerance(dtype)));
          EXPECT_TRUE(all_close("k fwd", extract(kr.download(), ks, B, Hk, T, D), k_ref, base_tolerance(dtype)));
          if (!in_place) {
            EXPECT_EQ(qb.download(), qi) << "q input changed";
            EXPECT_EQ(kb.download(), ki) << "k input changed";
          }
          DeviceTensor& qback = in_place ? qb : qo;
          DeviceTensor& kback = in_place ? kb : ko;
          LIGER_ASSERT_OK(liger_rope_backward(qback.data(), qs.strides.data(), nullptr, nullptr, Hq, kback.data(),
                                              ks.strides.data(), nullptr, nullptr, Hk, cb.data(), sb.data(), 1, T * D,
                                              D, B, T, D, dtype, &t, nullptr));
          LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
          EXPECT_TRUE(all_close("q roundtrip", extract(qback.download(), qs, B, Hq, T, D), q, base_tolerance(dtype)));
          EXPECT_TRUE(all_close("k roundtrip", extract(kback.download(), ks, B, Hk, T, D), k, base_tolerance(dtype)));
        }
  }
}

// Stages hold whole token tiles in shared memory: 64 heads of 256 fp32 are 64 KiB a token, so
// 8 stages of 4 tokens cannot fit; asked for, they are refused with the size, not clipped.
TEST(RopeStaged, StagesBeyondSharedMemoryAreRefused) {
  LIGER_REQUIRE_GPU();
  if (!has_bulk_copies()) GTEST_SKIP() << "staging needs the bulk-copy engine (sm_90)";
  const auto f = LIGER_DTYPE_FLOAT32;
  const int64_t B = 1, H = 64, T = 4, D = 256;
  const Strided qs = layout_for(Layout::kHF, B, H, T, D);
  DeviceTensor q(qs.size, f), c(T * D, f), s(T * D, f);
  liger_tunables t{};
  t.threads_per_block = 256;
  t.rows_per_block = 4;
  t.stages = 8;
  EXPECT_EQ(liger_rope_forward(q.data(), qs.strides.data(), nullptr, nullptr, H, nullptr, nullptr, nullptr, nullptr, 0,
                               c.data(), s.data(), 1, T * D, D, B, T, D, f, &t, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(liger_last_error()).find("stages=8"), std::string::npos) << liger_last_error();
}

TEST(RopeArguments, InvalidReturnStatus) {
  LIGER_REQUIRE_GPU();
  const auto bf = LIGER_DTYPE_BFLOAT16;
  DeviceTensor q(2 * 4 * 8, bf), k(2 * 4 * 8, bf), c(4 * 8, bf), s(4 * 8, bf);
  const int64_t st[3] = {32, 32, 8};
  auto call = [&](const void* qp, int64_t dim, liger_dtype dtype, const liger_tunables* t, int64_t cos_batch = 1,
                  const void* cp = nullptr) {
    return liger_rope_forward(qp, st, nullptr, nullptr, 1, k.data(), st, nullptr, nullptr, 1, cp ? cp : c.data(),
                              s.data(), cos_batch, 32, dim, 2, 4, dim, dtype, t, nullptr);
  };
  EXPECT_EQ(call(q.data(), 8, bf, nullptr), LIGER_STATUS_SUCCESS);
  EXPECT_EQ(call(q.data(), 7, bf, nullptr), LIGER_STATUS_UNSUPPORTED_SHAPE) << "odd head_dim";
  EXPECT_EQ(call(nullptr, 8, bf, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(call(q.data(), 8, static_cast<liger_dtype>(9), nullptr), LIGER_STATUS_UNSUPPORTED_DTYPE);
  EXPECT_EQ(call(q.data(), 8, bf, nullptr, 3), LIGER_STATUS_INVALID_ARGUMENT) << "cos_batch neither 1 nor batch";
  liger_tunables t{};
  t.threads_per_block = 48;
  EXPECT_EQ(call(q.data(), 8, bf, &t), LIGER_STATUS_INVALID_ARGUMENT);
  t = liger_tunables{};
  t.rows_per_block = 64;
  EXPECT_EQ(call(q.data(), 8, bf, &t), LIGER_STATUS_INVALID_ARGUMENT);
  t = liger_tunables{};
  t.pipeline_depth = 3;  // heads in flight: 1, 2 or 4
  EXPECT_EQ(call(q.data(), 8, bf, &t), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(liger_last_error()).find("pipeline_depth"), std::string::npos) << liger_last_error();
  t = liger_tunables{};
  t.stages = 9;  // token tiles in flight: 1..8
  EXPECT_EQ(call(q.data(), 8, bf, &t), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(liger_last_error()).find("stages"), std::string::npos) << liger_last_error();
  t = liger_tunables{};
  t.vector_bytes = 16;  // head_dim/2 = 4 bf16 = 8 bytes: 16-byte vectors impossible, refused
  EXPECT_EQ(call(q.data(), 8, bf, &t), LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(liger_last_error()), "");
  t.vector_bytes = 8;
  EXPECT_EQ(call(q.data(), 8, bf, &t), LIGER_STATUS_SUCCESS);
  LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
  liger_tunables out{};
  EXPECT_EQ(liger_rope_default_tunables(90, 16384, 40 * 128, bf, &out), LIGER_STATUS_SUCCESS);
  EXPECT_GT(out.threads_per_block, 0);
  EXPECT_EQ(liger_rope_default_tunables(90, 1, 1, bf, nullptr), LIGER_STATUS_INVALID_ARGUMENT);
}

// The tuned defaults are host arithmetic (no device needed): lanes that divide the token's vector
// slots (no lane idles through a last partial pass over the heads), about five heads per lane.
TEST(RopeDefaults, LanesDivideTheSlotsAtAboutFiveHeadsEach) {
  const liger_dtype bf = LIGER_DTYPE_BFLOAT16;
  struct Case {
    int64_t heads, head_dim;
    int threads, rows;
  };
  // head_dim 128 in bf16: 8 vector slots per head.
  for (const Case& c : {Case{32 + 8, 128, 128, 2}, Case{32 + 32, 128, 128, 1}, Case{28 + 4, 128, 128, 2},
                        Case{12 + 12, 128, 128, 4}, Case{4 + 1, 64, 128, 4}}) {
    liger_tunables out{};
    ASSERT_EQ(liger_rope_default_tunables(90, 16384, c.heads * c.head_dim, bf, &out), LIGER_STATUS_SUCCESS);
    EXPECT_EQ(out.threads_per_block, c.threads) << c.heads << " heads of " << c.head_dim;
    EXPECT_EQ(out.rows_per_block, c.rows) << c.heads << " heads of " << c.head_dim;
    EXPECT_EQ(out.vector_bytes, 16);
    EXPECT_EQ(out.pipeline_depth, 2);
    EXPECT_EQ(out.stages, 3);  // sm_90: token tiles staged through shared memory
  }
  liger_tunables sm80{};
  ASSERT_EQ(liger_rope_default_tunables(80, 16384, 40 * 128, bf, &sm80), LIGER_STATUS_SUCCESS);
  EXPECT_EQ(sm80.stages, 1) << "no bulk-copy engine before sm_90";
}

// Every heads_per_thread code variant (rope_variants.cu: the op's launcher compiled into this
// binary per value) against the reference, forward out of place into poisoned outputs, then
// backward in place. Shapes whose head counts are not multiples of 4 (a lane's last step holds
// fewer heads than HPT x pipeline_depth, a step crosses from q heads into k heads), GQA, q only,
// two-element heads; launch shapes with few lanes per token (many heads per lane, so HPT shapes
// the steps) for the register kernel (stages=1 or an unstaged layout) and the staged kernel
// (heads contiguous, sm_90), each pipeline_depth, and the defaults.
using VariantParam = std::tuple<int /*heads per thread*/, Layout, liger_dtype>;
class RopeHeadsPerThread : public ::testing::TestWithParam<VariantParam> {};

TEST_P(RopeHeadsPerThread, EveryLaunchShapeMatchesReference) {
  LIGER_REQUIRE_GPU();
  const auto [hpt, layout, dtype] = GetParam();
  const std::vector<Shape> shapes = {{2, 7, 3, 5, 64}, {1, 5, 1, 6, 128}, {2, 12, 4, 3, 128},
                                     {1, 3, 0, 4, 16}, {2, 1, 1, 3, 2},   {1, 0, 3, 2, 64}};
  struct Launch {
    int threads, rows, depth, stages;  // 0: the op's default
  };
  const std::vector<Launch> launches = {{0, 0, 0, 0},  {32, 1, 1, 1},  {32, 1, 2, 1}, {64, 2, 4, 1},
                                        {128, 1, 2, 1}, {32, 1, 0, 3}, {64, 2, 0, 2}};
  const Tolerance tolerance = base_tolerance(dtype);
  uint64_t seed = 100;
  for (const Shape& sh : shapes) {
    const int64_t B = sh.batch, Hq = sh.q_heads, Hk = sh.kv_heads, T = sh.seq, D = sh.dim;
    std::vector<double> cos(static_cast<std::size_t>(T * D)), sin(cos.size());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < D; ++d) {
        const double angle = 0.37 * (t + 1) * (1 + d % (D / 2));
        cos[t * D + d] = quantize(std::cos(angle), dtype);
        sin[t * D + d] = quantize(std::sin(angle), dtype);
      }
    DeviceTensor cb(cos, dtype), sb(sin, dtype);
    const Strided qs = layout_for(layout, B, Hq, T, D), ks = layout_for(layout, B, Hk, T, D);
    for (const Launch& l : launches) {
      ++seed;
      // The vector the launcher picks: the widest up to 16 bytes dividing D/2 (one element in the
      // padded layout, offset by one element); explicit lanes fewer than a head's vectors are refused.
      int vec = layout == Layout::kPadded ? 1 : 16 / static_cast<int>(dtype_bytes(dtype));
      while (vec > 1 && (D / 2) % vec != 0) vec /= 2;
      if (l.threads && l.threads / l.rows < D / 2 / vec) continue;
      SCOPED_TRACE("HPT " + std::to_string(hpt) + " B" + std::to_string(B) + " Hq" + std::to_string(Hq) + " Hk" +
                   std::to_string(Hk) + " T" + std::to_string(T) + " D" + std::to_string(D) + " threads " +
                   std::to_string(l.threads) + " rows " + std::to_string(l.rows) + " depth " + std::to_string(l.depth) +
                   " stages " + std::to_string(l.stages));
      liger_tunables t{};
      t.threads_per_block = l.threads;
      t.rows_per_block = l.rows;
      t.pipeline_depth = l.depth;
      t.stages = l.stages;
      const liger_tunables* tp = l.threads || l.depth || l.stages ? &t : nullptr;
      auto q = random_normal(static_cast<std::size_t>(B * Hq * T * D), dtype, seed * 7);
      auto k = random_normal(static_cast<std::size_t>(B * Hk * T * D), dtype, seed * 11);
      auto q_image = random_values(qs.size, dtype, seed * 13), k_image = random_values(ks.size, dtype, seed * 17);
      place(q_image, qs, q, B, Hq, T, D);
      place(k_image, ks, k, B, Hk, T, D);
      DeviceTensor qb(q_image, dtype), kb(k_image, dtype), qo(qs.size, dtype), ko(ks.size, dtype);
      qo.poison();
      ko.poison();
      const auto qo_before = qo.download(), ko_before = ko.download();
      auto at = [&](DeviceTensor& x, const Strided& s, int64_t heads) -> void* {
        return heads && x.data() ? static_cast<uint8_t*>(x.data()) + s.offset * dtype_bytes(dtype) : nullptr;
      };
      const liger_status fwd = rope_variant(hpt, false, at(qb, qs, Hq), qs.strides.data(), at(qo, qs, Hq),
                                            qs.strides.data(), Hq, at(kb, ks, Hk), ks.strides.data(), at(ko, ks, Hk),
                                            ks.strides.data(), Hk, cb.data(), sb.data(), 1, T * D, D, B, T, D, dtype,
                                            tp, nullptr);
      ASSERT_EQ(fwd, LIGER_STATUS_SUCCESS) << rope_variant_last_error();
      LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
      const auto q_ref = liger::ref::rope_forward(q, B, Hq, T, D, cos, sin, 1);
      const auto k_ref = liger::ref::rope_forward(k, B, Hk, T, D, cos, sin, 1);
      const auto qa = qo.download(), ka = ko.download();
      if (Hq) {
        EXPECT_TRUE(all_close("q fwd", extract(qa, qs, B, Hq, T, D), q_ref, tolerance));
      }
      if (Hk) {
        EXPECT_TRUE(all_close("k fwd", extract(ka, ks, B, Hk, T, D), k_ref, tolerance));
      }
      EXPECT_TRUE(outside_same(qo_before, qa, qs, B, Hq, T, D)) << "q_out padding written";
      EXPECT_TRUE(outside_same(ko_before, ka, ks, B, Hk, T, D)) << "k_out padding written";
      EXPECT_EQ(qb.download(), q_image) << "q modified by an out-of-place call";
      EXPECT_EQ(kb.download(), k_image) << "k modified by an out-of-place call";

      const liger_status bwd = rope_variant(hpt, true, at(qb, qs, Hq), qs.strides.data(), nullptr, nullptr, Hq,
                                            at(kb, ks, Hk), ks.strides.data(), nullptr, nullptr, Hk, cb.data(),
                                            sb.data(), 1, T * D, D, B, T, D, dtype, tp, nullptr);
      ASSERT_EQ(bwd, LIGER_STATUS_SUCCESS) << rope_variant_last_error();
      LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
      const auto dq_ref = liger::ref::rope_backward(q, B, Hq, T, D, cos, sin, 1);
      const auto dk_ref = liger::ref::rope_backward(k, B, Hk, T, D, cos, sin, 1);
      const auto qg = qb.download(), kg = kb.download();
      if (Hq) {
        EXPECT_TRUE(all_close("q bwd in place", extract(qg, qs, B, Hq, T, D), dq_ref, tolerance));
      }
      if (Hk) {
        EXPECT_TRUE(all_close("k bwd in place", extract(kg, ks, B, Hk, T, D), dk_ref, tolerance));
      }
      EXPECT_TRUE(outside_same(q_image, qg, qs, B, Hq, T, D)) << "q padding written";
      EXPECT_TRUE(outside_same(k_image, kg, ks, B, Hk, T, D)) << "k padding written";
    }
  }
}

// The variants differ only in how many heads a lane holds at once: on the same inputs each
// gives bit-identical outputs to HPT 1 (the same float operations per element), so a variant
// that skipped or repeated a head cannot hide inside the tolerance.
TEST(RopeHeadsPerThreadSame, BitIdenticalToOneHeadPerThread) {
  LIGER_REQUIRE_GPU();
  const auto bf = LIGER_DTYPE_BFLOAT16;
  const int64_t B = 2, Hq = 9, Hk = 3, T = 17, D = 128;
  for (Layout layout : {Layout::kContiguous, Layout::kHF}) {
    SCOPED_TRACE(layout_name(layout));
    const Strided qs = layout_for(layout, B, Hq, T, D), ks = layout_for(layout, B, Hk, T, D);
    const auto q_image = random_values(qs.size, bf, 5), k_image = random_values(ks.size, bf, 6);
    const auto cos = random_values(static_cast<std::size_t>(T * D), bf, 7, -1.0, 1.0);
    const auto sin = random_values(cos.size(), bf, 8, -1.0, 1.0);
    DeviceTensor cb(cos, bf), sb(sin, bf);
    for (int stages : {1, 3}) {
      liger_tunables t{};
      t.threads_per_block = 32;
      t.rows_per_block = 1;
      t.stages = stages;
      std::vector<std::vector<double>> q_outs, k_outs;
      for (int hpt : kRopeHeadsPerThread) {
        DeviceTensor qb(q_image, bf), kb(k_image, bf);
        ASSERT_EQ(rope_variant(hpt, false, qb.data(), qs.strides.data(), nullptr, nullptr, Hq, kb.data(),
                               ks.strides.data(), nullptr, nullptr, Hk, cb.data(), sb.data(), 1, T * D, D, B, T, D, bf,
                               &t, nullptr),
                  LIGER_STATUS_SUCCESS)
            << rope_variant_last_error();
        LIGER_ASSERT_CUDA(cudaDeviceSynchronize());
        q_outs.push_back(qb.download());
        k_outs.push_back(kb.download());
      }
      EXPECT_NE(q_outs[0], q_image) << "q not rotated";
      EXPECT_NE(k_outs[0], k_image) << "k not rotated";
      for (std::size_t i = 1; i < q_outs.size(); ++i) {
        EXPECT_TRUE(q_outs[i] == q_outs[0]) << "q: HPT " << kRopeHeadsPerThread[i] << " stages " << stages;
        EXPECT_TRUE(k_outs[i] == k_outs[0]) << "k: HPT " << kRopeHeadsPerThread[i] << " stages " << stages;
      }
    }
  }
  EXPECT_EQ(rope_variant(3, false, nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr, 0, nullptr,
                         nullptr, 1, 0, 0, 1, 1, 2, bf, nullptr, nullptr),
            LIGER_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rope_variant_last_error()).find("heads_per_thread=3"), std::string::npos);
}

std::string variant_name(const ::testing::TestParamInfo<VariantParam>& info) {
  const auto& [hpt, layout, dtype] = info.param;
  return "hpt" + std::to_string(hpt) + "_" + layout_name(layout) + "_" + dtype_label(dtype);
}

INSTANTIATE_TEST_SUITE_P(Variants, RopeHeadsPerThread,
                         ::testing::Combine(::testing::ValuesIn(kRopeHeadsPerThread),
                                            ::testing::Values(Layout::kContiguous, Layout::kHF, Layout::kPadded),
                                            ::testing::Values(LIGER_DTYPE_FLOAT32, LIGER_DTYPE_BFLOAT16)),
                         variant_name);

TEST(RopeArguments, ChecksRejectWrongOutputs) {
  LIGER_REQUIRE_GPU();
  const int64_t B = 1, H = 2, T = 3, D = 8;
  auto x = random_normal(B * H * T * D, LIGER_DTYPE_BFLOAT16, 9);
  std::vector<double> cos(T * D, std::cos(0.7)), sin(T * D, std::sin(0.7));
  auto ref = liger::ref::rope_forward(x, B, H, T, D, cos, sin, 1);
  auto wrong_sign = liger::ref::rope_backward(x, B, H, T, D, cos, sin, 1);
  EXPECT_FALSE(all_close("backward instead of forward", wrong_sign, ref, base_tolerance(LIGER_DTYPE_BFLOAT16)));
  EXPECT_FALSE(all_close("unrotated", x, ref, base_tolerance(LIGER_DTYPE_BFLOAT16)));
  EXPECT_FALSE(all_close("zeros", std::vector<double>(ref.size(), 0.0), ref, base_tolerance(LIGER_DTYPE_BFLOAT16)));
}

}  // namespace
