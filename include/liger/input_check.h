// Checks of what a user hands the CLI, made before a run directory exists (issue 15): a bad
// input is a usage error (exit 2) that names the problem and the fix, never a parked run, a
// half-made run directory or "this is a bug in liger-agent".
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace liger::input {

namespace fs = std::filesystem;

// True when `text` is well-formed UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF).
bool valid_utf8(std::string_view text);

// A positional argument that is either a path to a regular file or inline text.
struct Argument {
  bool is_file = false;
  fs::path file;     // when is_file
  std::string text;  // when !is_file: the argument itself
};

// Decides what `arg` is without ever failing on it as a path (an argument longer than a file
// name is text, not a "File name too long" error). Throws liger::Error (Usage) naming `what`
// ("the kernel-dev input") when the argument names a directory, a FIFO, a device or an
// unreadable file, when inline text is not UTF-8, or when it is longer than `max_text_bytes`
// (`hint_long` says what to do instead).
Argument classify_argument(const std::string& arg, const std::string& what, std::size_t max_text_bytes,
                           const std::string& hint_long);

// Throws liger::Error (Usage) unless `tree` is an existing directory holding every one of
// `markers` (repository-relative paths a checkout of the kernel library has). `flag` is how the
// user named it ("--tree").
void require_checkout(const fs::path& tree, const std::vector<std::string>& markers, const std::string& flag);

}  // namespace liger::input
