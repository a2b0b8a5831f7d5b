// Host-side helpers every launcher uses: device selection from the tensor's pointer, launch
// error checks turned into liger_status, and argument validation.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/status.h"

namespace liger::kernels {

inline cudaStream_t to_cuda(liger_stream_t stream) { return reinterpret_cast<cudaStream_t>(stream); }

// Switches to the device that owns `ptr` for the lifetime of the guard and restores the
// caller's device afterwards. Host or unregistered pointers leave the device unchanged.
class DeviceGuard {
 public:
  explicit DeviceGuard(const void* ptr) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      previous_ = -1;
      return;
    }
    cudaPointerAttributes attributes{};
    if (ptr != nullptr && cudaPointerGetAttributes(&attributes, ptr) == cudaSuccess &&
        attributes.type == cudaMemoryTypeDevice && attributes.device != previous_) {
      if (cudaSetDevice(attributes.device) == cudaSuccess) switched_ = true;
    }
    cudaGetLastError();  // pointer queries on host memory leave a sticky-free error behind
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

// Turns the launch's error state into a status; call right after every <<<>>> launch.
inline liger_status check_launch(const char* kernel_name) {
  cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return LIGER_STATUS_SUCCESS;
  if (error == cudaErrorMemoryAllocation)
    return fail(LIGER_STATUS_OUT_OF_MEMORY, "%s: %s", kernel_name, cudaGetErrorString(error));
  return fail(LIGER_STATUS_CUDA_ERROR, "%s launch failed: %s", kernel_name, cudaGetErrorString(error));
}

inline liger_status check_cuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return LIGER_STATUS_SUCCESS;
  cudaGetLastError();
  if (error == cudaErrorMemoryAllocation)
    return fail(LIGER_STATUS_OUT_OF_MEMORY, "%s: %s", what, cudaGetErrorString(error));
  return fail(LIGER_STATUS_CUDA_ERROR, "%s: %s", what, cudaGetErrorString(error));
}

// Compute capability as major*10+minor of the current device (e.g. 90 for H100), 0 if unknown.
inline int current_sm_arch() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major * 10 + minor;
}

inline int current_sm_count() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
  return count;
}

inline bool is_aligned(const void* ptr, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(ptr) % bytes == 0;
}

#define LIGER_RETURN_IF_ERROR(expr)                                   \
  do {                                                                \
    liger_status liger_status_ = (expr);                              \
    if (liger_status_ != LIGER_STATUS_SUCCESS) return liger_status_;  \
  } while (0)

}  // namespace liger::kernels
