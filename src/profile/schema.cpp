#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "liger/error.h"
#include "util/input_limits.h"
#include "liger/profile.h"
#include "liger/util.h"

namespace liger::profile {

enum class ValueType { String, Int, Number, Bool, List, Map, Any };

struct SchemaNode {
  std::vector<ValueType> types;  // empty = any
  bool required = false;
  std::vector<std::string> allowed;
  std::optional<double> minimum;
  std::optional<double> maximum;
  std::vector<std::pair<std::string, std::shared_ptr<const SchemaNode>>> fields;  // in order
  bool open = false;
  std::shared_ptr<const SchemaNode> items;
  std::shared_ptr<const SchemaNode> values;
  std::string description;
  bool readonly = false;        // a record, not a decision: edits are refused with `reason`
  std::string readonly_reason;
  // Constraints on strings that become names, paths or code (issue 15): a whole-value regular
  // expression (ECMAScript) and its text for the error message, a length bound, and the
  // repository-relative path rule with the folders the workflow owns.
  std::optional<std::regex> pattern;
  std::string pattern_text;
  std::optional<std::size_t> max_length;
  bool relative_path = false;
  std::vector<std::string> under;
  std::optional<std::regex> key_pattern;  // map keys (open maps and `values:` maps)
  std::string key_pattern_text;
};

namespace {

const char* type_name(ValueType type) {
  switch (type) {
    case ValueType::String: return "string";
    case ValueType::Int: return "int";
    case ValueType::Number: return "number";
    case ValueType::Bool: return "bool";
    case ValueType::List: return "list";
    case ValueType::Map: return "map";
    case ValueType::Any: return "any";
  }
  return "?";
}

std::string where(const std::string& origin, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0) return origin;
  return origin + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

Error schema_error(const std::string& origin, const YAML::Node& node, const std::string& what) {
  return Error(ErrorKind::Internal, where(origin, node) + ": invalid profile schema: " + what,
               "the schema files under skills/ are part of liger-agent; fix the schema");
}

ValueType parse_type(const std::string& origin, const YAML::Node& node) {
  static const std::map<std::string, ValueType> names = {
      {"string", ValueType::String}, {"int", ValueType::Int},   {"number", ValueType::Number},
      {"bool", ValueType::Bool},     {"list", ValueType::List}, {"map", ValueType::Map},
      {"any", ValueType::Any}};
  if (!node.IsScalar()) throw schema_error(origin, node, "a type must be a name");
  auto it = names.find(node.Scalar());
  if (it == names.end())
    throw schema_error(origin, node, "unknown type '" + node.Scalar() +
                                         "' (allowed: string, int, number, bool, list, map, any)");
  return it->second;
}

std::shared_ptr<const SchemaNode> parse_node(const std::string& origin, const YAML::Node& yaml) {
  static const std::set<std::string> known = {"type",    "required",   "enum", "min",   "max",         "fields",
                                              "open",    "items",      "values", "description", "readonly", "reason",
                                              "pattern", "max_length", "path", "under", "key_pattern"};
  auto node = std::make_shared<SchemaNode>();
  if (yaml.IsScalar()) {  // shorthand: `name: string`
    node->types.push_back(parse_type(origin, yaml));
    return node;
  }
  if (!yaml.IsMap()) throw schema_error(origin, yaml, "a schema node must be a map or a type name");
  for (const auto& entry : yaml) {
    const std::string key = entry.first.Scalar();
    if (!known.count(key))
      throw schema_error(origin, entry.first, "unknown schema key '" + key + "'");
  }
  if (yaml["type"]) {
    if (yaml["type"].IsSequence()) {
      for (const auto& t : yaml["type"]) node->types.push_back(parse_type(origin, t));
    } else {
      node->types.push_back(parse_type(origin, yaml["type"]));
    }
  }
  std::erase(node->types, ValueType::Any);
  if (yaml["required"]) node->required = yaml["required"].as<bool>();
  if (yaml["open"]) node->open = yaml["open"].as<bool>();
  if (yaml["description"]) node->description = yaml["description"].as<std::string>();
  if (yaml["readonly"]) node->readonly = yaml["readonly"].as<bool>();
  if (yaml["reason"]) node->readonly_reason = yaml["reason"].as<std::string>();
  if (node->readonly && node->readonly_reason.empty())
    throw schema_error(origin, yaml, "a readonly field needs a `reason:` (shown to whoever edits it)");
  if (yaml["min"]) node->minimum = yaml["min"].as<double>();
  if (yaml["max"]) node->maximum = yaml["max"].as<double>();
  if (yaml["enum"]) {
    if (!yaml["enum"].IsSequence()) throw schema_error(origin, yaml["enum"], "enum must be a list");
    for (const auto& v : yaml["enum"]) node->allowed.push_back(v.Scalar());
  }
  if (yaml["fields"]) {
    if (!yaml["fields"].IsMap()) throw schema_error(origin, yaml["fields"], "fields must be a map");
    for (const auto& entry : yaml["fields"])
      node->fields.emplace_back(entry.first.Scalar(), parse_node(origin, entry.second));
    if (node->types.empty()) node->types.push_back(ValueType::Map);
  }
  if (yaml["items"]) {
    node->items = parse_node(origin, yaml["items"]);
    if (node->types.empty()) node->types.push_back(ValueType::List);
  }
  if (yaml["values"]) node->values = parse_node(origin, yaml["values"]);
  auto compile = [&](const YAML::Node& text) {
    if (!text.IsScalar()) throw schema_error(origin, text, "a pattern must be a string");
    try {
      return std::regex(text.Scalar(), std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw schema_error(origin, text, "pattern '" + text.Scalar() + "' is not a valid regular expression: " + e.what());
    }
  };
  if (yaml["pattern"]) {
    node->pattern = compile(yaml["pattern"]);
    node->pattern_text = yaml["pattern"].Scalar();
  }
  if (yaml["key_pattern"]) {
    node->key_pattern = compile(yaml["key_pattern"]);
    node->key_pattern_text = yaml["key_pattern"].Scalar();
  }
  if (yaml["max_length"]) node->max_length = yaml["max_length"].as<std::size_t>();
  if (yaml["path"]) {
    if (!yaml["path"].IsScalar() || yaml["path"].Scalar() != "relative")
      throw schema_error(origin, yaml["path"], "path: the only path rule is `relative` (repository-relative)");
    node->relative_path = true;
  }
  if (yaml["under"]) {
    if (!node->relative_path) throw schema_error(origin, yaml["under"], "under: needs `path: relative`");
    if (!yaml["under"].IsSequence()) throw schema_error(origin, yaml["under"], "under must be a list of folders");
    for (const auto& dir : yaml["under"]) {
      std::string folder = dir.Scalar();
      while (!folder.empty() && folder.back() == '/') folder.pop_back();
      node->under.push_back(folder);
    }
  }
  return node;
}

// Why `text` is not a normalised repository-relative path, or "" when it is one. Checked
// lexically: the rule is about what the profile says, not about what exists on disk.
std::string relative_path_problem(const std::string& text) {
  if (text.empty()) return "an empty path";
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7f) return "a control character in the path";
  if (text.find('\\') != std::string::npos) return "a backslash (paths use '/')";
  if (text.front() == '/' || text.front() == '~') return "an absolute path";
  if (text.back() == '/') return "a trailing '/'";
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find('/', begin);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(begin, end - begin);
    if (part.empty()) return "an empty path component ('//')";
    if (part == "..") return "a '..' component (the path must stay inside the repository)";
    if (part == ".") return "a '.' component (the path is not normalised)";
    begin = end + 1;
  }
  return {};
}

bool parses_as_int(const std::string& text) {
  try {
    std::size_t used = 0;
    std::stoll(text, &used);
    return used == text.size();
  } catch (...) {
    return false;
  }
}

std::optional<double> as_number(const std::string& text) {
  try {
    std::size_t used = 0;
    double value = std::stod(text, &used);
    if (used == text.size()) return value;
  } catch (...) {
  }
  return std::nullopt;
}

bool matches(const YAML::Node& value, ValueType type) {
  switch (type) {
    case ValueType::String: return value.IsScalar();
    case ValueType::Int: return value.IsScalar() && parses_as_int(value.Scalar());
    case ValueType::Number: return value.IsScalar() && as_number(value.Scalar()).has_value();
    case ValueType::Bool: {
      if (!value.IsScalar()) return false;
      bool ignored;
      return YAML::convert<bool>::decode(value, ignored);
    }
    case ValueType::List: return value.IsSequence();
    case ValueType::Map: return value.IsMap();
    case ValueType::Any: return true;
  }
  return false;
}

// A value quoted for an error message: control characters are shown as escapes, so a value
// with a newline in it reads as one line and cannot forge further lines of the message.
std::string quoted(const std::string& value) {
  std::string text = value.size() > 60 ? value.substr(0, 57) : value;
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '"' || c == '\\') out += std::string("\\") + static_cast<char>(c);
    else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + (value.size() > 60 ? "...\"" : "\"");
}

std::string describe(const YAML::Node& value) {
  if (!value || value.IsNull()) return "nothing";
  if (value.IsSequence()) return "a list of " + std::to_string(value.size());
  if (value.IsMap()) return "a map";
  return quoted(value.Scalar());
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

class Validator {
 public:
  ValidationReport report;

  void check(const SchemaNode& schema, const YAML::Node& value, const std::string& path,
             const YAML::Node& located_at) {
    if (is_undecided(value)) {
      add(report.undecided, path, value, "", "", value["undecided"].Scalar());
      return;
    }
    if (!value || value.IsNull()) {
      if (schema.required)
        add(report.errors, path, located_at, "nothing", expected_text(schema), "required field is empty");
      return;
    }
    if (!schema.types.empty() &&
        std::none_of(schema.types.begin(), schema.types.end(), [&](ValueType t) { return matches(value, t); })) {
      add(report.errors, path, value, describe(value), expected_text(schema), "wrong type");
      return;
    }
    if (value.IsScalar()) check_scalar(schema, value, path);
    if (value.IsMap()) check_map(schema, value, path);
    if (value.IsSequence() && schema.items) {
      for (std::size_t i = 0; i < value.size(); ++i)
        check(*schema.items, value[i], path + "[" + std::to_string(i) + "]", value[i]);
    }
  }

 private:
  static std::string expected_text(const SchemaNode& schema) {
    if (!schema.allowed.empty()) return "one of: " + join(schema.allowed, ", ");
    std::vector<std::string> names;
    for (ValueType t : schema.types) names.push_back(type_name(t));
    return names.empty() ? "any value" : join(names, " or ");
  }

  void check_scalar(const SchemaNode& schema, const YAML::Node& value, const std::string& path) {
    const std::string& text = value.Scalar();
    if (!schema.allowed.empty() &&
        std::find(schema.allowed.begin(), schema.allowed.end(), text) == schema.allowed.end()) {
      add(report.errors, path, value, describe(value), expected_text(schema), "value not allowed");
    }
    if (schema.minimum || schema.maximum) {
      auto number = as_number(text);
      if (number && ((schema.minimum && *number < *schema.minimum) ||
                     (schema.maximum && *number > *schema.maximum))) {
        std::ostringstream range;
        range << "between " << (schema.minimum ? std::to_string(*schema.minimum) : "-inf") << " and "
              << (schema.maximum ? std::to_string(*schema.maximum) : "inf");
        add(report.errors, path, value, describe(value), range.str(), "out of range");
      }
    }
    if (schema.max_length && text.size() > *schema.max_length) {
      add(report.errors, path, value, describe(value) + " (" + std::to_string(text.size()) + " bytes)",
          "at most " + std::to_string(*schema.max_length) + " bytes", "too long");
    }
    if (schema.pattern && !std::regex_match(text, *schema.pattern)) {
      add(report.errors, path, value, describe(value), "a value matching the pattern " + schema.pattern_text,
          "does not match the pattern");
    }
    if (schema.relative_path) {
      std::string problem = relative_path_problem(text);
      if (problem.empty() && !schema.under.empty() &&
          std::none_of(schema.under.begin(), schema.under.end(),
                       [&](const std::string& dir) { return text.rfind(dir + "/", 0) == 0; })) {
        problem = "a path outside the folders this workflow writes";
      }
      if (!problem.empty()) {
        std::string expected = "a repository-relative path without '..'";
        if (!schema.under.empty()) expected += " under " + join(schema.under, "/, ") + "/";
        add(report.errors, path, value, describe(value), expected, "not an allowed path: " + problem);
      }
    }
  }

  void check_map(const SchemaNode& schema, const YAML::Node& value, const std::string& path) {
    auto child_path = [&](const std::string& name) { return path.empty() ? name : path + "." + name; };
    for (const auto& [name, child] : schema.fields) {
      const YAML::Node field = value[name];
      if (!field) {
        if (child->required)
          add(report.errors, child_path(name), value, "nothing", expected_text(*child), "required field is missing");
        continue;
      }
      check(*child, field, child_path(name), field);
    }
    if (schema.key_pattern) {
      for (const auto& entry : value) {
        const std::string name = entry.first.Scalar();
        if (!std::regex_match(name, *schema.key_pattern))
          add(report.errors, child_path(name), entry.first, quoted(name),
              "a key matching the pattern " + schema.key_pattern_text, "key does not match the pattern");
      }
    }
    if (schema.open && !schema.values) return;
    for (const auto& entry : value) {
      const std::string name = entry.first.Scalar();
      bool listed = std::any_of(schema.fields.begin(), schema.fields.end(),
                                [&](const auto& field) { return field.first == name; });
      if (listed) continue;
      if (schema.values) {
        check(*schema.values, entry.second, child_path(name), entry.second);
      } else if (!schema.fields.empty()) {
        std::vector<std::string> names;
        for (const auto& field : schema.fields) names.push_back(field.first);
        add(report.errors, child_path(name), entry.first, "\"" + name + "\"",
            "one of the fields: " + join(names, ", "), "unknown field");
      }
    }
  }

  static void add(std::vector<ValidationIssue>& list, const std::string& path, const YAML::Node& at,
                  std::string found, std::string expected, std::string message) {
    ValidationIssue issue;
    issue.path = path;
    if (at) {
      const YAML::Mark mark = at.Mark();
      if (mark.line >= 0) {
        issue.line = mark.line + 1;
        issue.column = mark.column + 1;
      }
    }
    issue.found = std::move(found);
    issue.expected = std::move(expected);
    issue.message = std::move(message);
    list.push_back(std::move(issue));
  }
};

}  // namespace

std::string ValidationIssue::format(const std::string& file) const {
  std::string text = file;
  if (line > 0) text += ":" + std::to_string(line) + ":" + std::to_string(column);
  text += ": " + (path.empty() ? std::string("(document)") : path) + ": " + message;
  if (!found.empty()) text += "; found " + found;
  if (!expected.empty()) text += "; allowed: " + expected;
  return text;
}

std::string ValidationReport::format_errors(const std::string& file) const {
  std::string text;
  for (const auto& issue : errors) text += issue.format(file) + "\n";
  return text;
}

std::string ValidationReport::format_undecided(const std::string& file) const {
  std::string text;
  for (const auto& issue : undecided) {
    text += file + (issue.line > 0 ? ":" + std::to_string(issue.line) : "") + ": " + issue.path +
            ": undecided: " + issue.message + "\n";
  }
  return text;
}

Schema Schema::parse(const std::string& yaml_text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw Error(ErrorKind::Internal,
                origin + ":" + std::to_string(e.mark.line + 1) + ": invalid schema YAML: " + e.msg,
                "fix the schema file");
  }
  Schema schema;
  schema.origin_ = origin;
  schema.root_ = parse_node(origin, root);
  return schema;
}

Schema Schema::load_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw Error(ErrorKind::Internal, "profile schema '" + path.string() + "' not found",
                "the skills/ directory ships with liger-agent; run from a complete checkout "
                "or reinstall");
  }
  return parse(util::read_file(path), path.string());
}

ValidationReport Schema::validate(const YAML::Node& document) const {
  Validator validator;
  validator.check(*root_, document, "", document);
  return validator.report;
}

namespace {

bool present(const YAML::Node& node) { return node && node.IsDefined() && !node.IsNull(); }

std::string text_of(const YAML::Node& node) { return present(node) ? YAML::Dump(node) : ""; }

void collect_readonly_changes(const SchemaNode& schema, const YAML::Node& before, const YAML::Node& after,
                              const std::string& path, std::vector<ValidationIssue>& out) {
  if (present(before) && is_undecided(before)) return;  // deciding a field is not editing it
  if (schema.readonly) {
    // Adding or removing the field is an edit too.
    if (text_of(before) != text_of(after)) {
      ValidationIssue issue;
      issue.path = path;
      if (present(after) && after.Mark().line >= 0) {
        issue.line = after.Mark().line + 1;
        issue.column = after.Mark().column + 1;
      }
      issue.found = present(after) ? text_of(after) : "nothing";
      issue.expected = present(before) ? text_of(before) : "nothing";
      issue.message = "read-only field was edited: " + schema.readonly_reason;
      out.push_back(issue);
    }
    return;
  }
  const bool before_map = present(before) && before.IsMap(), after_map = present(after) && after.IsMap();
  if (!schema.fields.empty() && (before_map || after_map)) {
    for (const auto& [name, field] : schema.fields)
      collect_readonly_changes(*field, before_map ? before[name] : YAML::Node(), after_map ? after[name] : YAML::Node(),
                               path.empty() ? name : path + "." + name, out);
  } else if (schema.items && present(before) && present(after) && before.IsSequence() && after.IsSequence()) {
    // Items present on both sides; a new item is new content, not an edit of a recorded one.
    for (std::size_t i = 0; i < before.size() && i < after.size(); ++i)
      collect_readonly_changes(*schema.items, before[i], after[i], path + "[" + std::to_string(i) + "]", out);
  }
}

// A plain scalar that yaml-cpp wrote from a double with 17 significant digits
// ("0.94999999999999996") in the shortest text that reads back as the same double ("0.95").
void shorten_doubles(YAML::Node node) {
  if (node.IsMap()) {
    for (auto entry : node) shorten_doubles(entry.second);
  } else if (node.IsSequence()) {
    for (auto item : node) shorten_doubles(item);
  } else if (node.IsScalar() && node.Tag() != "!") {  // "!": a quoted string stays as written
    const std::string& text = node.Scalar();
    if (text.size() < 8 || text.find_first_not_of("0123456789.eE+-") != std::string::npos) return;
    if (text.find('.') == std::string::npos && text.find_first_of("eE") == std::string::npos) return;
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) return;
    char buffer[64];
    auto [last, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
    if (error != std::errc()) return;
    std::string shortest(buffer, last);
    if (shortest.find_first_of(".eEn") == std::string::npos) shortest += ".0";  // still reads as a float
    if (shortest.size() < text.size()) node = shortest;
  }
}

}  // namespace

std::vector<ValidationIssue> Schema::readonly_changes(const YAML::Node& before, const YAML::Node& after) const {
  std::vector<ValidationIssue> issues;
  collect_readonly_changes(*root_, before, after, "", issues);
  return issues;
}

bool is_undecided(const YAML::Node& node) {
  return node && node.IsMap() && node.size() == 1 && node["undecided"] && node["undecided"].IsScalar();
}

YAML::Node parse_yaml(const std::string& text, const std::string& origin) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(ErrorKind::Usage,
                origin + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                    ": invalid YAML: " + e.msg,
                "fix the YAML syntax at that line");
  }
}

YAML::Node load_yaml_file(const std::filesystem::path& path) {
  // Checked before reading: a profile is a few KiB, and yaml-cpp needs many times a document's
  // size in memory.
  util::check_file_size(path, path.string(), util::kMaxProfileBytes,
                        "a profile (or other YAML document the engine loads) is a few KiB; restore it from the run's "
                        "history or regenerate it");
  return parse_yaml(util::read_file(path), path.string());
}

std::string to_yaml(const YAML::Node& node, const std::string& header_comment) {
  YAML::Node shortened = YAML::Clone(node);
  shorten_doubles(shortened);
  YAML::Emitter out;
  out.SetIndent(2);
  out << shortened;
  std::string text;
  std::istringstream lines(header_comment);
  for (std::string line; std::getline(lines, line);) text += "# " + line + "\n";
  text += out.c_str();
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

}  // namespace liger::profile
