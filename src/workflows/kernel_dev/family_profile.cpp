#include "workflows/kernel_dev/family_profile.h"

namespace liger::kernel_dev {

void set_family_identity(KernelProfile& p, const std::string& op, const KnowledgeBase& knowledge) {
  p.op_name = op;
  p.c_prefix = "liger_" + op;
  p.cpp_namespace = "liger::kernels::" + op;
  p.python_functional = op;
  p.python_module = "Liger" + camel_case(op);
  p.python_function = "Liger" + camel_case(op) + "Function";
  for (const auto& k : knowledge.tiers.kernels)
    if (k == op)
      p.notes.push_back("the library already has a kernel named '" + op +
                        "': Act must not overwrite it; use --name for a new op");
}

bool write_undecided_section(const KernelProfile& p, const std::string& section, YAML::Node& n) {
  const auto it = p.undecided.find(section);
  if (it == p.undecided.end()) return false;
  n["undecided"] = it->second;
  return true;
}

}  // namespace liger::kernel_dev
