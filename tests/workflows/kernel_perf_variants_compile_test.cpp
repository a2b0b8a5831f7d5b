// Every code variant of every op with code knobs renders and compiles with nvcc for sm_90: one
// kernel instantiation per setting (each knob moved to each of its other values, one at a time,
// plus the shipped line), `-c` only. Skipped, saying so, where nvcc is not on PATH.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <thread>

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
  struct Cleanup {
    fs::path dir;
    ~Cleanup() { fs::remove_all(dir); }
  } cleanup{root};  // also when an assertion ends the test early
  struct Job {
    std::string label, args, template_name;
    bool single;
    std::vector<std::string> argv;
    liger::toolchain::ProcessResult result;
  };
  std::vector<Job> jobs;
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
    for (std::size_t i = 0; i < settings.size(); ++i) {
      const KnobSetting& s = settings[i];
      const fs::path dir = root / spec.name / std::to_string(i);
      const fs::path cu = write_variant_unit(spec.code, spec.tuning, render_knobs(spec.code, text, s), dir);
      std::string args;
      for (const auto& k : spec.code.knobs) args += (args.empty() ? "" : ", ") + std::to_string(s.at(k.name));
      jobs.push_back({spec.name + " " + knob_text(spec.code, s), args, spec.code.template_name(),
                      spec.code.address_of.empty(), variant_compile_argv(repo, dir, cu, dir / "v.o", 90), {}});
    }
  }
  // A few compiles at a time (each is one nvcc process).
  const std::size_t width = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 4);
  for (std::size_t first = 0; first < jobs.size(); first += width) {
    std::vector<std::future<void>> running;
    for (std::size_t j = first; j < std::min(jobs.size(), first + width); ++j)
      running.push_back(std::async(std::launch::async, [&job = jobs[j]] {
        job.result = make_system_runner()->run(job.argv, {}, std::chrono::seconds(600));
      }));
    for (auto& f : running) f.get();
  }
  int compiled = 0;
  for (const auto& job : jobs) {
    ASSERT_TRUE(job.result.ok()) << job.label << " does not compile:\n" << job.result.output;
    // A kernel carries the rendered arguments (the rendered header shadowed the tree's), e.g.
    // "BwdVariant<0, 1, 0>".
    const auto kernels = parse_ptxas_log(job.result.output);
    if (job.single) ASSERT_EQ(kernels.size(), 1u) << job.label << ": one instantiation expected";
    CodeKnobSpec named;
    named.tmpl = job.template_name;
    const KernelResources* shown = variant_kernel(kernels, named);
    ASSERT_NE(shown, nullptr) << job.label << ": no kernel names " << job.template_name;
    EXPECT_NE(shown->name.find(job.template_name + "<" + job.args + ">"), std::string::npos) << job.label << ": "
                                                                                              << shown->name;
    ++compiled;
  }
  // norms 3 x 5, GLUs 2 x 7, cross-entropy 4, RoPE 6 (loads_first 2, min_blocks 3, heads_per_thread 3).
  EXPECT_GE(compiled, 39) << "every family's knobs";
}
