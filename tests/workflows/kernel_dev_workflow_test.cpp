// kernel-dev end to end through the engine, in a temporary tree holding copies of the files Act
// inserts into (ops.yaml, functional.py, docs/kernels/README.md, the library headers), with the
// toolchain replaced by a fake runner (no CUDA compile on CI): the words -> ReLU² profile, the
// staged files, alphabetical list inserts, a second identical run, --modify, the Tier-2 stop,
// "not run: no GPU", the GPU path's benchmark parsing, and the attempt loop on a build failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <unistd.h>

#include "liger/config.h"
#include "liger/engine.h"
#include "liger/error.h"
#include "liger/util.h"
#include "liger/workflows.h"
#include "workflows/kernel_dev/workflow.h"

#include "committed_tree.h"

namespace fs = std::filesystem;
using namespace liger;

namespace {

fs::path repo() { return fs::path(LIGER_SOURCE_DIR); }

struct FakeRunner : kernel_dev::ToolRunner {
  bool gpu = false;
  int build_failures = 0;  // the first N builds fail with a compiler error
  std::vector<std::vector<std::string>> calls;
  // Reference tests fail while this returns true (inspects the tree).
  std::function<bool()> reference_fails = [] { return false; };
  // Answers python3 calls when set (else: torch is not importable).
  std::function<toolchain::ProcessResult(const std::vector<std::string>&)> python;

  toolchain::ProcessResult run(const std::vector<std::string>& argv, const fs::path&, std::chrono::seconds,
                               const std::map<std::string, std::string>&) override {
    calls.push_back(argv);
    toolchain::ProcessResult r;
    r.exit_code = 0;
    const std::string exe = fs::path(argv.front()).filename().string();
    if (exe == "cmake" && argv.size() > 1 && argv[1] == "--build") {
      if (build_failures > 0) {
        --build_failures;
        r.exit_code = 1;
        r.output = "FAILED: kernels/CMakeFiles/liger_kernels.dir/src/relu_squared/relu_squared.cu.o\n"
                   "kernels/src/relu_squared/relu_squared.cu(42): error: identifier \"t9\" is undefined\n";
      } else {
        r.output = "ninja: no work to do.\n";
      }
    } else if (exe == "reference_tests") {
      if (reference_fails()) {
        r.exit_code = 1;
        r.output = "[ RUN      ] ReluSquaredReference.BackwardMatchesFiniteDifferences\n"
                   "test_relu_squared_ref.cpp:70: Failure\nforward differs from the expected relu(x)^2 at x=-1.5\n"
                   "[  FAILED  ] 1 test, listed below:\n";
      } else {
        r.output = "[==========] 2 tests ran.\n[  PASSED  ] 2 tests.\n";
      }
    } else if (exe == "kernel_tests") {
      r.output = "[==========] 31 tests ran.\n[  PASSED  ] 31 tests.\n";
    } else if (exe == "liger-bench") {
      auto it = std::find(argv.begin(), argv.end(), "--json");
      std::ofstream(*(it + 1)) << R"({"copy_gbps": 3000, "results": [
        {"op": "relu_squared", "mode": "forward", "shape": "16384x4096", "ok": true, "median_us": 60, "copy_fraction": 0.93, "extra_mib": 0},
        {"op": "relu_squared", "mode": "backward", "shape": "16384x4096", "ok": true, "median_us": 90, "copy_fraction": 0.91, "extra_mib": 0},
        {"op": "relu_squared", "mode": "full", "shape": "16384x4096", "ok": true, "median_us": 150, "copy_fraction": 0.92, "extra_mib": 0},
        {"op": "swiglu", "mode": "forward", "shape": "16384x14336", "ok": true, "median_us": 400, "copy_fraction": 0.865, "extra_mib": 0}]})";
      r.output = "ok\n";
    } else if (exe == "python3" && python) {
      return python(argv);
    } else if (exe == "python3") {
      r.exit_code = 3;
      r.output = "not run: torch not importable (ModuleNotFoundError)\n";
    }
    return r;
  }
  bool has_tool(const std::string&) override { return true; }
  bool has_gpu() override { return gpu; }
  int count(const std::string& exe) const {
    return static_cast<int>(std::count_if(calls.begin(), calls.end(), [&](const auto& a) {
      return fs::path(a.front()).filename().string() == exe;
    }));
  }
};

struct Tree {
  fs::path root, tree, runs, build;
  Config config = Config::defaults();
  engine::WorkflowRegistry registry;
  std::shared_ptr<FakeRunner> runner = std::make_shared<FakeRunner>();

  Tree() {
    std::string pattern = (fs::temp_directory_path() / "kernel-dev-wf-XXXXXX").string();
    root = ::mkdtemp(pattern.data());
    tree = root / "repo";
    runs = root / "runs";
    build = root / "build";
    // As committed: the ops a workflow has since added to the checkout are not in the baseline.
    liger::testing::copy_committed(repo(),
                                   {"kernels/ops.yaml", "kernels/python/liger_kernels/functional.py",
                                    "docs/kernels/README.md", "kernels/include/liger_kernels"},
                                   tree);
    // A configured build directory with the CUDA library enabled (the runner fakes the tools).
    fs::create_directories(build);
    std::ofstream(build / "build.ninja") << "# fake\n";
    std::ofstream(build / "CMakeCache.txt") << "LIGER_BUILD_KERNELS:BOOL=ON\nCMAKE_CUDA_COMPILER:FILEPATH=/usr/local/cuda/bin/nvcc\n";
    registry.add(kernel_dev::make_workflow());
    kernel_dev::set_tool_runner_for_testing(runner);
  }
  ~Tree() {
    kernel_dev::set_tool_runner_for_testing(nullptr);
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  engine::RunOutcome run(const std::string& input, nlohmann::json extra = nlohmann::json::object(),
                         engine::CheckpointPolicy policy = engine::CheckpointPolicy::AutoApprove,
                         const Config* cfg = nullptr) {
    engine::EngineOptions o;
    o.run_root = runs;
    o.checkpoints = policy;
    o.config = cfg ? cfg : &config;
    o.quiet = true;
    engine::RunRequest r;
    r.workflow = "kernel-dev";
    r.label = input;
    r.tree_root = tree;
    r.arguments = {{"input", input}, {"build_dir", build.string()}};
    for (auto& [k, v] : extra.items()) r.arguments[k] = v;
    r.input_text = input;
    engine::Engine e(registry, o);
    return e.start(r);
  }
  std::string read(const std::string& rel) const { return util::read_file(tree / rel); }
  bool exists(const std::string& rel) const { return fs::exists(tree / rel); }
};

std::vector<std::string> op_names(const std::string& ops_yaml) {
  std::vector<std::string> names;
  std::regex re(R"(\n  - name: ([a-z0-9_]+))");
  for (std::sregex_iterator it(ops_yaml.begin(), ops_yaml.end(), re), end; it != end; ++it) names.push_back((*it)[1]);
  return names;
}

const std::vector<std::string> kReluSquaredFiles = {
    "benchmarks/bench_relu_squared.cpp",
    "docs/kernels/README.md",
    "docs/kernels/relu_squared.md",
    "kernels/include/liger_kernels/relu_squared.h",
    "kernels/ops.yaml",
    "kernels/python/liger_kernels/compile/generated/relu_squared.py",
    "kernels/python/liger_kernels/functional.py",
    "kernels/python/liger_kernels/ops/relu_squared.py",
    "kernels/reference/relu_squared_ref.cpp",
    "kernels/reference/relu_squared_ref.h",
    "kernels/src/relu_squared/relu_squared.cu",
    "kernels/src/relu_squared/tuning.h",
    "tests/kernels/gpu/test_relu_squared.cpp",
    "tests/kernels/reference/test_relu_squared_ref.cpp",
};

}  // namespace

TEST(KernelDevWorkflow, RegisteredAsBuiltin) {
  engine::WorkflowRegistry registry;
  workflows::register_builtin_workflows(registry);
  const auto* w = registry.find("kernel-dev");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->has_all_stages());
  EXPECT_TRUE(static_cast<bool>(w->diagnose));
}

TEST(KernelDevWorkflow, WordsToReluSquaredThroughVerifyWithoutGpu) {
  Tree t;
  const auto out = t.run("ReLU squared activation function");
  ASSERT_EQ(out.status, "completed") << out.message;
  EXPECT_EQ(out.exit_code, 0);

  // Profile: the catalogue's ReLU², Tier 1, complete.
  const YAML::Node profile = YAML::LoadFile((out.run_dir / "profile.yaml").string());
  EXPECT_EQ(profile["identity"]["op_name"].as<std::string>(), "relu_squared");
  EXPECT_EQ(profile["tier"]["value"].as<int>(), 1);
  EXPECT_EQ(profile["source"]["kind"].as<std::string>(), "words");

  // Staged = applied = exactly the op's files and the three list files.
  const auto state = engine::read_run_state(out.run_dir);
  std::vector<std::string> staged = state["staged_files"].get<std::vector<std::string>>();
  EXPECT_EQ(staged, kReluSquaredFiles);
  for (const auto& f : kReluSquaredFiles) EXPECT_TRUE(t.exists(f)) << f;

  // ops.yaml: inserted once, in order, the other entries untouched.
  const std::string ops = t.read("kernels/ops.yaml");
  const auto names = op_names(ops);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(std::count(names.begin(), names.end(), "relu_squared"), 1);
  EXPECT_NE(ops.find("  - name: relu_squared\n    tier: 1\n    dtypes: [fp32, fp16, bf16]\n    options: []\n"
                     "    forward: liger_relu_squared_forward\n    backward: liger_relu_squared_backward\n"
                     "    header: kernels/include/liger_kernels/relu_squared.h\n  - name: rms_norm"),
            std::string::npos)
      << ops;
  std::string original = liger::testing::committed_text(repo(), "kernels/ops.yaml");
  std::string without = ops;
  const auto from = without.find("  - name: relu_squared\n");
  without.erase(from, without.find("  - name: rms_norm") - from);
  EXPECT_EQ(without, original);

  // Python exports and the docs row.
  const std::string functional = t.read("kernels/python/liger_kernels/functional.py");
  EXPECT_NE(functional.find("from .ops.relu_squared import relu_squared"), std::string::npos);
  EXPECT_NE(functional.find("liger_relu_squared = relu_squared"), std::string::npos);
  EXPECT_NE(functional.find("    \"relu_squared\","), std::string::npos);
  EXPECT_NE(t.read("docs/kernels/README.md").find("relu_squared"), std::string::npos);

  // Verify: build + reference tests passed, GPU tests and benchmark "not run: no GPU".
  const std::string verify = util::read_file(out.run_dir / "kernel-dev/verify.md");
  EXPECT_NE(verify.find("| build | passed"), std::string::npos) << verify;
  EXPECT_NE(verify.find("| reference tests | passed"), std::string::npos) << verify;
  EXPECT_NE(verify.find("| GPU tests | not run: no GPU"), std::string::npos) << verify;
  EXPECT_EQ(verify.find("| GPU tests | passed"), std::string::npos) << verify;
  EXPECT_NE(verify.find("| benchmark | not run: no GPU"), std::string::npos) << verify;
  EXPECT_NE(verify.find("| benchmark vs torch.compile | not run: no GPU"), std::string::npos) << verify;
  EXPECT_NE(verify.find("verdict: **unverified on GPU"), std::string::npos) << verify;
  // The compile pattern check asked python3 for torch, got none, and says so.
  EXPECT_NE(verify.find("| compile pattern matches the source | not run: python3 cannot import torch |"), std::string::npos)
      << verify;
  EXPECT_EQ(t.runner->count("python3"), 1);
  const std::string report = util::read_file(out.run_dir / "report.md");
  EXPECT_NE(report.find("not run: no GPU"), std::string::npos) << report;
  EXPECT_EQ(t.runner->count("kernel_tests"), 0);
  EXPECT_EQ(t.runner->count("liger-bench"), 0);
  // Nor are they built: the CUDA library and the reference tests are, the GPU-only targets not.
  for (const auto& c : t.runner->calls) {
    if (fs::path(c.front()).filename() != "cmake" || c.size() < 2 || c[1] != "--build") continue;
    EXPECT_NE(std::find(c.begin(), c.end(), "liger_kernels"), c.end());
    EXPECT_NE(std::find(c.begin(), c.end(), "reference_tests"), c.end());
    EXPECT_EQ(std::find(c.begin(), c.end(), "kernel_tests"), c.end());
    EXPECT_EQ(std::find(c.begin(), c.end(), "liger-bench"), c.end());
  }
  // The reference tests were filtered to the op.
  bool filtered = false;
  for (const auto& c : t.runner->calls)
    if (fs::path(c.front()).filename() == "reference_tests") filtered = c.at(1) == "--gtest_filter=ReluSquaredReference.*";
  EXPECT_TRUE(filtered);

  // A second identical run: nothing to apply, Verify still runs, completes.
  const auto again = t.run("ReLU squared activation function");
  ASSERT_EQ(again.status, "completed") << again.message;
  const auto state2 = engine::read_run_state(again.run_dir);
  EXPECT_TRUE(state2["staged_files"].empty()) << state2.dump(2);
  EXPECT_EQ(t.runner->count("reference_tests"), 2);
  EXPECT_EQ(op_names(t.read("kernels/ops.yaml")), names);
}

TEST(KernelDevWorkflow, ExistingOpDifferentFilesNeedsModify) {
  Tree t;
  ASSERT_EQ(t.run("ReLU squared activation function").status, "completed");
  const std::string cu = "kernels/src/relu_squared/relu_squared.cu";
  const std::string generated = t.read(cu);
  std::ofstream(t.tree / cu, std::ios::app) << "// hand edit\n";
  try {
    t.run("ReLU squared activation function");
    FAIL() << "a differing existing op must be refused without --modify";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--modify relu_squared"), std::string::npos) << e.what();
  }
  EXPECT_NE(t.read(cu), generated) << "the refused run left the tree alone";
  const auto out = t.run("ReLU squared activation function", {{"modify", "relu_squared"}});
  ASSERT_EQ(out.status, "completed") << out.message;
  EXPECT_EQ(t.read(cu), generated);
  const auto state = engine::read_run_state(out.run_dir);
  EXPECT_EQ(state["staged_files"], nlohmann::json::array({cu}));
}

TEST(KernelDevWorkflow, ModifyUnknownOpFails) {
  Tree t;
  EXPECT_THROW(t.run("ReLU squared activation function", {{"modify", "no_such_op"}}), Error);
}

// A Tier-2 request with no built-in PyTorch form (tiers.yaml) has undecided formulas: --yes does
// not approve them.
TEST(KernelDevWorkflow, Tier2RequestWithoutABuiltInFormStopsAtCheckpointEvenWithYes) {
  Tree t;
  const auto out = t.run("group norm");
  EXPECT_EQ(out.status, "awaiting_approval");
  EXPECT_EQ(out.pending_checkpoint, "profile");
  EXPECT_EQ(out.exit_code, 3);
  ASSERT_FALSE(out.undecided.empty());
  std::string all;
  for (const auto& u : out.undecided) all += u + "\n";
  EXPECT_NE(all.find("forward"), std::string::npos) << all;
  EXPECT_NE(all.find("backward"), std::string::npos) << all;
  const YAML::Node profile = YAML::LoadFile((out.run_dir / "profile.yaml").string());
  EXPECT_EQ(profile["tier"]["value"].as<int>(), 2);
  EXPECT_FALSE(t.exists("kernels/src/group_norm"));
  EXPECT_TRUE(t.runner->calls.empty());
}

// The same op as PyTorch code (and two more of the issue's spellings) runs end to end offline:
// the built-in analyser derives the row program, Act renders the row kernel, and Verify builds
// and runs the reference tests (their real compile and finite-difference run is in
// kernel_dev_tier2_offline_test.cpp) and says "not run" for the GPU parts.
TEST(KernelDevWorkflow, Tier2PyTorchRunsEndToEndOffline) {
  for (const auto& [source, op] : std::vector<std::pair<std::string, std::string>>{
           {"def f(x): return torch.softmax(x, dim=-1)", "softmax"},
           {"def f(x): return F.log_softmax(x, dim=-1)", "log_softmax"},
           {"def f(x): return x / x.norm(dim=-1, keepdim=True)", "l2_normalize"},
           // by name: the request's PyTorch form in tiers.yaml
           {"softmax", "softmax"},
           {"RMSNorm without weight", "rms_norm_no_affine"}}) {
    SCOPED_TRACE(source);
    Tree t;
    const auto out = t.run(source, {{"skip_bench", true}});
    ASSERT_EQ(out.status, "completed") << out.message;
    const YAML::Node profile = YAML::LoadFile((out.run_dir / "profile.yaml").string());
    EXPECT_EQ(profile["tier"]["value"].as<int>(), 2);
    EXPECT_EQ(profile["identity"]["op_name"].as<std::string>(), op);
    EXPECT_TRUE(t.exists("kernels/src/" + op + "/" + op + ".cu"));
    EXPECT_TRUE(t.exists("kernels/reference/" + op + "_ref.cpp"));
    const std::string verify = util::read_file(out.run_dir / "kernel-dev/verify.md");
    EXPECT_NE(verify.find("| build | passed"), std::string::npos) << verify;
    EXPECT_NE(verify.find("| reference tests | passed"), std::string::npos) << verify;
    EXPECT_NE(verify.find("| GPU tests | not run: no GPU"), std::string::npos) << verify;
    EXPECT_EQ(t.runner->count("reference_tests"), 1);
  }
}

TEST(KernelDevWorkflow, GpuPathRunsGpuTestsAndParsesBenchmarks) {
  Tree t;
  t.runner->gpu = true;
  const auto out = t.run("y = relu(x)^2", {{"name", "relu_squared"}});
  ASSERT_EQ(out.status, "completed") << out.message;
  EXPECT_EQ(t.runner->count("kernel_tests"), 1);
  EXPECT_EQ(t.runner->count("liger-bench"), 1);
  const auto verify = nlohmann::json::parse(util::read_file(out.run_dir / "kernel-dev/verify.json"));
  EXPECT_EQ(verify["verdict"], "pass");
  EXPECT_DOUBLE_EQ(verify["metrics"]["liger_bench"]["op"]["forward"]["copy_fraction"].get<double>(), 0.93);
  const std::string md = util::read_file(out.run_dir / "kernel-dev/verify.md");
  EXPECT_NE(md.find("forward 93.0% of copy"), std::string::npos) << md;
  EXPECT_NE(md.find("(swiglu 86.5%)"), std::string::npos) << md;
  EXPECT_NE(md.find("not run: torch not importable"), std::string::npos) << md;
  EXPECT_NE(md.find("| benchmark vs torch.compile | not run: torch not importable (ModuleNotFoundError)"), std::string::npos)
      << md;
}

// With torch on a GPU, Verify reports the kernel against torch.compile of the same function
// beside eager, and says why when torch.compile gave no timing.
TEST(KernelDevWorkflow, VerifyReportsTorchCompileBesideEager) {
  for (bool compiled : {true, false}) {
    Tree t;
    t.runner->gpu = true;
    t.runner->python = [&](const std::vector<std::string>& argv) {
      toolchain::ProcessResult r;
      r.exit_code = 0;
      const bool compare = std::any_of(argv.begin(), argv.end(), [](const std::string& a) {
        return a.find("kernel_dev_compare.py") != std::string::npos;
      });
      if (!compare) {
        r.exit_code = 3;
        r.output = "not run: torch not importable (ModuleNotFoundError)\n";
        return r;
      }
      const bool check_only = std::find(argv.begin(), argv.end(), "--check-only") != argv.end();
      auto json = std::find(argv.begin(), argv.end(), "--json");
      if (check_only) {
        std::ofstream(*(json + 1)) << R"({"agree": true, "tensors": [], "lines": ["agree"]})";
        r.output = "all outputs and gradients agree\n";
        return r;
      }
      nlohmann::json out = {{"speedup", {{"forward", 2.0}, {"backward", 3.0}, {"full", 2.5}}}, {"memory_saving", 0.4}};
      if (compiled) out["speedup_vs_compile"] = {{"forward", 1.25}, {"backward", 1.5}, {"full", 1.4}};
      else out["torch_compile_error"] = "BackendCompilerFailed: inductor missing";
      std::ofstream(*(json + 1)) << out.dump();
      r.output = "measured\n";
      return r;
    };
    const auto out = t.run("y = relu(x)^2", {{"name", "relu_squared"}});
    ASSERT_EQ(out.status, "completed") << out.message;
    const std::string md = util::read_file(out.run_dir / "kernel-dev/verify.md");
    EXPECT_NE(md.find("forward 2.00x, backward 3.00x"), std::string::npos) << md;
    if (compiled)
      EXPECT_NE(md.find("| benchmark vs torch.compile | measured | forward 1.25x, backward 1.50x, full 1.40x"), std::string::npos) << md;
    else
      EXPECT_NE(md.find("| benchmark vs torch.compile | not run: BackendCompilerFailed: inductor missing"), std::string::npos) << md;
  }
}

// A PyTorch input is compared as written: Verify hands the input's own code (and the entry the
// translator took as the op) to the comparison script, for the agreement check and the eager /
// torch.compile benchmarks, and names that baseline in the report. Other inputs keep the
// expression.
TEST(KernelDevWorkflow, VerifyComparesWithTheInputsOwnCode) {
  const std::string source = "import torch\n\ndef gated(x):\n    return x * torch.sigmoid(1.702 * x)\n";
  for (bool pytorch : {true, false}) {
    SCOPED_TRACE(pytorch ? "pytorch input" : "expression input");
    Tree t;
    t.runner->gpu = true;
    std::vector<std::vector<std::string>> compares;
    t.runner->python = [&](const std::vector<std::string>& argv) {
      toolchain::ProcessResult r;
      r.exit_code = 0;
      const bool compare = std::any_of(argv.begin(), argv.end(), [](const std::string& a) {
        return a.find("kernel_dev_compare.py") != std::string::npos;
      });
      if (!compare) {
        r.exit_code = 3;
        r.output = "not run: torch not importable (ModuleNotFoundError)\n";
        return r;
      }
      compares.push_back(argv);
      const bool with_code = std::find(argv.begin(), argv.end(), "--eager-source") != argv.end();
      const std::string baseline = with_code ? "input" : "expression";
      auto json = std::find(argv.begin(), argv.end(), "--json");
      if (std::find(argv.begin(), argv.end(), "--check-only") != argv.end())
        std::ofstream(*(json + 1)) << nlohmann::json{{"agree", true}, {"tensors", nlohmann::json::array()},
                                                     {"lines", {"agree"}}, {"baseline", baseline}}.dump();
      else
        std::ofstream(*(json + 1)) << nlohmann::json{{"speedup", {{"forward", 2.0}, {"backward", 3.0}, {"full", 2.5}}},
                                                     {"baseline", baseline}}.dump();
      r.output = "ok\n";
      return r;
    };
    const auto out = t.run(pytorch ? source : "y = x * sigmoid(1.702 * x)", {{"name", "quick_gelu"}});
    ASSERT_EQ(out.status, "completed") << out.message;
    ASSERT_GE(compares.size(), 2u);  // the agreement check per dtype of the tolerance table, the benchmark
    const std::string md = util::read_file(out.run_dir / "kernel-dev/verify.md");
    for (const auto& argv : compares) {
      auto src = std::find(argv.begin(), argv.end(), "--eager-source");
      auto entry = std::find(argv.begin(), argv.end(), "--eager-entry");
      if (!pytorch) {
        EXPECT_EQ(src, argv.end());
        continue;
      }
      ASSERT_NE(src, argv.end());
      ASSERT_NE(entry, argv.end());
      EXPECT_EQ(util::read_file(*(src + 1)), source);
      EXPECT_EQ(*(entry + 1), "gated");
    }
    if (pytorch) {
      EXPECT_NE(md.find("| agreement with PyTorch (fp64, the input's `gated`) | passed"), std::string::npos) << md;
      EXPECT_NE(md.find("| benchmark vs PyTorch eager (the input's `gated`) | measured"), std::string::npos) << md;
      const YAML::Node profile = YAML::LoadFile((out.run_dir / "profile.yaml").string());
      EXPECT_EQ(profile["source"]["entry"].as<std::string>(), "gated");
    } else {
      EXPECT_EQ(md.find("the input's"), std::string::npos) << md;
    }
  }
}

TEST(KernelDevWorkflow, SkipBenchSaysSo) {
  Tree t;
  t.runner->gpu = true;
  const auto out = t.run("ReLU squared activation function", {{"skip_bench", true}});
  ASSERT_EQ(out.status, "completed") << out.message;
  EXPECT_EQ(t.runner->count("liger-bench"), 0);
  EXPECT_NE(util::read_file(out.run_dir / "kernel-dev/verify.md").find("| benchmark | not run: --skip-bench"), std::string::npos);
}

TEST(KernelDevWorkflow, AttemptLoopOnPersistentBuildFailure) {
  Tree t;
  t.runner->build_failures = 100;
  const auto out = t.run("ReLU squared activation function");
  EXPECT_EQ(out.status, "verification_failed") << out.message;
  EXPECT_EQ(out.exit_code, 4);
  const auto state = engine::read_run_state(out.run_dir);
  ASSERT_EQ(state["attempts"].size(), 3u);
  EXPECT_EQ(t.runner->count("cmake"), 3);
  const std::string report = util::read_file(out.run_dir / "report.md");
  EXPECT_NE(report.find("identifier \"t9\" is undefined"), std::string::npos) << report;
  EXPECT_NE(report.find("the built-in provider is deterministic"), std::string::npos) << report;
  EXPECT_NE(report.find("the same failure persisted"), std::string::npos) << report;
  // The tree is restored byte for byte.
  EXPECT_FALSE(t.exists("kernels/src/relu_squared/relu_squared.cu"));
  EXPECT_FALSE(t.exists("kernels/python/liger_kernels/compile/generated/relu_squared.py"));
  EXPECT_EQ(t.read("kernels/ops.yaml"), liger::testing::committed_text(repo(), "kernels/ops.yaml"));
}

// Formulas that fail their own gradient check make every kernel built from them disagree with
// PyTorch too: the agreement check is not run (and its consequences are not sent to a model as
// diagnostics), and the report says why.
TEST(KernelDevWorkflow, AgreementWithPyTorchWaitsForTheReferenceTests) {
  Tree t;
  t.runner->gpu = true;
  t.runner->reference_fails = [] { return true; };
  int compare_calls = 0;
  t.runner->python = [&](const std::vector<std::string>& argv) {
    toolchain::ProcessResult r;
    const bool compare = std::any_of(argv.begin(), argv.end(), [](const std::string& a) {
      return a.find("kernel_dev_compare.py") != std::string::npos;
    });
    compare_calls += compare ? 1 : 0;
    r.exit_code = compare ? 0 : 3;
    r.output = compare ? "agree\n" : "not run: torch not importable (ModuleNotFoundError)\n";
    return r;
  };
  const auto out = t.run("y = relu(x)^2", {{"name", "relu_squared"}});
  EXPECT_EQ(out.status, "verification_failed") << out.message;
  EXPECT_EQ(compare_calls, 0);
  EXPECT_GE(t.runner->count("kernel_tests"), 1);  // the GPU tests still ran
  const std::string report = util::read_file(out.run_dir / "report.md");
  EXPECT_NE(report.find("not run: the reference tests failed"), std::string::npos) << report;
}

TEST(KernelDevWorkflow, AttemptLoopRecoversFromATransientBuildFailure) {
  Tree t;
  t.runner->build_failures = 1;
  const auto out = t.run("ReLU squared activation function");
  ASSERT_EQ(out.status, "completed") << out.message;
  EXPECT_EQ(engine::read_run_state(out.run_dir)["attempts"].size(), 2u);
  EXPECT_TRUE(t.exists("kernels/src/relu_squared/relu_squared.cu"));
}

TEST(KernelDevWorkflow, OpsYamlInsertKeepsOrderAndIsIdempotent) {
  const std::string text = "ops:\n  - name: alpha\n    tier: 1\n  - name: gamma\n    tier: 2\n";
  const std::string entry = "  - name: beta\n    tier: 1\n";
  const std::string once = kernel_dev::insert_ops_yaml_entry(text, "beta", entry);
  EXPECT_EQ(once, "ops:\n  - name: alpha\n    tier: 1\n  - name: beta\n    tier: 1\n  - name: gamma\n    tier: 2\n");
  EXPECT_EQ(kernel_dev::insert_ops_yaml_entry(once, "beta", entry), once);
  EXPECT_EQ(kernel_dev::insert_ops_yaml_entry(text, "zeta", "  - name: zeta\n"), text + "  - name: zeta\n");
  EXPECT_EQ(kernel_dev::insert_ops_yaml_entry(text, "aa", "  - name: aa\n"),
            "ops:\n  - name: aa\n  - name: alpha\n    tier: 1\n  - name: gamma\n    tier: 2\n");
}

// The compile pattern check where python3 imports torch: run on the op's source (the PyTorch module
// it came from, else its forward expression); a match passes, no match is a warning (the entry is
// inert), a broken entry fails Verify.
TEST(KernelDevWorkflow, CompilePatternCheckRunsWhereTorchImports) {
  struct Case {
    int exit_code;
    std::string output, status, row;
  };
  const std::vector<Case> cases = {
      {0, "matched: the dy_t pattern finds the PyTorch function it came from (one region)\n", "completed",
       "| compile pattern matches the source | passed | against the PyTorch source: matched: the dy_t pattern"},
      {1, "FAILED: the dy_t pattern does not match the PyTorch function it came from\n", "completed",
       "| compile pattern matches the source | failed (warning) | FAILED: the dy_t pattern does not match"},
      {4, "BROKEN: the pattern passes the source's `bias` as the op's `weight`\n", "verification_failed",
       "| compile pattern matches the source | failed | BROKEN: the pattern passes"},
  };
  const fs::path dyt = repo() / "tests/workflows/fixtures/kernel_dev/ops/dyt.py";
  for (const auto& c : cases) {
    Tree t;
    std::vector<std::string> check_argv;
    std::string source_seen;
    t.runner->python = [&](const std::vector<std::string>& argv) {
      toolchain::ProcessResult r;
      r.exit_code = 0;
      if (argv.size() > 1 && argv[1] == "-c") return r;  // the torch probe
      if (argv.size() > 1 && fs::path(argv[1]).filename() == "compile_pattern_check.py") {
        check_argv = argv;
        auto at = std::find(argv.begin(), argv.end(), "--source-file");
        if (at != argv.end()) source_seen = util::read_file(*(at + 1));
        r.exit_code = c.exit_code;
        r.output = c.output;
        return r;
      }
      r.exit_code = 3;
      r.output = "not run: no CUDA device visible to torch\n";
      return r;
    };
    const auto out = t.run(util::read_file(dyt));
    EXPECT_EQ(out.status, c.status) << c.exit_code << ": " << out.message;
    ASSERT_FALSE(check_argv.empty()) << "the check did not run";
    EXPECT_NE(std::find(check_argv.begin(), check_argv.end(), "--op"), check_argv.end());
    EXPECT_EQ(source_seen, util::read_file(dyt));  // the module the op came from, verbatim
    const std::string md = util::read_file(out.run_dir / "kernel-dev/verify.md");
    EXPECT_NE(md.find(c.row), std::string::npos) << md;
    if (c.exit_code == 1)
      EXPECT_NE(util::read_file(out.run_dir / "report.md").find("will not find"), std::string::npos);
    // Applied with the op when Verify passes; rolled back with it when a broken entry fails Verify.
    EXPECT_EQ(t.exists("kernels/python/liger_kernels/compile/generated/dy_t.py"), c.exit_code != 4);
  }

  // An op from an expression is checked against its forward expression.
  Tree t;
  std::string source_seen;
  t.runner->python = [&](const std::vector<std::string>& argv) {
    toolchain::ProcessResult r;
    r.exit_code = argv.size() > 1 && argv[1] == "-c" ? 0 : 3;
    auto at = std::find(argv.begin(), argv.end(), "--source-file");
    if (at != argv.end()) {
      source_seen = util::read_file(*(at + 1));
      r.exit_code = 0;
      r.output = "matched\n";
    }
    return r;
  };
  const auto out = t.run("y = relu(x)^2", {{"name", "relu_squared"}});
  ASSERT_EQ(out.status, "completed") << out.message;
  const YAML::Node profile = YAML::LoadFile((out.run_dir / "profile.yaml").string());
  EXPECT_EQ(source_seen, profile["forward"]["expression"].as<std::string>());
}

// --modify of an op the compile backend has a built-in rule for: no generated entry replaces it.
TEST(KernelDevWorkflow, NoCompileEntryForAnOpWithABuiltinRule) {
  Tree t;
  fs::create_directories(t.tree / "kernels/python/liger_kernels/compile");
  std::ofstream(t.tree / "kernels/python/liger_kernels/compile/builtin_ops.py")
      << "register_op(\"swiglu\", rules.glu, bench_dims=_GLU_DIMS, bench=_bench_glu(\"swiglu\"))\n";
  const auto out = t.run("SwiGLU", {{"modify", "swiglu"}});
  ASSERT_EQ(out.status, "completed") << out.message;
  EXPECT_FALSE(t.exists("kernels/python/liger_kernels/compile/generated/swiglu.py"));
  EXPECT_TRUE(t.exists("kernels/python/liger_kernels/ops/swiglu.py"));
  EXPECT_NE(util::read_file(out.run_dir / "report.md").find("the backend's built-in rules already place it"),
            std::string::npos);
  EXPECT_NE(util::read_file(out.run_dir / "kernel-dev/verify.md")
                .find("| compile pattern matches the source | not run: no compile-backend entry |"),
            std::string::npos)
      << util::read_file(out.run_dir / "kernel-dev/verify.md");
}
