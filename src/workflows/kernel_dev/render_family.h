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

// The text of a template file (an error naming the path when it is missing).
std::string read_template(const std::filesystem::path& path);

// Upper case (the op's C macro prefix).
std::string family_upper(std::string s);

// Profile text placed in comments, docstrings and Markdown cells: one line that cannot close any
// of them (as render.cpp's free_text). `quotes` also turns '"' into '\'' for text that lands
// inside a string literal of a template.
std::string family_free_text(const std::string& text, bool quotes = false);

// `text` as a C string literal.
std::string family_c_string(const std::string& text);

// The context entries every family sets from the profile's identity: tier, op, OP, Camel,
// display (free text, `quotes` as family_free_text), closest_kernel, python_module.
kainjow::mustache::data family_context(const KernelProfile& p, const std::string& tier, bool quotes);

// One entry of the `tolerances` list: dtype, dtype_enum and the C brace initialiser (whose reason
// is `reason`, already made free text). Throws std::invalid_argument for a dtype the library lacks.
kainjow::mustache::object family_tolerance(const ToleranceSpec& t, const std::string& reason);

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
