#include "liger/kernel_catalog.h"

#include "liger/error.h"
#include "liger/profile.h"

namespace liger::toolchain {

namespace {

// The contract with the kernel library, kept as data so it reads like the file it checks.
constexpr const char* kOpsSchema = R"(
type: list
items:
  type: map
  open: true
  fields:
    name: {type: string, required: true}
    tier: {type: [int, string], required: true}
    dtypes: {type: list, required: true, items: {type: string, enum: [fp32, fp16, bf16, float32, float16, bfloat16]}}
    options: {type: [list, map]}
    forward: {type: string, required: true}
    backward: {type: string}
    header: {type: string, required: true}
)";

std::vector<std::string> names_of(const YAML::Node& node) {
  std::vector<std::string> names;
  if (node.IsSequence()) {
    for (const auto& item : node) {
      if (item.IsScalar()) names.push_back(item.Scalar());
      else if (item.IsMap() && item["name"]) names.push_back(item["name"].as<std::string>());
      else if (item.IsMap() && item.size() == 1) names.push_back(item.begin()->first.as<std::string>());
    }
  } else if (node.IsMap()) {
    for (const auto& entry : node) names.push_back(entry.first.as<std::string>());
  }
  return names;
}

}  // namespace

std::vector<KernelOp> read_kernel_catalog(const std::filesystem::path& ops_yaml) {
  std::error_code ec;
  if (!std::filesystem::exists(ops_yaml, ec)) {
    throw Error(ErrorKind::Failure, "kernel catalogue '" + ops_yaml.string() + "' not found",
                "the kernel library lists its ops in kernels/ops.yaml; pass --kernels-dir for another checkout");
  }
  YAML::Node root = profile::load_yaml_file(ops_yaml);
  YAML::Node list = root.IsMap() && root["ops"] ? root["ops"] : root;  // `ops: [...]` or a bare list
  static const profile::Schema schema = profile::Schema::parse(kOpsSchema, "ops.yaml schema");
  const auto report = schema.validate(list);
  if (!report.ok() || !list.IsSequence()) {
    throw Error(ErrorKind::Failure,
                "kernel catalogue '" + ops_yaml.string() + "' is malformed:\n" +
                    (report.ok() ? ops_yaml.string() + ": expected a list of ops\n" : report.format_errors(ops_yaml.string())),
                "each op needs name, tier, dtypes, forward and header (backward and options are optional)");
  }
  std::vector<KernelOp> ops;
  for (const auto& node : list) {
    KernelOp op;
    op.name = node["name"].as<std::string>();
    op.tier = node["tier"].as<std::string>();
    for (const auto& dtype : node["dtypes"]) op.dtypes.push_back(dtype.as<std::string>());
    if (node["options"]) op.options = names_of(node["options"]);
    op.forward = node["forward"].as<std::string>();
    if (node["backward"] && !node["backward"].IsNull()) op.backward = node["backward"].as<std::string>();
    op.header = node["header"].as<std::string>();
    ops.push_back(std::move(op));
  }
  return ops;
}

}  // namespace liger::toolchain
