// Every code variant of every op with code knobs renders and compiles with nvcc for sm_90: one
// kernel instantiation per setting (each knob moved to each of its other values, one at a time,
// plus the shipped line), `-c` only. Skipped, saying so, where nvcc is not on PATH.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "liger/util.h"
#include "workflows/kernel_perf/kernel_perf.h"

namespace fs = std::filesystem;
using namespace liger::kernel_perf;

TEST(KernelPerfVariantsCompile, EveryKnobValueOfEveryFamilyCompilesForSm90) {
  auto runner = make_system_runner();
  if (!runner->has_tool("nvcc")) GTEST_SKIP() << "nvcc is not on PATH: the code variants were not compiled";
  const fs::path repo(LIGER_SOURCE_DIR);
  const fs::path spaces = repo / "skills/kernel_perf/search_spaces.yaml";
  const fs::path root = fs::temp_directory_path() / ("kperf-variants-compile-" + std::to_string(::getpid()));
  fs::remove_all(root);
  int compiled = 0;
  for (const auto& it : YAML::LoadFile(spaces.string())["ops"]) {
    const OpSpec spec = load_op_spec(spaces, it.first.as<std::string>());
    if (!spec.code.present) continue;
    const std::string text = liger::util::read_file(repo / spec.tuning);
    const auto shipped = read_knobs(spec.code, text);
    ASSERT_TRUE(shipped) << spec.name;
    std::vector<KnobSetting> settings = {*shipped};
    for (const auto& k : spec.code.knobs)
      for (int v : k.values)
        if (v != shipped->at(k.name)) {
          KnobSetting s = *shipped;
          s[k.name] = v;
          settings.push_back(s);
        }
    for (const auto& s : settings) {
      const std::string label = spec.name + " " + knob_text(spec.code, s);
      const fs::path dir = root / spec.name / std::to_string(&s - settings.data());
      const fs::path cu = write_variant_unit(spec.code, spec.tuning, render_knobs(spec.code, text, s), dir);
      const auto r = runner->run(variant_compile_argv(repo, dir, cu, dir / "v.o", 90), {}, std::chrono::seconds(600));
      ASSERT_TRUE(r.ok()) << label << " does not compile:\n" << r.output;
      // A kernel carries the rendered arguments (the rendered header shadowed the tree's), e.g.
      // "BwdVariant<0, 1, 0>".
      std::string args;
      for (const auto& k : spec.code.knobs) args += (args.empty() ? "" : ", ") + std::to_string(s.at(k.name));
      const auto kernels = parse_ptxas_log(r.output);
      ASSERT_EQ(kernels.size(), spec.code.address_of.empty() ? 1u : kernels.size()) << label << ": one instantiation";
      const KernelResources* shown = variant_kernel(kernels, spec.code);
      ASSERT_NE(shown, nullptr) << label << ": no kernel names " << spec.code.template_name();
      EXPECT_NE(shown->name.find(spec.code.template_name() + "<" + args + ">"), std::string::npos) << label << ": "
                                                                                                  << shown->name;
      ++compiled;
    }
  }
  fs::remove_all(root);
  EXPECT_GE(compiled, 12) << "the three norm ops x (shipped + 4 other knob values)";
}
