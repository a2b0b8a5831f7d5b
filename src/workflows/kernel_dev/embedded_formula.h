// A description that carries its own formula ("scaled tanh: 1.7159 * tanh(2/3 x)", "soft clamp,
// y = 30 * tanh(x / 30)"): the formula is the most specific statement of the op, so kernel-dev
// builds from it (as if the expression had been given) and names the op from the words before it.
#pragma once

#include <optional>
#include <string>

#include "workflows/kernel_dev/expr.h"

namespace liger::kernel_dev {

struct EmbeddedFormula {
  std::string as_written;  // the formula as the description writes it
  std::string formula;     // what was parsed: implicit products made explicit ("2/3 x" -> "2/3 * x")
  std::string name_words;  // the words before it, without connectives ("scaled tanh")
  bool composed = false;   // built from words that compose functions (find_composition_in_words)
};

// The longest tail of `text` that parses as a formula of at least one input and is written as one
// (an operator other than a hyphen's '-' or '+', a call or an assignment: "z-loss" and "log-sum-exp"
// stay words), after at least one word. nullopt when the text has none, or is an expression as a whole.
std::optional<EmbeddedFormula> find_embedded_formula(const std::string& text, const FunctionResolver& resolver);

// A description that composes named functions of one input, outermost first: "the square of the
// tanh of x" -> (tanh(x))^2, "the reciprocal of the softplus of x", "the log of the sigmoid of
// the input". Each "of" nests; a function is a word of arithmetic (square, cube, square root,
// reciprocal, negative, absolute value, exponential, logarithm, half, double), the derivative
// (symbolic: "the derivative of the tanh of x" is 1 - tanh(x)^2) or any function the
// resolver knows (tanh, sigmoid, the catalogue's activations, the row reductions: "the mean of
// the square of x" is a row's mean square). At least two functions (one is a plain name, which
// the catalogue handles); nullopt when a word is not a function or the result does not parse.
std::optional<EmbeddedFormula> find_composition_in_words(const std::string& text, const FunctionResolver& resolver);

// Numbers written next to what they multiply ("2/3 x", "0.044715 x^3", "2x", ")(") with the '*'
// made explicit; an exponent ("1e-5") stays a number.
std::string explicit_products(const std::string& formula);

}  // namespace liger::kernel_dev
