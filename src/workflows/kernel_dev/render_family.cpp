#include "workflows/kernel_dev/render_family.h"

#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "liger/text_escape.h"

namespace liger::kernel_dev {

namespace mu = kainjow::mustache;

std::string read_template(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("kernel-dev template not found: " + path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string family_upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string family_free_text(const std::string& text, bool quotes) {
  std::string out = util::escape_code_text(text);
  for (char& c : out) {
    if (c == '|') c = '/';
    else if (c == '`') c = '\'';
    else if (quotes && c == '"') c = '\'';
  }
  return out;
}

std::string family_c_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

mu::data family_context(const KernelProfile& p, const std::string& tier, bool quotes) {
  mu::data d;
  d.set("tier", tier);
  d.set("op", p.op_name);
  d.set("OP", family_upper(p.op_name));
  d.set("Camel", camel_case(p.op_name));
  d.set("display", family_free_text(p.display_name, quotes));
  d.set("closest_kernel", p.closest_kernel);
  d.set("python_module", p.python_module);
  return d;
}

mu::object family_tolerance(const ToleranceSpec& t, const std::string& reason) {
  if (t.dtype != "fp32" && t.dtype != "fp16" && t.dtype != "bf16")
    throw std::invalid_argument("render: profile tolerance for unknown dtype '" + t.dtype + "'");
  char brace[256];
  std::snprintf(brace, sizeof(brace), "{%.9g, %.9g, %.9g, ", t.atol, t.rtol, t.max_relative_l2);
  return mu::object{
      {"dtype", t.dtype},
      {"dtype_enum", t.dtype == "fp32" ? "LIGER_DTYPE_FLOAT32" : t.dtype == "fp16" ? "LIGER_DTYPE_FLOAT16" : "LIGER_DTYPE_BFLOAT16"},
      {"brace_init", std::string(brace) + family_c_string(reason) + "}"}};
}

void require_renderable(const KernelProfile& p, const std::vector<std::string>& problems) {
  if (!p.complete()) {
    std::string fields;
    for (const auto& [field, reason] : p.undecided) fields += (fields.empty() ? "" : "; ") + field + ": " + reason;
    throw std::invalid_argument("render: profile '" + p.op_name + "' has undecided fields: " + fields);
  }
  if (!problems.empty()) {
    std::string all;
    for (const auto& problem : problems) all += (all.empty() ? "" : "; ") + problem;
    throw std::invalid_argument("render: " + all);
  }
  if (!p.tolerances) throw std::invalid_argument("render: profile '" + p.op_name + "' lacks tolerances");
}

std::vector<RenderedFile> render_family_files(const KernelProfile& p, const std::string& family, const mu::data& data,
                                              const std::filesystem::path& templates_dir) {
  const std::string& op = p.op_name;
  struct Target {
    std::string template_name;
    std::string path;
    bool insert;
    std::string prefix = {};
  };
  const std::string own = family + "/";
  const std::vector<Target> targets = {
      {own + "header.h.mustache", "kernels/include/liger_kernels/" + op + ".h", false},
      {own + "kernel.cu.mustache", "kernels/src/" + op + "/" + op + ".cu", false},
      {own + "tuning.h.mustache", "kernels/src/" + op + "/tuning.h", false},
      {own + "reference.h.mustache", "kernels/reference/" + op + "_ref.h", false},
      {own + "reference.cpp.mustache", "kernels/reference/" + op + "_ref.cpp", false},
      {own + "test_reference.cpp.mustache", "tests/kernels/reference/test_" + op + "_ref.cpp", false},
      {own + "test_gpu.cpp.mustache", "tests/kernels/gpu/test_" + op + ".cpp", false},
      {own + "bench.cpp.mustache", "benchmarks/bench_" + op + ".cpp", false},
      {own + "python_op.py.mustache", "kernels/python/liger_kernels/ops/" + op + ".py", false},
      {own + "doc.md.mustache", "docs/kernels/" + op + ".md", false},
      {"docs_row.md.mustache", "docs/kernels/README.md", true, "| `"},
      {"exports_import.py.mustache", "kernels/python/liger_kernels/functional.py", true, "from .ops."},
      {"exports_alias.py.mustache", "kernels/python/liger_kernels/functional.py", true, "liger_"},
      {"exports_all.py.mustache", "kernels/python/liger_kernels/functional.py", true, "    \""},
  };
  std::vector<RenderedFile> files;
  for (const auto& target : targets) {
    const std::filesystem::path path = templates_dir / target.template_name;
    mu::mustache tmpl{read_template(path)};
    if (!tmpl.is_valid()) throw std::runtime_error(path.string() + ": " + tmpl.error_message());
    tmpl.set_custom_escape([](const std::string& s) { return s; });  // code, not HTML
    std::string content = tmpl.render(data);
    if (!tmpl.is_valid()) throw std::runtime_error(path.string() + ": " + tmpl.error_message());
    files.push_back({target.path, content, target.template_name, target.insert, target.prefix});
  }
  return files;
}

}  // namespace liger::kernel_dev
