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

// A git-style diffstat of a unified diff: one line per file ("path | 12 +++---"), then
// "N files changed, I insertions(+), D deletions(-)". "" for an empty diff.
std::string diffstat(const std::string& diff_text, std::size_t bar_width = 40);

// The diff with ANSI colours (headers bold, hunks cyan, deletions red, additions green), for a
// terminal only.
std::string colorize_diff(const std::string& diff_text);

}  // namespace liger::engine
