#include "workflows/kernel_perf/tuning_table.h"

#include <cctype>
#include <climits>
#include <cstdint>
#include <regex>

#include "liger/error.h"
#include "liger/util.h"

namespace liger::kernel_perf {

namespace {

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Index just past the comment or string starting at `i`, or `i` when none starts there.
std::size_t skip_comment(const std::string& s, std::size_t i) {
  if (s.compare(i, 2, "//") == 0) {
    const auto e = s.find('\n', i);
    return e == std::string::npos ? s.size() : e;
  }
  if (s.compare(i, 2, "/*") == 0) {
    const auto e = s.find("*/", i + 2);
    return e == std::string::npos ? s.size() : e + 2;
  }
  return i;
}

// Position of the '}' matching the '{' at `open`.
std::size_t match_brace(const std::string& s, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < s.size();) {
    const std::size_t j = skip_comment(s, i);
    if (j != i) {
      i = j;
      continue;
    }
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) return i;
    ++i;
  }
  throw Error(ErrorKind::Failure, "tuning table: unbalanced braces");
}

TableRow parse_row(const std::string& text) {
  TableRow row;
  row.pieces.emplace_back();
  std::string cur;
  int expr_depth = 0;  // braces of `int64_t{1}`-style expressions inside a field
  auto flush = [&] {
    const auto b = cur.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) {
      row.pieces.back() += cur;
    } else {
      const auto e = cur.find_last_not_of(" \t\r\n");
      row.pieces.back() += cur.substr(0, b);
      row.fields.push_back(cur.substr(b, e - b + 1));
      row.pieces.push_back(cur.substr(e + 1));
    }
    cur.clear();
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{' && !cur.empty() && ident_char(cur.back())) {
      ++expr_depth;
      cur += c;
    } else if (c == '}' && expr_depth > 0) {
      --expr_depth;
      cur += c;
    } else if (c == '{' || c == '}' || c == ',') {
      flush();
      row.pieces.back() += c;
    } else {
      cur += c;
    }
  }
  flush();
  return row;
}

}  // namespace

std::string TableRow::text() const {
  std::string out = pieces.empty() ? "" : pieces[0];
  for (std::size_t i = 0; i < fields.size(); ++i) out += fields[i] + (i + 1 < pieces.size() ? pieces[i + 1] : "");
  return out;
}

TuningFile TuningFile::parse(const std::string& text) {
  static const std::regex head_re(R"(constexpr\s+([A-Za-z_][\w:]*)\s+([A-Za-z_]\w*)\s*\[\s*\w*\s*\]\s*=\s*\{)");
  TuningFile f;
  std::size_t pos = 0;
  auto begin = std::sregex_iterator(text.begin(), text.end(), head_re);
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const std::size_t open = static_cast<std::size_t>(it->position(0) + it->length(0) - 1);
    if (open < pos) continue;
    const std::size_t close = match_brace(text, open);
    f.segments_.push_back(text.substr(pos, open + 1 - pos));
    TableArray a;
    a.type = (*it)[1];
    a.name = (*it)[2];
    // Rows: top-level `{...}` groups between the outer braces.
    std::string sep;
    for (std::size_t i = open + 1; i < close;) {
      const std::size_t j = skip_comment(text, i);
      if (j != i) {
        sep += text.substr(i, j - i);
        i = j;
        continue;
      }
      if (text[i] == '{') {
        const std::size_t end = match_brace(text, i);
        a.separators.push_back(sep);
        sep.clear();
        a.rows.push_back(parse_row(text.substr(i, end - i + 1)));
        i = end + 1;
      } else {
        sep += text[i++];
      }
    }
    a.separators.push_back(sep);
    f.arrays_.push_back(std::move(a));
    pos = close;
  }
  f.segments_.push_back(text.substr(pos));
  return f;
}

std::string TuningFile::emit() const {
  std::string out = segments_.empty() ? "" : segments_[0];
  for (std::size_t a = 0; a < arrays_.size(); ++a) {
    const auto& arr = arrays_[a];
    for (std::size_t r = 0; r < arr.rows.size(); ++r) out += arr.separators[r] + arr.rows[r].text();
    out += arr.separators.back();
    out += segments_[a + 1];
  }
  return out;
}

const TableArray* TuningFile::array(const std::string& name) const {
  for (const auto& a : arrays_)
    if (a.name == name) return &a;
  return nullptr;
}

TableArray* TuningFile::find(const std::string& name) {
  for (auto& a : arrays_)
    if (a.name == name) return &a;
  throw Error(ErrorKind::Internal, "tuning table: no array named '" + name + "'");
}

void TuningFile::set_field(const std::string& name, std::size_t row, std::size_t field, const std::string& value) {
  TableArray* a = find(name);
  if (row >= a->rows.size() || field >= a->rows[row].fields.size())
    throw Error(ErrorKind::Internal, "tuning table " + name + ": no row " + std::to_string(row) + " field " +
                                         std::to_string(field));
  a->rows[row].fields[field] = value;
}

void TuningFile::set_row(const std::string& name, std::size_t row, const std::vector<std::string>& values) {
  TableArray* a = find(name);
  if (row >= a->rows.size() || values.size() != a->rows[row].fields.size())
    throw Error(ErrorKind::Internal, "tuning table " + name + ": row " + std::to_string(row) + " has " +
                                         (row < a->rows.size() ? std::to_string(a->rows[row].fields.size()) : "no") +
                                         " fields, got " + std::to_string(values.size()));
  a->rows[row].fields = values;
}

void TuningFile::insert_row_after(const std::string& name, std::size_t row, const std::vector<std::string>& values) {
  TableArray* a = find(name);
  if (row >= a->rows.size()) throw Error(ErrorKind::Internal, "tuning table " + name + ": no row " + std::to_string(row));
  TableRow copy = a->rows[row];
  if (values.size() != copy.fields.size())
    throw Error(ErrorKind::Internal, "tuning table " + name + ": new row has the wrong number of fields");
  copy.fields = values;
  std::string sep = ", ";
  if (row + 1 < a->rows.size()) sep = a->separators[row + 1];
  else if (row > 0) sep = a->separators[row];
  a->rows.insert(a->rows.begin() + static_cast<long>(row) + 1, copy);
  a->separators.insert(a->separators.begin() + static_cast<long>(row) + 1, sep);
}

std::optional<long long> eval_field(const std::string& raw) {
  std::string t = util::trim(raw);
  static const std::regex brace_re(R"(^(?:u?int(?:8|16|32|64)_t|long long|long|int|size_t)\{([^}]*)\}$)");
  static const std::regex cast_re(R"(^static_cast<[^>]+>\((.*)\)$)");
  static const std::regex paren_re(R"(^\((.*)\)$)");
  std::smatch m;
  if (std::regex_match(t, m, cast_re) || std::regex_match(t, m, paren_re)) return eval_field(m[1]);
  if (std::regex_match(t, m, brace_re)) return eval_field(m[1]);
  if (t == "INT64_MAX" || t == "LLONG_MAX") return INT64_MAX;
  if (t == "INT32_MAX" || t == "INT_MAX") return INT32_MAX;
  const auto shift = t.find("<<");
  if (shift != std::string::npos) {
    auto a = eval_field(t.substr(0, shift));
    auto b = eval_field(t.substr(shift + 2));
    if (!a || !b || *b < 0 || *b > 62) return std::nullopt;
    return *a << *b;
  }
  static const std::regex num_re(R"(^(-?\d+)(?:[uU]?[lL]{0,2}|[lL]{0,2}[uU]?)$)");
  if (std::regex_match(t, m, num_re)) return std::stoll(m[1]);
  return std::nullopt;
}

}  // namespace liger::kernel_perf
