#include "common/status.h"

#include <cstdarg>
#include <cstdio>
#include <string>

namespace liger::kernels {
namespace {
thread_local std::string g_last_error;
}

liger_status fail(liger_status status, const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  g_last_error = std::string(liger_status_string(status)) + ": " + buffer;
  return status;
}

void clear_last_error() { g_last_error.clear(); }

const char* last_error_c_str() { return g_last_error.c_str(); }

}  // namespace liger::kernels

extern "C" {

const char* liger_status_string(liger_status status) {
  switch (status) {
    case LIGER_STATUS_SUCCESS: return "success";
    case LIGER_STATUS_INVALID_ARGUMENT: return "invalid argument";
    case LIGER_STATUS_UNSUPPORTED_DTYPE: return "unsupported dtype";
    case LIGER_STATUS_UNSUPPORTED_SHAPE: return "unsupported shape";
    case LIGER_STATUS_CUDA_ERROR: return "CUDA error";
    case LIGER_STATUS_OUT_OF_MEMORY: return "out of memory";
    case LIGER_STATUS_CUBLAS_ERROR: return "cuBLAS error";
    case LIGER_STATUS_INTERNAL: return "internal error";
  }
  return "unknown status";
}

const char* liger_last_error(void) { return liger::kernels::last_error_c_str(); }

const char* liger_dtype_name(liger_dtype dtype) {
  switch (dtype) {
    case LIGER_DTYPE_FLOAT32: return "float32";
    case LIGER_DTYPE_FLOAT16: return "float16";
    case LIGER_DTYPE_BFLOAT16: return "bfloat16";
  }
  return "unknown";
}

const char* liger_version(void) { return LIGER_KERNELS_VERSION; }

}  // extern "C"
