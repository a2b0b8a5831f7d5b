// libFuzzer target: the profile loader on arbitrary bytes: yaml-cpp parsing as the engine does it
// (profile::parse_yaml), schema validation against every workflow's profile schema, and
// kernel-dev's reading of the validated document (profile_from_yaml, the expression inside).
// liger::Error / std::exception is an accepted outcome; a crash, a sanitizer report or a
// timeout is a finding.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "liger/profile.h"
#include "workflows/kernel_dev/profile.h"

namespace kd = liger::kernel_dev;
namespace lp = liger::profile;

namespace {
const std::vector<lp::Schema>& schemas() {
  static const std::vector<lp::Schema> all = [] {
    std::vector<lp::Schema> out;
    for (const char* workflow : {"kernel_dev", "autopatch", "kernel_perf", "survey"})
      out.push_back(lp::Schema::load_file(std::string(LIGER_SOURCE_DIR) + "/skills/" + workflow + "/profile.schema.yaml"));
    return out;
  }();
  return all;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  YAML::Node document;
  try {
    document = lp::parse_yaml(text, "profile.yaml");
  } catch (const std::exception&) {
    return 0;
  }
  for (const auto& schema : schemas()) {
    try {
      lp::ValidationReport report = schema.validate(document);
      (void)report;
    } catch (const std::exception&) {
    }
  }
  try {
    kd::KernelProfile profile = kd::profile_from_yaml(document);
    (void)kd::profile_to_text(profile);
    (void)kd::row_program_problems(profile);
    if (profile.forward) (void)profile.program();
  } catch (const std::exception&) {
  }
  return 0;
}
