// GPU tests of GeGLU (forward, backward, in-place backward) against the fp64 reference, over
// dtype x shape x layout, several seeds, poisoned outputs, untouched inputs and row padding.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kernel_test_util.h"
#include "liger_kernels/geglu.h"
#include "geglu_ref.h"

#define GLU_FORWARD liger_geglu_forward
#define GLU_BACKWARD liger_geglu_backward
#define GLU_DEFAULTS liger_geglu_default_tunables
#define GLU_REF_FORWARD liger::ref::geglu_forward
#define GLU_REF_BACKWARD liger::ref::geglu_backward
#define GLU_SUITE GeGLU

#include "glu_test_body.inc"
