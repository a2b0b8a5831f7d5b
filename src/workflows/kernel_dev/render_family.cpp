#include "workflows/kernel_dev/render_family.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace liger::kernel_dev {

namespace mu = kainjow::mustache;

namespace {

std::string read_family_template(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("kernel-dev template not found: " + path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

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
    mu::mustache tmpl{read_family_template(path)};
    if (!tmpl.is_valid()) throw std::runtime_error(path.string() + ": " + tmpl.error_message());
    tmpl.set_custom_escape([](const std::string& s) { return s; });  // code, not HTML
    std::string content = tmpl.render(data);
    if (!tmpl.is_valid()) throw std::runtime_error(path.string() + ": " + tmpl.error_message());
    files.push_back({target.path, content, target.template_name, target.insert, target.prefix});
  }
  return files;
}

}  // namespace liger::kernel_dev
