// kernel-dev Act: templates rendered for ReLU² (one input), SwiGLU (gated, two inputs), DyT
// (scalar + per-channel learnable parameters, two-pass parameter gradients) and leaky ReLU
// (module parameters in an options struct); the rendered C++/CUDA/Python is compiled with the
// compilers present (nvcc -c, g++, python3 -m py_compile), and the rendered fp64 reference is
// built and its finite-difference test run. A missing compiler skips with the reason.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "workflows/kernel_dev/render.h"

namespace kd = liger::kernel_dev;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = LIGER_SOURCE_DIR;

const kd::KnowledgeBase& kb() {
  static const kd::KnowledgeBase k = kd::KnowledgeBase::load(kSource);
  return k;
}

std::vector<kd::RenderedFile> render(const std::string& request) {
  return kd::render(kd::analyse({request, kd::InputKind::Auto, ""}, kb()), kSource / "templates/kernel_dev");
}

const kd::RenderedFile& file(const std::vector<kd::RenderedFile>& files, const std::string& suffix) {
  for (const auto& f : files)
    if (f.path.size() >= suffix.size() && f.path.compare(f.path.size() - suffix.size(), suffix.size(), suffix) == 0) return f;
  throw std::runtime_error("no rendered file ending in " + suffix);
}

fs::path write_tree(const std::vector<kd::RenderedFile>& files, const std::string& name) {
  fs::path root = fs::temp_directory_path() / ("liger_kdev_render_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(root);
  for (const auto& f : files) {
    if (f.insert) continue;
    fs::path path = root / f.path;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << f.content;
  }
  return root;
}

std::string find_tool(const std::vector<std::string>& candidates) {
  for (const auto& c : candidates) {
    if (c.find('/') != std::string::npos) {
      if (fs::exists(c)) return c;
    } else if (std::system(("command -v " + c + " >/dev/null 2>&1").c_str()) == 0) {
      return c;
    }
  }
  return "";
}

// Runs `command`, returns "" on success or the exit status and the tail of its output.
std::string run(const std::string& command, const fs::path& log) {
  int status = std::system((command + " >" + log.string() + " 2>&1").c_str());
  if (status == 0) return "";
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  std::string out = text.str();
  if (out.size() > 6000) out = "..." + out.substr(out.size() - 6000);
  return "command failed (" + std::to_string(status) + "): " + command + "\n" + out;
}

const std::vector<std::string> kOps = {"ReLU squared activation function", "SwiGLU", "DyT", "leaky relu"};

}  // namespace

TEST(KernelDevRender, RendersEveryFileWithTheLibraryConventions) {
  auto files = render("ReLU squared activation function");
  ASSERT_EQ(files.size(), 14u);
  const auto& header = file(files, "include/liger_kernels/relu_squared.h");
  EXPECT_NE(header.content.find("LIGER_API liger_status liger_relu_squared_forward(const void* x, int64_t x_row_stride, "
                                "void* y, int64_t y_row_stride, int64_t rows, int64_t cols, liger_dtype dtype, "
                                "const liger_tunables* tunables, liger_stream_t stream);"),
            std::string::npos)
      << header.content;
  EXPECT_NE(header.content.find("liger_relu_squared_default_tunables"), std::string::npos);
  EXPECT_EQ(header.content.find("workspace"), std::string::npos);  // no learnable parameters
  const auto& cu = file(files, "relu_squared/relu_squared.cu");
  for (const char* expected : {"DeviceGuard guard(p.in[0]);", "check_launch(kName)", "load_vec<T, VEC>",
                               "// The row's last partial vector: element by element.", "default_config(current_sm_arch()",
                               "LIGER_STATUS_UNSUPPORTED_DTYPE", "y = (t0 * t0);", "dispatch_dtype(dtype"})
    EXPECT_NE(cu.content.find(expected), std::string::npos) << expected;
  EXPECT_EQ(cu.content.find("{{"), std::string::npos) << "unrendered tag";
  EXPECT_NE(file(files, "tuning.h").content.find("kTuning[]"), std::string::npos);
  EXPECT_NE(file(files, "relu_squared_ref.cpp").content.find("y = (t0 * t0);"), std::string::npos);
  const auto& row = file(files, "docs/kernels/README.md");
  EXPECT_TRUE(row.insert);
  EXPECT_EQ(row.content.rfind("| `relu_squared` |", 0), 0u) << row.content;
  // Inserting the exports into the library's functional.py keeps it importable text with the
  // new lines in their blocks.
  std::ifstream functional_in(kSource / "kernels/python/liger_kernels/functional.py");
  std::stringstream functional;
  functional << functional_in.rdbuf();
  std::string text = functional.str();
  int inserts = 0;
  for (const auto& f : files) {
    if (!f.insert || f.path != "kernels/python/liger_kernels/functional.py") continue;
    std::string updated = kd::insert_sorted_line(text, f.content, f.insert_prefix);
    EXPECT_NE(updated, text) << f.template_name << ": nothing inserted (prefix '" << f.insert_prefix << "')";
    text = updated;
    ++inserts;
  }
  EXPECT_EQ(inserts, 3);
  EXPECT_NE(text.find("from .ops.relu_squared import relu_squared\n"), std::string::npos);
  EXPECT_NE(text.find("    \"relu_squared\",\n"), std::string::npos);

  auto dyt = render("DyT");
  const auto& dyt_header = file(dyt, "include/liger_kernels/dyt.h");
  EXPECT_NE(dyt_header.content.find("const float* alpha, const void* gamma, const void* beta, liger_dtype weight_dtype"),
            std::string::npos)
      << dyt_header.content;
  EXPECT_NE(dyt_header.content.find("liger_dyt_backward_workspace_size"), std::string::npos);
  EXPECT_NE(file(dyt, "dyt/dyt.cu").content.find("dyt_reduce_kernel"), std::string::npos);
  auto leaky = render("leaky relu");
  EXPECT_NE(file(leaky, "include/liger_kernels/leaky_relu.h").content.find("float negative_slope; /* default 0.01 */"),
            std::string::npos);
}

TEST(KernelDevRender, RefusesIncompleteProfiles) {
  auto softmax = kd::analyse({"softmax", kd::InputKind::Auto, ""}, kb());
  try {
    kd::render(softmax, kSource / "templates/kernel_dev");
    FAIL() << "rendered a Tier-2 profile";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("not Tier 1"), std::string::npos) << e.what();
  }
  auto p = kd::analyse({"relu squared", kd::InputKind::Auto, ""}, kb());
  p.undecided["tiling"] = "a human wants to choose";
  try {
    kd::render(p, kSource / "templates/kernel_dev");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tiling: a human wants to choose"), std::string::npos) << e.what();
  }
  EXPECT_THROW(kd::render(kd::analyse({"relu", kd::InputKind::Auto, ""}, kb()), kSource / "no/such/dir"), std::runtime_error);
}

TEST(KernelDevRender, RenderingIsDeterministic) {
  auto a = render("SwiGLU"), b = render("SwiGLU");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].content, b[i].content) << a[i].path;
}

TEST(KernelDevRender, InsertSortedLine) {
  std::string table = "# Kernels\n\n| op | x |\n| --- | --- |\n| `geglu` | g |\n| `swiglu` | s |\n\nafter\n";
  std::string out = kd::insert_sorted_line(table, "| `relu_squared` | r |", "| `");
  EXPECT_EQ(out, "# Kernels\n\n| op | x |\n| --- | --- |\n| `geglu` | g |\n| `relu_squared` | r |\n| `swiglu` | s |\n\nafter\n");
  EXPECT_EQ(kd::insert_sorted_line(out, "| `relu_squared` | r |", "| `"), out);  // no duplicate
  EXPECT_EQ(kd::insert_sorted_line("no table\n", "| `a` |", "| `"), "no table\n");
  std::string first = kd::insert_sorted_line(table, "| `aaa` | a |", "| `");
  EXPECT_NE(first.find("| --- | --- |\n| `aaa` | a |\n| `geglu`"), std::string::npos) << first;
}

TEST(KernelDevRender, GeneratedReferenceBuildsAndPassesItsFiniteDifferenceTest) {
  std::string gxx = find_tool({"g++", "c++"});
  if (gxx.empty()) GTEST_SKIP() << "no C++ compiler (g++) on PATH: the rendered reference was not compiled";
  for (const auto& request : kOps) {
    SCOPED_TRACE(request);
    auto files = render(request);
    std::string op = kd::analyse({request, kd::InputKind::Auto, ""}, kb()).op_name;
    fs::path root = write_tree(files, op + "_ref");
    fs::path binary = root / "ref_test";
    std::string error = run(gxx + " -std=c++17 -O1 -Wall -Wextra -Werror -I" + (root / "kernels/reference").string() + " " +
                                (root / ("kernels/reference/" + op + "_ref.cpp")).string() + " " +
                                (root / ("tests/kernels/reference/test_" + op + "_ref.cpp")).string() +
                                " -lgtest -lgtest_main -pthread -o " + binary.string(),
                            root / "build.log");
    ASSERT_TRUE(error.empty()) << error;
    error = run(binary.string(), root / "run.log");
    EXPECT_TRUE(error.empty()) << error;
    fs::remove_all(root);
  }
}

TEST(KernelDevRender, GeneratedHostCodeAndPythonCompile) {
  std::string gxx = find_tool({"g++", "c++"});
  if (gxx.empty()) GTEST_SKIP() << "no C++ compiler (g++) on PATH: the rendered tests and benchmark were not compiled";
  std::string cuda_include;
  for (const char* candidate : {"/usr/local/cuda/include", "/usr/include"})
    if (fs::exists(fs::path(candidate) / "cuda_runtime.h")) cuda_include = candidate;
  if (cuda_include.empty()) GTEST_SKIP() << "no CUDA headers (cuda_runtime.h): the rendered GPU test and benchmark need them";
  std::string python = find_tool({"python3"});
  for (const auto& request : kOps) {
    SCOPED_TRACE(request);
    auto files = render(request);
    std::string op = kd::analyse({request, kd::InputKind::Auto, ""}, kb()).op_name;
    fs::path root = write_tree(files, op + "_host");
    std::string includes = " -I" + cuda_include + " -I" + (root / "kernels/include").string() + " -I" +
                           (kSource / "kernels/include").string() + " -I" + (root / "kernels/reference").string() + " -I" +
                           (kSource / "tests/kernels").string() + " -I" + (kSource / "benchmarks").string();
    for (const std::string& source : {"tests/kernels/gpu/test_" + op + ".cpp", "benchmarks/bench_" + op + ".cpp"}) {
      std::string error = run(gxx + " -std=c++17 -fsyntax-only -Wall -Wextra -Werror" + includes + " " + (root / source).string(),
                              root / "build.log");
      EXPECT_TRUE(error.empty()) << error;
    }
    if (!python.empty()) {
      std::string error = run(python + " -m py_compile " + (root / ("kernels/python/liger_kernels/ops/" + op + ".py")).string(),
                              root / "py.log");
      EXPECT_TRUE(error.empty()) << error;
    }
    fs::remove_all(root);
  }
  if (python.empty()) GTEST_SKIP() << "python3 not found: the rendered Python binding was not byte-compiled";
}

TEST(KernelDevRender, GeneratedCudaCompilesWithNvcc) {
  std::string nvcc = find_tool({"nvcc", "/usr/local/cuda/bin/nvcc"});
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (PATH, /usr/local/cuda/bin): the rendered CUDA kernels were not compiled";
  for (const auto& request : kOps) {
    SCOPED_TRACE(request);
    auto files = render(request);
    std::string op = kd::analyse({request, kd::InputKind::Auto, ""}, kb()).op_name;
    fs::path root = write_tree(files, op + "_cuda");
    std::string error = run(nvcc + " -std=c++17 -c --expt-relaxed-constexpr -arch=sm_90 -Werror all-warnings -I" +
                                (root / "kernels/include").string() + " -I" + (root / "kernels/src").string() + " -I" +
                                (kSource / "kernels/include").string() + " -I" + (kSource / "kernels/src").string() + " " +
                                (root / ("kernels/src/" + op + "/" + op + ".cu")).string() + " -o " + (root / "kernel.o").string(),
                            root / "nvcc.log");
    EXPECT_TRUE(error.empty()) << error;
    fs::remove_all(root);
  }
}
