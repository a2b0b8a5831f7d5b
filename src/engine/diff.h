// Unified diffs of staged files against the tree, shown at the Act checkpoint.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace liger::engine {

// A unified diff (3 lines of context) between two texts; "" when they are equal.
std::string unified_diff(const std::string& old_text, const std::string& new_text,
                         const std::string& old_label, const std::string& new_label);

// The diff of every staged file against the same path in the tree (new files diff against
// /dev/null), concatenated in path order.
std::string diff_staged_against_tree(const std::filesystem::path& staging_dir,
                                     const std::filesystem::path& tree_root,
                                     const std::vector<std::string>& files);

}  // namespace liger::engine
