// GeGLU benchmark entries: forward, backward (in place, as Liger does), and full (forward then
// in-place backward); the cases are shared with the other gated op (glu_bench.h).
#include "glu_bench.h"
#include "liger_kernels/geglu.h"

LIGER_BENCH_REGISTER(geglu) { liger::bench::add_glu_cases(cases, "geglu", liger_geglu_forward, liger_geglu_backward); }
