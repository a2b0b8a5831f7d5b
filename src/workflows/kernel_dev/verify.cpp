// kernel-dev's Verify: builds the tree, runs the op's reference tests, GPU tests, agreement with
// PyTorch and the compile-pattern check, then benchmarks it (vs copy bandwidth, eager PyTorch,
// torch.compile and the closest kernel); what cannot run on this machine is "not run: <reason>".
// Also the diagnosis the engine prints once every attempt has failed Verify.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "liger/util.h"
#include "workflows/kernel_dev/compile_entry.h"
#include "workflows/kernel_dev/input_sampling.h"
#include "workflows/kernel_dev/input_split.h"
#include "workflows/kernel_dev/workflow.h"
#include "workflows/kernel_dev/workflow_internal.h"

namespace liger::kernel_dev {

namespace fs = std::filesystem;
using std::chrono::seconds;

std::string eager_expression(const KernelProfile& p) {
  if (p.row_program) {
    // A Tier-2 forward is not one expression: the profile's PyTorch function, else the binding's
    // `reference` (the same row program in PyTorch operations).
    if (!p.row_program->pytorch_reference.empty()) return p.row_program->pytorch_reference;
    // Learnable weights follow the inputs, as kernel_dev_compare.py passes them (--params).
    std::string args;
    for (const auto& in : p.inputs) args += (args.empty() ? "" : ", ") + in.name;
    if (args.empty()) args = "x";
    for (const auto& l : p.learnable_parameters) args += ", " + l.name;
    return "__import__('liger_kernels.ops." + p.op_name + "', fromlist=['reference']).reference(" + args + ")";
  }
  const std::string prefix = "PyTorch eager baseline: ";
  for (const auto& note : p.notes)
    if (note.rfind(prefix, 0) == 0) return note.substr(prefix.size());
  return p.forward ? p.forward->expression : std::string{};
}

fs::path build_dir_for(const fs::path& tree_root) {
  if (const char* env = std::getenv("LIGER_BUILD_DIR"); env && *env) {
    fs::path dir = env;
    return dir.is_absolute() ? dir : tree_root / dir;
  }
  return tree_root / "build";
}

std::string foreign_build_dir_problem(const fs::path& tree_root, const fs::path& build) {
  std::ifstream cache(build / "CMakeCache.txt");
  const std::string key = "CMAKE_HOME_DIRECTORY:INTERNAL=";
  for (std::string line; std::getline(cache, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const fs::path source = line.substr(key.size());
    std::error_code a, b;
    const fs::path configured = fs::weakly_canonical(source, a), ours = fs::weakly_canonical(tree_root, b);
    if (a || b || configured == ours) return "";
    return "the build directory " + build.string() + " was configured for the checkout " + source.string() + ", not " +
           tree_root.string() + ": Verify would build and test that checkout instead of the files written here";
  }
  return "";
}

namespace stages {

// ------------------------------------------------------------------------------ Verify
namespace {

// Fixed module parameters as kernel_dev_compare.py's --module-params: the op runs at their
// defaults, so its PyTorch form must see the same values.
std::string module_params_arg(const KernelProfile& p) {
  std::string out;
  for (const auto& m : p.module_parameters) out += fmt::format("{}{}={}", out.empty() ? "" : ",", m.name, m.value);
  return out;
}

// Where the inputs are drawn from, as kernel_dev_compare.py's --samples ("" when all are normal):
// an op defined on part of the line is compared where it is defined, as its tests are.
std::string samples_arg(const KernelProfile& p) {
  std::string out;
  for (const auto& in : p.inputs)
    if (!in.sample.empty() && in.sample != "normal")
      out += (out.empty() ? "" : ";") + in.name + "=" + sample_python(in.sample, "z");
  return out;
}

// Arguments cut into inputs, as kernel_dev_compare.py's --splits ("" when none): the op's entry
// and the input's own code take the argument, the expression its parts (inputs[].split).
std::string splits_arg(const KernelProfile& p) {
  std::string out;
  for (const auto& arg : call_arguments(p)) {
    if (arg.parts.empty()) continue;
    out += (out.empty() ? "" : ";") + arg.name + "=";
    for (std::size_t k = 0; k < arg.parts.size(); ++k) out += (k ? "," : "") + p.inputs[arg.parts[k]].name;
  }
  return out;
}

// A PyTorch input is compared as written: its own code (the function, module or snippet the
// translator took as the op) becomes the baseline of the agreement check and of the eager and
// torch.compile benchmarks (kernel_dev_compare.py --eager-source / --eager-entry). The translation
// is what the kernel was built from, so a comparison with it could not catch a misread input.
// The script falls back to the translation, and says so, when the code cannot be called as is.
std::vector<std::string> input_code_args(const KernelProfile& p, const fs::path& log_dir) {
  if (p.source_kind != "pytorch" || p.source_entry.empty() || util::trim(p.source_text).empty()) return {};
  const fs::path file = log_dir / "input_code.py";
  util::write_file_atomic(file, p.source_text + (p.source_text.back() == '\n' ? "" : "\n"));
  return {"--eager-source", file.string(), "--eager-entry", p.source_entry};
}

// How a report names the baseline it compared with.
std::string baseline_label(const KernelProfile& p, const std::string& eager, const nlohmann::json& report) {
  const std::string used = report.is_object() ? report.value("baseline", std::string()) : std::string();
  if (used == "input") return "the input's " + (p.source_entry == "<snippet>" ? std::string("code") : "`" + p.source_entry + "`");
  if (used.rfind("translation", 0) == 0) return eager + "; " + used;
  return eager;
}

std::string tail_lines(const std::string& text, std::size_t lines = 40) {
  // A tool stopped by a signal may have printed nothing.
  if (text.empty()) return text;
  std::size_t at = text.size(), count = 0;
  while (at > 0 && count <= lines) {
    at = text.rfind('\n', at - 1);
    if (at == std::string::npos) return text;
    ++count;
  }
  return text.substr(at + 1);
}

// Tool output as the model and the report see it: paths relative to the tree and no test
// timings, so the same failure reads the same in any checkout (and a recorded repair exchange
// replays through a real build).
std::string relative_output(std::string text, const fs::path& tree) {
  const std::string root = tree.string() + "/";
  for (std::size_t at = text.find(root); at != std::string::npos; at = text.find(root, at)) text.erase(at, root.size());
  static const std::regex timing(R"( \([0-9]+ ms( total)?\))");
  return std::regex_replace(text, timing, "");
}

// Compiler errors first (what a human and an LLM need), else the tail.
std::string error_excerpt(const std::string& output) {
  std::istringstream in(output);
  std::string line, errors;
  int n = 0, follow = 0;  // a gtest "file:line: Failure" is followed by its message lines
  while (std::getline(in, line)) {
    // Blank lines carry nothing, and GoogleTest versions differ in where they print them (1.14
    // after every failure message, 1.12 not): skipped, the same failure reads the same on every
    // machine, which a recorded repair exchange relies on.
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const bool failure = line.find("Failure") != std::string::npos;
    if ((failure || follow > 0 || line.find("error") != std::string::npos || line.find("FAILED") != std::string::npos) &&
        n++ < 40)
      errors += line + "\n";
    follow = failure ? 3 : std::max(0, follow - 1);
  }
  return errors.empty() ? tail_lines(output) : errors;
}

struct Check {
  std::string name;
  std::string status;  // passed | failed | not run: <reason> | measured | warning
  std::string detail;
};

int build_jobs() {
  if (const char* env = std::getenv("LIGER_BUILD_JOBS"); env && *env) return std::max(1, std::atoi(env));
  return std::max(1u, std::thread::hardware_concurrency());
}

bool kernels_enabled(const fs::path& build) {
  const std::string cache = read_or_empty(build / "CMakeCache.txt");
  if (cache.find("LIGER_BUILD_KERNELS:BOOL=OFF") != std::string::npos) return false;
  return cache.find("CMAKE_CUDA_COMPILER:") != std::string::npos || cache.find("LIGER_BUILD_KERNELS:BOOL=ON") != std::string::npos;
}

int gtest_count(const std::string& output, const std::string& tag) {
  // "[  PASSED  ] 4 tests." / "[  FAILED  ] 1 test, listed below:"
  std::smatch m;
  std::regex re("\\[  " + tag + "  \\] ([0-9]+) test");
  if (std::regex_search(output, m, re)) return std::stoi(m[1]);
  return 0;
}

std::string pct(double v) { return fmt::format("{:.1f}%", v * 100.0); }

}  // namespace

StageResult verify(StageContext& ctx) {
  StageResult result;
  fs::create_directories(work_dir(ctx));
  KernelProfile p = current_profile(ctx);
  auto runner = current_tool_runner();
  const fs::path tree = ctx.tree_root;
  const std::string build_arg = ctx.input.value("build_dir", "");
  const fs::path build = build_arg.empty() ? build_dir_for(tree) : fs::path(build_arg);
  const bool skip_bench = ctx.input.value("skip_bench", false);
  const std::string camel = camel_case(p.op_name);
  std::vector<Check> checks;
  nlohmann::json metrics = nlohmann::json::object();
  fs::path log_dir = work_dir(ctx) / fmt::format("attempt-{}", ctx.attempt);
  fs::create_directories(log_dir);
  auto run_logged = [&](const std::string& step, const std::vector<std::string>& argv, int timeout_s,
                        const std::map<std::string, std::string>& env = {}) {
    ctx.progress(step + ": " + argv.front());
    auto r = runner->run(argv, tree, seconds(timeout_s), env);
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    util::write_file_atomic(log_dir / (step + ".log"), "$ " + cmd + "\n" + r.output);
    return r;
  };

  // 1. build (hard)
  bool built = false;
  bool kernels = false;
  {
    bool configured = fs::exists(build / "build.ninja") || fs::exists(build / "Makefile");
    bool ok = true;
    // A build directory of another checkout (LIGER_BUILD_DIR inherited from another clone's
    // setup) would build and test that checkout, and its tests would stand for this op's.
    if (const std::string foreign = foreign_build_dir_problem(tree, build); !foreign.empty()) {
      ok = false;
      result.fail("build: " + foreign,
                  "point LIGER_BUILD_DIR at a build directory of this checkout (or a new one), or remove " + build.string());
      checks.push_back({"build", "failed", foreign});
    } else if (!configured) {
      std::vector<std::string> argv = {"cmake", "-S", tree.string(), "-B", build.string(), "-DCMAKE_BUILD_TYPE=Release"};
      if (runner->has_tool("ninja")) argv.insert(argv.begin() + 1, {"-G", "Ninja"});
      if (runner->has_tool("nvcc")) {
        auto nvcc = toolchain::find_executable("nvcc");
        if (nvcc) argv.push_back("-DCMAKE_CUDA_COMPILER=" + nvcc->string());
        const char* archs = std::getenv("LIGER_CUDA_ARCHS");
        argv.push_back(std::string("-DCMAKE_CUDA_ARCHITECTURES=") + (archs && *archs ? archs : "80-real;90"));
      } else {
        argv.push_back("-DLIGER_BUILD_KERNELS=OFF");
      }
      auto r = run_logged("configure", argv, 1800);
      if (!r.ok()) {
        ok = false;
        result.fail("build: cmake configure of " + build.string() + " failed", error_excerpt(r.output));
        checks.push_back({"build", "failed", "cmake configure failed"});
      }
    }
    if (ok) {
      kernels = kernels_enabled(build);
      // Only what this Verify runs: the GPU tests and the benchmark are not built on a machine
      // without a GPU (the CUDA library still is: it proves the generated kernel compiles).
      std::vector<std::string> targets = {"reference_tests"};
      if (kernels) {
        targets.insert(targets.begin(), "liger_kernels");
        if (runner->has_gpu()) {
          targets.push_back("kernel_tests");
          if (!skip_bench) targets.push_back("liger-bench");
        }
      }
      std::vector<std::string> argv = {"cmake", "--build", build.string(), "-j", std::to_string(build_jobs()), "--target"};
      argv.insert(argv.end(), targets.begin(), targets.end());
      auto r = run_logged("build", argv, 3600);
      r.output = relative_output(r.output, tree);
      if (!r.ok()) {
        result.fail("build failed (" + std::string(r.timed_out ? "timed out" : "exit " + std::to_string(r.exit_code)) + ")",
                    error_excerpt(r.output));
        checks.push_back({"build", "failed", tail_lines(error_excerpt(r.output), 3)});
      } else {
        built = true;
        std::string built_targets;
        for (const auto& t : targets) built_targets += (built_targets.empty() ? "" : ", ") + t;
        checks.push_back({"build", "passed", kernels ? built_targets
                                                     : "reference_tests (CUDA library not configured: no nvcc)"});
      }
    }
  }

  // 2. reference tests (hard)
  bool reference_passed = false;
  if (built) {
    auto r = run_logged("reference_tests", {(build / "tests/kernels/reference_tests").string(), "--gtest_filter=" + camel + "Reference.*"}, 1800);
    r.output = relative_output(r.output, tree);
    int passed = gtest_count(r.output, "PASSED"), failed = gtest_count(r.output, "FAILED");
    if (!r.ok() || failed > 0) {
      result.fail("reference tests failed for " + p.op_name, error_excerpt(r.output));
      checks.push_back({"reference tests", "failed", fmt::format("{} failed", failed)});
    } else if (passed == 0) {
      result.fail("reference tests: no test matched " + camel + "Reference.* (the generated test is not in the build?)", tail_lines(r.output));
      checks.push_back({"reference tests", "failed", "no test ran"});
    } else {
      reference_passed = true;
      checks.push_back({"reference tests", "passed", fmt::format("{} test(s)", passed)});
    }
  } else {
    checks.push_back({"reference tests", "not run: the build failed", ""});
  }

  // 3. GPU tests (hard where a GPU exists)
  const bool gpu = runner->has_gpu();
  bool gpu_tests_passed = false;
  if (!built) {
    checks.push_back({"GPU tests", "not run: the build failed", ""});
  } else if (!gpu) {
    const std::string why = kernels ? "no GPU" : "no GPU (and the CUDA library is not built: no nvcc)";
    checks.push_back({"GPU tests", "not run: " + why, ""});
    result.warn("GPU tests not run: " + why);
  } else if (!kernels) {
    checks.push_back({"GPU tests", "not run: the CUDA library is not built (no nvcc)", ""});
    result.warn("GPU tests not run: the CUDA library is not built (no nvcc)");
  } else {
    auto r = run_logged("kernel_tests", {(build / "tests/kernels/kernel_tests").string(), "--gtest_filter=*" + camel + "Gpu*"}, 3600);
    r.output = relative_output(r.output, tree);
    int passed = gtest_count(r.output, "PASSED"), failed = gtest_count(r.output, "FAILED");
    if (!r.ok() || failed > 0) {
      result.fail("GPU tests failed for " + p.op_name, error_excerpt(r.output));
      checks.push_back({"GPU tests", "failed", fmt::format("{} failed", failed)});
    } else if (passed == 0) {
      result.fail("GPU tests: no test matched *" + camel + "Gpu*", tail_lines(r.output));
      checks.push_back({"GPU tests", "failed", "no test ran"});
    } else if (r.output.find("[  SKIPPED ]") != std::string::npos) {
      checks.push_back({"GPU tests", "not run: skipped by the test binary", tail_lines(r.output, 5)});
      result.warn("GPU tests skipped by the test binary", tail_lines(r.output, 5));
    } else {
      gpu_tests_passed = true;
      checks.push_back({"GPU tests", "passed", fmt::format("{} test(s)", passed)});
    }
  }

  // 4. agreement with the PyTorch function (hard, GPU only): every output and gradient of the
  // binding against the op's PyTorch form evaluated in fp64 on the same inputs, per dtype of the
  // tolerance table. The GPU tests compare with the generated fp64 reference, which comes from the
  // same profile as the kernel; this check is the one that can catch a profile that misread the
  // request. It runs only when the reference tests passed: formulas that fail their own gradient
  // check make every kernel built from them disagree too, and a repair request carrying both would
  // bury the root cause under its consequences.
  const std::string eager = eager_expression(p);
  if (gpu_tests_passed && reference_passed && !eager.empty() && runner->has_tool("python3")) {
    std::string inputs;
    for (const auto& t : p.inputs) inputs += (inputs.empty() ? "" : ",") + t.name;
    std::string params;
    for (const auto& l : p.learnable_parameters)
      params += fmt::format("{}{}:{}:{}", params.empty() ? "" : ",", l.name, l.shape, l.value);
    const std::string module_params = module_params_arg(p);
    std::map<std::string, nlohmann::json> by_dtype;
    for (const auto& t : p.tolerances.value_or(std::vector<ToleranceSpec>{}))
      by_dtype[t.dtype][t.applies_to] = {t.atol, t.rtol, t.max_relative_l2};
    if (by_dtype.empty()) by_dtype["bf16"] = nlohmann::json::object();
    const std::map<std::string, std::string> env = {{"LIGER_KERNELS_LIBRARY", (build / "kernels/libliger_kernels.so").string()},
                                                    {"PYTHONPATH", (tree / "kernels/python").string()}};
    std::string summary;
    std::string compared_with = eager;
    bool agree_all = true, ran = false;
    for (const auto& [dtype, tol] : by_dtype) {
      const fs::path json_path = log_dir / ("agreement_" + dtype + ".json");
      std::vector<std::string> argv = {"python3", (tree / "benchmarks/kernel_dev_compare.py").string(), "--op", p.op_name,
                                       "--eager", eager, "--inputs", inputs, "--dtype", dtype, "--check-only",
                                       "--json", json_path.string()};
      if (!params.empty()) argv.insert(argv.end(), {"--params", params});
      if (!module_params.empty()) argv.insert(argv.end(), {"--module-params", module_params});
      if (const auto samples = samples_arg(p); !samples.empty()) argv.insert(argv.end(), {"--samples", samples});
      if (const auto splits = splits_arg(p); !splits.empty()) argv.insert(argv.end(), {"--splits", splits});
      if (!tol.empty()) argv.insert(argv.end(), {"--tolerances", tol.dump()});
      const auto code = input_code_args(p, log_dir);
      argv.insert(argv.end(), code.begin(), code.end());
      auto r = run_logged("agreement_" + dtype, argv, 900, env);
      if (r.exit_code == 3) {  // no torch / no GPU visible to torch: said, not failed
        summary += fmt::format("{}{}: not run ({})", summary.empty() ? "" : "; ", dtype, util::trim(tail_lines(r.output, 1)));
        continue;
      }
      ran = true;
      nlohmann::json rep = fs::exists(json_path) ? nlohmann::json::parse(util::read_file(json_path), nullptr, false)
                                                 : nlohmann::json();
      if (!rep.is_object()) {
        agree_all = false;
        result.fail("agreement with PyTorch (" + dtype + "): the comparison did not run", error_excerpt(r.output));
        summary += fmt::format("{}{}: error", summary.empty() ? "" : "; ", dtype);
        continue;
      }
      metrics["agreement"][dtype] = rep;
      compared_with = baseline_label(p, eager, rep);
      std::string disagreements;
      for (const auto& t : rep.value("tensors", nlohmann::json::array())) {
        if (t.value("agree", true)) continue;
        disagreements += fmt::format("{}{}: max abs error {:.3e} at {} (rel {:.3e}), relative L2 {:.3e} (bound {:.1e}), {} of {} "
                                     "elements outside tolerance",
                                     disagreements.empty() ? "" : "; ", t.value("tensor", "?"), t.value("max_abs_error", 0.0),
                                     t.value("at", nlohmann::json::array()).dump(), t.value("max_rel_error", 0.0),
                                     t.value("rel_l2", 0.0), t.value("max_rel_l2", 0.0), t.value("elements_outside", 0),
                                     t.value("elements", 0));
      }
      std::string notes;
      for (const auto& line : rep.value("lines", nlohmann::json::array()))
        if (line.is_string() && line.get<std::string>().rfind("note ", 0) == 0) notes += line.get<std::string>() + "\n";
      if (!notes.empty()) result.warn("PyTorch's own result is not finite where the kernel's is (" + dtype + ")", notes);
      if (!rep.value("agree", false)) {
        agree_all = false;
        result.fail(fmt::format("{} disagrees with the PyTorch function ({}) in {} (fp64 reference)", p.op_name, compared_with, dtype),
                    disagreements.empty() ? error_excerpt(r.output) : disagreements);
      }
      summary += fmt::format("{}{}: {}", summary.empty() ? "" : "; ", dtype, rep.value("agree", false) ? "agree" : "DISAGREE");
    }
    checks.push_back({"agreement with PyTorch (fp64, " + compared_with + ")", !ran ? "not run" : agree_all ? "passed" : "failed", summary});
  } else if (!gpu_tests_passed) {
    checks.push_back({"agreement with PyTorch", "not run: GPU tests did not pass or did not run", ""});
  } else if (!reference_passed) {
    checks.push_back({"agreement with PyTorch", "not run: the reference tests failed (the formulas are wrong; the kernels implement them)", ""});
  }

  // 4b. the compile backend's pattern against the PyTorch the op came from (CPU PyTorch; no GPU).
  // An entry that does not match is inert (models keep their PyTorch): a warning. An entry that
  // would pass the wrong values or compute other values where it matches is broken: hard.
  {
    const std::string name = "compile pattern matches the source";
    const std::string entry = "kernels/python/liger_kernels/compile/generated/" + p.op_name + ".py";
    if (!fs::exists(tree / entry)) {
      const CompileEntryPlan plan = plan_compile_entry(p);
      checks.push_back({name, "not run: no compile-backend entry" + (plan.skipped.empty() ? std::string() : " (" + plan.skipped + ")"), ""});
    } else if (!runner->has_tool("python3")) {
      checks.push_back({name, "not run: python3 not found", ""});
      result.warn("compile pattern check not run: python3 not found");
    } else if (auto probe = runner->run({"python3", "-c", "import torch"}, tree, seconds(300)); !probe.ok()) {
      const std::string why = "python3 cannot import torch";
      checks.push_back({name, "not run: " + why, util::trim(tail_lines(probe.output, 1))});
      result.warn("compile pattern check not run: " + why + " (the check needs CPU PyTorch)");
    } else {
      // The PyTorch the op came from, else its forward (evaluated with the PyTorch calls models make).
      const bool from_pytorch = p.source_kind == "pytorch" && !p.source_text.empty();
      const fs::path source = log_dir / "compile_pattern_source.txt";
      util::write_file_atomic(source, from_pytorch ? p.source_text : (p.forward ? p.forward->expression : std::string{}));
      std::vector<std::string> argv = {"python3", (tree / "benchmarks/compile_pattern_check.py").string(), "--op",
                                       p.op_name, "--source-file", source.string()};
      // The source's own arguments are drawn whole (a cut argument too: the pattern matches the
      // region after the cut), so --splits is not the check's business.
      if (const auto samples = samples_arg(p); !samples.empty()) argv.insert(argv.end(), {"--samples", samples});
      auto r = run_logged("compile_pattern", argv, 600);
      const std::string against = from_pytorch ? "the PyTorch source" : "the forward expression";
      const std::string first = util::trim(r.output.substr(0, r.output.find('\n')));
      if (r.exit_code == 0) {
        checks.push_back({name, "passed", "against " + against + ": " + first});
      } else if (r.exit_code == 3) {
        checks.push_back({name, "not run: " + util::trim(tail_lines(r.output, 1)), ""});
        result.warn("compile pattern check not run", tail_lines(r.output, 1));
      } else if (r.exit_code == 4) {
        checks.push_back({name, "failed", first});
        result.fail("the compile-backend entry " + entry + " is broken: it must not be installed", error_excerpt(r.output));
      } else {
        checks.push_back({name, "failed (warning)", first});
        result.warn("the compile backend will not find " + p.op_name + " in models written like " + against +
                        " (its entry " + entry + " does not match it); the kernel is unaffected",
                    error_excerpt(r.output));
      }
    }
  }

  // 5. benchmarks (soft, GPU only). The torch.compile comparison has its own row, so a run that
  // could not measure it says why.
  const std::string compile_check = "benchmark vs torch.compile";
  if (skip_bench) {
    checks.push_back({"benchmark", "not run: --skip-bench", ""});
    checks.push_back({compile_check, "not run: --skip-bench", ""});
  } else if (!result.ok()) {
    checks.push_back({"benchmark", "not run: hard failures above", ""});
    checks.push_back({compile_check, "not run: hard failures above", ""});
  } else if (!gpu) {
    checks.push_back({"benchmark", "not run: no GPU", ""});
    checks.push_back({compile_check, "not run: no GPU", ""});
    result.warn("benchmark not run: no GPU");
  } else if (!kernels) {
    checks.push_back({"benchmark", "not run: the CUDA library is not built (no nvcc)", ""});
    checks.push_back({compile_check, "not run: the CUDA library is not built (no nvcc)", ""});
  } else {
    const fs::path bench_json = log_dir / "bench.json";
    std::string ops = p.op_name;
    if (!p.closest_kernel.empty() && p.closest_kernel != p.op_name) ops += "," + p.closest_kernel;
    auto r = run_logged("liger-bench", {(build / "benchmarks/liger-bench").string(), "--op", ops, "--dtype", "bf16", "--json", bench_json.string()}, 1800);
    if (!r.ok() || !fs::exists(bench_json)) {
      result.warn("liger-bench failed for " + p.op_name, error_excerpt(r.output));
      checks.push_back({"benchmark (liger-bench)", "failed", tail_lines(r.output, 3)});
    } else {
      nlohmann::json bench = nlohmann::json::parse(util::read_file(bench_json), nullptr, false);
      nlohmann::json mine = nlohmann::json::object(), closest = nlohmann::json::object();
      if (bench.is_object())
        for (const auto& row : bench.value("results", nlohmann::json::array())) {
          if (!row.value("ok", false)) continue;
          auto& dst = row.value("op", "") == p.op_name ? mine : closest;
          const std::string mode = row.value("mode", "");
          // keep the largest shape per mode (the last listed)
          dst[mode] = {{"shape", row.value("shape", "")}, {"median_us", row.value("median_us", 0.0)},
                       {"copy_fraction", row.value("copy_fraction", 0.0)}, {"extra_mib", row.value("extra_mib", 0.0)}};
        }
      metrics["liger_bench"] = {{"op", mine}, {"closest", {{"name", p.closest_kernel}, {"modes", closest}}}};
      std::string line;
      for (const char* mode : {"forward", "backward", "full"}) {
        if (!mine.contains(mode)) continue;
        double f = mine[mode].value("copy_fraction", 0.0);
        // A fused linear is GEMM-bound: its bytes over copy bandwidth says nothing; the time
        // next to the library's own fused linear loss does.
        const auto ms = [](const nlohmann::json& row) { return fmt::format("{:.2f} ms", row.value("median_us", 0.0) / 1000.0); };
        if (p.fused_linear) {
          line += fmt::format("{}{} {}", line.empty() ? "" : ", ", mode, ms(mine[mode]));
          if (closest.contains(mode)) line += fmt::format(" ({} {})", p.closest_kernel, ms(closest[mode]));
        } else {
          line += fmt::format("{}{} {} of copy", line.empty() ? "" : ", ", mode, pct(f));
          if (closest.contains(mode)) line += fmt::format(" ({} {})", p.closest_kernel, pct(closest[mode].value("copy_fraction", 0.0)));
        }
        if (std::string(mode) != "full" && f < 0.85 && !p.fused_linear)  // a fused linear is GEMM-bound
          result.warn(fmt::format("{} {} reaches {} of copy bandwidth (bar: 85%)", p.op_name, mode, pct(f)));
      }
      checks.push_back({"benchmark (liger-bench, bf16)", mine.empty() ? "failed" : "measured", line});
    }
    // PyTorch eager comparison through the generated binding.
    if (!runner->has_tool("python3")) {
      checks.push_back({"benchmark vs PyTorch eager", "not run: python3 not found", ""});
      checks.push_back({compile_check, "not run: python3 not found", ""});
    } else {
      const fs::path cmp_json = log_dir / "compare.json";
      std::string inputs;
      for (const auto& t : p.inputs) inputs += (inputs.empty() ? "" : ",") + t.name;
      std::string params;
      for (const auto& l : p.learnable_parameters)
        params += fmt::format("{}{}:{}:{}", params.empty() ? "" : ",", l.name, l.shape, l.value);
      std::vector<std::string> argv = {"python3", (tree / "benchmarks/kernel_dev_compare.py").string(), "--op", p.op_name,
                                       "--eager", eager, "--inputs", inputs, "--dtype", "bf16", "--json", cmp_json.string()};
      if (!params.empty()) argv.insert(argv.end(), {"--params", params});
      if (const auto module_params = module_params_arg(p); !module_params.empty())
        argv.insert(argv.end(), {"--module-params", module_params});
      if (const auto samples = samples_arg(p); !samples.empty()) argv.insert(argv.end(), {"--samples", samples});
      if (const auto splits = splits_arg(p); !splits.empty()) argv.insert(argv.end(), {"--splits", splits});
      const auto code = input_code_args(p, log_dir);
      argv.insert(argv.end(), code.begin(), code.end());
      std::string lib = (build / "kernels/libliger_kernels.so").string();
      std::map<std::string, std::string> env = {{"LIGER_KERNELS_LIBRARY", lib},
                                                {"PYTHONPATH", (tree / "kernels/python").string()}};
      auto r = run_logged("compare_eager", argv, 1800, env);
      if (r.exit_code == 3) {
        // "not run: no CUDA device visible to torch" / "not run: torch not importable (...)"
        std::string why = util::trim(tail_lines(r.output, 1));
        if (why.rfind("not run: ", 0) == 0) why = why.substr(9);
        checks.push_back({"benchmark vs PyTorch eager", "not run: " + why, ""});
        checks.push_back({compile_check, "not run: " + why, ""});
      } else if (!r.ok() || !fs::exists(cmp_json)) {
        result.warn("PyTorch eager comparison failed", error_excerpt(r.output));
        checks.push_back({"benchmark vs PyTorch eager", "failed", tail_lines(r.output, 3)});
        checks.push_back({compile_check, "not run: the comparison script failed (see the eager row)", ""});
      } else {
        nlohmann::json cmp = nlohmann::json::parse(util::read_file(cmp_json), nullptr, false);
        metrics["eager"] = cmp;
        std::string line;
        for (const char* mode : {"forward", "backward", "full"})
          if (cmp.contains("speedup") && cmp["speedup"].contains(mode))
            line += fmt::format("{}{} {:.2f}x", line.empty() ? "" : ", ", mode, cmp["speedup"][mode].get<double>());
        if (cmp.contains("memory_saving"))
          line += fmt::format(", peak memory {:.1f}% less", cmp["memory_saving"].get<double>() * 100.0);
        // Device time (CUDA-graph replays): the same ratios without the host's per-call work.
        if (cmp.contains("speedup_device") && cmp["speedup_device"].is_object() && !cmp["speedup_device"].empty()) {
          std::string device;
          for (const char* mode : {"forward", "backward", "full"})
            if (cmp["speedup_device"].contains(mode))
              device += fmt::format("{}{} {:.2f}x", device.empty() ? "" : ", ", mode, cmp["speedup_device"][mode].get<double>());
          line += "; device time (CUDA graphs): " + device;
        }
        if (cmp.contains("speedup_vs_compile") && cmp["speedup_vs_compile"].is_object() && !cmp["speedup_vs_compile"].empty()) {
          std::string compiled;
          for (const char* mode : {"forward", "backward", "full"})
            if (cmp["speedup_vs_compile"].contains(mode))
              compiled += fmt::format("{}{} {:.2f}x", compiled.empty() ? "" : ", ", mode,
                                      cmp["speedup_vs_compile"][mode].get<double>());
          line += "; vs torch.compile: " + compiled;
        } else if (cmp.contains("torch_compile_error") && !cmp["torch_compile_error"].get<std::string>().empty()) {
          line += "; torch.compile: " + cmp["torch_compile_error"].get<std::string>();
        }
        checks.push_back({"benchmark vs PyTorch eager (" + baseline_label(p, eager, cmp) + ")", "measured", line});
        // The same function under torch.compile (inductor), beside eager: speedup of ours over it.
        if (cmp.contains("speedup_vs_compile") && cmp["speedup_vs_compile"].is_object() && !cmp["speedup_vs_compile"].empty()) {
          std::string compiled;
          for (const char* mode : {"forward", "backward", "full"})
            if (cmp["speedup_vs_compile"].contains(mode))
              compiled += fmt::format("{}{} {:.2f}x", compiled.empty() ? "" : ", ", mode, cmp["speedup_vs_compile"][mode].get<double>());
          checks.push_back({compile_check, "measured", compiled});
        } else {
          const std::string why = cmp.value("torch_compile_error", std::string());
          checks.push_back({compile_check, "not run: " + (why.empty() ? std::string("torch.compile gave no timing") : why), ""});
        }
      }
    }
  }

  // verdict + report
  std::string verdict;
  if (!result.ok()) verdict = "fail";
  else if (gpu_tests_passed) verdict = "pass";
  else verdict = "unverified on GPU (build and reference tests passed; GPU tests not run)";
  std::ostringstream md;
  md << "kernel-dev Verify for `" << p.op_name << "` (attempt " << ctx.attempt << ")\n\n";
  md << "| check | result | detail |\n|---|---|---|\n";
  nlohmann::json jchecks = nlohmann::json::array();
  for (const auto& c : checks) {
    md << "| " << c.name << " | " << c.status << " | " << c.detail << " |\n";
    jchecks.push_back({{"check", c.name}, {"result", c.status}, {"detail", c.detail}});
    result.note(c.name + ": " + c.status + (c.detail.empty() ? "" : " (" + c.detail + ")"));
  }
  md << "\nverdict: **" << verdict << "**\n";
  result.note("verdict: " + verdict);
  nlohmann::json out = {{"op", p.op_name}, {"attempt", ctx.attempt}, {"build_dir", build.string()},
                        {"checks", jchecks}, {"metrics", metrics}, {"verdict", verdict}};
  util::write_file_atomic(work_dir(ctx) / "verify.md", md.str());
  util::write_file_atomic(work_dir(ctx) / "verify.json", out.dump(2) + "\n");
  return result;
}

std::string diagnose(const std::vector<engine::AttemptRecord>& attempts) {
  std::ostringstream out;
  out << "kernel-dev: " << attempts.size() << " attempt(s) failed Verify.\n";
  std::string first, last;
  for (const auto& a : attempts) {
    out << "- attempt " << a.attempt << ": ";
    std::string errors;
    for (const auto& f : a.hard) errors += (errors.empty() ? "" : "; ") + f.summary;
    out << (errors.empty() ? "no hard failure recorded" : errors) << "\n";
    for (const auto& fix : a.fixes) out << "  fix tried: " << fix << "\n";
    if (first.empty()) first = errors;
    last = errors;
  }
  if (first == last)
    out << "Diagnosis: the same failure persisted across attempts, so no fix reached its cause; with the built-in "
           "provider the regenerated code is identical each time. Inspect the failing file named above (logs under "
           "<run>/kernel-dev/attempt-N/) and correct the profile field it comes from (a formula, a tolerance), or use "
           "an LLM provider.\n";
  else
    out << "Diagnosis: the failure changed between attempts (first: " << first << "; last: " << last
        << "); the last fix moved the problem rather than removing it.\n";
  return out.str();
}

}  // namespace stages
}  // namespace liger::kernel_dev
