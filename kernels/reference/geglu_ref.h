// fp64 CPU reference of GeGLU with the tanh approximation of GELU (Liger-Kernel semantics):
// gelu(a) = 0.5 * a * (1 + tanh(sqrt(2/pi) * (a + 0.044715 a^3))); c = gelu(a) * b.
#pragma once

#include <vector>

namespace liger::ref {

double gelu_tanh(double x);
// d gelu_tanh / dx, analytic.
double gelu_tanh_derivative(double x);

std::vector<double> geglu_forward(const std::vector<double>& a, const std::vector<double>& b);
// db = dc * gelu(a); da = dc * b * gelu'(a).
void geglu_backward(const std::vector<double>& dc, const std::vector<double>& a, const std::vector<double>& b,
                    std::vector<double>& da, std::vector<double>& db);

}  // namespace liger::ref
