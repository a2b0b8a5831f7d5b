// The `segment` section of a kernel-dev profile: a segment reduction over jagged rows (mean, sum,
// max or min pooling of the rows of x [rows, features] over variable-length runs of rows given by
// offsets or lengths). Kept apart from profile.h so the profile struct only gains one field.
#pragma once

#include <string>
#include <vector>

namespace liger::kernel_dev {

struct SegmentSpec {
  std::string reduce = "mean";   // sum | mean | max | min
  std::string index = "offsets"; // offsets: [segments + 1] boundaries; lengths: [segments] row counts
  // The dim of the source's data tensor the segments run along. The kernel pools dim 0 of a
  // [rows, features] view; the binding moves another pooled dim to the front (a copy) and back.
  int pooled_dim = 0;
  long long features = 256;  // the feature count the tests and the benchmark use (any at run time)
  std::vector<std::string> dtypes = {"fp32", "fp16", "bf16"};
  std::string index_dtype = "int64";  // the C ABI's; the binding converts int32
  // What an empty segment (no rows) gives: "zero" for sum and mean (fixed); for max and min
  // "zero" (as index_add_/scatter_reduce into zeros) or "inf" (-inf for max, +inf for min, as
  // torch.segment_reduce without `initial`). The gradient of an empty segment goes nowhere.
  std::string empty_segment = "zero";
  // How the request spelled it (loop, index_add, scatter_reduce, segment_reduce, split, words):
  // documentation and the name of the PyTorch baseline it is compared with.
  std::string source_form = "words";
  // Benchmark: `segments` segments of uniform random length in [min_rows, max_rows] (fixed seed).
  long long bench_segments = 16384;
  long long bench_min_rows = 1;
  long long bench_max_rows = 512;
};

}  // namespace liger::kernel_dev
