// Text helpers of autopatch's stages (see workflow_internal.h).
#include <mustache.hpp>

#include <sstream>

#include "liger/error.h"
#include "liger/text_escape.h"
#include "liger/util.h"
#include "liger/workflows.h"
#include "workflows/autopatch/workflow_internal.h"

namespace liger::autopatch::wf {

using kainjow::mustache::mustache;

fs::path skills_dir() { return workflows::data_dir() / "skills" / "autopatch"; }
fs::path templates_dir() { return workflows::data_dir() / "templates" / "autopatch"; }

// A canonical one-line text of a node (flow style whatever style the node was loaded with), so a
// profile read back from disk compares equal to the same profile built in memory.
std::string emit(const YAML::Node& n) {
  if (!n || n.IsNull()) return "null";
  if (n.IsScalar()) return n.Scalar();
  std::string out;
  if (n.IsSequence()) {
    for (const auto& x : n) out += (out.empty() ? "" : ", ") + emit(x);
    return "[" + out + "]";
  }
  for (const auto& kv : n) out += (out.empty() ? "" : ", ") + kv.first.Scalar() + ": " + emit(kv.second);
  return "{" + out + "}";
}

std::string py_str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out + "\"";
}

std::string py_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + py_str(items[i]);
  return out + "]";
}

std::string render(const std::string& name, const data& view) {
  mustache t(util::read_file(templates_dir() / name));
  if (!t.is_valid()) throw Error(ErrorKind::Internal, "template " + name + ": " + t.error_message());
  // Python source, not HTML: {{value}} is made safe for a docstring, a comment or a "string".
  t.set_custom_escape(util::escaper_for(name));
  std::string out = t.render(view);
  if (!t.error_message().empty()) throw Error(ErrorKind::Internal, "template " + name + ": " + t.error_message());
  return out;
}

std::string title_of(const std::string& module) {
  std::string out;
  bool up = true;
  for (char c : module) {
    if (c == '_') { out += ' '; up = true; continue; }
    out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return out;
}

std::string tail(const std::string& text, size_t n) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

std::string read_or_empty(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) ? util::read_file(p) : std::string();
}

std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!util::trim(item).empty()) out.push_back(util::trim(item));
  return out;
}

}  // namespace liger::autopatch::wf
