// liger-bench harness: how an op registers benchmark cases, and what the harness measures.
//
// An op's `benchmarks/bench_<op>.cpp` registers its cases with
//
//   LIGER_BENCH_REGISTER(swiglu) {
//     cases.push_back(liger::bench::BenchCase{
//         .op = "swiglu", .mode = "forward", .shape = "16384x14336", .dtype = LIGER_DTYPE_BFLOAT16,
//         .min_bytes = 3.0 * 16384 * 14336 * 2, .flops = 0,
//         .setup = [](liger::bench::BenchContext& ctx) -> liger::bench::RunFn {
//           void* a = ctx.random(n, LIGER_DTYPE_BFLOAT16);       // tracked, freed by the harness
//           void* c = ctx.alloc(n * 2);
//           const liger_tunables* t = ctx.tunables();            // nullptr unless --tunable given
//           return [=](cudaStream_t s) { return liger_swiglu_forward(..., t, (liger_stream_t)s); };
//         }});
//   }
//
// The harness calls `setup` once per rotating input set (each call allocates a fresh, complete
// set of inputs and outputs through the context), enough sets that together they exceed 2x the
// L2 size, then times `run` cycling through the sets so no run finds its inputs in L2.
// Everything allocated through the context is freed by the harness after the case.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "liger_kernels/common.h"

namespace liger::bench {

// One timed launch sequence on the given stream (asynchronous; the harness synchronises).
// Returns the op's status; a non-success status on the first (warm-up) run fails the case.
using RunFn = std::function<liger_status(cudaStream_t)>;

class BenchContext;

struct BenchCase {
  std::string op;     // e.g. "swiglu"
  std::string mode;   // "forward" | "backward" | "full" (forward + backward)
  std::string shape;  // label, e.g. "16384x14336"
  liger_dtype dtype = LIGER_DTYPE_BFLOAT16;
  // The fewest bytes the op must move: each input read once, each output written once.
  double min_bytes = 0;
  // Floating-point operations of one run (0 if not meaningful).
  double flops = 0;
  // Allocates one input set through the context and returns the callable for that set.
  std::function<RunFn(BenchContext&)> setup;
  // Free text shown in --list and JSON (what the case models, e.g. "in place").
  std::string note;
  // Device memory the op allocates internally per run, when the op declares it (added to the
  // measured figure's column only if the measurement saw nothing; see README).
  std::size_t declared_workspace_bytes = 0;
};

// Handed to `setup`: tracked device allocations, random inputs, the tunables override, and
// facts about the device.
class BenchContext {
 public:
  // Uninitialised device memory (zero-filled, so no NaN-dependent timing), tracked.
  void* alloc(std::size_t bytes);
  // `count` values of `dtype` uniformly random in [low, high), tracked.
  void* random(std::size_t count, liger_dtype dtype, double low = -2.0, double high = 2.0);
  // Copies host bytes to a new tracked device buffer (e.g. int64 targets, index arrays).
  void* upload(const void* host, std::size_t bytes);
  // The --tunable overrides as a liger_tunables (zero fields = the op's default), or nullptr
  // when no --tunable was given (so the op's default path is what gets measured).
  const liger_tunables* tunables() const { return has_tunables_ ? &tunables_ : nullptr; }
  int sm_arch() const { return sm_arch_; }
  int sm_count() const { return sm_count_; }
  std::size_t l2_bytes() const { return l2_bytes_; }
  // Deterministic per-set seed (differs between rotating sets).
  uint64_t seed() const { return seed_; }

  // --- harness side -----------------------------------------------------------------------
  std::size_t allocated_bytes() const { return allocated_bytes_; }
  bool failed() const { return failed_; }
  const std::string& error() const { return error_; }
  void free_all();
  ~BenchContext() { free_all(); }

  liger_tunables tunables_{};
  bool has_tunables_ = false;
  int sm_arch_ = 0;
  int sm_count_ = 0;
  std::size_t l2_bytes_ = 0;
  uint64_t seed_ = 0;

 private:
  std::vector<void*> buffers_;
  std::size_t allocated_bytes_ = 0;
  bool failed_ = false;
  std::string error_;
};

// Registry of case generators; LIGER_BENCH_REGISTER adds to it during static initialisation
// (all bench_*.cpp files are linked into the one liger-bench executable).
using CaseGenerator = void (*)(std::vector<BenchCase>& cases);
bool register_generator(const char* name, CaseGenerator generator);
std::vector<BenchCase> all_cases();

// --- measurement (used by main.cpp; exposed so other tools can reuse it) --------------------
struct DeviceInfo {
  int device = 0;
  std::string name;
  int sm_arch = 0;
  int sm_count = 0;
  std::size_t l2_bytes = 0;
  std::size_t total_memory = 0;
};

struct MeasureOptions {
  int warmup_runs = 5;          // untimed runs before timing (the first also checks the status)
  double warmup_ms = 50;        // ...and at least this long
  int min_runs = 20;            // timed runs: at least this many
  int max_runs = 2000;          //   at most this many
  double min_time_ms = 400;     //   and keep going until this much GPU time was timed
  double stop_spread_pct = 0;   //   ...unless (> 0) the runs so far, at least min_runs, already have
                                //   a p10-p90 spread at or below this (% of the median): a tight
                                //   distribution has a stable median after few runs
  double rotate_factor = 2.0;   // rotating input sets together exceed this many times L2
  std::size_t max_set_bytes = 0;  // cap on all sets together (0: 40% of free memory)
};

struct Measurement {
  bool ok = false;
  std::string error;       // why the case failed or was skipped
  int runs = 0;            // timed runs
  int input_sets = 0;      // rotating input sets
  double set_mib = 0;      // device memory of one input set (MiB)
  double median_us = 0, min_us = 0, p10_us = 0, p90_us = 0, mean_us = 0;
  double spread_pct = 0;   // (p90 - p10) / median, in percent
  double gbps = 0;         // min_bytes / median, in GB/s (1e9 bytes)
  double copy_fraction = 0;  // gbps / copy bandwidth
  double tflops = 0;       // flops / median (0 when flops == 0)
  double extra_mib = 0;    // peak extra device memory of one run (see README), MiB
};

bool query_device(DeviceInfo& info, std::string& error);
// Device-to-device copy bandwidth (bytes read + written per second, GB/s) of a large
// cudaMemcpyAsync, median of several runs.
double measure_copy_bandwidth(std::size_t bytes, std::string& error);
Measurement measure_case(const BenchCase& bench_case, const DeviceInfo& device, const MeasureOptions& options,
                         const liger_tunables* tunables);

// Helpers for bench files.
std::size_t dtype_bytes(liger_dtype dtype);
const char* dtype_label(liger_dtype dtype);  // "fp32" | "fp16" | "bf16"

}  // namespace liger::bench

#define LIGER_BENCH_CONCAT_INNER(a, b) a##b
#define LIGER_BENCH_CONCAT(a, b) LIGER_BENCH_CONCAT_INNER(a, b)

// LIGER_BENCH_REGISTER(name) { cases.push_back(...); }  — `cases` is a std::vector<BenchCase>&.
#define LIGER_BENCH_REGISTER(name)                                                               \
  static void LIGER_BENCH_CONCAT(liger_bench_generate_, name)(std::vector<::liger::bench::BenchCase> & cases); \
  [[maybe_unused]] static const bool LIGER_BENCH_CONCAT(liger_bench_registered_, name) =         \
      ::liger::bench::register_generator(#name, &LIGER_BENCH_CONCAT(liger_bench_generate_, name)); \
  static void LIGER_BENCH_CONCAT(liger_bench_generate_, name)(std::vector<::liger::bench::BenchCase> & cases)
