// Status plumbing for the C ABI: every failure returns a liger_status and records a detail
// message for liger_last_error(), because an abort inside a training process loses the job.
#pragma once

#include "liger_kernels/common.h"

namespace liger::kernels {

// Records a printf-style detail for liger_last_error() and returns `status`.
liger_status fail(liger_status status, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void clear_last_error();
const char* last_error_c_str();

}  // namespace liger::kernels
