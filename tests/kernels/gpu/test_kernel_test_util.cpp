// The comparison helpers every GPU test judges with (kernel_test_util.h). They need no device, so
// these run wherever kernel_tests builds, CI included.
#include <vector>

#include "../kernel_test_util.h"

namespace liger::test {
namespace {

const Tolerance kTight{1e-5, 1e-5, 1e-5, "test"};

TEST(AllClose, RelativeL2OfAReferenceThatIsZeroUpToRoundingIsJudgedByAtol) {
  // x / |x| over one column: the exact input gradient is 0, the fp64 reference a rounding away.
  EXPECT_TRUE(all_close("dx", {3e-7}, {1e-17}, kTight));
  // Above atol it still fails, element-wise and in L2.
  EXPECT_FALSE(all_close("dx", {3e-5}, {1e-17}, kTight));
  // One element: its own bound judges it (a cancelling one-column RMSNorm dx, 0.36% off in
  // relative terms but 9e-6 absolute, inside atol), however the relative L2 reads.
  EXPECT_TRUE(all_close("dx", {2.509e-3}, {2.5e-3}, {1e-4, 1e-5, 1e-5, "test"}));
}

TEST(AllClose, RelativeL2CatchesABiasInsideTheElementBound) {
  // bf16's table: a 1% bias on values near 1 is inside atol + rtol|ref| for every element, and
  // even inside atol alone; the relative L2 bound (8e-3) is what catches it.
  std::vector<double> want(100, 1.0), got(100, 1.01);
  const Tolerance bf16{1.6e-2, 1.6e-2, 8e-3, "test"};
  EXPECT_FALSE(all_close("y", got, want, bf16));
  std::vector<double> close(100, 1.004);
  EXPECT_TRUE(all_close("y", close, want, bf16));
}

TEST(WithOutputRounding, AddsTwiceTheErrorOfStoringTheExactResult) {
  // fp16 subnormals are 2^-24 apart: values around 3e-6 round with ~1% error.
  std::vector<double> tiny;
  for (int i = 0; i < 64; ++i) tiny.push_back(3e-6 * (1.0 + i / 97.0));
  const Tolerance widened = with_output_rounding(kTight, tiny, LIGER_DTYPE_FLOAT16);
  EXPECT_GT(widened.max_relative_l2, 1e-3);
  EXPECT_LT(widened.max_relative_l2, 5e-2);
  EXPECT_EQ(widened.atol, kTight.atol);
  // In fp32 and for normal fp16 values it adds next to nothing.
  EXPECT_LT(with_output_rounding(kTight, tiny, LIGER_DTYPE_FLOAT32).max_relative_l2, 2e-5);
  std::vector<double> normal(64, 0.3);
  EXPECT_LT(with_output_rounding(kTight, normal, LIGER_DTYPE_FLOAT16).max_relative_l2, 1e-5 + 2 * 5e-4);
}

}  // namespace
}  // namespace liger::test
