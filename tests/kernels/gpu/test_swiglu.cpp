// GPU tests of SwiGLU (forward, backward, in-place backward) against the fp64 reference, over
// dtype x shape x layout, several seeds, poisoned outputs, untouched inputs and row padding.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kernel_test_util.h"
#include "liger_kernels/swiglu.h"
#include "swiglu_ref.h"

#define GLU_FORWARD liger_swiglu_forward
#define GLU_BACKWARD liger_swiglu_backward
#define GLU_DEFAULTS liger_swiglu_default_tunables
#define GLU_REF_FORWARD liger::ref::swiglu_forward
#define GLU_REF_BACKWARD liger::ref::swiglu_backward
#define GLU_SUITE SwiGLU

#include "glu_test_body.inc"
