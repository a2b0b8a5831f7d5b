// autopatch's Verify: py_compile, the import check, the instance test and the convergence tests of
// the generated integration; what cannot run on this machine is "not run: <reason>" and the verdict
// is then "unverified" (see workflow_internal.h).
#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include "liger/error.h"
#include "liger/process.h"
#include "liger/util.h"
#include "workflows/autopatch/workflow.h"
#include "workflows/autopatch/workflow_internal.h"

namespace liger::autopatch::wf {

struct PyEnv {
  bool python = false, torch = false, transformers = false, cuda = false, pytest = false, library = false;
  std::string torch_version, transformers_version, why_not;
};

toolchain::ProcessResult run_py(const StageContext& ctx, const std::vector<std::string>& argv, int timeout_s) {
  toolchain::ProcessOptions o;
  o.argv = argv;
  o.cwd = ctx.tree_root;
  o.timeout = std::chrono::seconds(timeout_s);
  const char* pp = std::getenv("PYTHONPATH");
  o.env["PYTHONPATH"] = (ctx.tree_root / "kernels/python").string() + (pp && *pp ? std::string(":") + pp : "");
  o.env["PYTHONDONTWRITEBYTECODE"] = "1";
  if (ctx.log) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    ctx.log->info("autopatch verify: {}", cmd);
  }
  return toolchain::run_process(o);
}

PyEnv probe(const StageContext& ctx, const std::string& python) {
  PyEnv env;
  if (!toolchain::find_executable(python)) return env;
  env.python = true;
  auto r = run_py(ctx, {python, "-c",
                        "import importlib\n"
                        "def v(m):\n"
                        "    try:\n"
                        "        return importlib.import_module(m).__version__\n"
                        "    except Exception as e:\n"
                        "        return 'MISSING ' + type(e).__name__\n"
                        "t = v('torch'); print('torch', t); print('transformers', v('transformers'))\n"
                        "print('pytest', v('pytest'))\n"
                        "try:\n"
                        "    from liger_kernels import _lib; print('library', _lib.library_path())\n"
                        "except Exception as e:\n"
                        "    print('library MISSING', type(e).__name__)\n"
                        "if not t.startswith('MISSING'):\n"
                        "    import torch; print('cuda', torch.cuda.is_available())\n"},
                  120);
  std::istringstream lines(r.output);
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("torch ", 0) == 0 && l.find("MISSING") == std::string::npos) { env.torch = true; env.torch_version = l.substr(6); }
    if (l.rfind("transformers ", 0) == 0 && l.find("MISSING") == std::string::npos) {
      env.transformers = true;
      env.transformers_version = l.substr(13);
    }
    if (l == "cuda True") env.cuda = true;
    if (l.rfind("pytest ", 0) == 0 && l.find("MISSING") == std::string::npos) env.pytest = true;
    if (l.rfind("library ", 0) == 0 && l.find("MISSING") == std::string::npos) env.library = true;
  }
  return env;
}

struct PytestCase {
  std::string name, outcome, message;
};

std::vector<PytestCase> parse_pytest(const std::string& out) {
  std::vector<PytestCase> cases;
  static const std::regex line(R"(^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)(?: - (.*))?$)");
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_match(l, m, line)) cases.push_back({m[2], m[1], m[3]});
  }
  return cases;
}

// tolerance | hard, from a failed convergence test's message (and the log around it).
std::string classify_failure(const std::string& message, const std::string& log) {
  static const std::vector<std::string> hard_markers = {
      "shape", "OutOfMemoryError", "out of memory", "KeyError", "RuntimeError", "TypeError", "AttributeError",
      "ImportError", "non-finite", "NaN", "did not train", "CUDA error", "IndexError", "ValueError"};
  const std::string text = message.empty() ? log : message;
  for (const auto& h : hard_markers)
    if (text.find(h) != std::string::npos) return "hard";
  if (text.find("elements outside atol") != std::string::npos || text.find("relative error norm") != std::string::npos)
    return "tolerance";
  return "hard";
}

StageResult verify(StageContext& ctx) {
  StageResult result;
  const YAML::Node& doc = ctx.profile;
  const YAML::Node gen = doc["generation"];
  const std::string module = gen["module"].as<std::string>();
  const std::string test_rel = gen["test"].as<std::string>();
  const std::string python = ctx.input.value("python", std::string("python3"));
  std::vector<std::string> lines;  // verify.md
  std::vector<std::string> not_run;
  auto record = [&](const std::string& check, const std::string& status) { lines.push_back("| " + check + " | " + status + " |"); };

  const PyEnv env = probe(ctx, python);
  // 1. py_compile (python3 only).
  if (!env.python) {
    not_run.push_back("py_compile: " + python + " not found on PATH");
    record("py_compile", "not run: " + python + " not found");
  } else {
    std::vector<std::string> argv = {python, "-m", "py_compile"};
    for (const auto& rel : {gen["integration"].as<std::string>(), test_rel, gen["registry"].as<std::string>()})
      if (fs::exists(ctx.tree_root / rel)) argv.push_back((ctx.tree_root / rel).string());
    auto r = run_py(ctx, argv, 120);
    if (!r.ok()) {
      result.fail("generated Python does not compile", tail(r.output));
      record("py_compile", "FAILED");
    } else {
      record("py_compile", "passed (" + std::to_string(argv.size() - 3) + " files)");
    }
  }
  // 2. import check.
  if (env.python && env.torch) {
    std::string code = "import importlib, sys\nm = importlib.import_module('liger_kernels.transformers." + module + "')\n";
    if (env.transformers)
      code += "mod = importlib.import_module(m.SPEC['modeling'])\n"
              "names = [m.SPEC['causal_lm']] + [n['cls'] for n in m.SPEC['norms'] + m.SPEC['layer_norms'] + m.SPEC['mlps']]\n"
              "names += [m.SPEC['rope']] if m.SPEC['rope'] else []\n"
              "missing = [n for n in names if not hasattr(mod, n)]\n"
              "assert not missing, f'not in {mod.__name__}: {missing}'\n"
              "import liger_kernels.transformers as T\n"
              "assert m.SPEC['model_type'] in T.MODEL_TYPE_TO_APPLY_LIGER_FN, 'not registered'\n";
    code += "print('import ok')\n";
    auto r = run_py(ctx, {python, "-c", code}, 300);
    if (!r.ok()) {
      result.fail("import check failed: liger_kernels.transformers." + module, tail(r.output));
      record("import check", "FAILED");
    } else {
      record("import check", env.transformers ? "passed (module, its classes in transformers " + env.transformers_version + ", registry)"
                                             : "passed (module only; transformers missing: classes not checked)");
    }
  } else {
    const std::string why = !env.python ? python + " not found" : "torch not installed";
    not_run.push_back("import check: " + why);
    record("import check", "not run: " + why);
  }
  // 3/4. instance and convergence tests.
  std::string why_tests;
  if (!env.python) why_tests = python + " not found";
  else if (!env.torch) why_tests = "torch not installed";
  else if (!env.transformers) why_tests = "transformers not installed";
  else if (!env.cuda) why_tests = "no CUDA device visible to torch";
  else if (!env.pytest) why_tests = "pytest not installed";
  else if (!env.library) why_tests = "the liger_kernels CUDA library is not built (cmake --build build --target liger_kernels)";
  else if (!result.ok()) why_tests = "the import check failed";
  if (!why_tests.empty()) {
    not_run.push_back("instance test: " + why_tests);
    not_run.push_back("convergence tests: " + why_tests);
    record("instance test", "not run: " + why_tests);
    record("convergence tests", "not run: " + why_tests);
  } else {
    const fs::path log_dir = ctx.run_dir / "autopatch";
    fs::create_directories(log_dir);
    ctx.progress("instance test: " + test_rel);
    auto r = run_py(ctx, {python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", test_rel, "-k", "not convergence"}, 900);
    util::write_file_atomic(log_dir / ("instance-" + std::to_string(ctx.attempt) + ".log"), r.output);
    auto cases = parse_pytest(r.output);
    int passed = 0;
    for (const auto& c : cases) passed += c.outcome == "PASSED";
    // The CPU build check names the fields a failed build traces to; they become the next
    // attempt's repair (act: repaired_profile).
    if (r.output.find("MINI-CONFIG-BUILD") != std::string::npos) {
      std::string fixes;
      for (const auto& kv : parse_mini_config_fixes(r.output))
        fixes += "MINI-CONFIG-FIX " + kv.first.as<std::string>() + "=" + kv.second.as<std::string>() + "\n";
      result.fail("MINI-CONFIG-BUILD: the mini model does not build on CPU" +
                      (fixes.empty() ? std::string(" (no field named)") : ": " + fixes.substr(0, fixes.find('\n'))),
                  fixes + tail(r.output, 2000));
    }
    if (!r.ok() || passed == 0) {
      result.fail("instance test failed (" + test_rel + ")", tail(r.output));
      record("instance test", "FAILED (" + std::to_string(passed) + " passed)");
    } else {
      record("instance test", "passed (" + std::to_string(passed) + " tests)");
    }
    ctx.progress("convergence tests: " + test_rel);
    r = run_py(ctx, {python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", test_rel, "-k", "convergence"}, 1800);
    util::write_file_atomic(log_dir / ("convergence-" + std::to_string(ctx.attempt) + ".log"), r.output);
    cases = parse_pytest(r.output);
    int cp = 0, soft = 0, hard = 0;
    for (const auto& c : cases) {
      if (c.outcome == "PASSED") { ++cp; continue; }
      if (c.outcome != "FAILED" && c.outcome != "ERROR") continue;
      if (c.outcome == "FAILED" && classify_failure(c.message, "") == "tolerance") {
        ++soft;
        result.warn("tolerance tuning needed: " + c.name, c.message);
      } else {
        ++hard;
        result.fail("convergence test failed: " + c.name, c.message.empty() ? tail(r.output, 2000) : c.message);
      }
    }
    if (cases.empty() && !r.ok()) {
      ++hard;
      result.fail("convergence tests did not run (pytest exit " + std::to_string(r.exit_code) + ")", tail(r.output));
    }
    record("convergence tests", std::to_string(cp) + " passed, " + std::to_string(soft) + " tolerance-only, " +
                                    std::to_string(hard) + " hard");
  }
  for (const auto& n : not_run) result.warn("not run: " + n);
  std::string verdict;
  if (!result.ok()) verdict = "failed";
  else if (!not_run.empty()) verdict = "unverified (" + std::to_string(not_run.size()) + " check(s) not run on this machine)";
  else if (!result.soft.empty()) verdict = "verified with warnings (tolerance tuning needed)";
  else verdict = "verified";
  result.note("verdict: " + verdict);
  if (result.ok() && !not_run.empty())
    result.warn("verdict: unverified", "the integration was generated and compiles, but its import/instance/convergence "
                                       "checks could not run here; run them where torch, transformers and a GPU exist");
  std::string md = "# autopatch verification: " + module + "\n\nverdict: **" + verdict + "**\n\n";
  md += "environment: python " + std::string(env.python ? "yes" : "no") + ", torch " +
        (env.torch ? env.torch_version : "no") + ", transformers " + (env.transformers ? env.transformers_version : "no") +
        ", CUDA " + (env.cuda ? "yes" : "no") + "\n\n| check | result |\n| --- | --- |\n";
  for (const auto& l : lines) md += l + "\n";
  if (doc["patch_plan"]["declined"].size() > 0) {
    md += "\n## Declined on purpose\n\n";
    for (const auto& it : doc["patch_plan"]["declined"])
      md += "- " + it["kernel"].as<std::string>() + " (" + it["target"].as<std::string>() + "): " +
            it["reason"].as<std::string>("") + "\n";
  }
  util::write_file_atomic(ctx.run_dir / "autopatch" / "verify.md", md);
  result.note("verification summary: " + (ctx.run_dir / "autopatch" / "verify.md").string());
  return result;
}

}  // namespace liger::autopatch::wf
