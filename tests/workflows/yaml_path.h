// Test helper: a node of a profile document addressed by a path such as "a.b[0].c".
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace liger::testing {

// The node at `path` (created if missing), so a test can edit one field of a loaded profile.
inline YAML::Node yaml_at(YAML::Node root, const std::string& path) {
  YAML::Node node = root;
  std::string rest = path;
  while (!rest.empty()) {
    const std::size_t end = rest.find_first_of(".[");
    const std::string key = rest.substr(0, end);
    rest = end == std::string::npos ? "" : rest.substr(end);
    if (!key.empty()) node.reset(node[key]);
    while (!rest.empty() && rest[0] == '[') {
      const std::size_t close = rest.find(']');
      node.reset(node[std::stoi(rest.substr(1, close - 1))]);
      rest = rest.substr(close + 1);
    }
    if (!rest.empty() && rest[0] == '.') rest = rest.substr(1);
  }
  return node;
}

}  // namespace liger::testing
