// Where a generated op's tests draw each input from. An element-wise op is tested at random
// points; an op that is defined on part of the line only (log, sqrt, logit, asin, acosh, a loss of
// probabilities) would compute NaN there and fail every comparison, or pass a finite-difference
// check vacuously. Understand picks, per input, the first of a fixed list of distributions under
// which the forward and every gradient are finite, and records it in the profile (inputs[].sample,
// editable); the reference test, the GPU test and Verify's PyTorch comparison all draw from it.
//
// Every distribution is a map of one standard-normal draw z, so the tests keep their seeds:
//   normal           z                      (the whole line)
//   positive         0.1 + |z|              (log, sqrt, rsqrt, pow with a fractional exponent)
//   unit             0.05 + 0.9 sigmoid(z)  (probabilities: logit, binary cross-entropy, entropy)
//   symmetric_unit   0.95 tanh(z)           (asin, acos, atanh)
//   above_one        1.1 + |z|              (acosh)
#pragma once

#include <map>
#include <string>
#include <vector>

#include "workflows/kernel_dev/expr.h"

namespace liger::kernel_dev {

const std::vector<std::string>& sample_kinds();
bool is_sample_kind(const std::string& kind);
// The value a standard-normal draw z maps to (fp64).
double sample_value(const std::string& kind, double z);
// The same map as source text: C++ (double `z`) and PyTorch (a tensor `z`).
std::string sample_cpp(const std::string& kind, const std::string& z);
std::string sample_python(const std::string& kind, const std::string& z);
// Four points at or near the ends of the distribution's range, as C++ initialiser text: the
// reference test checks that the forward and backward stay finite there.
std::string sample_extremes_cpp(const std::string& kind);
// One-line description for the profile and the docs ("x > 0.1").
std::string sample_description(const std::string& kind, const std::string& input);

struct SampleChoice {
  std::map<std::string, std::string> kind;  // input -> sample kind
  // Non-empty when even the best choice leaves non-finite points: what the tests will meet.
  std::string problem;
  int failing = 0;  // of `points`, under the choice
  int points = 0;
};

// Greedy over the inputs: start with every input normal; while some of `points` random draws give
// a non-finite forward or gradient, move the one input whose next distribution removes the most
// failures (ties go to the earlier input and the earlier distribution). `fixed` binds the
// parameters (at their initial values).
// `hints` (input -> kind, Program::sample_hints) start where given and are never moved.
SampleChoice choose_input_samples(const Expr& forward, const std::vector<Expr>& gradients,
                                  const std::vector<std::string>& inputs, const Environment& fixed, int points = 256,
                                  const std::map<std::string, std::string>& hints = {});

}  // namespace liger::kernel_dev
