// The rendering shared by kernel-dev's op families that have a template folder of their own
// (segments: templates/kernel_dev/segment/, fused linear losses: .../fused_linear/): the checks
// every family makes before rendering and the one list of files a generated op consists of.
#pragma once

#include <mustache.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "workflows/kernel_dev/profile.h"
#include "workflows/kernel_dev/render.h"

namespace liger::kernel_dev {

// Throws std::invalid_argument naming every undecided field, every problem of the family's own
// section (`problems`), or the missing tolerances.
void require_renderable(const KernelProfile& p, const std::vector<std::string>& problems);

// The op's files from `family` (a folder under templates_dir): header, kernel, tuning table,
// fp64 reference and its tests, GPU tests, benchmark, Python op and doc page, plus the shared
// registration inserts (docs index, functional.py exports), each rendered with `data`.
std::vector<RenderedFile> render_family_files(const KernelProfile& p, const std::string& family,
                                              const kainjow::mustache::data& data,
                                              const std::filesystem::path& templates_dir);

}  // namespace liger::kernel_dev
