// Row entropy forward, bf16 [rows, cols] -> one value per row, in five hand-written forms (one process,
// cudaMemcpy D2D as the copy reference): a replica of the two-pass structure the generator emitted before session 27 (max pass, then sums),
// the online single pass (running max, sums rescaled as it grows) with a block or a warp per row,
// two loads in flight, and a plain row sum as the read roofline. Evidence for row_online.cpp:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 row_entropy_forms.cu -o forms && ./forms 16384 4096
// MB_ONCE=1 runs each form once (for ncu). read_sum computes a different function: its error column is not a check.
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cstdlib>

__device__ __forceinline__ float ex2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float fexp(float x) { return ex2(x * 1.4426950408889634f); }
constexpr float kLog2e = 1.4426950408889634f;

struct alignas(16) V8 { __nv_bfloat162 h[4]; };
__device__ __forceinline__ void widen(const V8& v, float* f) {
#pragma unroll
  for (int i = 0; i < 4; ++i) { float2 t = __bfloat1622float2(v.h[i]); f[2*i] = t.x; f[2*i+1] = t.y; }
}

template <int N> __device__ __forceinline__ void warp_sum(float (&a)[N]) {
#pragma unroll
  for (int o = 16; o; o >>= 1)
#pragma unroll
    for (int k = 0; k < N; ++k) a[k] += __shfl_xor_sync(~0u, a[k], o);
}
__device__ __forceinline__ float warp_max(float a) {
#pragma unroll
  for (int o = 16; o; o >>= 1) a = fmaxf(a, __shfl_xor_sync(~0u, a, o));
  return a;
}
// block combine of N sums (or a max when MAX), every thread gets the result
template <int N, bool MAX> __device__ __forceinline__ void block_reduce(float (&a)[N], float* sh) {
  if (MAX) a[0] = warp_max(a[0]); else warp_sum(a);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
  if (l == 0) for (int k = 0; k < N; ++k) sh[k * 32 + w] = a[k];
  __syncthreads();
  for (int k = 0; k < N; ++k) {
    float v = l < nw ? sh[k * 32 + l] : (MAX ? -INFINITY : 0.f);
    a[k] = v;
  }
  if (MAX) a[0] = warp_max(a[0]); else warp_sum(a);
  __syncthreads();
}

// V0: the generated structure: pass 1 max, pass 2 sum exp and sum exp*(x-m).
__global__ void v0_two_pass(const __nv_bfloat16* x, __nv_bfloat16* y, float* st, int64_t R, int64_t C, int rows_per_block) {
  __shared__ float sh[64];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const __nv_bfloat16* xr = x + r * C;
    float a[1] = {-INFINITY};
    for (int64_t c = threadIdx.x * 8; c < C; c += blockDim.x * 8) {
      V8 v = *reinterpret_cast<const V8*>(xr + c); float f[8]; widen(v, f);
#pragma unroll
      for (int k = 0; k < 8; ++k) a[0] = fmaxf(a[0], f[k]);
    }
    block_reduce<1, true>(a, sh);
    const float m = a[0];
    float b[2] = {0.f, 0.f};
    for (int64_t c = threadIdx.x * 8; c < C; c += blockDim.x * 8) {
      V8 v = *reinterpret_cast<const V8*>(xr + c); float f[8]; widen(v, f);
#pragma unroll
      for (int k = 0; k < 8; ++k) { float t = f[k] - m; float e = fexp(t); b[0] += e; b[1] = fmaf(e, t, b[1]); }
    }
    block_reduce<2, false>(b, sh);
    if (threadIdx.x == 0) { float s = b[0]; y[r] = __float2bfloat16(logf(s) - b[1] / s); st[2*r] = m; st[2*r+1] = s; }
  }
}

// Online accumulation in base-2 units: m2 = max(x)*log2e; s = sum 2^(x*l - m2); s1 = sum 2^(..)*(x*l - m2)
struct Online { float m, s, s1; };
__device__ __forceinline__ void rescale(Online& o, float m_new) {
  const float d = o.m - m_new;            // <= 0
  const float r = ex2(d);
  o.s1 = r * fmaf(d, o.s, o.s1);
  o.s = r * o.s;
  o.m = m_new;
}
__device__ __forceinline__ void online_chunk(Online& o, const float* f) {
  float cm = f[0];
#pragma unroll
  for (int k = 1; k < 8; ++k) cm = fmaxf(cm, f[k]);
  cm *= kLog2e;
  if (cm > o.m) rescale(o, cm);
#pragma unroll
  for (int k = 0; k < 8; ++k) { float t = fmaf(f[k], kLog2e, -o.m); float e = ex2(t); o.s += e; o.s1 = fmaf(e, t, o.s1); }
}
__device__ __forceinline__ Online merge(Online a, Online b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return a;
  rescale(a, m); rescale(b, m);
  return {m, a.s + b.s, a.s1 + b.s1};
}
__device__ __forceinline__ Online warp_merge(Online o) {
#pragma unroll
  for (int off = 16; off; off >>= 1) {
    Online p{__shfl_xor_sync(~0u, o.m, off), __shfl_xor_sync(~0u, o.s, off), __shfl_xor_sync(~0u, o.s1, off)};
    o = merge(o, p);
  }
  return o;
}
__device__ __forceinline__ void finish(Online o, __nv_bfloat16* y, float* st, int64_t r) {
  // entropy = log s - sum p (x - m) ; in base 2 units: t = (x - m)*log2e, so sum e*t / s / log2e
  const float s = o.s;
  y[r] = __float2bfloat16(logf(s) - (o.s1 / s) / kLog2e);
  st[2*r] = o.m / kLog2e; st[2*r+1] = s;
}

// V1: online single pass, block per row (block combine through shared memory)
__global__ void v1_online_block(const __nv_bfloat16* x, __nv_bfloat16* y, float* st, int64_t R, int64_t C, int) {
  __shared__ float sh[3 * 32];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const __nv_bfloat16* xr = x + r * C;
    Online o{-1e30f, 0.f, 0.f};
    for (int64_t c = threadIdx.x * 8; c < C; c += blockDim.x * 8) {
      V8 v = *reinterpret_cast<const V8*>(xr + c); float f[8]; widen(v, f);
      online_chunk(o, f);
    }
    o = warp_merge(o);
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    if (l == 0) { sh[w] = o.m; sh[32 + w] = o.s; sh[64 + w] = o.s1; }
    __syncthreads();
    if (w == 0) {
      Online p = l < nw ? Online{sh[l], sh[32 + l], sh[64 + l]} : Online{-1e30f, 0.f, 0.f};
      p = warp_merge(p);
      if (l == 0) finish(p, y, st, r);
    }
    __syncthreads();
  }
}

// V2: online single pass, one warp per row (no barrier)
__global__ void v2_online_warp(const __nv_bfloat16* x, __nv_bfloat16* y, float* st, int64_t R, int64_t C, int) {
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
  for (int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < R; r += warps) {
    const __nv_bfloat16* xr = x + r * C;
    Online o{-1e30f, 0.f, 0.f};
    for (int64_t c = (threadIdx.x & 31) * 8; c < C; c += 256) {
      V8 v = *reinterpret_cast<const V8*>(xr + c); float f[8]; widen(v, f);
      online_chunk(o, f);
    }
    o = warp_merge(o);
    if ((threadIdx.x & 31) == 0) finish(o, y, st, r);
  }
}
// V3: online, warp per row, two loads in flight
__global__ void v3_online_warp2(const __nv_bfloat16* x, __nv_bfloat16* y, float* st, int64_t R, int64_t C, int) {
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
  for (int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < R; r += warps) {
    const __nv_bfloat16* xr = x + r * C;
    Online o{-1e30f, 0.f, 0.f};
    int64_t c = (threadIdx.x & 31) * 8;
    for (; c + 256 < C; c += 512) {
      V8 v = *reinterpret_cast<const V8*>(xr + c); V8 w = *reinterpret_cast<const V8*>(xr + c + 256);
      float f[8]; widen(v, f); online_chunk(o, f); widen(w, f); online_chunk(o, f);
    }
    if (c < C) { V8 v = *reinterpret_cast<const V8*>(xr + c); float f[8]; widen(v, f); online_chunk(o, f); }
    o = warp_merge(o);
    if ((threadIdx.x & 31) == 0) finish(o, y, st, r);
  }
}
// V4: two-pass, warp per row
__global__ void v4_two_pass_warp(const __nv_bfloat16* x, __nv_bfloat16* y, float* st, int64_t R, int64_t C, int) {
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
  for (int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < R; r += warps) {
    const __nv_bfloat16* xr = x + r * C;
    float m = -INFINITY;
    for (int64_t c = (threadIdx.x & 31) * 8; c < C; c += 256) {
      V8 v = *reinterpret_cast<const V8*>(xr + c); float f[8]; widen(v, f);
#pragma unroll
      for (int k = 0; k < 8; ++k) m = fmaxf(m, f[k]);
    }
    m = warp_max(m);
    float b[2] = {0.f, 0.f};
    for (int64_t c = (threadIdx.x & 31) * 8; c < C; c += 256) {
      V8 v = *reinterpret_cast<const V8*>(xr + c); float f[8]; widen(v, f);
#pragma unroll
      for (int k = 0; k < 8; ++k) { float t = f[k] - m; float e = fexp(t); b[0] += e; b[1] = fmaf(e, t, b[1]); }
    }
    warp_sum(b);
    if ((threadIdx.x & 31) == 0) { float s = b[0]; y[r] = __float2bfloat16(logf(s) - b[1] / s); st[2*r] = m; st[2*r+1] = s; }
  }
}
// Read roofline: sum of the row, warp per row
__global__ void read_sum(const __nv_bfloat16* x, __nv_bfloat16* y, float* st, int64_t R, int64_t C, int) {
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
  for (int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < R; r += warps) {
    const __nv_bfloat16* xr = x + r * C;
    float b[1] = {0.f};
    for (int64_t c = (threadIdx.x & 31) * 8; c < C; c += 256) {
      V8 v = *reinterpret_cast<const V8*>(xr + c); float f[8]; widen(v, f);
#pragma unroll
      for (int k = 0; k < 8; ++k) b[0] += f[k];
    }
    warp_sum(b);
    if ((threadIdx.x & 31) == 0) y[r] = __float2bfloat16(b[0]);
  }
}

typedef void (*K)(const __nv_bfloat16*, __nv_bfloat16*, float*, int64_t, int64_t, int);

int main(int argc, char** argv) {
  const int64_t R = argc > 1 ? atoll(argv[1]) : 16384, C = argc > 2 ? atoll(argv[2]) : 4096;
  const size_t n = R * C;
  std::vector<__nv_bfloat16> h(n);
  uint32_t seed = 1;
  for (size_t i = 0; i < n; ++i) { seed = seed * 1664525u + 1013904223u; h[i] = __float2bfloat16(((seed >> 8) * (1.0f / 16777216.0f)) * 8.f - 4.f); }
  __nv_bfloat16 *x, *y, *xc; float* st;
  cudaMalloc(&x, n * 2); cudaMalloc(&xc, n * 2); cudaMalloc(&y, R * 2); cudaMalloc(&st, R * 8);
  cudaMemcpy(x, h.data(), n * 2, cudaMemcpyHostToDevice);
  // fp64 reference for the first rows
  std::vector<double> ref(64);
  for (int r = 0; r < 64; ++r) {
    double m = -1e300; for (int64_t c = 0; c < C; ++c) m = std::max(m, (double)__bfloat162float(h[r*C+c]));
    double s = 0, s1 = 0; for (int64_t c = 0; c < C; ++c) { double t = __bfloat162float(h[r*C+c]) - m; double e = exp(t); s += e; s1 += e * t; }
    ref[r] = log(s) - s1 / s;
  }
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  const bool once = getenv("MB_ONCE") != nullptr;
  auto timeit = [&](auto fn) {
    if (once) { fn(); cudaDeviceSynchronize(); return 1.0f; }
    for (int i = 0; i < 5; ++i) fn();
    std::vector<float> ts;
    for (int rep = 0; rep < 7; ++rep) {
      cudaEventRecord(a); for (int i = 0; i < 20; ++i) fn(); cudaEventRecord(b); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b); ts.push_back(ms * 1000.f / 20);
    }
    std::sort(ts.begin(), ts.end()); return ts[3];
  };
  const float tcopy = timeit([&] { cudaMemcpyAsync(xc, x, n * 2, cudaMemcpyDeviceToDevice); });
  const double copy_bw = 2.0 * n * 2 / (tcopy * 1e-6);
  printf("rows %lld cols %lld  copy %.2f us (%.0f GB/s)\n", (long long)R, (long long)C, tcopy, copy_bw / 1e9);
  struct { const char* name; K k; int threads; int rows_per_warp_block; } vs[] = {
    {"v0_two_pass_block128_rpb2", v0_two_pass, 128, 0}, {"v0_two_pass_block256_rpb1", v0_two_pass, 256, 1},
    {"v1_online_block128_rpb2", v1_online_block, 128, 0}, {"v1_online_block256_rpb1", v1_online_block, 256, 1},
    {"v2_online_warp_b128", v2_online_warp, 128, 2}, {"v2_online_warp_b256", v2_online_warp, 256, 2},
    {"v3_online_warp2ld_b128", v3_online_warp2, 128, 2}, {"v4_two_pass_warp_b128", v4_two_pass_warp, 128, 2},
    {"read_sum_warp_b128", read_sum, 128, 2},
  };
  std::vector<__nv_bfloat16> hy(64);
  for (auto& v : vs) {
    int64_t grid = v.rows_per_warp_block == 0 ? R / 2 : v.rows_per_warp_block == 1 ? R : R / (v.threads / 32);
    cudaMemset(y, 0, R * 2);
    auto fn = [&] { v.k<<<(unsigned)grid, v.threads>>>(x, y, st, R, C, 0); };
    float t = timeit(fn);
    cudaError_t e = cudaGetLastError();
    cudaMemcpy(hy.data(), y, 64 * 2, cudaMemcpyDeviceToHost);
    double err = 0; for (int r = 0; r < 64; ++r) err = std::max(err, fabs(__bfloat162float(hy[r]) - ref[r]) / std::max(1e-3, fabs(ref[r])));
    const double bw = (double)n * 2 / (t * 1e-6);
    printf("%-28s %8.2f us  %6.1f%% of copy  max rel err %.2e %s\n", v.name, t, 100.0 * bw / copy_bw, err, e ? cudaGetErrorString(e) : "");
  }
  return 0;
}
