// fp64 CPU reference of SwiGLU (Liger-Kernel semantics). Dense [rows, cols] row-major vectors;
// the GPU tests apply the same functions to the strided views they launch on.
#pragma once

#include <vector>

namespace liger::ref {

// silu(a) = a * sigmoid(a); c = silu(a) * b.
std::vector<double> swiglu_forward(const std::vector<double>& a, const std::vector<double>& b);
// db = dc * silu(a); da = dc * b * (s + silu(a) * (1 - s)), s = sigmoid(a).
void swiglu_backward(const std::vector<double>& dc, const std::vector<double>& a, const std::vector<double>& b,
                     std::vector<double>& da, std::vector<double>& db);

// Element-wise helpers (exposed for the reference tests).
double sigmoid(double x);
double silu(double x);

}  // namespace liger::ref
