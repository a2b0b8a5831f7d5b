// kernel-dev Act: templates rendered for ReLU² (one input), SwiGLU (gated, two inputs), DyT
// (scalar + per-channel learnable parameters, two-pass parameter gradients) and leaky ReLU
// (module parameters in an options struct), and Tier-2 row programs (softmax, an RMS scale with
// a module parameter and a recomputed reduction); the rendered C++/CUDA/Python is compiled with the
// compilers present (nvcc -c, g++, python3 -m py_compile), and the rendered fp64 reference is
// built and its finite-difference test run. A missing compiler skips with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <yaml-cpp/yaml.h>

#include "workflows/kernel_dev/codegen.h"
#include "workflows/kernel_dev/render.h"

#include "committed_tree.h"
#include "rendered_tree.h"

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

using namespace liger::testing::rendered;  // write_tree, find_tool, run and the compile steps

// Tier 2: the softmax profile of the recorded LLM exchange (answers/3.md) and variants of it:
// "softmax_wrong" with the gradient the model first gave (no row-sum term), "rms_scale" (an RMS
// normalisation without weight: a mean, a module parameter, the input saved and the forward
// reduction recomputed in the backward).
kd::KernelProfile tier2_profile(const std::string& variant) {
  std::ifstream in(kSource / "tests/workflows/fixtures/kernel_dev/cassettes/softmax_llm/answers/3.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const std::size_t begin = s.find("```yaml\n") + 8;
  YAML::Node n = YAML::Load(s.substr(begin, s.find("```", begin) - begin));
  auto rename = [&](const std::string& op, const std::string& camel) {
    n["identity"]["op_name"] = op;
    n["identity"]["display_name"] = camel;
    n["identity"]["c_prefix"] = "liger_" + op;
    n["identity"]["cpp_namespace"] = "liger::kernels::" + op;
    n["identity"]["python_functional"] = op;
    n["identity"]["python_module"] = "Liger" + camel;
    n["identity"]["python_function"] = "Liger" + camel + "Function";
  };
  if (variant == "softmax_wrong") {
    rename("softmax_wrong", "SoftmaxWrong");
    n["row_program"]["backward"]["reductions"] = YAML::Node(YAML::NodeType::Sequence);
    n["row_program"]["backward"]["grad_input"] = "y * dy";
  } else if (variant == "rms_scale") {
    rename("rms_scale", "RmsScale");
    YAML::Node eps;
    eps["name"] = "eps";
    eps["default"] = 1e-6;
    n["module_parameters"].push_back(eps);
    YAML::Node rp = YAML::Load(R"yaml(
forward:
  reductions: [{name: r, op: mean, expression: "x * x"}]
  output: "x * rsqrt(r + eps)"
backward:
  uses: [x]
  reductions: [{name: g, op: mean, expression: "dy * x"}]
  grad_input: "rsqrt(r + eps) * (dy - x * g / (r + eps))"
)yaml");
    n["row_program"] = rp;
  }
  return kd::profile_from_yaml(n);
}

const std::vector<std::string> kTier2 = {"softmax", "rms_scale"};

// tanh and erfc: ops named like libm functions (namespace liger::kernels::tanh next to ::tanh;
// CUDA's host headers call erfc unqualified at global scope, so the entry points may not bring the
// op's namespace there). Then inputs on part of the line (p in (0, 1): inputs[].sample unit) and
// atan's code; rounding and detach() (a straight-through estimator).
const std::vector<std::string> kOps = {"ReLU squared activation function", "SwiGLU", "DyT", "leaky relu", "tanh",
                                       "def erfc(x): return torch.special.erfc(x)",
                                       "def bce_atan(p, t): return F.binary_cross_entropy(p, t, reduction='none') + torch.atan(t)",
                                       "def fake_quant(x): return x + (torch.round(x * 8) / 8 - x).detach() + torch.floor(x)"};

}  // namespace

TEST(KernelDevRender, RendersEveryFileWithTheLibraryConventions) {
  auto files = render("ReLU squared activation function");
  ASSERT_EQ(files.size(), 15u);
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
  // new lines in their blocks (the committed file: the main job adds these very lines to the
  // checkout).
  std::string text = liger::testing::committed_text(kSource, "kernels/python/liger_kernels/functional.py");
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
  auto group_norm = kd::analyse({"group norm", kd::InputKind::Auto, ""}, kb());
  try {
    kd::render(group_norm, kSource / "templates/kernel_dev");
    FAIL() << "rendered a Tier-2 profile with undecided formulas";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has undecided fields"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("row_program: "), std::string::npos) << e.what();
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

TEST(KernelDevRender, ExistingLibraryKernelsAreDetected) {
  // swiglu is hand-written in the library: its files exist and the profile says so.
  auto p = kd::analyse({"SwiGLU", kd::InputKind::Auto, ""}, kb());
  bool noted = false;
  for (const auto& n : p.notes) noted = noted || n.find("already has a kernel named 'swiglu'") != std::string::npos;
  EXPECT_TRUE(noted);
  auto existing = kd::existing_paths(kd::render(p, kSource / "templates/kernel_dev"), kSource);
  EXPECT_NE(std::find(existing.begin(), existing.end(), "kernels/include/liger_kernels/swiglu.h"), existing.end());
  auto fresh = kd::analyse({"y = x^3 + sin(x)", kd::InputKind::Auto, "kdev test only op"}, kb());
  EXPECT_TRUE(kd::existing_paths(kd::render(fresh, kSource / "templates/kernel_dev"), kSource).empty());
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
    std::string error = build_reference(gxx, root, op);
    ASSERT_TRUE(error.empty()) << error;
    error = run((root / "ref_test").string(), root / "run.log");
    EXPECT_TRUE(error.empty()) << error;
    fs::remove_all(root);
  }
}

TEST(KernelDevRender, GeneratedHostCodeAndPythonCompile) {
  std::string gxx = find_tool({"g++", "c++"});
  if (gxx.empty()) GTEST_SKIP() << "no C++ compiler (g++) on PATH: the rendered tests and benchmark were not compiled";
  const std::string cuda_include = cuda_include_dir();
  if (cuda_include.empty()) GTEST_SKIP() << "no CUDA headers (cuda_runtime.h): the rendered GPU test and benchmark need them";
  std::string python = find_tool({"python3"});
  for (const auto& request : kOps) {
    SCOPED_TRACE(request);
    auto files = render(request);
    std::string op = kd::analyse({request, kd::InputKind::Auto, ""}, kb()).op_name;
    fs::path root = write_tree(files, op + "_host");
    const std::string error = check_host_code(gxx, cuda_include, root, op);
    EXPECT_TRUE(error.empty()) << error;
    if (!python.empty()) {
      // The binding and the compile backend's entry.
      for (const std::string& module : {"ops/" + op + ".py", "compile/generated/" + op + ".py"}) {
        std::string error = py_compile(python, root, module);
        EXPECT_TRUE(error.empty()) << module << ": " << error;
      }
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
    std::string error = compile_kernel(nvcc, root, op);
    EXPECT_TRUE(error.empty()) << error;
    fs::remove_all(root);
  }
}

// The emitted fp32 CUDA statements of every catalogue op (forward and backward, with their CSE
// temporaries and safe forms), compiled as host C++ and compared with the emitted fp64 statements
// at random points, and checked finite at x = +-80: the code the kernels embed, not the evaluator.
TEST(KernelDevRender, EmittedFp32CodeMatchesFp64CodeForEveryCatalogueOp) {
  std::string gxx = find_tool({"g++", "c++"});
  if (gxx.empty()) GTEST_SKIP() << "no C++ compiler (g++) on PATH: the emitted statements were not compiled";
  std::ostringstream src;
  src << R"(#include <cmath>
#include <cstdio>
#include <math.h>
#include <random>
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
// The kernels' accurate (fp32-storage) math policy; the 16-bit policy is checked on the GPU.
struct M {
  static float exp(float x) { return expf(x); }
  static float log(float x) { return logf(x); }
  static float log1p(float x) { return log1pf(x); }
  static float expm1(float x) { return expm1f(x); }
  static float tanh(float x) { return tanhf(x); }
  static float erf(float x) { return erff(x); }
  static float div(float a, float b) { return a / b; }
  static float sigmoid(float x) { const float z = expf(-fabsf(x)); const float r = 1.0f / (1.0f + z); return x >= 0.0f ? r : z * r; }
  static float softplus(float x) { return log1pf(expf(-fabsf(x))) + fmaxf(x, 0.0f); }
};
static inline float sign_f32(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f); }
static inline double sigmoid_f64(double x) { if (x >= 0.0) return 1.0 / (1.0 + std::exp(-x)); const double z = std::exp(x); return z / (1.0 + z); }
static inline double softplus_f64(double x) { return std::log1p(std::exp(-std::fabs(x))) + std::fmax(x, 0.0); }
static inline double sign_f64(double x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0); }
static int failures = 0;
)";
  int ops = 0;
  for (const auto& entry : kb().catalogue.entries()) {
    kd::Program program = entry.program();
    kd::Tier1Code code = kd::generate_tier1(program);
    std::vector<std::string> outputs = {program.output};
    for (const auto& [name, e] : code.backward) outputs.push_back(name);
    std::string op = entry.name;
    auto body = [&](const char* type, const std::string& forward, const std::string& backward) {
      std::ostringstream b;
      b << "    {\n";
      std::size_t k = 0;
      for (const auto& in : program.inputs) b << "      const " << type << " " << in << " = (" << type << ")v[" << k++ << "];\n";
      for (const auto& p : program.params) b << "      const " << type << " " << p.name << " = (" << type << ")v[" << k++ << "];\n";
      b << "      const " << type << " d" << program.output << " = (" << type << ")v[" << k++ << "];\n";
      for (const auto& o : outputs) b << "      " << type << " " << o << ";\n";
      b << "      {\n" << forward << "      }\n      {\n" << backward << "      }\n";  // separate functions in the kernel
      for (std::size_t i = 0; i < outputs.size(); ++i) b << "      r[" << i << "] = " << outputs[i] << ";\n";
      b << "    }\n";
      return b.str();
    };
    std::size_t nvalues = program.inputs.size() + program.params.size() + 1;
    src << "static void check_" << op << "() {\n  std::mt19937_64 rng(11);\n  std::uniform_real_distribution<double> u(-6.0, 6.0);\n"
        << "  for (int i = 0; i < 2000; ++i) {\n    double v[" << nvalues << "];\n";
    std::size_t k = 0;
    for (std::size_t j = 0; j < program.inputs.size(); ++j)
      src << "    v[" << k++ << "] = (float)(i < 4 ? (i % 2 ? 80.0 : -80.0) : u(rng));\n";
    for (const auto& p : program.params)
      src << "    v[" << k++ << "] = (float)(" << p.init << (p.learnable ? " + 0.1 * u(rng)" : "") << ");\n";
    src << "    v[" << k++ << "] = (float)(u(rng) / 3.0);\n";
    src << "    float r32[" << outputs.size() << "]; double r64[" << outputs.size() << "];\n";
    src << "    { float* r = r32;\n" << body("float", code.forward_cuda.statements, code.backward_cuda.statements) << "    }\n";
    src << "    { double* r = r64;\n" << body("double", code.forward_reference.statements, code.backward_reference.statements) << "    }\n";
    src << "    for (int k = 0; k < " << outputs.size() << "; ++k) {\n"
        << "      bool finite = std::isfinite(r32[k]);\n"
        << "      bool close = std::fabs(r32[k] - r64[k]) <= 2e-4 * (1.0 + std::fabs(r64[k]));\n"
        << "      if (!finite || (i >= 4 && !close)) { if (failures++ < 20) std::printf(\"" << op
        << " output %d at point %d: fp32 %.9g fp64 %.17g\\n\", k, i, (double)r32[k], r64[k]); }\n"
        << "    }\n  }\n}\n";
    ++ops;
  }
  src << "int main() {\n";
  for (const auto& entry : kb().catalogue.entries()) src << "  check_" << entry.name << "();\n";
  src << "  std::printf(\"%d failures\\n\", failures);\n  return failures == 0 ? 0 : 1;\n}\n";
  ASSERT_GE(ops, 25);
  fs::path root = fs::temp_directory_path() / ("liger_kdev_emitted_" + std::to_string(::getpid()));
  fs::create_directories(root);
  std::ofstream(root / "emitted.cpp") << src.str();
  std::string error = run(gxx + " -std=c++17 -O1 -Wall -Werror -Wno-unused-variable -Wno-unused-but-set-variable " +
                              (root / "emitted.cpp").string() + " -o " + (root / "emitted").string(),
                          root / "build.log");
  ASSERT_TRUE(error.empty()) << error;
  error = run((root / "emitted").string(), root / "run.log");
  EXPECT_TRUE(error.empty()) << error;
  fs::remove_all(root);
}

TEST(KernelDevRender, Tier2RendersRowKernelFromTheRowProgram) {
  auto files = kd::render(tier2_profile("softmax"), kSource / "templates/kernel_dev");
  ASSERT_EQ(files.size(), 14u);  // no compile-backend entry for a row reduction
  for (const auto& f : files) EXPECT_EQ(f.path.find("compile/generated/"), std::string::npos) << f.path;
  const auto& header = file(files, "include/liger_kernels/softmax.h");
  EXPECT_NE(header.content.find("LIGER_API liger_status liger_softmax_backward(const void* dy, int64_t dy_row_stride, "
                                "const void* y, int64_t y_row_stride, void* dx, int64_t dx_row_stride, int64_t rows, "
                                "int64_t cols, liger_dtype dtype, const liger_tunables* tunables, liger_stream_t stream);"),
            std::string::npos)
      << header.content;
  const auto& cu = file(files, "softmax/softmax.cu");
  for (const char* expected : {"struct Math {", "__shfl_xor_sync", "row_all_reduce<WARP, Reduce::kMax>(row_max_, shared_)",
                               "block_all_reduce<Reduce::kSum>(all_, shared_)", "v0_ = M::exp((x - m));",
                               "y_r0_ = M::div(1.0f, s);", "y = (M::exp((x - m)) * y_r0_);", "dx = (y * (dy - g));",
                               "DeviceGuard guard(p.out);",
                               "default_config(current_sm_arch(), p.cols, dtype, BACKWARD)", "LIGER_STATUS_UNSUPPORTED_DTYPE",
                               "liger_softmax_backward_default_tunables"})
    EXPECT_NE(cu.content.find(expected), std::string::npos) << expected << "\n" << cu.content;
  EXPECT_EQ(cu.content.find("{{"), std::string::npos) << "unrendered tag";
  for (const char* table : {"kForwardTuning[]", "kBackwardTuning[]"})
    EXPECT_NE(file(files, "softmax/tuning.h").content.find(table), std::string::npos) << table;
  EXPECT_NE(file(files, "softmax_ref.cpp").content.find("dx = (y * (dy - g));"), std::string::npos);
  EXPECT_NE(file(files, "softmax_ref.h").content.find("//   per row: g = sum(dy * y); dx = y * (dy - g)"), std::string::npos)
      << file(files, "softmax_ref.h").content;
  const auto& py = file(files, "ops/softmax.py");
  EXPECT_NE(py.content.find("m = _row(x, x).amax(dim=-1, keepdim=True)"), std::string::npos) << py.content;
  EXPECT_NE(py.content.find("ctx.save_for_backward(y, )"), std::string::npos) << py.content;
  const auto& row = file(files, "docs/kernels/README.md");
  EXPECT_EQ(row.content.rfind("| `softmax` | Softmax | 2 | `y = exp(x - m) / s with m = max(x), s = sum(exp(x - m)) per row`", 0), 0u)
      << row.content;
  // The recomputed forward reduction, the mean and the module parameter of rms_scale.
  auto rms = kd::render(tier2_profile("rms_scale"), kSource / "templates/kernel_dev");
  const auto& rms_cu = file(rms, "rms_scale/rms_scale.cu").content;
  EXPECT_NE(rms_cu.find("float r;  // mean over the row of x^2"), std::string::npos) << rms_cu;
  EXPECT_NE(rms_cu.find("r = all_[0] / n;"), std::string::npos);
  EXPECT_NE(file(rms, "include/liger_kernels/rms_scale.h").content.find("float eps; /* default 1e-06 */"), std::string::npos);
}

TEST(KernelDevRender, Tier2RefusesWhatItCannotRender) {
  auto p = tier2_profile("softmax");
  p.row_program.reset();
  try {
    kd::render(p, kSource / "templates/kernel_dev");
    FAIL() << "rendered a Tier-2 profile without a row program";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has no row_program"), std::string::npos) << e.what();
  }
  p = tier2_profile("softmax");
  p.row_program->grad_input = "y * (dy - h)";
  try {
    kd::render(p, kSource / "templates/kernel_dev");
    FAIL() << "rendered a row program naming an unknown row scalar";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("backward.grad_input: 'y * (dy - h)' uses h"), std::string::npos) << e.what();
  }
  auto fused = kd::analyse({"fused linear cross entropy", kd::InputKind::Auto, ""}, kb());
  fused.tier = 3;
  fused.undecided.clear();
  fused.fused_linear.reset();  // a Tier-3 op other than a fused linear + loss: no template for it
  EXPECT_THROW(kd::render(fused, kSource / "templates/kernel_dev"), std::invalid_argument);
}

// The rendered fp64 reference of each Tier-2 op builds and passes its finite-difference check;
// the model's first softmax gradient (no row-sum term) fails it, with the message Verify sends back.
TEST(KernelDevRender, Tier2ReferenceChecksTheGradientAgainstFiniteDifferences) {
  std::string gxx = find_tool({"g++", "c++"});
  if (gxx.empty()) GTEST_SKIP() << "no C++ compiler (g++) on PATH: the rendered reference was not compiled";
  for (const std::string op : {"softmax", "rms_scale", "softmax_wrong"}) {
    SCOPED_TRACE(op);
    fs::path root = write_tree(kd::render(tier2_profile(op), kSource / "templates/kernel_dev"), op + "_ref");
    std::string error = build_reference(gxx, root, op);
    ASSERT_TRUE(error.empty()) << error;
    error = run((root / "ref_test").string(), root / "run.log");
    if (op == "softmax_wrong") {
      EXPECT_NE(error.find("gradient check failed (seed 1): dx[row "), std::string::npos) << error;
      EXPECT_NE(error.find("by central differences of the forward (L = sum(dy * y))"), std::string::npos) << error;
      EXPECT_NE(error.find("[  PASSED  ] 1 test."), std::string::npos) << "the extremes test still passes\n" << error;
    } else {
      EXPECT_TRUE(error.empty()) << error;
    }
    fs::remove_all(root);
  }
}

TEST(KernelDevRender, Tier2HostCodePythonAndCudaCompile) {
  std::string gxx = find_tool({"g++", "c++"});
  std::string nvcc = find_tool({"nvcc", "/usr/local/cuda/bin/nvcc"});
  std::string python = find_tool({"python3"});
  const std::string cuda_include = cuda_include_dir();
  std::vector<std::string> skipped;
  for (const auto& op : kTier2) {
    SCOPED_TRACE(op);
    fs::path root = write_tree(kd::render(tier2_profile(op), kSource / "templates/kernel_dev"), op + "_t2");
    if (!gxx.empty() && !cuda_include.empty()) EXPECT_EQ(check_host_code(gxx, cuda_include, root, op), "");
    if (!python.empty()) EXPECT_EQ(py_compile(python, root, "ops/" + op + ".py"), "");
    if (!nvcc.empty()) EXPECT_EQ(compile_kernel(nvcc, root, op), "");
    fs::remove_all(root);
  }
  if (gxx.empty() || cuda_include.empty()) skipped.push_back("g++ or the CUDA headers (GPU test and benchmark)");
  if (python.empty()) skipped.push_back("python3 (binding)");
  if (nvcc.empty()) skipped.push_back("nvcc (kernel)");
  if (!skipped.empty()) {
    std::string what;
    for (const auto& s : skipped) what += (what.empty() ? "" : ", ") + s;
    GTEST_SKIP() << "not compiled, tool missing: " << what;
  }
}

// Input names are the user's (a function's parameters): every name a generated file also uses for
// a local of its own (t for the tunables, s for the stream, out, rows, dtype, ...) must still give
// code that compiles, in every language the op is rendered to.
TEST(KernelDevRender, InputsNamedLikeTheTemplatesLocalsStillCompile) {
  const std::vector<std::string> names = {"i",      "m",      "out",    "rows",  "cols",   "dtype",
                                          "shape",  "device", "size",   "ctx",    "stream", "status", "mode",  "count",
                                          "bytes",  "ref",    "seed",   "key",    "offset", "stride", "row",   "col",
                                          "vec",    "total",  "result", "saved",  "tunables", "workspace", "M", "VEC",
                                          "new",    "auto",   "char",
                                          // Names that need no rename: they must stay the user's.
                                          "x", "y", "t", "a", "b", "c", "s", "n", "e", "k", "r", "h", "l", "v", "g", "w", "z", "p", "u", "q", "f", "d", "logits",
                                          "target", "gate", "up", "input", "mask", "hidden", "other",
                                          // Its gradient would be `do`.
                                          "o"};
  const std::set<std::string> kept = {"x", "y", "t", "a", "c", "s", "n", "e", "k", "r", "h", "l", "v", "b", "g", "w", "z", "p", "u", "q", "f", "d", "logits",
                                      "target", "gate", "up", "input", "mask", "hidden", "other"};
  ASSERT_LE(names.size(), 64u) << "a generated element-wise kernel reads at most 64 inputs";
  auto request_of = [](const std::vector<std::string>& inputs) {
    std::string parameters, body;
    for (const auto& n : inputs) {
      parameters += (parameters.empty() ? "" : ", ") + n;
      body += n + " * 1.5 + ";
    }
    return "def clash(" + parameters + "): return " + body + "torch.tanh(" + inputs.front() + ")";
  };
  const std::string request = request_of(names);
  const kd::KernelProfile p = kd::analyse({request, kd::InputKind::Auto, ""}, kb());
  ASSERT_TRUE(p.complete()) << request;
  ASSERT_EQ(p.inputs.size(), names.size());
  // One more input than the kernel's read masks hold is refused at Understand, with the reason.
  std::vector<std::string> too_many;
  for (int i = 0; i < 65; ++i) too_many.push_back("x" + std::to_string(i));
  const kd::KernelProfile wide = kd::analyse({request_of(too_many), kd::InputKind::Auto, ""}, kb());
  EXPECT_FALSE(wide.complete());
  ASSERT_TRUE(wide.undecided.count("forward"));
  EXPECT_NE(wide.undecided.at("forward").find("reads at most 64"), std::string::npos) << wide.undecided.at("forward");
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (kept.count(names[i])) {
      EXPECT_EQ(p.inputs[i].name, names[i]) << "renamed without need";
    } else {
      EXPECT_EQ(p.inputs[i].name, names[i] + "_in");
      EXPECT_TRUE(std::any_of(p.notes.begin(), p.notes.end(), [&](const std::string& n) {
        return n.find("input '" + names[i] + "' is '" + names[i] + "_in'") != std::string::npos;
      })) << names[i];
    }
  }
  const auto files = kd::render(p, kSource / "templates/kernel_dev");
  std::string gxx = find_tool({"g++", "c++"});
  if (gxx.empty()) GTEST_SKIP() << "no C++ compiler (g++) on PATH: the rendered code was not compiled";
  fs::path root = write_tree(files, p.op_name + "_clash");
  std::string error = build_reference(gxx, root, p.op_name);
  EXPECT_TRUE(error.empty()) << error;
  if (error.empty()) {
    error = run((root / "ref_test").string(), root / "run.log");
    EXPECT_TRUE(error.empty()) << error;
  }
  if (const std::string cuda_include = cuda_include_dir(); !cuda_include.empty()) {
    error = check_host_code(gxx, cuda_include, root, p.op_name);
    EXPECT_TRUE(error.empty()) << error;
  }
  if (const std::string python = find_tool({"python3"}); !python.empty())
    for (const std::string& module : {"ops/" + p.op_name + ".py", "compile/generated/" + p.op_name + ".py"}) {
      if (!fs::exists(root / "kernels/python/liger_kernels" / module)) continue;
      error = py_compile(python, root, module);
      EXPECT_TRUE(error.empty()) << module << ": " << error;
    }
  if (const std::string nvcc = find_tool({"nvcc", "/usr/local/cuda/bin/nvcc"}); !nvcc.empty()) {
    error = compile_kernel(nvcc, root, p.op_name);
    EXPECT_TRUE(error.empty()) << error;
  }
  fs::remove_all(root);
}

// Parameters are the user's too: a distillation temperature T (the kernels' storage type is the
// template parameter T), M (the math policy), VEC or i get names of their own in the generated
// code, element-wise and per row, and the code compiles.
TEST(KernelDevRender, ParametersNamedLikeTheTemplatesNamesStillCompile) {
  for (const char* request : {"def scaled(x, T=2.0, M=0.5, VEC=1.0, i=3.0):\n    return torch.sigmoid(x / T) * M + VEC * i",
                              "def tempered(logits, T=2.0):\n    return F.log_softmax(logits / T, dim=-1) * T"}) {
    const kd::KernelProfile p = kd::analyse({request, kd::InputKind::Auto, ""}, kb());
    ASSERT_TRUE(p.complete()) << request;
    ASSERT_FALSE(p.module_parameters.empty()) << request;
    for (const auto& m : p.module_parameters) {
      EXPECT_EQ(m.name.substr(m.name.size() - 6), "_param") << m.name;
      const std::string original = m.name.substr(0, m.name.size() - 6);
      EXPECT_TRUE(std::any_of(p.notes.begin(), p.notes.end(), [&](const std::string& n) {
        return n.find("parameter '" + original + "' is '" + m.name + "'") != std::string::npos;
      })) << m.name;
    }
    const auto files = kd::render(p, kSource / "templates/kernel_dev");
    fs::path root = write_tree(files, p.op_name + "_param_clash");
    if (const std::string python = find_tool({"python3"}); !python.empty()) {
      const std::string error = py_compile(python, root, "ops/" + p.op_name + ".py");
      EXPECT_TRUE(error.empty()) << error;
    }
    if (const std::string nvcc = find_tool({"nvcc", "/usr/local/cuda/bin/nvcc"}); !nvcc.empty()) {
      const std::string error = compile_kernel(nvcc, root, p.op_name);
      EXPECT_TRUE(error.empty()) << request << "\n" << error;
    } else {
      std::cout << "[ SKIPPED  ] nvcc not found: " << p.op_name << "'s kernel was rendered, not compiled\n";
    }
    fs::remove_all(root);
  }
}

// A backward that is the upstream gradient itself (a straight-through estimator) runs no kernel in
// the binding: autograd gets dy back; any other backward launches the generated kernel.
TEST(KernelDevRender, IdentityBackwardReturnsTheUpstreamWithoutALaunch) {
  auto python_of = [](const std::string& request) {
    const auto p = kd::analyse({request, kd::InputKind::Auto, ""}, kb());
    for (const auto& f : kd::render(p, kSource / "templates/kernel_dev"))
      if (f.path == "kernels/python/liger_kernels/ops/" + p.op_name + ".py") return f.content;
    return std::string();
  };
  const std::string ste = python_of("def fake_quant(x): return x + (torch.round(x * 8) / 8 - x).detach()");
  ASSERT_FALSE(ste.empty());
  EXPECT_NE(ste.find("return (*[dy.to(dtype) for dtype in ctx.dtypes], *([None] * len(ctx.hyper)))"), std::string::npos) << ste;
  EXPECT_EQ(ste.find("ctx.save_for_backward("), std::string::npos) << ste;
  const std::string relu2 = python_of("ReLU squared activation function");
  EXPECT_EQ(relu2.find("ctx.dtypes"), std::string::npos) << relu2;
  EXPECT_NE(relu2.find("ctx.save_for_backward(x, )"), std::string::npos) << relu2;
  if (std::system("command -v python3 >/dev/null 2>&1") == 0) {
    const fs::path file = fs::temp_directory_path() / ("liger_identity_backward_" + std::to_string(::getpid()) + ".py");
    std::ofstream(file) << ste;
    EXPECT_EQ(std::system(("python3 -c \"import ast,sys; ast.parse(open(sys.argv[1]).read())\" " + file.string()).c_str()), 0);
    fs::remove(file);
  }
}
