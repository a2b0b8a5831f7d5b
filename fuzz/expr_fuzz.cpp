// libFuzzer target: kernel-dev's expression language end to end on arbitrary text: lexing and
// parsing (with the activation catalogue as the function resolver), printing, evaluation,
// symbolic differentiation and simplification. Any exception derived from std::exception is an
// accepted outcome (a clear error); a crash, a sanitizer report or a timeout is a finding.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "workflows/kernel_dev/catalogue.h"
#include "workflows/kernel_dev/expr.h"

namespace kd = liger::kernel_dev;

namespace {
const kd::Catalogue& catalogue() {
  static const kd::Catalogue c = kd::Catalogue::load_file(std::string(LIGER_SOURCE_DIR) + "/skills/kernel_dev/activations.yaml");
  return c;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const kd::FunctionResolver resolver = catalogue().resolver();
  const std::string text(reinterpret_cast<const char*>(data), size);
  kd::Program program;
  try {
    program = kd::parse_program(text, resolver);
  } catch (const std::exception&) {
    return 0;
  }
  try {
    const std::string printed = kd::to_string(program.expression);
    kd::parse_program("y = " + printed, resolver);  // printing must produce parseable text, or a clear error
  } catch (const std::exception&) {
  }
  kd::Environment env;
  for (const auto& name : kd::free_symbols(program.expression)) env[name] = 0.75;
  try {
    (void)kd::eval_f64(program.expression, env);
    (void)kd::eval_f32(program.expression, env);
  } catch (const std::exception&) {
  }
  // Gradients as Understand derives them: every input and parameter.
  int variables = 0;
  for (const auto& [name, value] : env) {
    if (++variables > 4) break;
    try {
      kd::Expr d = kd::derivative(program.expression, name);
      (void)kd::to_string(d);
      (void)kd::eval_f64(d, env);
    } catch (const std::exception&) {
    }
  }
  return 0;
}
