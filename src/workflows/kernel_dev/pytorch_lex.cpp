// Python logical lines and tokens for the PyTorch translator (pytorch_detail.h).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <regex>

#include "workflows/kernel_dev/pytorch_detail.h"

namespace liger::kernel_dev::torch_detail {

namespace {

// --------------------------------------------------------------------------------------------
// Logical lines: physical lines joined while brackets are open or a line ends in '\'.

std::string strip_comment(const std::string& line) {
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      return line.substr(0, i);
    }
  }
  return line;
}

// Python's lexical nesting, scanned left to right: inside which string quote (backslash escapes
// included) and how many brackets deep. One scanner for logical_lines (is a line continued?)
// and top_level (where are the separators?), so both read a line the same way.
struct Nesting {
  int depth = 0;
  char quote = 0;
  // Consumes text[i] and, for a backslash inside a string, the character it escapes; returns
  // the index of the last character consumed. `plain` (when given) tells whether text[i] was
  // outside strings and neither a quote nor a bracket.
  std::size_t step(const std::string& text, std::size_t i, bool* plain = nullptr) {
    const char c = text[i];
    bool outside = false;
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') quote = c;
    else if (c == '(' || c == '[' || c == '{') ++depth;
    else if (c == ')' || c == ']' || c == '}') --depth;
    else outside = true;
    if (plain) *plain = outside;
    return i;
  }
};

}  // namespace

std::vector<LogicalLine> logical_lines(const std::string& source) {
  std::vector<std::string> physical;
  std::istringstream in(source);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    physical.push_back(line);
  }
  std::vector<LogicalLine> out;
  bool in_docstring = false;
  std::string docstring_quote;
  for (std::size_t i = 0; i < physical.size(); ++i) {
    std::string text = physical[i];
    std::string trimmed = text.substr(std::min(text.find_first_not_of(" \t"), text.size()));
    if (in_docstring) {
      if (trimmed.find(docstring_quote) != std::string::npos) in_docstring = false;
      continue;
    }
    // A string prefix (r, u, b, f, rb, ...: r"""...""" keeps backslashes in HF docstrings) does not
    // change where the docstring ends.
    const std::size_t prefix = std::min(trimmed.find_first_not_of("rRuUbBfF"), std::size_t{2});
    if (prefix < trimmed.size() &&
        (trimmed.compare(prefix, 3, "\"\"\"") == 0 || trimmed.compare(prefix, 3, "'''") == 0)) {
      trimmed.erase(0, prefix);
      docstring_quote = trimmed.substr(0, 3);
      if (trimmed.size() < 6 || trimmed.find(docstring_quote, 3) == std::string::npos) in_docstring = true;
      continue;
    }
    LogicalLine logical;
    logical.number = static_cast<int>(i) + 1;
    logical.raw = text;
    logical.indent = static_cast<int>(text.find_first_not_of(" \t"));
    std::string joined = strip_comment(text);
    // Bracket depth of `joined`, scanned incrementally as lines are appended (rescanning the
    // whole joined text per line is quadratic in a long unclosed bracket). A trailing '\\' is
    // left unscanned: it is either removed (line continuation) or the last character.
    Nesting nesting;
    std::size_t scanned = 0;
    auto scan = [&](std::size_t upto) {
      for (; scanned < upto; ++scanned) scanned = nesting.step(joined, scanned);
    };
    auto continued = [&] {
      std::size_t last = joined.find_last_not_of(" \t");
      bool backslash = last != std::string::npos && joined[last] == '\\';
      scan(backslash ? last : joined.size());
      return backslash || nesting.depth > 0;
    };
    while (i + 1 < physical.size() && continued()) {
      std::size_t last = joined.find_last_not_of(" \t");
      if (last != std::string::npos && joined[last] == '\\') joined.resize(last);
      joined += " " + strip_comment(physical[++i]);
    }
    std::size_t first = joined.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    logical.text = joined.substr(first);
    while (!logical.text.empty() && std::isspace(static_cast<unsigned char>(logical.text.back()))) logical.text.pop_back();
    out.push_back(logical);
  }
  return out;
}

// Positions in `text` of `wanted` outside strings and brackets.
std::vector<std::size_t> top_level(const std::string& text, char wanted) {
  std::vector<std::size_t> at;
  Nesting nesting;
  for (std::size_t i = 0; i < text.size(); ++i) {
    bool plain = false;
    i = nesting.step(text, i, &plain);
    if (plain && text[i] == wanted && nesting.depth == 0) at.push_back(i);
  }
  return at;
}

std::string trimmed(const std::string& text) {
  const std::size_t b = text.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return text.substr(b, text.find_last_not_of(" \t") - b + 1);
}

// Python's one-line forms, rewritten into the block forms the reader walks:
//   def f(x): return x * 2          -> def f(x): / return x * 2 (body indented)
//   a = x * 2; return a             -> two statements
//   f = lambda x, y=1.0: x * y      -> def f(x, y=1.0): / return x * y (a bare lambda is `f`)
// Each piece keeps the physical line number, so errors still point at what the user wrote.
std::vector<LogicalLine> expand_compound(const std::vector<LogicalLine>& lines) {
  std::vector<LogicalLine> out;
  auto push = [&](const LogicalLine& base, int indent, const std::string& text) {
    LogicalLine l = base;
    l.indent = indent;
    l.text = text;
    // Where the statement is written in its physical line ("def f(x): return x @ w" puts the
    // return at column 11, not at its block indent), so refusals point at the right character.
    const std::size_t written = base.raw.find(text);
    const std::size_t body = text.rfind("return ", 0) == 0 ? base.raw.find(text.substr(7)) : std::string::npos;
    l.column = written != std::string::npos ? static_cast<int>(written)
               : body != std::string::npos  ? static_cast<int>(body) - 7
                                            : -1;
    out.push_back(l);
  };
  static const std::regex lambda_line(R"(^(?:([A-Za-z_][A-Za-z0-9_]*)\s*=\s*)?lambda\b(.*)$)");
  for (const auto& line : lines) {
    std::smatch m;
    if (std::regex_match(line.text, m, lambda_line)) {
      const std::string rest = m[2].str();
      const auto colons = top_level(rest, ':');
      if (!colons.empty()) {
        const std::string name = m[1].matched ? m[1].str() : "f";
        push(line, line.indent, "def " + name + "(" + trimmed(rest.substr(0, colons.front())) + "):");
        push(line, line.indent + 4, "return " + trimmed(rest.substr(colons.front() + 1)));
        continue;
      }
    }
    std::vector<std::string> statements;
    std::size_t from = 0;
    for (std::size_t at : top_level(line.text, ';')) {
      statements.push_back(trimmed(line.text.substr(from, at - from)));
      from = at + 1;
    }
    statements.push_back(trimmed(line.text.substr(from)));
    int indent = line.indent;
    for (const auto& statement : statements) {
      if (statement.empty()) continue;
      // A header with its body on the same line: the first top-level ':' ends the header.
      const bool header = statement.rfind("def ", 0) == 0 || statement.rfind("class ", 0) == 0;
      const auto colons = header ? top_level(statement, ':') : std::vector<std::size_t>{};
      if (!colons.empty() && !trimmed(statement.substr(colons.front() + 1)).empty()) {
        push(line, indent, statement.substr(0, colons.front() + 1));
        indent += 4;
        push(line, indent, trimmed(statement.substr(colons.front() + 1)));
      } else {
        push(line, indent, statement);
      }
    }
  }
  return out;
}

// --------------------------------------------------------------------------------------------
// Python expression tokens.

std::vector<PyToken> py_lex(const std::string& text) {
  std::vector<PyToken> out;
  std::size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    PyToken t;
    t.offset = i;
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1])))) {
      std::size_t j = i;
      while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.' || text[j] == '_')) ++j;
      if (j < text.size() && (text[j] == 'e' || text[j] == 'E')) {
        std::size_t k = j + 1;
        if (k < text.size() && (text[k] == '+' || text[k] == '-')) ++k;
        while (k < text.size() && std::isdigit(static_cast<unsigned char>(text[k]))) ++k;
        j = k;
      }
      t.type = PyTok::Number;
      t.text = text.substr(i, j - i);
      std::string digits;
      for (char d : t.text)
        if (d != '_') digits += d;
      t.number = std::strtod(digits.c_str(), nullptr);
      i = j;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      t.type = PyTok::Name;
      t.text = text.substr(i, j - i);
      i = j;
    } else if (c == '"' || c == '\'') {
      std::size_t j = i + 1;
      while (j < text.size() && text[j] != c) j += text[j] == '\\' ? 2 : 1;
      t.type = PyTok::String;
      t.text = text.substr(i + 1, j - i - 1);
      i = std::min(j + 1, text.size());
    } else {
      static const char* ops[] = {"**", "<=", ">=", "==", "!=", "//", "->"};
      t.type = PyTok::Op;
      t.text = std::string(1, c);
      for (const char* op : ops)
        if (text.compare(i, 2, op) == 0) t.text = op;
      i += t.text.size();
    }
    out.push_back(t);
  }
  PyToken end;
  end.offset = text.size();
  out.push_back(end);
  return out;
}

}  // namespace liger::kernel_dev::torch_detail
