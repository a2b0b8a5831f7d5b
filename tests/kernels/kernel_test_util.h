// Shared machinery of the GPU kernel tests: honest verification as the spec asks (fresh random
// inputs per seed, outputs poisoned with NaN before each launch, fp64 references, element-wise
// and relative-norm error checks so an all-zero output never passes).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "liger_kernels/common.h"

namespace liger::test {

// ---------------------------------------------------------------------------------------------
// GPU availability: every GPU test calls LIGER_REQUIRE_GPU() first.
inline const std::string& gpu_unavailable_reason() {
  static const std::string reason = [] {
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      cudaGetLastError();
      return std::string("no usable CUDA device (") + cudaGetErrorString(error) + ")";
    }
    if (count == 0) return std::string("no CUDA device present");
    return std::string();
  }();
  return reason;
}

#define LIGER_REQUIRE_GPU()                                                            \
  do {                                                                                 \
    if (!::liger::test::gpu_unavailable_reason().empty())                              \
      GTEST_SKIP() << "GPU test not run: " << ::liger::test::gpu_unavailable_reason(); \
  } while (0)

#define LIGER_ASSERT_OK(expr)                                                              \
  do {                                                                                     \
    liger_status liger_test_status_ = (expr);                                              \
    ASSERT_EQ(liger_test_status_, LIGER_STATUS_SUCCESS)                                    \
        << #expr << " -> " << liger_status_string(liger_test_status_) << ": " << liger_last_error(); \
  } while (0)

#define LIGER_ASSERT_CUDA(expr)                                                   \
  do {                                                                            \
    cudaError_t liger_test_error_ = (expr);                                       \
    ASSERT_EQ(liger_test_error_, cudaSuccess) << #expr << ": " << cudaGetErrorString(liger_test_error_); \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Host-side storage conversions (round to nearest even), independent of CUDA's headers so the
// quantisation the tests assume is spelled out.
inline uint16_t float_to_bf16_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}
inline float bf16_bits_to_float(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}
inline uint16_t float_to_half_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal half (or zero): scale into the 10-bit mantissa
    float magnitude;
    std::memcpy(&magnitude, &abs, 4);
    uint32_t mantissa = static_cast<uint32_t>(std::nearbyint(magnitude * 16777216.0f));  // 2^24
    return static_cast<uint16_t>(sign | mantissa);
  }
  uint32_t exponent = ((abs >> 23) - 112u) << 10;
  uint32_t mantissa = (abs >> 13) & 0x3ffu;
  uint32_t rest = abs & 0x1fffu;
  uint32_t result = exponent | mantissa;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}
inline float half_bits_to_float(uint16_t bits) {
  uint32_t sign = (bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  float value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);
    if (sign) value = -value;
    return value;
  }
  uint32_t out = exponent == 31 ? (sign | 0x7f800000u | (mantissa << 13))
                                : (sign | ((exponent + 112u) << 23) | (mantissa << 13));
  std::memcpy(&value, &out, 4);
  return value;
}

inline std::size_t dtype_bytes(liger_dtype dtype) { return dtype == LIGER_DTYPE_FLOAT32 ? 4 : 2; }

// Rounds `value` to what `dtype` can store.
inline double quantize(double value, liger_dtype dtype) {
  float as_float = static_cast<float>(value);
  switch (dtype) {
    case LIGER_DTYPE_FLOAT32: return as_float;
    case LIGER_DTYPE_FLOAT16: return half_bits_to_float(float_to_half_bits(as_float));
    case LIGER_DTYPE_BFLOAT16: return bf16_bits_to_float(float_to_bf16_bits(as_float));
  }
  return value;
}

inline std::vector<uint8_t> encode(const std::vector<double>& values, liger_dtype dtype) {
  std::vector<uint8_t> bytes(values.size() * dtype_bytes(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    float as_float = static_cast<float>(values[i]);
    if (dtype == LIGER_DTYPE_FLOAT32) {
      std::memcpy(&bytes[i * 4], &as_float, 4);
    } else {
      uint16_t bits = dtype == LIGER_DTYPE_FLOAT16 ? float_to_half_bits(as_float) : float_to_bf16_bits(as_float);
      std::memcpy(&bytes[i * 2], &bits, 2);
    }
  }
  return bytes;
}

inline std::vector<double> decode(const std::vector<uint8_t>& bytes, liger_dtype dtype) {
  std::size_t count = bytes.size() / dtype_bytes(dtype);
  std::vector<double> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (dtype == LIGER_DTYPE_FLOAT32) {
      float value;
      std::memcpy(&value, &bytes[i * 4], 4);
      values[i] = value;
    } else {
      uint16_t bits;
      std::memcpy(&bits, &bytes[i * 2], 2);
      values[i] = dtype == LIGER_DTYPE_FLOAT16 ? half_bits_to_float(bits) : bf16_bits_to_float(bits);
    }
  }
  return values;
}

// ---------------------------------------------------------------------------------------------
// A device buffer of `count` elements of `dtype`. Freed on scope exit.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  DeviceTensor(std::size_t count, liger_dtype dtype) : count_(count), dtype_(dtype) {
    if (count_ > 0 && cudaMalloc(&data_, count_ * dtype_bytes(dtype_)) != cudaSuccess) {
      cudaGetLastError();
      data_ = nullptr;
    }
  }
  DeviceTensor(const std::vector<double>& values, liger_dtype dtype) : DeviceTensor(values.size(), dtype) {
    upload(values);
  }
  ~DeviceTensor() {
    if (data_) cudaFree(data_);
  }
  DeviceTensor(DeviceTensor&& other) noexcept { *this = std::move(other); }
  DeviceTensor& operator=(DeviceTensor&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    std::swap(dtype_, other.dtype_);
    return *this;
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  std::size_t count() const { return count_; }
  liger_dtype dtype() const { return dtype_; }
  bool allocated() const { return data_ != nullptr || count_ == 0; }

  void upload(const std::vector<double>& values) {
    auto bytes = encode(values, dtype_);
    cudaMemcpy(data_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
  }
  std::vector<double> download() const {
    std::vector<uint8_t> bytes(count_ * dtype_bytes(dtype_));
    cudaMemcpy(bytes.data(), data_, bytes.size(), cudaMemcpyDeviceToHost);
    return decode(bytes, dtype_);
  }
  // Fills with a NaN bit pattern so an element the kernel forgot to write fails the check.
  void poison() {
    if (data_) cudaMemset(data_, 0xff, count_ * dtype_bytes(dtype_));
  }

 private:
  void* data_ = nullptr;
  std::size_t count_ = 0;
  liger_dtype dtype_ = LIGER_DTYPE_FLOAT32;
};

// ---------------------------------------------------------------------------------------------
// Fresh random inputs: values already quantised to `dtype`, so the fp64 reference sees exactly
// what the kernel reads.
inline std::vector<double> random_values(std::size_t count, liger_dtype dtype, uint64_t seed,
                                         double low = -2.0, double high = 2.0) {
  std::mt19937_64 generator(seed);
  std::uniform_real_distribution<double> distribution(low, high);
  std::vector<double> values(count);
  for (auto& value : values) value = quantize(distribution(generator), dtype);
  return values;
}

inline std::vector<double> random_normal(std::size_t count, liger_dtype dtype, uint64_t seed,
                                         double mean = 0.0, double stddev = 1.0) {
  std::mt19937_64 generator(seed);
  std::normal_distribution<double> distribution(mean, stddev);
  std::vector<double> values(count);
  for (auto& value : values) value = quantize(distribution(generator), dtype);
  return values;
}

// ---------------------------------------------------------------------------------------------
// Error budget of one comparison. `atol`/`rtol` bound each element; `max_relative_l2` bounds
// ||got - ref|| / ||ref|| over the whole tensor, which catches systematic errors hiding under a
// loose element-wise bound and makes an all-zero output fail.
struct Tolerance {
  double atol;
  double rtol;
  double max_relative_l2;
  const char* reason;
};

// The base table per dtype (one place, with the reason for each row). Ops that need more
// (long reductions in weight gradients, say) scale these in their own test file and say why.
inline Tolerance base_tolerance(liger_dtype dtype) {
  switch (dtype) {
    case LIGER_DTYPE_FLOAT32:
      return {1e-5, 1e-5, 1e-5,
              "fp32 storage and fp32 arithmetic: only rounding of a few fp32 ops (2^-24 each) and "
              "reassociation of sums"};
    case LIGER_DTYPE_FLOAT16:
      return {2e-3, 2e-3, 1e-3,
              "fp16 output rounding is 2^-11 relative (4.9e-4); fp32 math inside; one rounding of the "
              "result plus any fp16 intermediate the semantics require"};
    case LIGER_DTYPE_BFLOAT16:
      return {1.6e-2, 1.6e-2, 8e-3,
              "bf16 output rounding is 2^-8 relative (3.9e-3); two roundings where the semantics cast "
              "an intermediate back to bf16 (llama casting mode)"};
  }
  return {0, 0, 0, "unknown dtype"};
}

inline Tolerance scaled(Tolerance tolerance, double factor, const char* reason) {
  tolerance.atol *= factor;
  tolerance.rtol *= factor;
  tolerance.max_relative_l2 *= factor;
  tolerance.reason = reason;
  return tolerance;
}

// `tolerance` widened by what storing `expected` in `dtype` alone costs: twice the relative L2
// error of the exact result rounded to the dtype. Tiny outputs (an fp16 weight gradient averaged
// over rows and ~1/vocab probabilities sits in fp16's subnormal range, 2^-24 apart) cannot be
// stored closer than that by any kernel; for outputs in the normal range this adds ~2^-11 or less.
inline Tolerance with_output_rounding(Tolerance tolerance, const std::vector<double>& expected, liger_dtype dtype) {
  double diff_squared = 0.0, ref_squared = 0.0;
  for (double e : expected) {
    if (!std::isfinite(e)) continue;
    const double d = quantize(e, dtype) - e;
    diff_squared += d * d;
    ref_squared += e * e;
  }
  if (ref_squared > 0.0) tolerance.max_relative_l2 += 2.0 * std::sqrt(diff_squared / ref_squared);
  return tolerance;
}

// Compares `got` with the fp64 `expected`. Fails on: size mismatch, any non-finite value where
// the reference is finite (this includes unwritten NaN poison), an element outside
// atol + rtol*|ref|, or a relative L2 error above the bound.
inline ::testing::AssertionResult all_close(const std::string& what, const std::vector<double>& got,
                                            const std::vector<double>& expected, const Tolerance& tolerance) {
  if (got.size() != expected.size()) {
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " != expected " << expected.size();
  }
  double diff_squared = 0.0, ref_squared = 0.0, worst_excess = 0.0;
  std::size_t worst_index = 0, non_finite = 0, first_non_finite = 0, violations = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(expected[i])) continue;  // the reference itself says non-finite: not compared
    if (!std::isfinite(got[i])) {
      if (non_finite++ == 0) first_non_finite = i;
      continue;
    }
    double diff = std::fabs(got[i] - expected[i]);
    double bound = tolerance.atol + tolerance.rtol * std::fabs(expected[i]);
    if (diff > bound) {
      ++violations;
      if (diff - bound > worst_excess) {
        worst_excess = diff - bound;
        worst_index = i;
      }
    }
    diff_squared += diff * diff;
    ref_squared += expected[i] * expected[i];
  }
  std::ostringstream message;
  message.precision(8);
  if (non_finite > 0) {
    message << what << ": " << non_finite << " non-finite outputs (first at index " << first_non_finite
            << ", got " << got[first_non_finite] << ", expected " << expected[first_non_finite]
            << "); NaN poison left means the kernel did not write it";
    return ::testing::AssertionFailure() << message.str();
  }
  double relative_l2 = ref_squared > 0 ? std::sqrt(diff_squared / ref_squared) : std::sqrt(diff_squared);
  // The relative L2 bound catches a systematic error that the element bound lets through (a 1%
  // bias on values near 1 sits inside bf16's atol). It is judged by atol alone where it is no
  // statistic of the error: a reference that is zero up to rounding (root mean square below atol:
  // the input gradient of x / |x| over one column, where any rounding of the exact zero is a 100%
  // relative error), or fewer than 32 elements, where it is just the elements' own errors, which
  // atol + rtol|ref| already judges (a one-column RMSNorm's dx cancels 1 - y^2 in fp32).
  const double atol_squared_total = tolerance.atol * tolerance.atol * static_cast<double>(got.size());
  const bool no_statistic = ref_squared <= atol_squared_total || got.size() < 32;
  const bool l2_over = relative_l2 > tolerance.max_relative_l2 && !(no_statistic && diff_squared <= atol_squared_total);
  if (violations > 0 || l2_over) {
    message << what << ": " << violations << " of " << got.size() << " elements outside atol=" << tolerance.atol
            << " rtol=" << tolerance.rtol;
    if (violations > 0)
      message << " (worst at index " << worst_index << ": got " << got[worst_index] << ", expected "
              << expected[worst_index] << ")";
    message << "; relative L2 error " << relative_l2 << " (bound " << tolerance.max_relative_l2
            << "); tolerance reason: " << tolerance.reason;
    return ::testing::AssertionFailure() << message.str();
  }
  return ::testing::AssertionSuccess();
}

inline const char* dtype_label(liger_dtype dtype) {
  switch (dtype) {
    case LIGER_DTYPE_FLOAT32: return "fp32";
    case LIGER_DTYPE_FLOAT16: return "fp16";
    case LIGER_DTYPE_BFLOAT16: return "bf16";
  }
  return "unknown";
}

}  // namespace liger::test
