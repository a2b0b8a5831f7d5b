// SwiGLU benchmark entries: forward, backward (in place, as Liger does), and full (forward then
// in-place backward); the cases are shared with the other gated op (glu_bench.h).
#include "glu_bench.h"
#include "liger_kernels/swiglu.h"

LIGER_BENCH_REGISTER(swiglu) { liger::bench::add_glu_cases(cases, "swiglu", liger_swiglu_forward, liger_swiglu_backward); }
