// Input names in the generated code (generated_names.h).
#include "workflows/kernel_dev/generated_names.h"

#include <set>

namespace liger::kernel_dev {

namespace {

const std::set<std::string>& reserved_names() {
  static const std::set<std::string> names = {
      // C++ and CUDA C++ keywords and alternative tokens. Python reserves some of them for itself,
      // but d<name> may still spell one: the gradient of an input `o` would be `do`.
      "and", "or", "not", "if", "else", "for", "while", "do", "return", "true", "false", "try", "class", "continue",
      "alignas", "alignof", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
      "char8_t", "char16_t", "char32_t", "compl", "concept", "const", "consteval", "constexpr", "constinit",
      "const_cast", "co_await", "co_return", "co_yield", "decltype", "default", "delete", "double", "dynamic_cast",
      "enum", "explicit", "export", "extern", "float", "friend", "goto", "inline", "int", "long", "mutable",
      "namespace", "new", "noexcept", "not_eq", "nullptr", "operator", "or_eq", "private", "protected", "public",
      "register", "reinterpret_cast", "requires", "short", "signed", "sizeof", "static", "static_assert",
      "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "typedef", "typeid", "typename",
      "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "xor", "xor_eq", "main",
      "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "NULL", "assert", "std", "liger", "torch",
      // The templates' own type and constant names (the storage type T, the math policy M, ...).
      "i", "m", "M", "T", "VEC", "F", "P", "DT", "I64", "F32", "OP"};
  return names;
}

// Locals of the generated files that an input may not take (a parameter is declared where they are
// not in scope: a distillation's `offset` or `scale` compiles as a parameter).
const std::set<std::string>& template_locals() {
  static const std::set<std::string> names = {
      // What the Tier-1 templates declare beside the inputs (kernel.cu, reference and GPU tests,
      // benchmark, Python binding, compile entry): launch geometry, loop indices, buffers. Of the
      // single letters only these clash (KernelDevRender.InputsNamedLikeTheTemplatesLocalsStillCompile
      // compiles x, y, t, a, b, c, s, n, e, k, r, h, l, v, ... as they are): `i` the reference
      // test's index, `m` the benchmark's mode (both above).
      "out", "rows", "cols", "dtype", "shape", "device", "size", "ctx", "stream", "status", "mode", "count", "bytes",
      "ref", "seed", "key", "offset", "stride", "row", "col", "vec", "total", "tile", "lane", "warp", "result",
      "saved", "grads", "tensors", "layout", "buffer", "values", "expected", "tunables", "workspace", "threads",
      "blocks", "tun", "nbytes", "dims", "init", "hyper", "self", "cls", "Tensor", "math", "ctypes", "lib",
      "elem", "active", "groups", "partial", "scalar", "launch", "run", "tag", "sum", "image", "storage", "what",
      "numeric", "checked", "probe", "left", "right", "plus", "minus", "loss", "value", "fa", "fb", "f0", "dout",
      "forward", "backward", "reference", "options", "weight_dtype", "sm_arch", "in_stride", "out_stride",
      "launch_tunables", "launch_stream", "like", "others",
      // The Tier-2 binding's row statistics (the forward returns them, the autograd function saves them).
      "stats"};
  return names;
}

}  // namespace

bool reserved_in_generated_code(const std::string& name) {
  return reserved_names().count(name) > 0 || template_locals().count(name) > 0 || name.rfind("__", 0) == 0;
}

Program with_generated_code_names(const Program& program, std::vector<std::string>& notes,
                                  const std::function<bool(const std::string&)>& also_reserved) {
  auto reserved = [&](const std::string& name) {
    return reserved_in_generated_code(name) || (also_reserved && also_reserved(name));
  };
  std::set<std::string> taken(program.inputs.begin(), program.inputs.end());
  for (const auto& p : program.params) taken.insert(p.name);
  const std::set<std::string> original(program.inputs.begin(), program.inputs.end());
  auto clashes = [&](const std::string& name) {
    // d<name> of one input equal to another input's name would give two tensors one name.
    return reserved(name) || reserved("d" + name) || (original.count("d" + name) > 0);
  };
  Program out = program;
  std::map<std::string, Expr> renames;
  for (auto& in : out.inputs) {
    if (!clashes(in)) continue;
    std::string fresh = in + "_in";
    for (int k = 2; taken.count(fresh) || taken.count("d" + fresh) || reserved(fresh); ++k)
      fresh = in + "_in" + std::to_string(k);
    taken.insert(fresh);
    notes.push_back("input '" + in + "' is '" + fresh + "' in the generated code ('" + in + "' or 'd" + in +
                    "' names something the generated kernel, tests or binding already use)");
    renames[in] = sym(fresh);
    if (auto hint = out.sample_hints.find(in); hint != out.sample_hints.end()) {
      out.sample_hints[fresh] = hint->second;
      out.sample_hints.erase(hint);
    }
    if (auto role = out.column_roles.find(in); role != out.column_roles.end()) {
      out.column_roles[fresh] = role->second;
      out.column_roles.erase(role);
    }
    in = fresh;
  }
  // A parameter is declared in the kernel beside the template's own names too (`const float T =
  // o_.T` inside a template over the storage type T does not compile): a temperature T becomes
  // T_param, in the C ABI's options and the Python entry's keywords as well.
  auto parameter_clashes = [&](const std::string& name) {
    return reserved_names().count(name) > 0 || name.rfind("__", 0) == 0 || (also_reserved && also_reserved(name));
  };
  for (auto& param : out.params) {
    if (!parameter_clashes(param.name) && !(param.learnable && parameter_clashes("d" + param.name))) continue;
    std::string fresh = param.name + "_param";
    for (int k = 2; taken.count(fresh) || taken.count("d" + fresh) || reserved(fresh); ++k)
      fresh = param.name + "_param" + std::to_string(k);
    taken.insert(fresh);
    notes.push_back("parameter '" + param.name + "' is '" + fresh + "' in the generated code and the Python entry's "
                    "keywords ('" + param.name + "' names something the generated kernel, tests or binding already use)");
    renames[param.name] = sym(fresh);
    param.name = fresh;
  }
  if (renames.empty()) return out;
  out.expression = substitute(program.expression, renames);
  out.output = unclashing_output_name(program.output, out.inputs, out.params);
  return out;
}

}  // namespace liger::kernel_dev
