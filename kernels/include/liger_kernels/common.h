/* liger_kernels: the bundled CUDA kernel library of liger-agent.
 *
 * C ABI conventions shared by every op (so ctypes, the agent and C++ users call them alike):
 *  - raw device pointers, int64_t sizes and row strides (in elements), a dtype enum, an
 *    options struct per op where the op has options, a nullable tunables pointer, a stream;
 *  - every entry point returns liger_status and never aborts; liger_last_error() gives the
 *    detail of the calling thread's last failure;
 *  - kernels launch on the device that owns the first tensor argument, not the caller's current
 *    device (models split over GPUs with device_map="auto" rely on that); the caller's current
 *    device is restored before returning;
 *  - launches are asynchronous on `stream`; no entry point synchronises the device.
 */
#ifndef LIGER_KERNELS_COMMON_H
#define LIGER_KERNELS_COMMON_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define LIGER_API __declspec(dllexport)
#else
#define LIGER_API __attribute__((visibility("default")))
#endif

/* The same type as cudaStream_t, declared without pulling CUDA headers into C users. */
struct CUstream_st;
typedef struct CUstream_st* liger_stream_t;

typedef enum liger_status {
  LIGER_STATUS_SUCCESS = 0,
  LIGER_STATUS_INVALID_ARGUMENT = 1, /* null pointer, bad size or stride, bad option value */
  LIGER_STATUS_UNSUPPORTED_DTYPE = 2,
  LIGER_STATUS_UNSUPPORTED_SHAPE = 3, /* a size the op cannot handle (e.g. odd RoPE head dim) */
  LIGER_STATUS_CUDA_ERROR = 4,        /* a launch or runtime call failed */
  LIGER_STATUS_OUT_OF_MEMORY = 5,     /* workspace allocation failed */
  LIGER_STATUS_CUBLAS_ERROR = 6,
  LIGER_STATUS_INTERNAL = 7
} liger_status;

typedef enum liger_dtype {
  LIGER_DTYPE_FLOAT32 = 0,
  LIGER_DTYPE_FLOAT16 = 1,
  LIGER_DTYPE_BFLOAT16 = 2
} liger_dtype;

/* Launch parameters that matter for speed, shared by all ops so kernel-perf can search them
 * generically. A zero field means "use the tuned default" from the op's table (per
 * architecture and size class). Each op documents which fields it reads and their valid values;
 * an invalid value gives LIGER_STATUS_INVALID_ARGUMENT, never a silent fallback. */
typedef struct liger_tunables {
  int32_t threads_per_block; /* threads in one CUDA block */
  int32_t rows_per_block;    /* rows (tokens) one block handles, for row-wise ops */
  int32_t vector_bytes;      /* bytes per vector access: 16, 8, 4, or 2 (element) */
  int32_t reduction_blocks;  /* blocks that produce partial sums for weight gradients */
  int32_t chunk_rows;        /* rows per chunk for chunked ops (fused linear cross-entropy) */
  int32_t pipeline_depth;    /* software pipelining, 0 = tuned default. Norm backwards: 1 = no
                              * prefetch, 2 = prefetch the next row tile. Cross-entropy rows: vector
                              * loads in flight per thread (1, 2 or 4). RoPE: heads in flight per
                              * lane (1, 2 or 4) */
  int32_t stages;            /* tiles in flight through shared memory by the bulk-copy engine
                              * (sm_90 and later), 0 = tuned default, 1 = off. Norm backwards:
                              * row tiles (rows of one chunk, 16-byte vectors; 2..8); RoPE:
                              * token tiles (heads contiguous within a token; 2..8) */
  int32_t reserved[1];       /* zero; room to grow without breaking the ABI */
} liger_tunables;

LIGER_API const char* liger_status_string(liger_status status);
/* Human-readable detail of the calling thread's last non-success status ("" if none). */
LIGER_API const char* liger_last_error(void);
LIGER_API const char* liger_dtype_name(liger_dtype dtype);
/* Library version as "major.minor.patch". */
LIGER_API const char* liger_version(void);

#ifdef __cplusplus
}
#endif

#endif /* LIGER_KERNELS_COMMON_H */
