#include "liger/review.h"

#include <algorithm>

#include "liger/profile.h"

namespace liger::review {

namespace {

std::string flow(const YAML::Node& node) {
  if (!node) return "-";
  if (profile::is_undecided(node)) return "UNDECIDED (" + node["undecided"].as<std::string>() + ")";
  if (node.IsScalar()) return node.Scalar();
  if (node.IsNull()) return "-";
  std::string out;
  if (node.IsSequence()) {
    for (const auto& item : node) out += (out.empty() ? "" : ", ") + flow(item);
    return "[" + out + "]";
  }
  for (const auto& entry : node) out += (out.empty() ? "" : ", ") + entry.first.Scalar() + ": " + flow(entry.second);
  return "{" + out + "}";
}

}  // namespace

std::string inline_text(const YAML::Node& node, std::size_t max_chars) {
  std::string text = flow(node);
  std::replace(text.begin(), text.end(), '\n', ' ');
  if (text.size() > max_chars && max_chars > 3) text = text.substr(0, max_chars - 3) + "...";
  return text;
}

std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      out += (c ? " | " : "") + cell;
      if (c + 1 < width.size()) out += std::string(width[c] - cell.size(), ' ');
    }
    return out + "\n";
  };
  std::string out = line(header);
  std::string rule;
  for (std::size_t c = 0; c < width.size(); ++c) rule += (c ? "-+-" : "") + std::string(width[c], '-');
  out += rule + "\n";
  for (const auto& row : rows) out += line(row);
  return out;
}

std::string field_line(const std::string& label, const std::string& value, std::size_t label_width) {
  std::string head = label + ":";
  if (head.size() < label_width) head += std::string(label_width - head.size(), ' ');
  else head += " ";
  std::string out = head;
  for (char c : value) {
    out += c;
    if (c == '\n') out += std::string(head.size(), ' ');
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out + "\n";
}

}  // namespace liger::review
