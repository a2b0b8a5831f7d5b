// The files kernel-dev's Act renders, written to a scratch tree and compiled with the tools this
// machine has (g++, nvcc, python3), for the tests that prove the templates' output builds. Each
// compile returns "" on success, else the command and the tail of its output, for the test to
// print; a tool that is missing is "" from find_tool, and the test skips with the reason.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "workflows/kernel_dev/render.h"

namespace liger::testing::rendered {

// The rendered files (not the list inserts) under a fresh <tmp>/liger_kdev_<pid>_<name>.
inline std::filesystem::path write_tree(const std::vector<kernel_dev::RenderedFile>& files, const std::string& name) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("liger_kdev_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(root);
  for (const auto& f : files) {
    if (f.insert) continue;
    fs::path path = root / f.path;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << f.content;
  }
  return root;
}

// The first candidate present: a path that exists, or a name on PATH; "" when none is.
inline std::string find_tool(const std::vector<std::string>& candidates) {
  for (const auto& c : candidates) {
    if (c.find('/') != std::string::npos) {
      if (std::filesystem::exists(c)) return c;
    } else if (std::system(("command -v " + c + " >/dev/null 2>&1").c_str()) == 0) {
      return c;
    }
  }
  return "";
}

// Runs `command` with its output in `log`; "" on success, else the exit status and the tail of the output.
inline std::string run(const std::string& command, const std::filesystem::path& log) {
  const int status = std::system((command + " >" + log.string() + " 2>&1").c_str());
  if (status == 0) return "";
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  std::string out = text.str();
  if (out.size() > 6000) out = "..." + out.substr(out.size() - 6000);
  return "command failed (" + std::to_string(status) + "): " + command + "\n" + out;
}

// Where cuda_runtime.h is (the rendered GPU test and benchmark include it); "" when nowhere.
inline std::string cuda_include_dir() {
  std::string found;
  for (const char* candidate : {"/usr/local/cuda/include", "/usr/include"})
    if (std::filesystem::exists(std::filesystem::path(candidate) / "cuda_runtime.h")) found = candidate;
  return found;
}

// The op's rendered fp64 reference with its GoogleTest file, linked into root/ref_test. `warnings`
// are the compiler's warning flags (a test that edits the reference by hand may need fewer).
inline std::string build_reference(const std::string& gxx, const std::filesystem::path& root, const std::string& op,
                                   const std::string& warnings = " -Wall -Wextra -Werror") {
  return run(gxx + " -std=c++17 -O1" + warnings + " -I" + (root / "kernels/reference").string() + " " +
                 (root / ("kernels/reference/" + op + "_ref.cpp")).string() + " " +
                 (root / ("tests/kernels/reference/test_" + op + "_ref.cpp")).string() +
                 " -lgtest -lgtest_main -pthread -o " + (root / "ref_test").string(),
             root / "build.log");
}

// The op's rendered GPU test and benchmark, syntax-checked against the rendered and the library's
// headers; every error of both.
inline std::string check_host_code(const std::string& gxx, const std::string& cuda_include,
                                   const std::filesystem::path& root, const std::string& op) {
  const std::filesystem::path source_dir = LIGER_SOURCE_DIR;
  const std::string includes = " -I" + cuda_include + " -I" + (root / "kernels/include").string() + " -I" +
                               (source_dir / "kernels/include").string() + " -I" + (root / "kernels/reference").string() +
                               " -I" + (source_dir / "tests/kernels").string() + " -I" + (source_dir / "benchmarks").string();
  std::string errors;
  for (const std::string& source : {"tests/kernels/gpu/test_" + op + ".cpp", "benchmarks/bench_" + op + ".cpp"})
    errors += run(gxx + " -std=c++17 -fsyntax-only -Wall -Wextra -Werror" + includes + " " + (root / source).string(),
                  root / "build.log");
  return errors;
}

// A rendered Python module (relative to kernels/python/liger_kernels), byte-compiled.
inline std::string py_compile(const std::string& python, const std::filesystem::path& root, const std::string& module) {
  return run(python + " -m py_compile " + (root / ("kernels/python/liger_kernels/" + module)).string(), root / "py.log");
}

// The op's rendered CUDA kernel, compiled for sm_90 (`arch`: nvcc's target flags) with every
// warning an error and hidden visibility, as the library builds it; then every liger_<op>_* entry
// point must be exported (GLOBAL DEFAULT in readelf, when readelf is present): the Python binding
// loads them from the shared library by name.
inline std::string compile_kernel(const std::string& nvcc, const std::filesystem::path& root, const std::string& op,
                                  const std::string& arch = "-arch=sm_90") {
  const std::filesystem::path source_dir = LIGER_SOURCE_DIR;
  std::string error = run(nvcc + " -std=c++17 -c --expt-relaxed-constexpr " + arch +
                              " -Xcompiler -fvisibility=hidden -Werror all-warnings -I" + (root / "kernels/include").string() +
                              " -I" + (root / "kernels/src").string() + " -I" + (source_dir / "kernels/include").string() +
                              " -I" + (source_dir / "kernels/src").string() + " " +
                              (root / ("kernels/src/" + op + "/" + op + ".cu")).string() + " -o " +
                              (root / "kernel.o").string(),
                          root / "nvcc.log");
  if (!error.empty() || find_tool({"readelf"}).empty()) return error;
  const std::filesystem::path symbols = root / "symbols.txt";
  if (std::system(("readelf -sW " + (root / "kernel.o").string() + " > " + symbols.string() + " 2>&1").c_str()) != 0)
    return "readelf failed on " + (root / "kernel.o").string();
  std::ifstream in(symbols);
  int exported = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find(" FUNC ") == std::string::npos || line.find(" GLOBAL ") == std::string::npos) continue;
    if (line.find(" liger_" + op + "_") == std::string::npos) continue;
    if (line.find(" DEFAULT ") == std::string::npos) return "entry point not exported (hidden visibility): " + line;
    ++exported;
  }
  return exported >= 2 ? "" : "no exported liger_" + op + "_* entry points in " + (root / "kernel.o").string();
}

}  // namespace liger::testing::rendered
