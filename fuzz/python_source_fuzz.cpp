// libFuzzer target: the two Python readers on arbitrary text: autopatch's source reader
// (tokenizer, statement and class structure, call and assignment helpers used by the model
// analysis) and kernel-dev's PyTorch translator. liger::Error / std::exception is an accepted
// outcome (a clear error); a crash, a sanitizer report or a timeout is a finding.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "workflows/autopatch/python_source.h"
#include "workflows/kernel_dev/catalogue.h"
#include "workflows/kernel_dev/pytorch.h"

namespace ap = liger::autopatch;
namespace kd = liger::kernel_dev;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const kd::Catalogue catalogue =
      kd::Catalogue::load_file(std::string(LIGER_SOURCE_DIR) + "/skills/kernel_dev/activations.yaml");
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    ap::PythonModule m = ap::parse_python(text, "fuzz.py");
    // The helpers model_analysis.cpp applies to every statement and assignment.
    for (const auto& st : m.statements) {
      (void)ap::find_calls(st);
      if (auto a = ap::as_assignment(st)) {
        for (char op : {'*', '+', '-'})
          for (const auto& part : ap::split_top_level(a->value, op)) (void)ap::strip_parens(part);
      }
    }
    for (const auto& c : m.classes) {
      (void)c.init_assignments();
      (void)c.has_base("nn.Module");
    }
  } catch (const std::exception&) {
  }
  try {
    (void)kd::looks_like_pytorch(text);
    kd::TorchTranslation t = kd::translate_pytorch(text, catalogue);
    if (t.elementwise) (void)kd::derivative(t.program.expression, t.program.inputs.empty() ? "x" : t.program.inputs[0]);
  } catch (const std::exception&) {
  }
  return 0;
}
