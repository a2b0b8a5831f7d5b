// The checkout as committed, for tests that render against the library's files. The main job and
// every workflow write into the checkout they run in (kernel-dev adds an op to ops.yaml, the
// headers and functional.py; autopatch adds registry lines; kernel-perf edits tuning tables), and
// the suite must pass after any of them: tests take their baseline from git HEAD, not from the
// working tree. A source that is not a git checkout (an unpacked archive) falls back to the
// working tree, which is then the committed state.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace liger::testing {

namespace committed_detail {

inline std::string quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// git as the tests' user sees it; safe.directory on the command line because CI may run as a
// user other than the clone's owner, and git then refuses the repository.
inline std::string git(const std::filesystem::path& source) {
  return "git -c safe.directory='*' -C " + quote(source.string());
}

inline bool run_quietly(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

}  // namespace committed_detail

// True when `source` is the top of a git checkout whose HEAD can be read.
inline bool is_git_checkout(const std::filesystem::path& source) {
  static const bool has_git = committed_detail::run_quietly("git --version");
  if (!has_git) return false;
  return std::filesystem::exists(source / ".git") &&
         committed_detail::run_quietly(committed_detail::git(source) + " rev-parse --verify HEAD");
}

// Copies repository-relative files or directories of `source` as committed into `dest`
// (created); files the working tree has and HEAD lacks are not copied.
inline void copy_committed(const std::filesystem::path& source, const std::vector<std::string>& paths,
                           const std::filesystem::path& dest) {
  namespace fs = std::filesystem;
  fs::create_directories(dest);
  if (!is_git_checkout(source)) {
    for (const auto& rel : paths) {
      fs::create_directories((dest / rel).parent_path());
      fs::copy(source / rel, dest / rel, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    }
    return;
  }
  std::string command = committed_detail::git(source) + " archive --format=tar HEAD --";
  for (const auto& rel : paths) command += " " + committed_detail::quote(rel);
  command += " | tar -xf - -C " + committed_detail::quote(dest.string());
  // bash for pipefail: a failed `git archive` must not pass as an empty tar.
  if (std::system(("bash -c " + committed_detail::quote("set -o pipefail; " + command)).c_str()) != 0)
    throw std::runtime_error("could not copy the committed files of " + source.string() + ": " + command);
}

// The committed text of one repository-relative file.
inline std::string committed_text(const std::filesystem::path& source, const std::string& rel) {
  namespace fs = std::filesystem;
  std::string pattern = (fs::temp_directory_path() / "liger-committed-XXXXXX").string();
  const char* made = ::mkdtemp(pattern.data());
  if (!made) throw std::runtime_error("mkdtemp failed");
  const fs::path dir = made;
  copy_committed(source, {rel}, dir);
  std::ifstream in(dir / rel);
  std::stringstream text;
  text << in.rdbuf();
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!in) throw std::runtime_error("no committed " + rel + " in " + source.string());
  return text.str();
}

}  // namespace liger::testing
