// The profile pieces shared by kernel-dev's op families that keep a section of their own in the
// profile document (segments: `segment`, fused linear losses: `fused_linear`): the op's identity
// from its name, and the section's YAML (an undecided section is `{undecided: "<reason>"}`).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include <yaml-cpp/yaml.h>

#include "workflows/kernel_dev/profile.h"

namespace liger::kernel_dev {

// Sets the names derived from `op` (op_name, c_prefix, C++ namespace, Python names) and notes a
// clash with a kernel the library already has, which Act must not overwrite.
void set_family_identity(KernelProfile& p, const std::string& op, const KnowledgeBase& knowledge);

// Writes the section's `undecided` reason into `n` where the analysis left it undecided; returns
// whether it did (the caller then writes nothing else).
bool write_undecided_section(const KernelProfile& p, const std::string& section, YAML::Node& n);

// Reads n[key] into `out` where the key is present (absent keys keep the spec's default).
template <class T>
void read_field(const YAML::Node& n, const char* key, T& out) {
  if (n[key]) out = n[key].as<T>();
}

// Reads the document's `section` into `spec`: nothing where it is absent or null; an undecided
// section records its reason in p.undecided and leaves a default spec (the op is of this family,
// still to decide); otherwise `fill(n, spec)` reads the fields. Errors name the section.
template <class Spec, class Fill>
void read_family_section(const YAML::Node& root, const std::string& section, KernelProfile& p,
                         std::optional<Spec>& spec, Fill fill) {
  const YAML::Node n = root[section];
  if (!n || n.IsNull()) return;
  if (!n.IsMap()) throw std::runtime_error(section + ": expected a mapping");
  if (n["undecided"]) {
    p.undecided[section] = n["undecided"].as<std::string>();
    spec = Spec{};
    return;
  }
  Spec s;
  try {
    fill(n, s);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(section + ": " + std::string(e.what()));
  }
  spec = s;
}

}  // namespace liger::kernel_dev
