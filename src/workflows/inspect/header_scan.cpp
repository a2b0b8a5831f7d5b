#include "workflows/inspect/header_scan.h"

#include <regex>

#include "liger/util.h"

namespace liger::workflows::inspect {

namespace {

// Comments and preprocessor lines become spaces (newlines kept) so offsets still map to lines.
std::string blank_out_non_code(const std::string& source) {
  std::string code = source;
  std::size_t i = 0;
  bool line_start = true;
  while (i < code.size()) {
    if (code.compare(i, 2, "/*") == 0) {
      std::size_t end = code.find("*/", i + 2);
      end = end == std::string::npos ? code.size() : end + 2;
      for (std::size_t k = i; k < end; ++k)
        if (code[k] != '\n') code[k] = ' ';
      i = end;
      continue;
    }
    if (code.compare(i, 2, "//") == 0) {
      while (i < code.size() && code[i] != '\n') code[i++] = ' ';
      continue;
    }
    if (line_start && code[i] == '#') {
      // A directive runs to the end of the line, continued by a trailing backslash.
      while (i < code.size() && !(code[i] == '\n' && code[i - 1] != '\\')) {
        if (code[i] != '\n') code[i] = ' ';
        ++i;
      }
      continue;
    }
    if (code[i] == '\n') line_start = true;
    else if (!std::isspace(static_cast<unsigned char>(code[i]))) line_start = false;
    ++i;
  }
  return code;
}

std::string collapse_spaces(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  return util::trim(out);
}

CParameter parse_parameter(const std::string& text) {
  const std::string param = collapse_spaces(text);
  static const std::regex named(R"(^(.*[\s\*&])([A-Za-z_]\w*)(\s*\[[^\]]*\])?$)");
  std::smatch match;
  if (std::regex_match(param, match, named)) {
    std::string type = collapse_spaces(match[1]);
    // "int64_t" alone matches the pattern with an empty type; keep it as an unnamed parameter.
    if (!type.empty()) {
      // Attach pointer stars to the type the way the headers write them ("const void* a").
      std::string cleaned;
      for (std::size_t k = 0; k < type.size(); ++k) {
        if (type[k] == ' ' && k + 1 < type.size() && type[k + 1] == '*') continue;
        cleaned += type[k];
      }
      return {cleaned + (match[3].matched ? std::string(match[3]) : ""), match[2]};
    }
  }
  return {param, ""};
}

}  // namespace

std::vector<CFunction> scan_c_declarations(const std::string& source) {
  const std::string code = blank_out_non_code(source);
  std::vector<CFunction> functions;
  static const std::regex extern_c(R"(extern\s*"C"\s*\{)");
  static const std::regex declaration(R"(^([\s\S]*?)\b([A-Za-z_]\w*)\s*\(([\s\S]*)\)\s*$)");

  for (auto it = std::sregex_iterator(code.begin(), code.end(), extern_c); it != std::sregex_iterator(); ++it) {
    std::size_t pos = static_cast<std::size_t>(it->position() + it->length());
    int depth = 1;
    std::size_t statement_start = pos;
    while (pos < code.size() && depth > 0) {
      char c = code[pos];
      if (c == '{') ++depth;
      if (c == '}') --depth;
      if (depth == 0) break;
      if (c == ';' && depth == 1) {
        const std::string statement = code.substr(statement_start, pos - statement_start);
        const std::string flat = collapse_spaces(statement);
        std::smatch match;
        bool is_type = flat.starts_with("typedef") || flat.starts_with("struct") || flat.starts_with("enum") ||
                       flat.starts_with("union");
        if (!is_type && std::regex_match(statement, match, declaration)) {
          CFunction function;
          function.name = match[2];
          std::string return_type = collapse_spaces(match[1]);
          for (const char* macro : {"LIGER_API ", "extern "})
            if (return_type.starts_with(macro)) return_type = return_type.substr(std::string(macro).size());
          function.return_type = return_type;
          const std::size_t name_offset = statement_start + static_cast<std::size_t>(match.position(2));
          function.line = 1 + static_cast<int>(std::count(code.begin(), code.begin() + name_offset, '\n'));
          const std::string params = match[3];
          int paren = 0;
          std::string current;
          for (char p : params) {
            if (p == '(') ++paren;
            if (p == ')') --paren;
            if (p == ',' && paren == 0) {
              function.parameters.push_back(parse_parameter(current));
              current.clear();
            } else {
              current += p;
            }
          }
          if (!collapse_spaces(current).empty() && collapse_spaces(current) != "void")
            function.parameters.push_back(parse_parameter(current));
          functions.push_back(std::move(function));
        }
        statement_start = pos + 1;
      }
      if (c == '}' && depth == 1) statement_start = pos + 1;  // after a nested block, e.g. a typedef enum
      ++pos;
    }
  }
  return functions;
}

std::vector<CFunction> scan_header_file(const std::filesystem::path& header) {
  return scan_c_declarations(util::read_file(header));
}

}  // namespace liger::workflows::inspect
