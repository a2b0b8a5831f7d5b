// kernel-dev Act's compile-backend entry (kernels/python/liger_kernels/compile/generated/<op>.py):
// the PyTorch spelling of a forward, the entry's roles and argument order for ops with inputs,
// scalar and per-channel learnable parameters and hyperparameters (in the order of the generated
// functional, read from the rendered binding), none for Tier 2, and, where a python3 with torch is
// on this machine, benchmarks/compile_pattern_check.py run on rendered entries: the DyT module it
// came from matches, a module computing something else does not, a broken entry is reported as
// broken. CI has no torch: those cases skip with the reason.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <unistd.h>

#include "liger/util.h"
#include "workflows/kernel_dev/compile_entry.h"
#include "workflows/kernel_dev/render.h"

namespace kd = liger::kernel_dev;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = LIGER_SOURCE_DIR;
const std::string kEntryDir = "kernels/python/liger_kernels/compile/generated/";

const kd::KnowledgeBase& kb() {
  static const kd::KnowledgeBase k = kd::KnowledgeBase::load(kSource);
  return k;
}

kd::KernelProfile profile(const std::string& request, kd::InputKind kind = kd::InputKind::Auto) {
  return kd::analyse({request, kind, ""}, kb());
}

std::vector<kd::RenderedFile> render(const kd::KernelProfile& p) { return kd::render(p, kSource / "templates/kernel_dev"); }

const kd::RenderedFile* find(const std::vector<kd::RenderedFile>& files, const std::string& path) {
  for (const auto& f : files)
    if (f.path == path) return &f;
  return nullptr;
}

// The parameter names of `def <name>(...)` in Python text.
std::vector<std::string> def_params(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\\ndef " + name + "\\(([^)]*)\\)"))) return {};
  std::vector<std::string> out;
  std::string params = m[1];
  std::regex param("([A-Za-z_][A-Za-z0-9_]*)\\s*(:[^,=]*)?(=[^,]*)?,?\\s*");
  for (std::sregex_iterator it(params.begin(), params.end(), param), end; it != end; ++it) out.push_back((*it)[1]);
  return out;
}

std::string torch_of(const std::string& expression) { return kd::torch_expression(kd::parse_expression(expression)); }

std::string run(const std::string& command, const fs::path& log) {
  int rc = std::system((command + " > " + log.string() + " 2>&1").c_str());
  std::string out = liger::util::read_file(log);
  return std::to_string(WEXITSTATUS(rc)) + "\n" + out;
}

// A python3 that imports torch (CI has none): the one on PATH, else Debian's.
std::string torch_python() {
  for (const char* candidate : {"python3", "/usr/bin/python3"})
    if (std::system((std::string(candidate) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0) return candidate;
  return "";
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "kdev-compile-entry-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

TEST(KernelDevCompileEntry, ForwardIsSpelledAsModelsWriteIt) {
  EXPECT_EQ(torch_of("tanh(alpha * x) * weight + bias"), "((torch.tanh((alpha * x)) * weight) + bias)");
  // A bound by a constant is a clamp (either operand order); two tensors are maximum/minimum.
  EXPECT_EQ(torch_of("max(x, 0)"), "torch.clamp(x, min=0.0)");
  EXPECT_EQ(torch_of("min(6, x)"), "torch.clamp(x, max=6.0)");
  EXPECT_EQ(torch_of("max(x, y)"), "torch.maximum(x, y)");
  EXPECT_EQ(torch_of("softplus(x) * step(x)"), "(F.softplus(x) * (x > 0.0).type_as(x))");
  EXPECT_EQ(torch_of("where(x > 0, x, 0.2 * x)"), "torch.where((x > 0.0), x, (0.2 * x))");
  EXPECT_EQ(torch_of("clamp(x, -1, 1)"), "torch.clamp(x, (-1.0), 1.0)");
  // Powers and negation keep the expression language's grouping whatever Python's is.
  EXPECT_EQ(torch_of("-x^2"), "(-(x ** 2.0))");
  EXPECT_EQ(torch_of("2^-x"), "(2.0 ** (-x))");
  EXPECT_EQ(torch_of("x / 1.702"), "(x / 1.702)");
}

TEST(KernelDevCompileEntry, EntryHasRolesAndTheFunctionalsArgumentOrder) {
  // Two inputs, a scalar and a per-channel learnable parameter, a hyperparameter (fixed).
  auto p = profile("param alpha: scalar = 0.5\nparam weight: channel = 1\nparam slope = 0.1 fixed\n"
                   "y = where(x > 0, x, slope * x) * weight + alpha * g",
                   kd::InputKind::Expression);
  ASSERT_TRUE(p.complete());
  auto files = render(p);
  const auto* entry = find(files, kEntryDir + p.op_name + ".py");
  ASSERT_NE(entry, nullptr);
  EXPECT_FALSE(entry->insert);
  const std::string& text = entry->content;
  for (const char* expected : {"    \"x\": \"input\",\n", "    \"g\": \"input\",\n", "    \"alpha\": \"param\",\n",
                               "    \"weight\": \"param\",\n", "    \"slope\": \"scalar\",\n",
                               "    \"alpha\": (\"scalar\", 0.5),\n", "    \"weight\": (\"channel\", 1.0),\n",
                               "    \"slope\": 0.1,\n", "register_op(OP, PATTERN.scan, source=\"kernel-dev\""})
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
  EXPECT_NE(text.find("torch.where((x > 0.0), x, (slope * x))"), std::string::npos) << text;
  // pattern, replacement and the library call take the arguments in the functional's order.
  const auto* binding = find(files, "kernels/python/liger_kernels/ops/" + p.op_name + ".py");
  ASSERT_NE(binding, nullptr);
  const auto functional = def_params(binding->content, p.op_name);
  ASSERT_EQ(functional.size(), 5u) << binding->content;
  EXPECT_EQ(std::vector<std::string>(functional.begin(), functional.begin() + 2), (std::vector<std::string>{"x", "g"}));
  EXPECT_EQ(functional.back(), "slope");
  EXPECT_EQ(def_params(text, "pattern"), functional);
  EXPECT_EQ(def_params(text, "replacement"), functional);
  std::string call = "return LF." + p.op_name + "(";
  for (const auto& name : functional) call += name + ", ";
  EXPECT_NE(text.find(call + ")"), std::string::npos) << call << "\n" << text;
  // Importable without CUDA: the library is imported inside replacement only.
  EXPECT_EQ(text.find("\nfrom ... import functional"), std::string::npos);
  EXPECT_EQ(text.find("\nimport liger_kernels"), std::string::npos);
}

TEST(KernelDevCompileEntry, DytFromWordsAndFromItsModule) {
  auto words = render(profile("DyT"));
  const auto* entry = find(words, kEntryDir + "dyt.py");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(def_params(entry->content, "pattern"), def_params(find(words, "kernels/python/liger_kernels/ops/dyt.py")->content, "dyt"));
  auto module = profile(liger::util::read_file(kSource / "tests/workflows/fixtures/kernel_dev/ops/dyt.py"));
  ASSERT_EQ(module.source_kind, "pytorch");
  const auto plan = kd::plan_compile_entry(module);
  EXPECT_EQ(plan.skipped, "");
  EXPECT_NE(plan.expression.find("torch.tanh((alpha * x))"), std::string::npos) << plan.expression;
}

// A PyTorch input's own spelling is the pattern: the translation expands torch.asinh into a where
// of logs, which a model calling torch.asinh does not compute. An edited forward is followed
// instead (the profile is the contract), and a source the entry cannot reuse falls back.
TEST(KernelDevCompileEntry, PytorchInputsKeepTheirOwnSpelling) {
  auto p = profile("def f(x):\n    \"\"\"gate\"\"\"\n    return torch.asinh(x) * torch.sigmoid(x)\n");
  ASSERT_EQ(p.source_kind, "pytorch");
  auto plan = kd::plan_compile_entry(p);
  EXPECT_EQ(plan.skipped, "");
  EXPECT_EQ(plan.expression, "torch.asinh(x) * torch.sigmoid(x)");
  EXPECT_NE(p.forward->expression.find("where"), std::string::npos) << "the kernel computes the expansion";

  EXPECT_EQ(kd::plan_compile_entry(profile("def f(x):\n    return F.silu(x) * x")).expression, "F.silu(x) * x");
  EXPECT_EQ(kd::plan_compile_entry(profile("def f(x, y): return F.smooth_l1_loss(x, y, reduction='none', beta=0.5)"))
                .expression,
            "F.smooth_l1_loss(x, y, reduction='none', beta=0.5)");
  auto nn = profile("def f(x, y):\n    return torch.nn.functional.softplus(x) * y");
  EXPECT_EQ(kd::plan_compile_entry(nn).expression, "F.softplus(x) * y");

  p.forward->expression = "asinh(x) * tanh(x)";  // edited at review: the source no longer computes it
  plan = kd::plan_compile_entry(p);
  EXPECT_EQ(plan.expression.find("torch.asinh(x) * torch.sigmoid(x)"), std::string::npos) << plan.expression;
  EXPECT_NE(plan.expression.find("torch.tanh(x)"), std::string::npos) << plan.expression;

  // Two statements: the derived spelling.
  auto two = profile("def f(x):\n    h = torch.sigmoid(x)\n    return x * h");
  EXPECT_EQ(kd::plan_compile_entry(two).expression, "(x * torch.sigmoid(x))");
}

TEST(KernelDevCompileEntry, NoEntryForRowReductionsOrUnusedArguments) {
  kd::KernelProfile row = profile("relu squared");
  row.tier = 2;
  auto plan = kd::plan_compile_entry(row);
  EXPECT_EQ(plan.expression, "");
  EXPECT_NE(plan.skipped.find("only element-wise (Tier 1) ops"), std::string::npos) << plan.skipped;

  // A hyperparameter the (edited) forward no longer uses: the library call needs a value for it
  // that no matched region holds.
  auto p = profile("leaky relu");
  ASSERT_FALSE(p.module_parameters.empty());
  p.forward->expression = "relu(x)";
  plan = kd::plan_compile_entry(p);
  EXPECT_EQ(plan.expression, "");
  EXPECT_NE(plan.skipped.find("does not use " + p.module_parameters.front().name), std::string::npos) << plan.skipped;
  auto files = render(p);
  EXPECT_EQ(find(files, kEntryDir + p.op_name + ".py"), nullptr);
}

// ------------------------------------------------------------------ the check, where torch exists
namespace {

struct Checked {
  int exit_code;
  std::string output;
};

// Writes the entry rendered for `p` to a temporary file and runs the check against `source`.
Checked check(const std::string& python, const kd::KernelProfile& p, const std::string& source,
              const std::string& edit_from = "", const std::string& edit_to = "") {
  TempDir dir;
  auto files = render(p);
  const auto* entry = find(files, kEntryDir + p.op_name + ".py");
  if (!entry) return {-1, "no entry rendered"};
  std::string text = entry->content;
  if (!edit_from.empty()) {
    auto at = text.find(edit_from);
    if (at == std::string::npos) return {-1, "edit target not found: " + edit_from};
    text.replace(at, edit_from.size(), edit_to);
  }
  std::ofstream(dir.path / "entry.py") << text;
  std::ofstream(dir.path / "source.txt") << source;
  const std::string out = run(python + " " + (kSource / "benchmarks/compile_pattern_check.py").string() + " --op " +
                                  p.op_name + " --entry " + (dir.path / "entry.py").string() + " --source-file " +
                                  (dir.path / "source.txt").string(),
                              dir.path / "log.txt");
  const auto nl = out.find('\n');
  return {std::stoi(out.substr(0, nl)), out.substr(nl + 1)};
}

}  // namespace

TEST(KernelDevCompileEntry, PatternCheckOnRenderedEntries) {
  const std::string python = torch_python();
  if (python.empty()) GTEST_SKIP() << "no python3 that imports torch (python3, /usr/bin/python3): the pattern check needs it";

  const std::string dyt_source = liger::util::read_file(kSource / "tests/workflows/fixtures/kernel_dev/ops/dyt.py");
  const auto dyt = profile(dyt_source);
  auto r = check(python, dyt, dyt_source);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("matched: the " + dyt.op_name + " pattern finds the PyTorch function it came from"), std::string::npos)
      << r.output;
  for (const char* binding : {"x <- x (4, 8)", "alpha <- alpha (1,)", "weight <- weight (8,)", "bias <- bias (8,)"})
    EXPECT_NE(r.output.find(binding), std::string::npos) << binding << "\n" << r.output;

  // The same module without its bias is another function: not matched, said, exit 1.
  std::string no_bias = dyt_source;
  no_bias.replace(no_bias.find("x * self.weight + self.bias"), 27, "x * self.weight");
  r = check(python, dyt, no_bias);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAILED: the " + dyt.op_name + " pattern does not match the PyTorch function it came from"),
            std::string::npos)
      << r.output;

  // An entry whose pattern takes weight and bias in another order than its replacement would
  // pass the model's bias as the weight: broken (4), not merely unmatched.
  r = check(python, dyt, dyt_source, "def pattern(x, alpha, weight, bias, ):",
            "def pattern(x, alpha, bias, weight, ):");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("BROKEN: the graph passes the matched values to replacement in pattern's order"),
            std::string::npos)
      << r.output;

  // A function source, and a words-sourced op checked against its forward expression with a
  // hyperparameter held as a constant.
  const auto silu_tanh = profile(liger::util::read_file(kSource / "tests/workflows/fixtures/kernel_dev/ops/silu_tanh.py"));
  r = check(python, silu_tanh, silu_tanh.source_text);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto leaky = profile("leaky relu");
  r = check(python, leaky, leaky.forward->expression);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("negative_slope <- 0.01"), std::string::npos) << r.output;
}

// A module that reaches a catalogue function through an attribute (transformers' GELUTanh:
// self.act = functools.partial(F.gelu, approximate="tanh")) has no one-line return to copy: the
// pattern is the catalogue's spelling in the op's names, which the source's graph holds.
TEST(KernelDevCompileEntry, AFunctionCalledThroughAnAttributeKeepsItsCatalogueSpelling) {
  auto p = profile("import functools\nclass GELUTanh(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                   "        self.act = functools.partial(nn.functional.gelu, approximate=\"tanh\")\n"
                   "    def forward(self, input):\n        return self.act(input)\n");
  EXPECT_EQ(kd::plan_compile_entry(p).expression, "F.gelu(input, approximate='tanh')");
  // The eager baseline names the op's input, not the catalogue's x.
  bool named = false;
  for (const auto& note : p.notes) named = named || note == "PyTorch eager baseline: F.gelu(input, approximate='tanh')";
  EXPECT_TRUE(named);
}
