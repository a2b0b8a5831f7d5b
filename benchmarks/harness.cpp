// liger-bench harness: registry, tracked allocations with random inputs, and the measurement
// itself (CUDA events around each run, warm-up, rotating input sets larger than L2, median and
// spread, achieved bandwidth against the copy bandwidth of the same device).
#include "harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>

namespace liger::bench {
namespace {

std::vector<std::pair<std::string, CaseGenerator>>& generators() {
  static std::vector<std::pair<std::string, CaseGenerator>> list;
  return list;
}

uint16_t float_to_bf16_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

// Round-to-nearest-even fp32 -> fp16 for the normal range the random pools use ([-1e4, 1e4],
// magnitudes above 2^-14); tiny values flush to zero, which the pools never produce on purpose.
uint16_t float_to_half_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) return static_cast<uint16_t>(sign);
  uint32_t result = (((abs >> 23) - 112u) << 10) | ((abs >> 13) & 0x3ffu);
  uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}

// Device-resident pools of random values per (dtype, range); random() tiles them with
// device-to-device copies, so filling gigabytes costs milliseconds, not host RNG seconds.
constexpr std::size_t kPoolElements = (std::size_t{1} << 22) + 61;  // odd length: tiles don't align to rows

struct PoolKey {
  liger_dtype dtype;
  double low, high;
  bool operator<(const PoolKey& other) const {
    return std::tie(dtype, low, high) < std::tie(other.dtype, other.low, other.high);
  }
};

void* device_pool(liger_dtype dtype, double low, double high, std::string& error) {
  static std::map<PoolKey, void*> pools;
  PoolKey key{dtype, low, high};
  auto found = pools.find(key);
  if (found != pools.end()) return found->second;
  std::mt19937_64 generator(0x5eed0000u + static_cast<unsigned>(dtype));
  std::uniform_real_distribution<double> distribution(low, high);
  std::size_t element = dtype_bytes(dtype);
  std::vector<uint8_t> host(kPoolElements * element);
  for (std::size_t i = 0; i < kPoolElements; ++i) {
    float value = static_cast<float>(distribution(generator));
    if (dtype == LIGER_DTYPE_FLOAT32) {
      std::memcpy(&host[i * 4], &value, 4);
    } else {
      uint16_t bits = dtype == LIGER_DTYPE_FLOAT16 ? float_to_half_bits(value) : float_to_bf16_bits(value);
      std::memcpy(&host[i * 2], &bits, 2);
    }
  }
  void* pool = nullptr;
  cudaError_t status = cudaMalloc(&pool, host.size());
  if (status == cudaSuccess) status = cudaMemcpy(pool, host.data(), host.size(), cudaMemcpyHostToDevice);
  if (status != cudaSuccess) {
    cudaGetLastError();
    error = std::string("random pool: ") + cudaGetErrorString(status);
    if (pool) cudaFree(pool);
    return nullptr;
  }
  pools[key] = pool;
  return pool;
}

double percentile(const std::vector<double>& sorted, double fraction) {
  if (sorted.empty()) return 0;
  double position = fraction * static_cast<double>(sorted.size() - 1);
  std::size_t lower = static_cast<std::size_t>(std::floor(position));
  std::size_t upper = std::min(lower + 1, sorted.size() - 1);
  double weight = position - static_cast<double>(lower);
  return sorted[lower] * (1 - weight) + sorted[upper] * weight;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
std::size_t dtype_bytes(liger_dtype dtype) { return dtype == LIGER_DTYPE_FLOAT32 ? 4 : 2; }

const char* dtype_label(liger_dtype dtype) {
  switch (dtype) {
    case LIGER_DTYPE_FLOAT32: return "fp32";
    case LIGER_DTYPE_FLOAT16: return "fp16";
    case LIGER_DTYPE_BFLOAT16: return "bf16";
  }
  return "unknown";
}

bool register_generator(const char* name, CaseGenerator generator) {
  generators().emplace_back(name, generator);
  return true;
}

std::vector<BenchCase> all_cases() {
  auto list = generators();
  std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<BenchCase> cases;
  for (const auto& [name, generator] : list) generator(cases);
  return cases;
}

// ---------------------------------------------------------------------------------------------
void* BenchContext::alloc(std::size_t bytes) {
  if (failed_) return nullptr;
  void* pointer = nullptr;
  cudaError_t status = cudaMalloc(&pointer, std::max<std::size_t>(bytes, 256));
  if (status == cudaSuccess) status = cudaMemset(pointer, 0, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    failed_ = true;
    error_ = "allocation of " + std::to_string(bytes) + " bytes failed: " + cudaGetErrorString(status);
    if (pointer) cudaFree(pointer);
    return nullptr;
  }
  buffers_.push_back(pointer);
  allocated_bytes_ += bytes;
  return pointer;
}

void* BenchContext::random(std::size_t count, liger_dtype dtype, double low, double high) {
  std::size_t element = dtype_bytes(dtype);
  void* pointer = alloc(count * element);
  if (!pointer) return nullptr;
  std::string error;
  void* pool = device_pool(dtype, low, high, error);
  if (!pool) {
    failed_ = true;
    error_ = error;
    return nullptr;
  }
  // Start at a seed-dependent offset so buffers and sets differ.
  std::size_t offset = static_cast<std::size_t>((seed_ * 0x9e3779b97f4a7c15ull + buffers_.size() * 7919ull) %
                                                kPoolElements);
  std::size_t done = 0;
  while (done < count) {
    std::size_t chunk = std::min(count - done, kPoolElements - offset);
    cudaError_t status = cudaMemcpy(static_cast<uint8_t*>(pointer) + done * element,
                                    static_cast<const uint8_t*>(pool) + offset * element, chunk * element,
                                    cudaMemcpyDeviceToDevice);
    if (status != cudaSuccess) {
      cudaGetLastError();
      failed_ = true;
      error_ = std::string("random fill: ") + cudaGetErrorString(status);
      return nullptr;
    }
    done += chunk;
    offset = 0;
  }
  return pointer;
}

void* BenchContext::upload(const void* host, std::size_t bytes) {
  void* pointer = alloc(bytes);
  if (!pointer) return nullptr;
  cudaError_t status = cudaMemcpy(pointer, host, bytes, cudaMemcpyHostToDevice);
  if (status != cudaSuccess) {
    cudaGetLastError();
    failed_ = true;
    error_ = std::string("upload: ") + cudaGetErrorString(status);
    return nullptr;
  }
  return pointer;
}

void BenchContext::free_all() {
  for (void* pointer : buffers_) cudaFree(pointer);
  buffers_.clear();
  allocated_bytes_ = 0;
}

// ---------------------------------------------------------------------------------------------
bool query_device(DeviceInfo& info, std::string& error) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    error = std::string("no usable CUDA device (") + cudaGetErrorString(status) + ")";
    return false;
  }
  if (count == 0) {
    error = "no CUDA device present";
    return false;
  }
  status = cudaGetDevice(&info.device);
  cudaDeviceProp properties{};
  if (status == cudaSuccess) status = cudaGetDeviceProperties(&properties, info.device);
  if (status != cudaSuccess) {
    cudaGetLastError();
    error = std::string("cannot query the CUDA device: ") + cudaGetErrorString(status);
    return false;
  }
  info.name = properties.name;
  info.sm_arch = properties.major * 10 + properties.minor;
  info.sm_count = properties.multiProcessorCount;
  info.l2_bytes = static_cast<std::size_t>(properties.l2CacheSize);
  info.total_memory = properties.totalGlobalMem;
  return true;
}

double measure_copy_bandwidth(std::size_t bytes, std::string& error) {
  void* source = nullptr;
  void* destination = nullptr;
  cudaError_t status = cudaMalloc(&source, bytes);
  if (status == cudaSuccess) status = cudaMalloc(&destination, bytes);
  if (status == cudaSuccess) status = cudaMemset(source, 1, bytes);
  cudaEvent_t start = nullptr, stop = nullptr;
  std::vector<double> times;
  if (status == cudaSuccess) status = cudaEventCreate(&start);
  if (status == cudaSuccess) status = cudaEventCreate(&stop);
  for (int i = 0; i < 23 && status == cudaSuccess; ++i) {
    status = cudaEventRecord(start);
    if (status == cudaSuccess) status = cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice);
    if (status == cudaSuccess) status = cudaEventRecord(stop);
    if (status == cudaSuccess) status = cudaEventSynchronize(stop);
    float ms = 0;
    if (status == cudaSuccess) status = cudaEventElapsedTime(&ms, start, stop);
    if (i >= 3) times.push_back(ms);  // three warm-up copies
  }
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  if (source) cudaFree(source);
  if (destination) cudaFree(destination);
  if (status != cudaSuccess || times.empty()) {
    cudaGetLastError();
    error = std::string("copy bandwidth: ") + cudaGetErrorString(status);
    return 0;
  }
  std::sort(times.begin(), times.end());
  double median_ms = percentile(times, 0.5);
  return 2.0 * static_cast<double>(bytes) / (median_ms * 1e-3) / 1e9;
}

namespace {
// (p90 - p10) / median of a set of run times, in percent (the spread the results report).
double spread_pct_of(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  const double median = percentile(times, 0.5);
  return median > 0 ? (percentile(times, 0.9) - percentile(times, 0.1)) / median * 100.0 : 0;
}
}  // namespace

Measurement measure_case(const BenchCase& bench_case, const DeviceInfo& device, const MeasureOptions& options,
                         const liger_tunables* tunables) {
  Measurement result;
  std::size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  std::size_t cap = options.max_set_bytes ? options.max_set_bytes : static_cast<std::size_t>(0.4 * free_bytes);
  double target = options.rotate_factor * static_cast<double>(device.l2_bytes);

  // Input sets: one context per set, allocated until they exceed rotate_factor x L2.
  std::vector<std::unique_ptr<BenchContext>> sets;
  std::vector<RunFn> runs;
  std::size_t total_set_bytes = 0;
  while (true) {
    auto context = std::make_unique<BenchContext>();
    if (tunables) {
      context->tunables_ = *tunables;
      context->has_tunables_ = true;
    }
    context->sm_arch_ = device.sm_arch;
    context->sm_count_ = device.sm_count;
    context->l2_bytes_ = device.l2_bytes;
    context->seed_ = 1000 + sets.size();
    RunFn run = bench_case.setup(*context);
    if (context->failed() || !run) {
      result.error = context->failed() ? context->error() : "setup returned no run function";
      if (sets.empty()) return result;
      break;  // keep the sets we have (still report how many)
    }
    total_set_bytes += context->allocated_bytes();
    result.set_mib = static_cast<double>(context->allocated_bytes()) / (1024.0 * 1024.0);
    runs.push_back(std::move(run));
    sets.push_back(std::move(context));
    if (static_cast<double>(total_set_bytes) > target) break;
    if (total_set_bytes + sets.back()->allocated_bytes() > cap) break;
    if (sets.size() >= 4096) break;
  }
  result.error.clear();
  result.input_sets = static_cast<int>(runs.size());
  if (static_cast<double>(total_set_bytes) <= target) {
    result.error = "note: input sets total " + std::to_string(total_set_bytes >> 20) +
                   " MiB, not above the rotation target (memory cap); L2 may flatter this case";
  }

  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    cudaGetLastError();
    result.error = "cannot create a stream";
    return result;
  }
  auto cleanup_stream = [&] { cudaStreamDestroy(stream); };

  // First run: status check and extra-memory measurement (free memory before vs after).
  cudaDeviceSynchronize();
  std::size_t free_before = 0, free_after = 0;
  cudaMemGetInfo(&free_before, &total_bytes);
  liger_status first = runs[0](stream);
  cudaError_t sync_status = cudaStreamSynchronize(stream);
  cudaMemGetInfo(&free_after, &total_bytes);
  if (first != LIGER_STATUS_SUCCESS || sync_status != cudaSuccess) {
    cudaGetLastError();
    result.error = first != LIGER_STATUS_SUCCESS
                       ? std::string(liger_status_string(first)) + ": " + liger_last_error()
                       : std::string("CUDA error in first run: ") + cudaGetErrorString(sync_status);
    cleanup_stream();
    return result;
  }
  double measured_extra = free_before > free_after ? static_cast<double>(free_before - free_after) : 0.0;
  result.extra_mib = std::max(measured_extra, static_cast<double>(bench_case.declared_workspace_bytes)) /
                     (1024.0 * 1024.0);

  // Warm-up.
  cudaEvent_t warm_start, warm_stop;
  cudaEventCreate(&warm_start);
  cudaEventCreate(&warm_stop);
  cudaEventRecord(warm_start, stream);
  std::size_t next = 1 % runs.size();
  for (int i = 0;; ++i) {
    runs[next](stream);
    next = (next + 1) % runs.size();
    if (i + 1 >= options.warmup_runs) {
      cudaEventRecord(warm_stop, stream);
      cudaEventSynchronize(warm_stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, warm_start, warm_stop);
      if (ms >= options.warmup_ms || i > 100000) break;
    }
  }
  cudaEventDestroy(warm_start);
  cudaEventDestroy(warm_stop);

  // Timed runs, in batches: an event pair around each run, synchronised per batch.
  constexpr int kBatch = 32;
  std::vector<cudaEvent_t> starts(kBatch), stops(kBatch);
  for (int i = 0; i < kBatch; ++i) {
    cudaEventCreate(&starts[i]);
    cudaEventCreate(&stops[i]);
  }
  std::vector<double> times;
  double total_ms = 0;
  bool run_failed = false;
  while (!run_failed && static_cast<int>(times.size()) < options.max_runs &&
         (static_cast<int>(times.size()) < options.min_runs || total_ms < options.min_time_ms)) {
    int batch = std::min(kBatch, options.max_runs - static_cast<int>(times.size()));
    for (int i = 0; i < batch; ++i) {
      cudaEventRecord(starts[i], stream);
      if (runs[next](stream) != LIGER_STATUS_SUCCESS) run_failed = true;
      cudaEventRecord(stops[i], stream);
      next = (next + 1) % runs.size();
    }
    if (cudaStreamSynchronize(stream) != cudaSuccess) run_failed = true;
    for (int i = 0; i < batch && !run_failed; ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, starts[i], stops[i]);
      times.push_back(ms);
      total_ms += ms;
    }
    if (!run_failed && options.stop_spread_pct > 0 && static_cast<int>(times.size()) >= options.min_runs &&
        total_ms < options.min_time_ms && spread_pct_of(times) <= options.stop_spread_pct)
      break;
  }
  for (int i = 0; i < kBatch; ++i) {
    cudaEventDestroy(starts[i]);
    cudaEventDestroy(stops[i]);
  }
  cleanup_stream();
  if (run_failed || times.empty()) {
    cudaGetLastError();
    result.error = std::string("a timed run failed: ") + liger_last_error();
    return result;
  }

  std::sort(times.begin(), times.end());
  result.runs = static_cast<int>(times.size());
  result.median_us = percentile(times, 0.5) * 1e3;
  result.min_us = times.front() * 1e3;
  result.p10_us = percentile(times, 0.1) * 1e3;
  result.p90_us = percentile(times, 0.9) * 1e3;
  double sum = 0;
  for (double t : times) sum += t;
  result.mean_us = sum / static_cast<double>(times.size()) * 1e3;
  result.spread_pct = result.median_us > 0 ? (result.p90_us - result.p10_us) / result.median_us * 100.0 : 0;
  result.gbps = result.median_us > 0 ? bench_case.min_bytes / (result.median_us * 1e-6) / 1e9 : 0;
  result.tflops = result.median_us > 0 && bench_case.flops > 0 ? bench_case.flops / (result.median_us * 1e-6) / 1e12 : 0;
  result.ok = true;
  return result;
}

}  // namespace liger::bench
