#include "workflows/autopatch/python_source.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "liger/error.h"
#include "util/input_limits.h"

namespace liger::autopatch {

namespace {

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (c & 0x80); }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (c & 0x80); }

const std::set<std::string>& keywords() {
  static const std::set<std::string> k = {
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
      "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
      "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return",
      "try", "while", "with", "yield"};
  return k;
}

// CPython's limits: 200 nested brackets (parser), 100 indentation levels (tokenizer).
constexpr size_t kMaxBracketNesting = 200;
constexpr size_t kMaxIndentLevels = 100;

[[noreturn]] void lex_error(const std::string& origin, int line, const std::string& what) {
  throw Error(ErrorKind::Usage, origin + ":" + std::to_string(line) + ": " + what,
              "autopatch reads Python source; check that the file is a complete modeling file");
}

bool word_like(const Token& t) {
  return t.kind == TokKind::Name || t.kind == TokKind::Number || t.kind == TokKind::String;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Tokenizer
// ---------------------------------------------------------------------------------------------

LexResult tokenize(std::string_view src, const std::string& origin) {
  LexResult out;
  std::vector<int> indents{0};
  std::vector<std::pair<char, int>> brackets;  // open bracket, line
  size_t i = 0;
  int line = 1;
  size_t line_start = 0;
  bool at_line_start = true;
  bool line_has_tokens = false;
  const size_t n = src.size();

  auto push = [&](TokKind k, std::string text, int ln, int col) {
    out.tokens.push_back(Token{k, std::move(text), ln, col});
  };

  while (i < n) {
    if (at_line_start && !brackets.empty()) at_line_start = false;  // continuation line
    if (at_line_start && brackets.empty()) {
      // Measure indentation of this physical line.
      int width = 0;
      size_t j = i;
      while (j < n && (src[j] == ' ' || src[j] == '\t' || src[j] == '\f')) {
        width = src[j] == '\t' ? (width / 8 + 1) * 8 : (src[j] == '\f' ? 0 : width + 1);
        ++j;
      }
      // Blank or comment-only lines do not change indentation.
      if (j >= n || src[j] == '\n' || src[j] == '\r' || src[j] == '#') {
        if (j < n && src[j] == '#') {
          size_t e = j;
          while (e < n && src[e] != '\n') ++e;
          out.comments.push_back(Comment{line, trim(src.substr(j + 1, e - j - 1))});
          j = e;
        }
        if (j < n && src[j] == '\r') ++j;
        if (j < n && src[j] == '\n') ++j;
        i = j;
        ++line;
        line_start = i;
        continue;
      }
      if (width > indents.back()) {
        indents.push_back(width);
        if (indents.size() > kMaxIndentLevels + 1)
          lex_error(origin, line, "column " + std::to_string(width + 1) + ": more than " +
                                      std::to_string(kMaxIndentLevels) + " levels of indentation (Python's own limit)");
        push(TokKind::Indent, "", line, width);
      } else {
        while (width < indents.back()) {
          indents.pop_back();
          push(TokKind::Dedent, "", line, width);
        }
        if (width != indents.back()) lex_error(origin, line, "inconsistent dedent");
      }
      i = j;
      at_line_start = false;
    }
    char c = src[i];
    int col = static_cast<int>(i - line_start);
    if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < n && src[i + 1] == '\n') ++i;
      ++i;
      if (brackets.empty() && line_has_tokens) {
        push(TokKind::Newline, "", line, col);
        line_has_tokens = false;
      }
      ++line;
      line_start = i;
      at_line_start = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\f') { ++i; continue; }
    if (c == '#') {
      size_t e = i;
      while (e < n && src[e] != '\n') ++e;
      out.comments.push_back(Comment{line, trim(src.substr(i + 1, e - i - 1))});
      i = e;
      continue;
    }
    if (c == '\\' && i + 1 < n && (src[i + 1] == '\n' || src[i + 1] == '\r')) {
      // Explicit line joining: the next physical line continues this logical line.
      i += (src[i + 1] == '\r' && i + 2 < n && src[i + 2] == '\n') ? 3 : 2;
      ++line;
      line_start = i;
      continue;
    }
    // String literal (with optional prefix).
    {
      size_t p = i;
      while (p < n && p - i < 3 && src[p] != '\0' && std::strchr("rRbBuUfF", src[p])) ++p;
      if (p < n && (src[p] == '\'' || src[p] == '"')) {
        std::string prefix(src.substr(i, p - i));
        bool valid_prefix = prefix.size() <= 2;
        if (valid_prefix) {
          bool fstring = prefix.find_first_of("fF") != std::string::npos;
          char q = src[p];
          bool triple = p + 2 < n && src[p + 1] == q && src[p + 2] == q;
          size_t k = p + (triple ? 3 : 1);
          int start_line = line;
          int brace = 0;
          bool closed = false;
          while (k < n) {
            char d = src[k];
            if (d == '\\' && k + 1 < n) {
              if (src[k + 1] == '\n') { ++line; line_start = k + 2; }
              k += 2;
              continue;
            }
            if (fstring && d == '{') {
              if (brace == 0 && k + 1 < n && src[k + 1] == '{') { k += 2; continue; }
              ++brace;
              ++k;
              continue;
            }
            if (fstring && d == '}' && brace > 0) { --brace; ++k; continue; }
            if (fstring && brace > 0 && (d == '\'' || d == '"') && d != q) {
              // A nested string inside a replacement field.
              size_t m = k + 1;
              while (m < n && src[m] != d && src[m] != '\n') ++m;
              k = m + 1;
              continue;
            }
            if (d == '\n') {
              if (!triple) lex_error(origin, start_line, "unterminated string literal");
              ++line;
              line_start = k + 1;
              ++k;
              continue;
            }
            if (d == q && brace == 0) {
              if (!triple) { k += 1; closed = true; break; }
              if (k + 2 < n && src[k + 1] == q && src[k + 2] == q) {
                k += 3;
                closed = true;
                break;
              }
            }
            ++k;
          }
          if (!closed) lex_error(origin, start_line, "unterminated string literal");
          push(TokKind::String, std::string(src.substr(i, k - i)), start_line, col);
          line_has_tokens = true;
          i = k;
          continue;
        }
      }
    }
    if (is_ident_start(c)) {
      size_t e = i;
      while (e < n && is_ident_char(src[e])) ++e;
      push(TokKind::Name, std::string(src.substr(i, e - i)), line, col);
      line_has_tokens = true;
      i = e;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i + 1 < n && std::isdigit(static_cast<unsigned char>(src[i + 1])))) {
      size_t e = i;
      while (e < n) {
        char d = src[e];
        if (is_ident_char(d) || d == '.') { ++e; continue; }
        if ((d == '+' || d == '-') && e > i && (src[e - 1] == 'e' || src[e - 1] == 'E') &&
            !(src[i] == '0' && i + 1 < n && (src[i + 1] == 'x' || src[i + 1] == 'X'))) {
          ++e;
          continue;
        }
        break;
      }
      push(TokKind::Number, std::string(src.substr(i, e - i)), line, col);
      line_has_tokens = true;
      i = e;
      continue;
    }
    static const char* ops3[] = {"**=", "//=", ">>=", "<<=", "..."};
    static const char* ops2[] = {"->", ":=", "==", "!=", "<=", ">=", "**", "//", "<<", ">>", "+=",
                                 "-=", "*=", "/=", "%=", "&=", "|=", "^=", "@="};
    std::string op;
    for (const char* o : ops3)
      if (src.substr(i, 3) == o) { op = o; break; }
    if (op.empty())
      for (const char* o : ops2)
        if (src.substr(i, 2) == o) { op = o; break; }
    if (op.empty()) op = std::string(1, c);
    if (op == "(" || op == "[" || op == "{") {
      brackets.push_back({c, line});
      // CPython stops at the same depth ("too many nested parentheses"); the analysis helpers
      // rescan bracketed spans, so unbounded nesting would make them quadratic.
      if (brackets.size() > kMaxBracketNesting)
        lex_error(origin, line,
                  "column " + std::to_string(col + 1) + ": brackets nest deeper than " +
                      std::to_string(kMaxBracketNesting) + " levels (Python's own limit)");
    }
    if (op == ")" || op == "]" || op == "}") {
      if (!brackets.empty()) brackets.pop_back();
    }
    push(TokKind::Op, op, line, col);
    line_has_tokens = true;
    i += op.size();
  }
  if (!brackets.empty()) lex_error(origin, brackets.back().second, "bracket never closed");
  if (line_has_tokens) push(TokKind::Newline, "", line, 0);
  while (indents.size() > 1) {
    indents.pop_back();
    push(TokKind::Dedent, "", line, 0);
  }
  push(TokKind::End, "", line, 0);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Expression helpers
// ---------------------------------------------------------------------------------------------

std::string join_tokens(const std::vector<Token>& tokens, size_t begin, size_t end) {
  std::string s;
  for (size_t i = begin; i < end && i < tokens.size(); ++i) {
    if (i > begin && word_like(tokens[i]) && word_like(tokens[i - 1])) s += ' ';
    s += tokens[i].text;
  }
  return s;
}

namespace {

struct CallSpan {
  Call call;
  size_t begin = 0;  // first token of the callee
  size_t end = 0;    // one past the closing parenthesis
};

size_t matching_close(const std::vector<Token>& t, size_t open) {
  int depth = 0;
  for (size_t i = open; i < t.size(); ++i) {
    if (t[i].kind != TokKind::Op) continue;
    const std::string& s = t[i].text;
    if (s == "(" || s == "[" || s == "{") ++depth;
    if (s == ")" || s == "]" || s == "}") {
      if (--depth == 0) return i;
    }
  }
  return t.size();
}

std::vector<CallSpan> call_spans(const std::vector<Token>& t, int line) {
  std::vector<CallSpan> out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].kind != TokKind::Name) continue;
    bool after_dot = i > 0 && t[i - 1].kind == TokKind::Op && t[i - 1].text == ".";
    bool chained = after_dot && i > 1 && t[i - 2].kind == TokKind::Op &&
                   (t[i - 2].text == ")" || t[i - 2].text == "]");
    if (after_dot && !chained) continue;
    std::string callee = chained ? "." + t[i].text : t[i].text;
    size_t j = i + 1;
    while (j + 1 < t.size() && t[j].kind == TokKind::Op && t[j].text == "." &&
           t[j + 1].kind == TokKind::Name) {
      callee += "." + t[j + 1].text;
      j += 2;
    }
    // A chain may contain several calls (x.float().pow(2)): report each dotted prefix that is
    // followed by '(' as a call, then continue scanning after it.
    if (j < t.size() && t[j].kind == TokKind::Op && t[j].text == "(") {
      if (keywords().count(t[i].text) && t[i].text != "print") continue;
      size_t close = matching_close(t, j);
      CallSpan cs;
      cs.call.callee = callee;
      cs.call.line = t[i].line ? t[i].line : line;
      cs.begin = chained ? i - 1 : i;
      cs.end = std::min(close + 1, t.size());
      cs.call.text = join_tokens(t, i, cs.end);
      // Split arguments on top-level commas.
      size_t a = j + 1;
      int depth = 0;
      for (size_t k = j + 1; k <= close && k < t.size(); ++k) {
        const Token& tk = t[k];
        if (tk.kind == TokKind::Op && (tk.text == "(" || tk.text == "[" || tk.text == "{")) ++depth;
        if (tk.kind == TokKind::Op && (tk.text == ")" || tk.text == "]" || tk.text == "}")) {
          if (depth > 0) { --depth; continue; }
        }
        bool split = (depth == 0 && tk.kind == TokKind::Op && tk.text == ",") || k == close;
        if (!split) continue;
        if (k > a) {
          if (k - a >= 2 && t[a].kind == TokKind::Name && t[a + 1].kind == TokKind::Op &&
              t[a + 1].text == "=") {
            cs.call.kwargs[t[a].text] = join_tokens(t, a + 2, k);
          } else {
            cs.call.args.push_back(join_tokens(t, a, k));
          }
        }
        a = k + 1;
      }
      out.push_back(std::move(cs));
    }
  }
  return out;
}

}  // namespace

std::vector<Call> find_calls(const std::vector<Token>& tokens, int line) {
  std::vector<Call> out;
  for (auto& cs : call_spans(tokens, line)) out.push_back(std::move(cs.call));
  return out;
}

std::vector<Call> find_calls(const Statement& st) { return find_calls(st.tokens, st.line); }

std::optional<Assignment> as_assignment(const Statement& st) {
  const auto& t = st.tokens;
  if (t.empty()) return std::nullopt;
  static const std::set<std::string> stmt_keywords = {
      "def", "class", "if", "elif", "else", "for", "while", "with", "return", "try", "except",
      "finally", "import", "from", "raise", "assert", "del", "pass", "yield", "lambda", "async",
      "global", "nonlocal", "break", "continue"};
  if (t[0].kind == TokKind::Name && stmt_keywords.count(t[0].text)) return std::nullopt;
  if (t[0].kind == TokKind::Op && t[0].text == "@") return std::nullopt;
  static const std::set<std::string> aug = {"=", "+=", "-=", "*=", "/=", "//=", "%=", "**=",
                                            "@=", "&=", "|=", "^=", ">>=", "<<="};
  int depth = 0;
  size_t colon = t.size();
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].kind != TokKind::Op) continue;
    const std::string& s = t[i].text;
    if (s == "(" || s == "[" || s == "{") ++depth;
    else if (s == ")" || s == "]" || s == "}") --depth;
    else if (depth == 0 && s == ":" && colon == t.size()) colon = i;
    else if (depth == 0 && aug.count(s)) {
      Assignment a;
      a.op = s;
      a.line = st.line;
      size_t lhs_end = std::min(i, colon);
      // Targets: split on top-level commas, strip parens.
      size_t b = 0;
      int d = 0;
      for (size_t k = 0; k <= lhs_end; ++k) {
        if (k < lhs_end && t[k].kind == TokKind::Op) {
          if (t[k].text == "(" || t[k].text == "[") ++d;
          if (t[k].text == ")" || t[k].text == "]") --d;
        }
        if (k == lhs_end || (d == 0 && t[k].kind == TokKind::Op && t[k].text == ",")) {
          if (k > b) a.targets.push_back(strip_parens(join_tokens(t, b, k)));
          b = k + 1;
        }
      }
      a.value_tokens.assign(t.begin() + static_cast<long>(i) + 1, t.end());
      a.value = join_tokens(t, i + 1, t.size());
      auto spans = call_spans(a.value_tokens, st.line);
      if (!spans.empty() && spans.front().begin == 0 && spans.front().end == a.value_tokens.size())
        a.call = spans.front().call;
      return a;
    }
  }
  // Annotated declaration without value ("x: int") is not an assignment.
  return std::nullopt;
}

std::vector<std::string> split_top_level(std::string_view expr, char op) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  char quote = 0;
  for (size_t i = 0; i < expr.size(); ++i) {
    char c = expr[i];
    if (quote) {
      if (c == '\\') { ++i; continue; }
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '\'' || c == '"') { quote = c; continue; }
    if (c == '(' || c == '[' || c == '{') ++depth;
    else if (c == ')' || c == ']' || c == '}') --depth;
    else if (depth == 0 && c == op) {
      bool prev_same = i > 0 && expr[i - 1] == op;
      bool next_same = i + 1 < expr.size() && expr[i + 1] == op;
      bool next_eq = i + 1 < expr.size() && expr[i + 1] == '=';
      if (prev_same || next_same || next_eq) continue;
      if ((op == '+' || op == '-')) {
        // Unary sign or exponent sign: not a binary operator.
        if (i == 0) continue;
        char p = expr[i - 1];
        if (std::strchr("(*/+-,=[<>%@", p)) continue;
        if ((p == 'e' || p == 'E') && i > 1 && std::isdigit(static_cast<unsigned char>(expr[i - 2]))) continue;
      }
      parts.emplace_back(expr.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.emplace_back(expr.substr(start));
  return parts;
}

std::string strip_parens(std::string_view expr) {
  std::string s(expr);
  while (s.size() >= 2 && s.front() == '(' && s.back() == ')') {
    int depth = 0;
    bool outer = true;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '(') ++depth;
      if (s[i] == ')') --depth;
      if (depth == 0 && i + 1 < s.size()) { outer = false; break; }
    }
    if (!outer) break;
    s = s.substr(1, s.size() - 2);
  }
  return s;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// ---------------------------------------------------------------------------------------------
// Structure
// ---------------------------------------------------------------------------------------------

bool Statement::is_compound_header() const {
  if (tokens.empty() || tokens.back().kind != TokKind::Op || tokens.back().text != ":") return false;
  static const std::set<std::string> heads = {"def", "class", "if", "elif", "else", "for",
                                              "while", "with", "try", "except", "finally", "async"};
  return tokens.front().kind == TokKind::Name && heads.count(tokens.front().text);
}

std::string Statement::keyword() const {
  if (tokens.empty() || tokens.front().kind != TokKind::Name) return "";
  return keywords().count(tokens.front().text) ? tokens.front().text : "";
}

const FunctionDef* ClassDef::method(std::string_view n) const {
  for (const auto& m : methods)
    if (m.name == n) return &m;
  return nullptr;
}

std::vector<Assignment> ClassDef::init_assignments() const {
  std::vector<Assignment> out;
  const FunctionDef* init = method("__init__");
  if (!init) return out;
  for (const auto& st : init->body) {
    auto a = as_assignment(st);
    if (!a) continue;
    for (const auto& tgt : a->targets)
      if (tgt.rfind("self.", 0) == 0) { out.push_back(*a); break; }
  }
  return out;
}

std::vector<Assignment> ClassDef::init_assignments_to(std::string_view attr) const {
  std::vector<Assignment> out;
  std::string want = "self." + std::string(attr);
  for (auto& a : init_assignments())
    for (const auto& tgt : a.targets)
      if (tgt == want) { out.push_back(a); break; }
  return out;
}

bool ClassDef::has_base(std::string_view base) const {
  for (const auto& b : bases) {
    if (b == base) return true;
    if (b.size() > base.size() && b.compare(b.size() - base.size(), base.size(), base) == 0 &&
        b[b.size() - base.size() - 1] == '.')
      return true;
  }
  return false;
}

const ClassDef* PythonModule::find_class(std::string_view name) const {
  for (const auto& c : classes)
    if (c.name == name) return &c;
  return nullptr;
}

const FunctionDef* PythonModule::find_function(std::string_view name) const {
  for (const auto& f : functions)
    if (f.name == name) return &f;
  return nullptr;
}

std::string PythonModule::line_text(int line) const {
  if (line < 1 || line > static_cast<int>(lines.size())) return "";
  return trim(lines[static_cast<size_t>(line - 1)]);
}

bool PythonModule::imports_name(std::string_view name) const {
  for (const auto& im : imports)
    for (const auto& n : im.names)
      if (n == name) return true;
  return false;
}

namespace {

std::vector<std::string> param_names(const std::vector<Token>& t) {
  // def name ( params ) [-> ann] :
  std::vector<std::string> out;
  size_t open = 0;
  while (open < t.size() && !(t[open].kind == TokKind::Op && t[open].text == "(")) ++open;
  if (open >= t.size()) return out;
  size_t close = matching_close(t, open);
  int depth = 0;
  bool expect_name = true;
  for (size_t k = open + 1; k < close; ++k) {
    const Token& tk = t[k];
    if (tk.kind == TokKind::Op) {
      if (tk.text == "(" || tk.text == "[" || tk.text == "{") ++depth;
      else if (tk.text == ")" || tk.text == "]" || tk.text == "}") --depth;
      else if (depth == 0 && tk.text == ",") { expect_name = true; continue; }
      continue;
    }
    if (depth == 0 && expect_name && tk.kind == TokKind::Name) {
      out.push_back(tk.text);
      expect_name = false;
    }
  }
  return out;
}

FunctionDef make_function(const std::vector<Statement>& sts, size_t idx, size_t end,
                          std::vector<std::string> decorators) {
  const Statement& h = sts[idx];
  FunctionDef f;
  size_t p = 0;
  if (h.tokens[p].text == "async") ++p;
  f.name = p + 1 < h.tokens.size() ? h.tokens[p + 1].text : "";
  f.params = param_names(h.tokens);
  f.decorators = std::move(decorators);
  f.line = h.line;
  f.end_line = h.end_line;
  for (size_t k = idx + 1; k < end; ++k) {
    f.body.push_back(sts[k]);
    f.end_line = std::max(f.end_line, sts[k].end_line);
  }
  return f;
}

size_t block_end(const std::vector<Statement>& sts, size_t idx) {
  size_t k = idx + 1;
  while (k < sts.size() && sts[k].depth > sts[idx].depth) ++k;
  return k;
}

std::optional<std::string> copied_from_marker(const PythonModule& m, int first_line) {
  // The marker is a comment on the line(s) directly above the class (or its decorators).
  // Comments are in line order: a binary search keeps this linear over a file of many classes.
  auto it = std::lower_bound(m.comments.begin(), m.comments.end(), first_line - 2,
                             [](const Comment& c, int line) { return c.line < line; });
  for (; it != m.comments.end() && it->line < first_line; ++it) {
    if (it->text.rfind("Copied from", 0) == 0) return trim(it->text.substr(std::string("Copied from").size()));
  }
  return std::nullopt;
}

}  // namespace

PythonModule parse_python(std::string_view source, const std::string& origin) {
  util::check_input_size(origin, source.size(), util::kMaxModelingFileBytes,
                         "autopatch reads HuggingFace modeling files (a few hundred KiB at most)");
  PythonModule m;
  m.origin = origin;
  {
    std::string cur;
    for (char c : source) {
      if (c == '\n') { m.lines.push_back(cur); cur.clear(); }
      else if (c != '\r') cur += c;
    }
    if (!cur.empty()) m.lines.push_back(cur);
  }
  LexResult lx = tokenize(source, origin);
  m.comments = std::move(lx.comments);
  int depth = 0;
  Statement cur;
  for (const auto& t : lx.tokens) {
    if (t.kind == TokKind::Indent) { ++depth; continue; }
    if (t.kind == TokKind::Dedent) { --depth; continue; }
    if (t.kind == TokKind::End) break;
    if (t.kind == TokKind::Newline) {
      if (!cur.tokens.empty()) {
        cur.text = join_tokens(cur.tokens, 0, cur.tokens.size());
        m.statements.push_back(std::move(cur));
      }
      cur = Statement{};
      continue;
    }
    if (cur.tokens.empty()) {
      cur.line = t.line;
      cur.depth = depth;
    }
    int last = t.line;
    if (t.kind == TokKind::String)
      last += static_cast<int>(std::count(t.text.begin(), t.text.end(), '\n'));
    cur.end_line = std::max(cur.end_line, last);
    cur.tokens.push_back(t);
  }

  const auto& sts = m.statements;
  std::vector<std::string> pending_decorators;
  int pending_first_line = 0;
  for (size_t i = 0; i < sts.size(); ++i) {
    const Statement& st = sts[i];
    const std::string kw = st.tokens.empty() ? "" : st.tokens.front().text;
    if (kw == "import" || kw == "from") {
      Import im;
      im.line = st.line;
      size_t k = 1;
      std::string mod;
      while (k < st.tokens.size() && st.tokens[k].text != "import") mod += st.tokens[k++].text;
      if (kw == "import") {
        im.module = join_tokens(st.tokens, 1, st.tokens.size());
      } else {
        im.module = mod;
        for (++k; k < st.tokens.size(); ++k) {
          const Token& tk = st.tokens[k];
          if (tk.kind != TokKind::Name) continue;
          if (tk.text == "as") { ++k; continue; }
          im.names.push_back(tk.text);
        }
      }
      m.imports.push_back(std::move(im));
      continue;
    }
    if (st.depth != 0) continue;
    if (!st.tokens.empty() && st.tokens.front().kind == TokKind::Op && st.tokens.front().text == "@") {
      if (pending_decorators.empty()) pending_first_line = st.line;
      pending_decorators.push_back(join_tokens(st.tokens, 1, st.tokens.size()));
      continue;
    }
    if (kw == "def" || (kw == "async" && st.tokens.size() > 1 && st.tokens[1].text == "def")) {
      size_t e = block_end(sts, i);
      m.functions.push_back(make_function(sts, i, e, std::move(pending_decorators)));
      pending_decorators.clear();
      i = e - 1;
      continue;
    }
    if (kw == "class") {
      size_t e = block_end(sts, i);
      ClassDef c;
      c.name = st.tokens.size() > 1 ? st.tokens[1].text : "";
      c.decorators = std::move(pending_decorators);
      c.line = st.line;
      c.end_line = std::max(st.end_line, sts[e - 1].end_line);
      int first_line = c.decorators.empty() ? st.line : pending_first_line;
      pending_decorators.clear();
      if (st.tokens.size() > 2 && st.tokens[2].text == "(") {
        size_t close = matching_close(st.tokens, 2);
        size_t b = 3;
        int d = 0;
        for (size_t k = 3; k <= close && k < st.tokens.size(); ++k) {
          const Token& tk = st.tokens[k];
          if (k < close && tk.kind == TokKind::Op && (tk.text == "(" || tk.text == "[")) ++d;
          if (k < close && tk.kind == TokKind::Op && (tk.text == ")" || tk.text == "]")) --d;
          if (k == close || (d == 0 && tk.kind == TokKind::Op && tk.text == ",")) {
            if (k > b) c.bases.push_back(join_tokens(st.tokens, b, k));
            b = k + 1;
          }
        }
      }
      std::vector<std::string> mdecos;
      for (size_t k = i + 1; k < e; ++k) {
        const Statement& s2 = sts[k];
        c.end_line = std::max(c.end_line, s2.end_line);
        if (s2.depth != st.depth + 1) continue;
        const std::string k2 = s2.tokens.empty() ? "" : s2.tokens.front().text;
        if (k2 == "@") {
          mdecos.push_back(join_tokens(s2.tokens, 1, s2.tokens.size()));
          continue;
        }
        if (k2 == "def" || (k2 == "async" && s2.tokens.size() > 1 && s2.tokens[1].text == "def")) {
          size_t me = block_end(sts, k);
          c.methods.push_back(make_function(sts, k, me, std::move(mdecos)));
          mdecos.clear();
          k = me - 1;
          continue;
        }
        mdecos.clear();
        c.class_body.push_back(s2);
      }
      c.copied_from = copied_from_marker(m, first_line);
      m.classes.push_back(std::move(c));
      i = e - 1;
      continue;
    }
    pending_decorators.clear();
    if (auto a = as_assignment(st)) m.assignments.push_back(std::move(*a));
  }
  return m;
}

PythonModule parse_python_file(const std::filesystem::path& path) {
  util::check_file_size(path, path.string(), util::kMaxModelingFileBytes,
                        "autopatch reads HuggingFace modeling files (a few hundred KiB at most); pass the "
                        "modeling_<model>.py file itself");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(ErrorKind::Io, "cannot read " + path.string(),
                "check that the path exists and is readable");
  std::stringstream ss;
  ss << in.rdbuf();
  PythonModule m = parse_python(ss.str(), path.filename().string());
  m.path = path;
  return m;
}

}  // namespace liger::autopatch
