// Reference entry: a device-to-device copy (cudaMemcpyAsync) of the same bytes as an op's input,
// timed through the same harness as every op, so an op's row can be read against it.
#include "harness.h"

namespace {

using liger::bench::BenchCase;
using liger::bench::BenchContext;
using liger::bench::RunFn;

BenchCase copy_case(const char* shape, std::size_t elements, liger_dtype dtype) {
  std::size_t bytes = elements * liger::bench::dtype_bytes(dtype);
  BenchCase c;
  c.op = "copy";
  c.mode = "forward";
  c.shape = shape;
  c.dtype = dtype;
  c.min_bytes = 2.0 * static_cast<double>(bytes);
  c.note = "cudaMemcpyAsync device-to-device, read + write";
  c.setup = [bytes](BenchContext& ctx) -> RunFn {
    void* source = ctx.alloc(bytes);
    void* destination = ctx.alloc(bytes);
    return [=](cudaStream_t stream) {
      cudaError_t error = cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice, stream);
      return error == cudaSuccess ? LIGER_STATUS_SUCCESS : LIGER_STATUS_CUDA_ERROR;
    };
  };
  return c;
}

}  // namespace

LIGER_BENCH_REGISTER(copy) {
  cases.push_back(copy_case("16384x14336", std::size_t{16384} * 14336, LIGER_DTYPE_BFLOAT16));
  cases.push_back(copy_case("4096x4096", std::size_t{4096} * 4096, LIGER_DTYPE_BFLOAT16));
  cases.push_back(copy_case("1024x1024", std::size_t{1024} * 1024, LIGER_DTYPE_BFLOAT16));
}
