#include "engine/diff.h"

#include <algorithm>
#include <sstream>

#include "liger/util.h"

namespace liger::engine {

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct Edit {
  char op;  // ' ', '-', '+'
  std::string line;
};

// Longest-common-subsequence table; quadratic, which is fine for generated sources. Very large
// files get a whole-file replacement instead of a slow diff.
std::vector<Edit> edit_script(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<Edit> edits;
  if (a.size() * b.size() > 25'000'000) {
    for (const auto& line : a) edits.push_back({'-', line});
    for (const auto& line : b) edits.push_back({'+', line});
    return edits;
  }
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<unsigned>> lcs(n + 1, std::vector<unsigned>(m + 1, 0));
  for (std::size_t i = n; i-- > 0;)
    for (std::size_t j = m; j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::size_t i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] == b[j]) {
      edits.push_back({' ', a[i]});
      ++i;
      ++j;
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) {
      edits.push_back({'-', a[i++]});
    } else {
      edits.push_back({'+', b[j++]});
    }
  }
  while (i < n) edits.push_back({'-', a[i++]});
  while (j < m) edits.push_back({'+', b[j++]});
  return edits;
}

}  // namespace

std::string unified_diff(const std::string& old_text, const std::string& new_text,
                         const std::string& old_label, const std::string& new_label) {
  if (old_text == new_text) return "";
  const auto edits = edit_script(split_lines(old_text), split_lines(new_text));
  constexpr std::size_t kContext = 3;
  std::ostringstream out;
  out << "--- " << old_label << "\n+++ " << new_label << "\n";

  std::size_t index = 0;
  while (index < edits.size()) {
    // Find the next change, then grow the hunk until a run of > 2*context unchanged lines.
    std::size_t change = index;
    while (change < edits.size() && edits[change].op == ' ') ++change;
    if (change == edits.size()) break;
    std::size_t begin = change >= kContext ? std::max(index, change - kContext) : index;
    std::size_t end = change;
    std::size_t unchanged_run = 0;
    for (std::size_t k = change; k < edits.size(); ++k) {
      if (edits[k].op == ' ') {
        if (++unchanged_run > 2 * kContext) break;
      } else {
        unchanged_run = 0;
        end = k + 1;
      }
    }
    end = std::min(edits.size(), end + kContext);

    // Line numbers of the hunk start in each file.
    std::size_t old_line = 1, new_line = 1;
    for (std::size_t k = 0; k < begin; ++k) {
      if (edits[k].op != '+') ++old_line;
      if (edits[k].op != '-') ++new_line;
    }
    std::size_t old_count = 0, new_count = 0;
    for (std::size_t k = begin; k < end; ++k) {
      if (edits[k].op != '+') ++old_count;
      if (edits[k].op != '-') ++new_count;
    }
    out << "@@ -" << (old_count ? old_line : old_line - 1) << "," << old_count << " +"
        << (new_count ? new_line : new_line - 1) << "," << new_count << " @@\n";
    for (std::size_t k = begin; k < end; ++k) out << edits[k].op << edits[k].line << "\n";
    index = end;
  }
  return out.str();
}

std::string diff_staged_against_tree(const std::filesystem::path& staging_dir,
                                     const std::filesystem::path& tree_root,
                                     const std::vector<std::string>& files) {
  std::string all;
  for (const auto& file : files) {
    const auto tree_path = tree_root / file;
    std::error_code ec;
    const bool exists = std::filesystem::exists(tree_path, ec);
    const std::string old_text = exists ? util::read_file(tree_path) : "";
    const std::string new_text = util::read_file(staging_dir / file);
    all += unified_diff(old_text, new_text, exists ? "a/" + file : "/dev/null", "b/" + file);
  }
  return all;
}

std::string diffstat(const std::string& diff_text, std::size_t bar_width) {
  struct FileStat {
    std::string path;
    std::size_t added = 0, removed = 0;
  };
  std::vector<FileStat> files;
  bool in_header = false;
  for (const auto& line : split_lines(diff_text)) {
    if (line.rfind("--- ", 0) == 0) {
      in_header = true;
      continue;
    }
    if (in_header && line.rfind("+++ ", 0) == 0) {
      std::string path = line.substr(4);
      if (path.rfind("b/", 0) == 0) path = path.substr(2);
      files.push_back({path});
      in_header = false;
      continue;
    }
    in_header = false;
    if (files.empty() || line.empty()) continue;
    if (line[0] == '+') ++files.back().added;
    if (line[0] == '-') ++files.back().removed;
  }
  if (files.empty()) return "";
  std::size_t path_width = 0, most = 0, added = 0, removed = 0;
  for (const auto& f : files) {
    path_width = std::max(path_width, f.path.size());
    most = std::max(most, f.added + f.removed);
    added += f.added;
    removed += f.removed;
  }
  const std::size_t count_width = std::to_string(most).size();
  std::string out;
  for (const auto& f : files) {
    const std::size_t total = f.added + f.removed;
    // scaled like git: the largest change fills the bar, any change shows at least one mark
    auto scale = [&](std::size_t n) { return most <= bar_width ? n : (n == 0 ? 0 : std::max<std::size_t>(1, n * bar_width / most)); };
    std::string count = std::to_string(total);
    out += " " + f.path + std::string(path_width - f.path.size(), ' ') + " | " +
           std::string(count_width - count.size(), ' ') + count + " " + std::string(scale(f.added), '+') +
           std::string(scale(f.removed), '-') + "\n";
  }
  out += " " + std::to_string(files.size()) + (files.size() == 1 ? " file changed, " : " files changed, ") +
         std::to_string(added) + (added == 1 ? " insertion(+), " : " insertions(+), ") + std::to_string(removed) +
         (removed == 1 ? " deletion(-)\n" : " deletions(-)\n");
  return out;
}

std::string colorize_diff(const std::string& diff_text) {
  std::string out;
  for (const auto& line : split_lines(diff_text)) {
    const char* colour = "";
    if (line.rfind("--- ", 0) == 0 || line.rfind("+++ ", 0) == 0) colour = "\033[1m";
    else if (line.rfind("@@", 0) == 0) colour = "\033[36m";
    else if (!line.empty() && line[0] == '-') colour = "\033[31m";
    else if (!line.empty() && line[0] == '+') colour = "\033[32m";
    out += *colour ? std::string(colour) + line + "\033[0m\n" : line + "\n";
  }
  return out;
}

}  // namespace liger::engine
