// Act for kernel-dev: renders every file of a generated Tier-1 op from templates/kernel_dev/ and
// the approved profile. Deterministic: the same profile gives the same files.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "workflows/kernel_dev/profile.h"

namespace liger::kernel_dev {

struct RenderedFile {
  std::string path;           // relative to the repository root
  std::string content;
  std::string template_name;  // templates/kernel_dev/<template_name>
  // true: `content` is one line to insert, in alphabetical order, into the list or table of the
  // existing file `path` (see insert_sorted_line); false: a new file.
  bool insert = false;
  std::string insert_prefix;  // the prefix of the block's lines, for insert_sorted_line
};

// Throws std::invalid_argument when the profile is not a complete Tier-1 profile (naming the
// undecided fields) and std::runtime_error when a template is missing or malformed.
std::vector<RenderedFile> render(const KernelProfile& profile, const std::filesystem::path& templates_dir);

// The kernels that launch their own grid (Tier 1 element-wise, segments, fused linear) take no
// row-kernel launch fields: tiling.rows_per_block must be 0 or 1 (`fixed_rows_per_block` is the
// one the analyser writes, named in the error) and the backward_* fields absent. Throws std::invalid_argument naming the field otherwise, so an edit
// the kernel cannot act on is refused at Act instead of silently ignored.
void require_no_row_launch_fields(const KernelProfile& profile, int fixed_rows_per_block, const std::string& kernel);

// The new files (not inserts) of `files` that already exist under `repo_root`: a generated op
// must not overwrite a library kernel (e.g. the hand-written swiglu) unless the run is --modify.
std::vector<std::string> existing_paths(const std::vector<RenderedFile>& files, const std::filesystem::path& repo_root);

// Inserts `line` into the block of consecutive lines of `text` that start with `prefix` (a
// Markdown table's "| `", a Python list's '    "'), keeping that block alphabetically sorted;
// a line already present is not duplicated. Returns the text unchanged when no such block exists.
std::string insert_sorted_line(const std::string& text, const std::string& line, const std::string& prefix);

}  // namespace liger::kernel_dev
