#include "liger/text_escape.h"

namespace liger::util {

namespace {

bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string escape_code_text(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    // A backslash could splice a // comment onto the next line or start an escape sequence; a
    // double quote could close a string: neither survives.
    char next = is_control(c) ? ' ' : c == '"' ? '\'' : c == '\\' ? '/' : static_cast<char>(c);
    if ((next == '/' && !out.empty() && out.back() == '*') || (next == '*' && !out.empty() && out.back() == '/'))
      out += ' ';
    out += next;
  }
  return out;
}

std::string escape_markdown_text(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (is_control(c)) out += ' ';
    else if (c == '|') out += "\\|";
    else out += static_cast<char>(c);
  }
  return out;
}

std::function<std::string(const std::string&)> escaper_for(const std::string& file_name) {
  if (ends_with(file_name, ".md") || ends_with(file_name, ".md.mustache")) return escape_markdown_text;
  return escape_code_text;
}

}  // namespace liger::util
