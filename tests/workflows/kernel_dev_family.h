// The scaffold shared by the tests of kernel-dev's op families with templates of their own
// (segments, Tier 3 fused linear losses): analysing a request against the checkout's knowledge,
// compiling the rendered files of a list of requests with the tools this machine has, and running
// the whole workflow with --yes on a committed copy of the library's list files with the toolchain
// faked (every build step succeeds, the reference tests pass, PyTorch is absent).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "liger/config.h"
#include "liger/engine.h"
#include "workflows/kernel_dev/workflow.h"

#include "liger/util.h"
#include "workflows/kernel_dev/render.h"

#include "committed_tree.h"
#include "rendered_tree.h"

namespace liger::testing::family {

inline const kernel_dev::KnowledgeBase& kb() {
  static const kernel_dev::KnowledgeBase k = kernel_dev::KnowledgeBase::load(LIGER_SOURCE_DIR);
  return k;
}

inline kernel_dev::KernelProfile analyse(const std::string& text, const std::string& name = "") {
  return kernel_dev::analyse({text, kernel_dev::InputKind::Auto, name}, kb());
}

// The profile's undecided fields, one "field: why" per line (for failure messages).
inline std::string undecided_text(const kernel_dev::KernelProfile& p) {
  std::string out;
  for (const auto& [field, why] : p.undecided) out += field + ": " + why + "\n";
  return out;
}

// The rendered row kernel of `op` under `root` compiled for sm_90 by `nvcc` with -Werror and ptxas
// statistics, against the rendered and the checkout's library headers. Returns nvcc's exit status;
// `output` gets what it printed.
inline int compile_rendered_kernel(const std::string& nvcc, const std::filesystem::path& root, const std::string& op,
                                   std::string& output) {
  const std::filesystem::path source = LIGER_SOURCE_DIR;
  const std::filesystem::path log = root / "nvcc.log";
  const std::string command = nvcc + " -std=c++17 -c --expt-relaxed-constexpr -gencode=arch=compute_90,code=sm_90 "
                              "-Werror all-warnings -Xptxas -v -I" + (root / "kernels/include").string() + " -I" +
                              (root / "kernels/src").string() + " -I" + (source / "kernels/include").string() + " -I" +
                              (source / "kernels/src").string() + " " +
                              (root / ("kernels/src/" + op + "/" + op + ".cu")).string() + " -o " +
                              (root / "kernel.o").string() + " >" + log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  output = liger::util::read_file(log);
  return status;
}

using Variants = std::vector<std::pair<std::string, std::string>>;  // op name, request

// Each variant rendered; its GPU test and benchmark syntax-checked against the CUDA headers, its
// binding byte-compiled and its kernel compiled with nvcc (`nvcc_arch`: the target flags), each as
// far as this machine has the tool. Returns the tools that were missing ("" when none was).
inline std::string compile_variants(const Variants& variants, const std::string& nvcc_arch) {
  namespace fs = std::filesystem;
  using namespace rendered;
  const fs::path templates = fs::path(LIGER_SOURCE_DIR) / "templates/kernel_dev";
  const std::string gxx = find_tool({"g++", "c++"});
  const std::string nvcc = find_tool({"nvcc", "/usr/local/cuda/bin/nvcc"});
  const std::string python = find_tool({"python3"});
  const std::string cuda_include = cuda_include_dir();
  for (const auto& [op, text] : variants) {
    SCOPED_TRACE(op);
    const fs::path root = write_tree(kernel_dev::render(analyse(text, op), templates), op);
    if (!gxx.empty() && !cuda_include.empty()) EXPECT_EQ(check_host_code(gxx, cuda_include, root, op), "");
    if (!python.empty()) EXPECT_EQ(py_compile(python, root, "ops/" + op + ".py"), "");
    if (!nvcc.empty()) EXPECT_EQ(compile_kernel(nvcc, root, op, nvcc_arch), "");
    fs::remove_all(root);
  }
  std::string missing;
  if (gxx.empty() || cuda_include.empty()) missing += "g++ or the CUDA headers (GPU test and benchmark); ";
  if (python.empty()) missing += "python3 (binding); ";
  if (nvcc.empty()) missing += "nvcc (kernel); ";
  return missing;
}

// Each variant's rendered fp64 reference built with its tests by `gxx`, run, and all `tests` of
// them passing.
inline void expect_references_pass(const std::string& gxx, const Variants& variants, int tests) {
  namespace fs = std::filesystem;
  using namespace rendered;
  const fs::path templates = fs::path(LIGER_SOURCE_DIR) / "templates/kernel_dev";
  for (const auto& [op, text] : variants) {
    SCOPED_TRACE(op);
    const fs::path root = write_tree(kernel_dev::render(analyse(text, op), templates), op + "_ref");
    std::string error = build_reference(gxx, root, op);
    ASSERT_TRUE(error.empty()) << error;
    error = run((root / "ref_test").string(), root / "run.log");
    EXPECT_TRUE(error.empty()) << error;
    const std::string log = util::read_file(root / "run.log");
    EXPECT_NE(log.find("[  PASSED  ] " + std::to_string(tests) + " tests."), std::string::npos) << log;
    fs::remove_all(root);
  }
}

// The output of the reference tests of `text` rendered as `op` with `rule` in its fp64 reference
// replaced by `wrong` ("" after a failed expectation when the rule is not there or the reference
// does not build). Built without warning flags: what is under test is the hand-edited rule, not
// how cleanly it compiles.
inline std::string run_with_wrong_rule(const std::string& gxx, const std::string& text, const std::string& op,
                                       const std::string& rule, const std::string& wrong) {
  namespace fs = std::filesystem;
  using namespace rendered;
  auto files = kernel_dev::render(analyse(text, op), fs::path(LIGER_SOURCE_DIR) / "templates/kernel_dev");
  bool replaced = false;
  for (auto& f : files)
    if (f.path == "kernels/reference/" + op + "_ref.cpp" && f.content.find(rule) != std::string::npos) {
      f.content.replace(f.content.find(rule), rule.size(), wrong);
      replaced = true;
    }
  EXPECT_TRUE(replaced) << "the rendered reference has no '" << rule << "'";
  if (!replaced) return "";
  const fs::path root = write_tree(files, op);
  std::string error = build_reference(gxx, root, op, "");
  EXPECT_TRUE(error.empty()) << error;
  if (error.empty()) error = run((root / "ref_test").string(), root / "run.log");
  else error.clear();
  fs::remove_all(root);
  return error;
}

// Records every command; the reference test binary reports `reference_tests` passed tests.
struct FakeRunner : kernel_dev::ToolRunner {
  explicit FakeRunner(int reference_tests) : reference_tests(reference_tests) {}
  int reference_tests;
  std::vector<std::vector<std::string>> calls;
  toolchain::ProcessResult run(const std::vector<std::string>& argv, const std::filesystem::path&, std::chrono::seconds,
                               const std::map<std::string, std::string>&) override {
    calls.push_back(argv);
    toolchain::ProcessResult r;
    r.exit_code = 0;
    const std::string exe = std::filesystem::path(argv.front()).filename().string();
    if (exe == "reference_tests") {
      const std::string n = std::to_string(reference_tests);
      r.output = "[==========] " + n + " tests ran.\n[  PASSED  ] " + n + " tests.\n";
    } else if (exe == "python3") {
      r.exit_code = 3;
      r.output = "not run: torch not importable\n";
    } else {
      r.output = "ninja: no work to do.\n";
    }
    return r;
  }
  bool has_tool(const std::string&) override { return true; }
  bool has_gpu() override { return false; }
};

struct YesRun {
  std::filesystem::path root;  // scratch folder: the caller removes it
  std::filesystem::path tree;  // the library's list files as committed, which Act edits
  engine::RunOutcome out;
};

// kernel-dev on `input` with every checkpoint approved, `runner` standing in for the toolchain.
inline YesRun run_with_yes(const std::string& input, const std::string& label, std::shared_ptr<FakeRunner> runner) {
  namespace fs = std::filesystem;
  const fs::path source = LIGER_SOURCE_DIR;
  std::string pattern = (fs::temp_directory_path() / ("kernel-dev-" + label + "-XXXXXX")).string();
  YesRun run;
  const char* made = ::mkdtemp(pattern.data());
  if (!made) throw std::runtime_error("mkdtemp failed for " + pattern);
  run.root = made;
  run.tree = run.root / "repo";
  const fs::path build = run.root / "build";
  copy_committed(source,
                 {"kernels/ops.yaml", "kernels/python/liger_kernels/functional.py", "docs/kernels/README.md",
                  "kernels/include/liger_kernels"},
                 run.tree);
  fs::create_directories(build);
  std::ofstream(build / "build.ninja") << "# fake\n";
  std::ofstream(build / "CMakeCache.txt") << "LIGER_BUILD_KERNELS:BOOL=OFF\n";
  kernel_dev::set_tool_runner_for_testing(runner);
  engine::WorkflowRegistry registry;
  registry.add(kernel_dev::make_workflow());
  Config config = Config::defaults();
  engine::EngineOptions o;
  o.run_root = run.root / "runs";
  o.checkpoints = engine::CheckpointPolicy::AutoApprove;
  o.config = &config;
  o.quiet = true;
  engine::RunRequest r;
  r.workflow = "kernel-dev";
  r.label = label;
  r.tree_root = run.tree;
  r.input_text = input;
  r.arguments = {{"input", r.input_text}, {"build_dir", build.string()}};
  engine::Engine engine(registry, o);
  run.out = engine.start(r);
  kernel_dev::set_tool_runner_for_testing(nullptr);
  return run;
}

// The filter Verify passed to the reference test binary ("" when it did not run it).
inline std::string reference_filter(const FakeRunner& runner) {
  std::string filter;
  for (const auto& c : runner.calls)
    if (std::filesystem::path(c.front()).filename() == "reference_tests") filter = c.size() > 1 ? c.at(1) : "";
  return filter;
}

// A --yes run that completed: Act wrote `op`'s kernel, binding, reference test and benchmark and
// its ops.yaml entry of `tier`, and Verify passed the reference tests, run as <Camel>Reference.*.
inline void expect_op_through_verify(const YesRun& yes, const FakeRunner& runner, const std::string& op, int tier) {
  namespace fs = std::filesystem;
  ASSERT_EQ(yes.out.status, "completed") << yes.out.message;
  for (const std::string f : {"kernels/src/" + op + "/" + op + ".cu", "kernels/python/liger_kernels/ops/" + op + ".py",
                              "tests/kernels/reference/test_" + op + "_ref.cpp", "benchmarks/bench_" + op + ".cpp"})
    EXPECT_TRUE(fs::exists(yes.tree / f)) << f;
  EXPECT_NE(util::read_file(yes.tree / "kernels/ops.yaml").find("  - name: " + op + "\n    tier: " + std::to_string(tier) + "\n"),
            std::string::npos);
  const std::string verify = util::read_file(yes.out.run_dir / "kernel-dev/verify.md");
  EXPECT_NE(verify.find("| reference tests | passed"), std::string::npos) << verify;
  EXPECT_EQ(reference_filter(runner), "--gtest_filter=" + kernel_dev::camel_case(op) + "Reference.*");
}

}  // namespace liger::testing::family
