// Recognising a segment reduction (see segment.h) in words or in PyTorch code, and the profile it
// gives. The rules read what the code does, not how it is named: which call reduces which tensor
// over which dim, whether the index tensor is used as boundaries (o[i]:o[i+1], o[1:] - o[:-1],
// len(o) - 1) or as counts (repeat_interleave repeats, split sizes, a divisor), and whether
// anything else is computed (then the request is named as not a pure segment reduction).
#include "workflows/kernel_dev/segment.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>
#include <cstdlib>
#include <sstream>

namespace liger::kernel_dev {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string regex_quote(const std::string& s) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(s, special, R"(\$&)");
}

// ------------------------------------------------------------------------------------- words

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> out;
  std::string w;
  for (char c : lower(text) + " ") {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      w += c;
    } else if (!w.empty()) {
      out.push_back(w);
      w.clear();
    }
  }
  return out;
}

std::string reduce_word(const std::string& w) {
  static const std::map<std::string, std::string> kinds = {
      {"mean", "mean"},    {"means", "mean"},   {"average", "mean"}, {"averages", "mean"}, {"averaged", "mean"},
      {"averaging", "mean"}, {"avg", "mean"},   {"sum", "sum"},      {"sums", "sum"},      {"summed", "sum"},
      {"summing", "sum"},  {"total", "sum"},    {"totals", "sum"},   {"max", "max"},       {"maximum", "max"},
      {"maxima", "max"},   {"amax", "max"},     {"min", "min"},      {"minimum", "min"},   {"minima", "min"},
      {"amin", "min"}};
  auto it = kinds.find(w);
  return it == kinds.end() ? "" : it->second;
}

SegmentRecognition recognise_words(const std::string& text) {
  SegmentRecognition r;
  const std::vector<std::string> ws = words_of(text);
  std::string joined = " ";
  for (const auto& w : ws) joined += w + " ";
  static const std::set<std::string> context = {"segment", "segments", "segmented", "segmentwise", "jagged", "ragged",
                                                "varlen", "offsets", "lengths", "seqlens", "indptr", "csr", "bag",
                                                "bags", "cu"};
  bool segmented = false;
  for (const auto& w : ws) segmented = segmented || context.count(w) > 0;
  for (const char* phrase : {" variable length", " variable sized", " variable size ", " different lengths",
                             " varying lengths", " varying length", " uneven length"})
    segmented = segmented || joined.find(phrase) != std::string::npos;
  if (!segmented) return r;
  // Other row ops that merely mention segments (a segment softmax) are not a pooling.
  static const std::set<std::string> other = {"softmax", "norm", "normalize", "normalise", "normalization",
                                              "normalisation", "attention", "entropy", "logsumexp", "variance",
                                              "std", "argsort", "sort", "cumsum", "scan", "prod", "product",
                                              // a padded batch with a mask is a dense reduction, not jagged rows
                                              "padded", "padding", "mask", "masked"};
  for (const auto& w : ws)
    if (other.count(w)) return r;
  std::vector<std::string> kinds;
  bool pooling = false;
  for (const auto& w : ws) {
    const std::string k = reduce_word(w);
    if (!k.empty() && std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
    pooling = pooling || w == "pool" || w == "pooling" || w == "pooled" || w == "pools" || w == "reduce" ||
              w == "reduction";
  }
  if (kinds.empty() && !pooling) return r;
  r.matched = true;
  r.spec.source_form = "words";
  // A pooling the generated op does not have (weighted, root-mean-square, median...) or segments
  // given as per-row ids: named, never generated as the plain pooling the words also mention.
  static const std::map<std::string, std::string> unsupported = {
      {"weighted", "a weighted pooling"}, {"weights", "a weighted pooling"}, {"rms", "a root-mean-square pooling"},
      {"median", "a median"}, {"quantile", "a quantile"}, {"percentile", "a percentile"}, {"topk", "a top-k"},
      {"geometric", "a geometric mean"}, {"harmonic", "a harmonic mean"}, {"gem", "a generalised-mean pooling"},
      {"l2", "an L2 pooling"}, {"lp", "an Lp pooling"}};
  for (const auto& w : ws)
    if (unsupported.count(w)) {
      r.rejection = "the description asks for " + unsupported.at(w) + " over segments (\"" + w +
                    "\"): the generated segment op pools by sum, mean, max or min, unweighted";
      return r;
    }
  if (joined.find(" root mean square") != std::string::npos || joined.find(" mean square") != std::string::npos ||
      joined.find(" mean of squares") != std::string::npos) {
    r.rejection = "the description asks for a mean of squares over segments: the generated segment op pools the rows "
                  "themselves by sum, mean, max or min (square them first, and take the root after)";
    return r;
  }
  for (const char* phrase : {" ids ", " id ", " batch vector", " index vector", " segment index ", " assignment",
                             " segment labels", " per row segment"})
    if (joined.find(phrase) != std::string::npos) {
      r.rejection = "the description gives the segments as per-row ids (\"" + trim(phrase) +
                    "\"); the generated op takes offsets [segments + 1] or lengths [segments]: compute them once "
                    "(torch.bincount(ids) gives the lengths of sorted ids) and describe the pooling with those";
      return r;
    }
  if (kinds.empty()) {
    r.spec.reduce = "mean";
    r.notes.push_back("the description names no reduction kind: mean pooling assumed (sum, max and min are the "
                      "alternatives: edit segment.reduce)");
  } else {
    r.spec.reduce = kinds.front();
    if (kinds.size() > 1)
      r.notes.push_back("the description names several reductions; the first, " + kinds.front() +
                        ", is generated (edit segment.reduce for another)");
  }
  // Offsets or lengths: the last index word named ("variable-length" describes the segments).
  std::string cleaned = joined;
  for (const char* phrase : {" variable length", " different lengths", " varying lengths", " varying length",
                             " uneven length"}) {
    for (std::size_t at; (at = cleaned.find(phrase)) != std::string::npos;) cleaned.erase(at, std::string(phrase).size());
  }
  static const std::map<std::string, std::string> index_words = {
      {"offsets", "offsets"}, {"offset", "offsets"}, {"boundaries", "offsets"}, {"indptr", "offsets"},
      {"csr", "offsets"},     {"seqlens", "lengths"}, {"cu", "offsets"},       {"starts", "offsets"},
      {"lengths", "lengths"}, {"length", "lengths"},  {"lens", "lengths"},     {"sizes", "lengths"},
      {"counts", "lengths"}};
  std::string index;
  for (const auto& w : words_of(cleaned)) {
    auto it = index_words.find(w);
    if (it != index_words.end()) index = it->second;
  }
  if (cleaned.find(" cu seqlens") != std::string::npos) index = "offsets";  // cu_seqlens: cumulative
  if (index.empty()) {
    r.notes.push_back("the description names no index form: offsets [segments + 1] assumed (edit segment.index to "
                      "lengths for per-segment row counts)");
    index = "offsets";
  }
  r.spec.index = index;
  static const std::regex dim_re(R"(\b(?:dim|axis|dimension)\s*=?\s*(-?[0-9]))");
  std::smatch m;
  const std::string lowered = lower(text);
  if (std::regex_search(lowered, m, dim_re)) r.spec.pooled_dim = std::stoi(m[1]);
  if ((r.spec.reduce == "max" || r.spec.reduce == "min") &&
      (lowered.find("-inf") != std::string::npos || lowered.find("infinity") != std::string::npos))
    r.spec.empty_segment = "inf";
  r.resolved_from = "description: " + r.spec.reduce + " pooling over variable-length segments given " + r.spec.index;
  return r;
}

// -------------------------------------------------------------------------------------- code

std::string strip_comments(const std::string& code) {
  std::string out;
  bool comment = false;
  char quote = 0;
  for (char c : code) {
    if (c == '\n') comment = false;
    if (comment) continue;
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      comment = true;
      continue;
    }
    out += c;
  }
  return out;
}

// The text from `open` (an opening bracket) to its match, exclusive; npos-safe.
std::size_t matching(const std::string& s, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < s.size(); ++i) {
    if (s[i] == '(' || s[i] == '[' || s[i] == '{') ++depth;
    if (s[i] == ')' || s[i] == ']' || s[i] == '}') {
      if (--depth == 0) return i;
    }
  }
  return std::string::npos;
}

std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty()) out.push_back(trim(cur));
  return out;
}

struct Call {
  std::string name;
  std::vector<std::string> args;  // positional
  std::map<std::string, std::string> kwargs;
  std::size_t pos = 0;
};

std::vector<Call> calls(const std::string& code, const std::set<std::string>& names) {
  std::vector<Call> out;
  for (std::size_t i = 0; i < code.size(); ++i) {
    if (!ident_char(code[i]) || (i > 0 && ident_char(code[i - 1]))) continue;
    std::size_t j = i;
    while (j < code.size() && ident_char(code[j])) ++j;
    const std::string name = code.substr(i, j - i);
    std::size_t k = j;
    while (k < code.size() && code[k] == ' ') ++k;
    if (k < code.size() && code[k] == '(' && names.count(name)) {
      const std::size_t close = matching(code, k);
      if (close != std::string::npos) {
        Call c;
        c.name = name;
        c.pos = i;
        for (const auto& a : split_top(code.substr(k + 1, close - k - 1))) {
          static const std::regex kw(R"(^([A-Za-z_]\w*)\s*=(?!=)\s*([\s\S]*)$)");
          std::smatch m;
          if (std::regex_match(a, m, kw)) c.kwargs[m[1]] = trim(m[2]);
          else c.args.push_back(a);
        }
        out.push_back(c);
      }
    }
    i = j - 1;
  }
  return out;
}

// A method call on a tensor (x.split(...)), not a module function (torch.split(...), F.x(...)).
bool tensor_method(const std::string& code, std::size_t pos) {
  if (pos == 0 || code[pos - 1] != '.') return false;
  std::size_t b = pos - 1;
  while (b > 0 && ident_char(code[b - 1])) --b;
  static const std::set<std::string> modules = {"torch", "F", "functional", "Tensor", "nn", "np"};
  return !modules.count(code.substr(b, pos - 1 - b));
}

// An argument that is one tensor, possibly cast (x, x.float(), x.to(torch.float32)): its name.
std::string tensor_name(std::string arg) {
  arg = trim(arg);
  static const std::regex cast(R"(^([A-Za-z_]\w*)(?:\.(?:float|double|half|bfloat16|contiguous|tolist|long|int)\(\)|\.to\([^()]*\)|\.type_as\(\w+\))*$)");
  std::smatch m;
  if (std::regex_match(arg, m, cast)) return m[1];
  return "";
}

std::string quoted(const std::string& arg) {
  const std::string t = trim(arg);
  if (t.size() >= 2 && (t.front() == '"' || t.front() == '\'') && t.back() == t.front()) return t.substr(1, t.size() - 2);
  return "";
}

int int_arg(const std::string& arg, int fallback) {
  static const std::regex integer(R"(^\s*(-?[0-9]+)\s*$)");
  std::smatch m;
  if (std::regex_match(arg, m, integer)) return std::stoi(m[1]);
  return fallback;
}

struct Signature {
  std::string entry;     // function name, Class.forward, or "lambda"
  std::string klass;
  std::vector<std::string> params;
  std::string body;      // the code after the signature
};

Signature signature(const std::string& code) {
  Signature s;
  static const std::regex klass(R"(\bclass\s+([A-Za-z_]\w*))");
  static const std::regex def(R"(\bdef\s+([A-Za-z_]\w*)\s*\()");
  static const std::regex lambda(R"(\blambda\b([^:]*):)");
  std::smatch m;
  std::size_t open = std::string::npos;
  if (std::regex_search(code, m, klass)) s.klass = m[1];
  for (auto it = std::sregex_iterator(code.begin(), code.end(), def); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1];
    if (name == "__init__") continue;
    if (!s.klass.empty() && name != "forward") continue;
    s.entry = s.klass.empty() ? name : s.klass + "." + name;
    open = static_cast<std::size_t>(it->position(0) + it->length(0) - 1);
    break;
  }
  std::string params;
  if (open != std::string::npos) {
    const std::size_t close = matching(code, open);
    if (close == std::string::npos) return s;
    params = code.substr(open + 1, close - open - 1);
    s.body = code.substr(close + 1);
  } else if (std::regex_search(code, m, lambda)) {
    s.entry = "lambda";
    params = m[1];
    s.body = m.suffix();
  } else {
    s.body = code;
  }
  for (auto p : split_top(params)) {
    p = trim(p.substr(0, p.find_first_of(":=")));
    while (!p.empty() && p.front() == '*') p.erase(p.begin());
    if (!p.empty() && p != "self" && p != "/") s.params.push_back(p);
  }
  return s;
}

bool mentions(const std::string& code, const std::string& name) {
  return std::regex_search(code, std::regex("\\b" + regex_quote(name) + "\\b"));
}

// How `name` is used: +1 per use as boundaries, -1 per use as counts (0: no evidence).
int index_evidence(const std::string& code, const std::string& name) {
  const std::string n = regex_quote(name);
  int score = 0;
  for (const std::string& re : {
           n + R"(\s*\[\s*\w+\s*\+\s*1\s*\])",                          // o[i + 1]
           n + R"(\s*\[\s*1\s*:\s*\])", n + R"(\s*\[\s*:\s*-\s*1\s*\])", // o[1:], o[:-1]
           R"(diff\(\s*)" + n + R"(\b)", n + R"(\.diff\()",                // torch.diff(o)
           R"(offsets\s*=\s*)" + n + R"(\b)",                              // segment_reduce(offsets=o)
           R"(\blen\(\s*)" + n + R"(\s*\)\s*-\s*1)", n + R"(\.(?:numel|nelement)\(\)\s*-\s*1)",
           n + R"(\.(?:size\(\s*0?\s*\)|shape)\s*\[?\s*0?\s*\]?\s*-\s*1)",
           R"(tensor_split\([^)]*\b)" + n + R"(\b)"})
    if (std::regex_search(code, std::regex(re))) ++score;
  for (const std::string& re : {
           R"(lengths\s*=\s*)" + n + R"(\b)",                                  // segment_reduce(lengths=l)
           R"(repeat_interleave\([^()]*(?:\([^()]*\)[^()]*)*,\s*)" + n + R"(\b)", // repeats
           n + R"(\.repeat_interleave\()",
           R"(\bsplit\(\s*\w+\s*,\s*)" + n + R"(\b)", R"(\.split\(\s*)" + n + R"(\b)", // split sizes
           R"(cumsum\(\s*)" + n + R"(\b)", n + R"(\.cumsum\()",
           R"(/\s*\(?\s*)" + n + R"(\b)", R"(div_?\(\s*)" + n + R"(\b)",       // divisor
           R"(:\s*\w+\s*\+\s*)" + n + R"(\s*\[)",                              // x[s:s + l[i]]
           R"(\bzip\([^)]*\b)" + n + R"(\b)", R"(enumerate\(\s*)" + n + R"(\b)"})
    if (std::regex_search(code, std::regex(re))) --score;
  return score;
}

std::string index_from_name(const std::string& name) {
  const std::string n = lower(name);
  for (const char* o : {"offset", "ptr", "cu_seq", "boundar", "start", "bounds", "cum"})
    if (n.find(o) != std::string::npos) return "offsets";
  for (const char* l : {"len", "count", "size", "num", "sizes"})
    if (n.find(l) != std::string::npos) return "lengths";
  return "";
}

// Calls a pure segment reduction is written with; any other call is computation the generated
// kernel would drop.
const std::set<std::string>& allowed_calls() {
  static const std::set<std::string> names = {
      "zeros", "zeros_like", "new_zeros", "empty", "empty_like", "new_empty", "full", "full_like", "new_full",
      "index_add_", "index_add", "scatter_add_", "scatter_add", "scatter_reduce_", "scatter_reduce",
      "index_reduce_", "index_reduce", "segment_reduce", "_segment_reduce", "repeat_interleave", "arange", "diff",
      "range", "len", "mean", "sum", "max", "amax", "min", "amin", "size", "numel", "nelement", "unsqueeze", "view",
      "reshape", "float", "double", "half", "to", "clamp", "clamp_min", "clamp_", "clamp_min_", "div", "div_",
      "true_divide", "split", "tensor_split", "stack", "cat", "tolist", "item", "int", "zip", "enumerate", "cumsum",
      "bincount", "expand", "expand_as", "type_as", "long", "tensor", "as_tensor", "contiguous", "view_as",
      "unsqueeze_", "list", "tuple", "dim", "ones", "ones_like", "new_ones", "movedim", "transpose", "t",
      "permute", "values", "forward", "super", "__init__", "Module", "isinstance", "assert", "print", "ValueError",
      "RuntimeError", "flatten", "squeeze", "where", "maximum", "minimum", "masked_fill", "masked_fill_",
      "cumsum_", "pad", "searchsorted", "bucketize", "abs", "all", "any", "lambda", "float32", "set_",
      "max_", "min_", "sum_", "reduce", "dim_size", "numpy", "cpu", "cuda", "detach", "clone", "copy_",
      "fill_", "zero_", "new_tensor", "int64", "long_", "type", "shape", "no_grad", "while", "elif", "with", "append", "extend", "segment_csr", "scatter_mean", "scatter_sum",
      "scatter_max", "scatter_min", "scatter", "nested_tensor_from_jagged", "nested", "values"};
  return names;
}

std::string method_reduce(const std::string& name) {
  if (name == "mean") return "mean";
  if (name == "sum") return "sum";
  if (name == "max" || name == "amax") return "max";
  if (name == "min" || name == "amin") return "min";
  return "";
}

std::string scatter_reduce_kind(const std::string& s) {
  if (s == "sum" || s == "add") return "sum";
  if (s == "mean") return "mean";
  if (s == "amax" || s == "max") return "max";
  if (s == "amin" || s == "min") return "min";
  return "";
}

// Of several scatter-style calls (a count of ones beside the sums), the one pooling a parameter,
// else the first pooling a named tensor.
const Call& pooling_call(const std::vector<Call>& list, const std::vector<std::string>& params) {
  for (const auto& c : list)
    if (c.args.size() >= 3 && std::find(params.begin(), params.end(), tensor_name(c.args[2])) != params.end()) return c;
  for (const auto& c : list)
    if (c.args.size() >= 3 && !tensor_name(c.args[2]).empty()) return c;
  return list.front();
}

// "line L, column C" of offset `pos` of `body`, a suffix of `code` (comments are blanked, never
// removed across lines, so the numbers are the source's).
std::string where(const std::string& code, const std::string& body, std::size_t pos) {
  const std::size_t at = code.size() - body.size() + std::min(pos, body.size());
  const std::size_t line = 1 + static_cast<std::size_t>(std::count(code.begin(), code.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  const std::size_t start = code.rfind('\n', at == 0 ? 0 : at - 1);
  const std::size_t column = start == std::string::npos || at == 0 ? at + 1 : at - start;
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// The expression a method is called on: `out` in out.scatter_reduce(...), `torch.zeros(n, d)` in
// torch.zeros(n, d).scatter_reduce(...) ("" for a module function).
std::string receiver(const std::string& body, std::size_t pos) {
  if (pos == 0 || body[pos - 1] != '.') return "";
  std::size_t b = pos - 1;
  while (b > 0) {
    const char c = body[b - 1];
    if (ident_char(c) || c == '.') {
      --b;
    } else if (c == ')' || c == ']') {
      int depth = 0;
      std::size_t k = b - 1;
      for (;; --k) {
        if (body[k] == ')' || body[k] == ']') ++depth;
        if (body[k] == '(' || body[k] == '[') --depth;
        if (depth == 0 || k == 0) break;
      }
      if (depth != 0) break;
      b = k;
    } else {
      break;
    }
  }
  return trim(body.substr(b, pos - 1 - b));
}

// The value a reduce-into tensor starts from, read from how it is made: "zero" (zeros, new_zeros,
// full(.., 0)), "-inf" / "+inf" (full(.., float('-inf')), torch.finfo(..).min / .max), "other" (a
// known non-zero constant, or empty: undefined), "" (unknown: a parameter or an expression).
std::string initial_value(const std::string& body, std::size_t before, const std::string& receiver_text) {
  std::string made = receiver_text;
  if (std::regex_match(made, std::regex(R"([A-Za-z_]\w*)"))) {
    // The last assignment to the name before the call (out = torch.zeros(...)).
    const std::regex assign("(?:^|\\n)[ \\t]*" + regex_quote(made) + R"(\s*=(?!=)\s*([^\n]*))");
    const std::string head = body.substr(0, before);
    made.clear();
    for (auto it = std::sregex_iterator(head.begin(), head.end(), assign); it != std::sregex_iterator(); ++it)
      made = trim((*it)[1]);
    // A fill after the assignment decides instead (out.fill_(float('-inf'))).
    const std::regex fill(regex_quote(receiver_text) + R"(\.fill_\(([^\n]*)\))");
    for (auto it = std::sregex_iterator(head.begin(), head.end(), fill); it != std::sregex_iterator(); ++it)
      made = "full(_, " + (*it)[1].str() + ")";
    if (made.empty()) return "";
  }
  const std::string low = lower(made);
  static const std::regex zeros(R"(^(?:torch\.)?(?:[\w\.]*\.)?(?:zeros|new_zeros|zeros_like)\s*\()");
  if (std::regex_search(low, zeros)) return "zero";
  static const std::regex empties(R"(^(?:torch\.)?(?:[\w\.]*\.)?(?:empty|new_empty|empty_like|ones|new_ones|ones_like|rand\w*)\s*\()");
  if (std::regex_search(low, empties)) return "other";
  static const std::regex full(R"(^(?:torch\.)?(?:[\w\.]*\.)?(?:full|new_full|full_like)\s*\()");
  if (!std::regex_search(low, full)) return "";
  const std::size_t open = low.find('(');
  const std::size_t close = matching(low, open);
  if (close == std::string::npos) return "";
  std::vector<std::string> args;
  for (const auto& a : split_top(low.substr(open + 1, close - open - 1)))
    if (!std::regex_search(a, std::regex(R"(^\w+\s*=)")) || a.rfind("fill_value", 0) == 0)
      args.push_back(a.rfind("fill_value", 0) == 0 ? trim(a.substr(a.find('=') + 1)) : a);
  if (args.size() < 2) return "";
  const std::string v = args[1];
  if (v.find("inf") != std::string::npos) return v.find('-') != std::string::npos ? "-inf" : "+inf";
  if (v.find("finfo") != std::string::npos)
    return v.find(".min") != std::string::npos ? "-inf" : v.find(".max") != std::string::npos ? "+inf" : "";
  static const std::regex number(R"(^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[-+]?[0-9]+)?$)");
  if (std::regex_match(v, number)) return std::strtod(v.c_str(), nullptr) == 0.0 ? "zero" : "other";
  return "";
}

SegmentRecognition recognise_code(const std::string& source) {
  SegmentRecognition r;
  const std::string code = strip_comments(source);
  const Signature sig = signature(code);
  const std::string& body = sig.body;
  r.entry = sig.entry;
  std::string data, index_arg;  // the pooled tensor; the index tensor of a scatter-style call
  int dim = 0;
  std::string kind, form;
  std::size_t pooling_pos = std::string::npos;  // the pooling call or slice, for where a refusal points

  // An embedding bag looks rows up by index and pools them: the lookup is a gather the generated
  // segment op does not do.
  for (const auto& c : calls(body, {"embedding_bag", "EmbeddingBag"})) {
    r.matched = true;
    r.spec.source_form = "embedding_bag";
    r.rejection = where(code, body, c.pos) + ": " + c.name + " gathers rows of its weight by index before pooling; "
                  "kernel-dev's segment op pools the rows it is given (sum, mean, max or min over offsets or lengths): "
                  "look the rows up first (weight[ids]) and pool those";
    return r;
  }
  const std::vector<Call> segs = calls(body, {"segment_reduce", "_segment_reduce"});
  const std::vector<Call> csr = calls(body, {"segment_csr"});  // torch_scatter: offsets ("indptr")
  // A jagged nested tensor (torch.nested.nested_tensor_from_jagged(values, offsets)) reduced
  // over its ragged dim 1: the segments of `values` rows.
  const std::vector<Call> nested = calls(body, {"nested_tensor_from_jagged"});
  // torch_scatter's scatter_<reduce>(src, index, dim=0): a per-row segment index.
  const std::vector<Call> ts = calls(body, {"scatter_mean", "scatter_sum", "scatter_max", "scatter_min"});
  const std::vector<Call> scat = calls(body, {"scatter_reduce_", "scatter_reduce", "index_reduce_", "index_reduce"});
  const std::vector<Call> adds = calls(body, {"index_add_", "index_add", "scatter_add_", "scatter_add"});
  const std::vector<Call> splits = calls(body, {"split", "tensor_split"});
  std::string index_hint;  // offsets / lengths when the spelling says it
  std::string index_name;  // the index tensor named by the spelling
  if (!segs.empty()) {
    const Call& c = segs.front();
    pooling_pos = c.pos;
    form = "segment_reduce";
    data = c.args.empty() ? (c.kwargs.count("data") ? tensor_name(c.kwargs.at("data")) : "") : tensor_name(c.args[0]);
    std::string reduce = c.args.size() > 1 ? quoted(c.args[1]) : (c.kwargs.count("reduce") ? quoted(c.kwargs.at("reduce")) : "");
    kind = scatter_reduce_kind(reduce);
    if (kind.empty()) r.rejection = "torch.segment_reduce with reduce='" + reduce + "': the generated kernels pool by sum, mean, max or min";
    for (const char* key : {"lengths", "offsets"})
      if (c.kwargs.count(key)) {
        index_hint = key;
        index_name = tensor_name(c.kwargs.at(key));
      }
    if (c.args.size() > 2 && index_hint.empty()) {
      index_hint = "lengths";  // segment_reduce(data, reduce, lengths, ...)
      index_name = tensor_name(c.args[2]);
    }
    if (c.kwargs.count("axis")) dim = int_arg(c.kwargs.at("axis"), 0);
    if (kind == "max" || kind == "min") {
      // Without `initial` an empty segment gives the reduction's identity (-inf for max); with it,
      // that value: 0 and the identity are what the generated kernels write.
      r.spec.empty_segment = "inf";
      if (c.kwargs.count("initial")) {
        const std::string initial = lower(c.kwargs.at("initial"));
        static const std::regex number(R"(^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[-+]?[0-9]+)?$)");
        const bool negative = initial.find('-') != std::string::npos;
        if (std::regex_match(initial, number) && std::strtod(initial.c_str(), nullptr) == 0.0)
          r.spec.empty_segment = "zero";
        else if (initial.find("inf") == std::string::npos || negative != (kind == "max"))
          r.rejection = "torch.segment_reduce with initial=" + c.kwargs.at("initial") + ": an empty segment gives 0 or " +
                        (kind == "max" ? "-inf" : "+inf") + " in the generated kernels";
      }
    }
  } else if (!nested.empty()) {
    const Call& c = nested.front();
    pooling_pos = c.pos;
    form = "nested";
    data = !c.args.empty() ? tensor_name(c.args[0]) : (c.kwargs.count("values") ? tensor_name(c.kwargs.at("values")) : "");
    if (c.args.size() > 1 || c.kwargs.count("offsets")) {
      index_hint = "offsets";
      index_name = tensor_name(c.args.size() > 1 ? c.args[1] : c.kwargs.at("offsets"));
    } else if (c.kwargs.count("lengths")) {
      index_hint = "lengths";
      index_name = tensor_name(c.kwargs.at("lengths"));
    }
    for (const auto& red : calls(body.substr(c.pos), {"mean", "sum", "amax", "max", "amin", "min"})) {
      kind = method_reduce(red.name);
      std::string d = red.kwargs.count("dim") ? red.kwargs.at("dim") : "";
      if (d.empty() && !red.args.empty()) d = red.args[tensor_method(body.substr(c.pos), red.pos) ? 0 : std::min<std::size_t>(1, red.args.size() - 1)];
      if (int_arg(d, -99) != 1)
        r.rejection = "the nested tensor is reduced over dim " + (d.empty() ? std::string("(all)") : d) +
                      ", not its ragged dim 1: only the pooling of each segment's rows is a segment reduction";
      break;
    }
    if (kind.empty()) return r;
  } else if (!csr.empty()) {
    const Call& c = csr.front();
    pooling_pos = c.pos;
    form = "segment_csr";
    data = c.args.empty() ? "" : tensor_name(c.args[0]);
    index_hint = "offsets";
    index_name = c.args.size() > 1 ? tensor_name(c.args[1]) : (c.kwargs.count("indptr") ? tensor_name(c.kwargs.at("indptr")) : "");
    const std::string reduce = c.kwargs.count("reduce") ? quoted(c.kwargs.at("reduce")) : (c.args.size() > 3 ? quoted(c.args[3]) : "sum");
    kind = scatter_reduce_kind(reduce);
    if (kind.empty()) r.rejection = "segment_csr with reduce='" + reduce + "': the generated kernels pool by sum, mean, max or min";
    // segment_csr pools the last dim of indptr's rank - 1; with a 1-D indptr that is dim 0.
  } else if (!ts.empty()) {
    const Call& c = ts.front();
    pooling_pos = c.pos;
    form = "torch_scatter";
    if (c.args.size() < 2) return r;
    data = tensor_name(c.args[0]);
    index_arg = tensor_name(c.args[1]);
    kind = scatter_reduce_kind(c.name.substr(std::string("scatter_").size()));
    dim = c.kwargs.count("dim") ? int_arg(c.kwargs.at("dim"), 0) : (c.args.size() > 2 ? int_arg(c.args[2], 0) : 0);
    if (data.empty()) r.rejection = "the tensor pooled by " + c.name + " is computed (" + c.args[0] + "): kernel-dev generates the pooling of one input tensor; compute it first";
  } else if (!scat.empty()) {
    const Call& c = pooling_call(scat, sig.params);
    pooling_pos = c.pos;
    form = c.name.find("index") == 0 ? "index_reduce" : "scatter_reduce";
    if (c.args.size() < 3) return r;
    dim = int_arg(c.args[0], 0);
    index_arg = tensor_name(c.args[1]);
    data = tensor_name(c.args[2]);
    const std::string reduce = c.args.size() > 3 ? quoted(c.args[3]) : (c.kwargs.count("reduce") ? quoted(c.kwargs.at("reduce")) : "");
    kind = scatter_reduce_kind(reduce);
    if (kind.empty()) r.rejection = c.name + " with reduce='" + reduce + "': the generated kernels pool by sum, mean, max or min";
    if (data.empty()) r.rejection = "the tensor pooled by " + c.name + " is computed (" + c.args[2] + "): kernel-dev generates the pooling of one input tensor; compute it first";
    // include_self (default True) folds the output's initial values into every segment: harmless
    // for a sum into zeros or a max from -inf, a different op otherwise (a max with 0 is a ReLU of
    // the max; a mean counts one more element). An empty segment keeps the initial value.
    auto self = c.kwargs.find("include_self");
    const bool include_self = self == c.kwargs.end() || trim(self->second) != "False";
    const std::string initial = initial_value(body, c.pos, receiver(body, c.pos));
    const std::string identity = kind == "max" ? "-inf" : kind == "min" ? "+inf" : "zero";
    const std::string at = " (" + where(code, body, c.pos) + ")";
    if (!kind.empty() && r.rejection.empty()) {
      if (initial == identity && kind != "mean") {
        r.spec.empty_segment = identity == "zero" ? "zero" : "inf";
      } else if (!include_self && (initial == "zero" || (initial == identity && kind != "sum"))) {
        r.spec.empty_segment = initial == "zero" ? "zero" : "inf";
      } else if (include_self) {
        r.rejection = c.name + "(..., reduce='" + reduce + "') with include_self=True (the default)" + at +
                      " also reduces the output's initial values " +
                      (initial.empty() ? std::string("(which the analyser cannot see)") : "(" + initial + ")") +
                      " into every segment" +
                      (kind == "mean" ? ": the mean counts them as one more element"
                       : kind == "sum" ? ""
                                       : ": a " + kind + " with " + initial + " is not the segment's " + kind) +
                      ". The generated op pools each segment's rows only: pass include_self=False (empty segments "
                      "then keep the initial value, 0 from torch.zeros)" +
                      (kind == "max" || kind == "min"
                           ? std::string(", or start from torch.full(..., float('") + (kind == "max" ? "-" : "") + "inf'))"
                           : std::string());
      } else {
        r.rejection = c.name + " with include_self=False" + at + " leaves an empty segment at the output's initial value (" +
                      (initial.empty() ? std::string("unknown to the analyser") : initial) +
                      "); the generated op writes 0 (or -inf / +inf for max / min): start from torch.zeros";
      }
    }
  } else if (!adds.empty()) {
    const Call& c = pooling_call(adds, sig.params);
    pooling_pos = c.pos;
    form = c.name.find("index") == 0 ? "index_add" : "scatter_add";
    if (c.args.size() < 3) return r;
    dim = int_arg(c.args[0], 0);
    index_arg = tensor_name(c.args[1]);
    data = tensor_name(c.args[2]);
    if (data.empty()) r.rejection = "the tensor pooled by " + c.name + " is computed (" + c.args[2] + "): kernel-dev generates the pooling of one input tensor; compute it first";
    // A division after the sums makes them means (out / lengths[:, None], out.div_(counts)), when
    // it divides by counts: a divisor without any name (/ 2.0) only scales the sums.
    const std::string after = body.substr(c.pos);
    static const std::regex divide(R"((?:[^/]/[^/=]|\.div_?\(|torch\.div\(|true_divide|/=))");
    kind = std::regex_search(after, divide) ? "mean" : "sum";
    static const std::regex divisor(R"((?:[^/]/=?|\.div_?\(|true_divide\()\s*([^\n]*))");
    for (auto it = std::sregex_iterator(after.begin(), after.end(), divisor); it != std::sregex_iterator(); ++it) {
      const std::string by = trim((*it)[1].str());
      if (!by.empty() && by[0] != '/' && !std::regex_search(by, std::regex(R"(^\(*\s*[A-Za-z_])")) && r.rejection.empty())
        r.rejection = where(code, body, c.pos + static_cast<std::size_t>(it->position(0))) + ": the " + c.name +
                      " sums are divided by `" + by + "`, not by the segments' lengths: the generated op pools by sum, "
                      "mean (divided by each segment's row count), max or min; scale the result separately";
    }
    if (c.kwargs.count("alpha") && int_arg(c.kwargs.at("alpha"), 0) != 1 && r.rejection.empty())
      r.rejection = where(code, body, c.pos) + ": " + c.name + " with alpha=" + c.kwargs.at("alpha") +
                    " scales the pooled rows; the generated op pools them unscaled (scale the result separately)";
  } else {
    // A loop over segments, or a split into segments, with a reduction per piece.
    static const std::regex slice(R"(\b([A-Za-z_]\w*)\s*\[\s*((?::\s*,\s*)*)([^\[\]:,]*(?:\[[^\]]*\][^\[\]:,]*)*):([^\[\]:,]*(?:\[[^\]]*\][^\[\]:,]*)*)\])");
    const bool loop = std::regex_search(body, std::regex(R"(\bfor\b[\s\S]*\bin\b)"));
    std::smatch m;
    std::string search = body;
    while (loop && std::regex_search(search, m, slice)) {
      const std::string a = trim(m[3]), b = trim(m[4]);
      // Bounds that vary per segment (o[i]:o[i + 1], s:s + n, s:e from a zip), not constants.
      static const std::regex constant(R"(^-?[0-9]*$)");
      // ... and that come from an index tensor: the bounds or the loops' iterables name a tensor
      // besides the sliced one and the loop variables (x[:, i * 16:(i + 1) * 16] over range(4)
      // is a fixed chunking, not segments).
      bool indexed = false;
      {
        std::set<std::string> loop_vars;
        std::string sources = a + " " + b;
        static const std::regex header(R"(\bfor\s+([\w\s,()]+?)\s+in\s+([^\n:\]]+))");
        for (auto it = std::sregex_iterator(body.begin(), body.end(), header); it != std::sregex_iterator(); ++it) {
          static const std::regex word(R"([A-Za-z_]\w*)");
          const std::string vars = (*it)[1].str();
          for (auto w = std::sregex_iterator(vars.begin(), vars.end(), word); w != std::sregex_iterator(); ++w)
            loop_vars.insert(w->str());
          sources += " " + (*it)[2].str();
        }
        // Names assigned in the body from the index (s, e = offsets[i].item(), ...) count as the index.
        static const std::set<std::string> builtins = {"range", "len", "zip", "enumerate", "int", "tolist", "item",
                                                       "numel", "size", "shape", "min", "max", "torch", "diff",
                                                       "cumsum", "long", "cpu", "list", "reversed", "sorted"};
        static const std::regex name_re(R"((?:^|[^\w.])([A-Za-z_]\w*))");
        for (auto it = std::sregex_iterator(sources.begin(), sources.end(), name_re); it != std::sregex_iterator(); ++it) {
          const std::string n = (*it)[1].str();
          if (n != m[1].str() && !loop_vars.count(n) && !builtins.count(n)) indexed = true;
        }
      }
      if (indexed && !a.empty() && !b.empty() && !(std::regex_match(a, constant) && std::regex_match(b, constant))) {
        data = m[1];
        pooling_pos = body.size() - search.size() + static_cast<std::size_t>(m.position(0));
        const std::string leading = m[2];  // ":, " per dim before the sliced one
        dim = static_cast<int>(std::count(leading.begin(), leading.end(), ','));
        form = "loop";
        break;
      }
      search = m.suffix();
    }
    if (form.empty() && !splits.empty()) {
      const Call& c = splits.front();
      pooling_pos = c.pos;
      const bool method = tensor_method(body, c.pos);
      if (method) {
        std::size_t b = c.pos - 1;
        while (b > 0 && ident_char(body[b - 1])) --b;
        data = body.substr(b, c.pos - 1 - b);
        if (!c.args.empty()) index_name = tensor_name(c.args[0]);
        if (c.args.size() > 1) dim = int_arg(c.args[1], 0);
      } else if (c.args.size() >= 2) {
        data = tensor_name(c.args[0]);
        index_name = tensor_name(c.args[1]);
        if (c.args.size() > 2) dim = int_arg(c.args[2], 0);
      }
      if (c.kwargs.count("dim")) dim = int_arg(c.kwargs.at("dim"), 0);
      // Pieces of tensor-given sizes, reduced and stacked (a split into fixed halves is a GLU, not this).
      if (!data.empty() && !index_name.empty() && std::regex_search(body, std::regex(R"(\b(?:stack|cat)\s*\()"))) {
        form = "split";
        // tensor_split cuts at indices (boundaries); split takes sizes.
        index_hint = c.name == "tensor_split" ? "offsets" : "lengths";
      }
    }
    if (form.empty()) return r;
    // A piece reduced by something other than sum/mean/max/min is a segment reduction the
    // generator does not have: named (with where) rather than left to the element-wise front end.
    static const std::set<std::string> others = {"std", "var", "prod", "median", "nanmedian", "logsumexp", "norm",
                                                 "quantile", "nanquantile", "mode", "nanmean", "nansum", "argmax",
                                                 "argmin", "count_nonzero", "std_mean", "var_mean"};
    const std::vector<Call> other_calls = calls(body, others);
    const std::vector<Call> pooled = calls(body, {"mean", "sum", "max", "amax", "min", "amin"});
    if (!other_calls.empty() && (pooled.empty() || other_calls.front().pos < pooled.front().pos)) {
      r.matched = true;
      r.spec.source_form = form;
      r.rejection = "each segment is reduced with " + other_calls.front().name + " (" +
                    where(code, body, other_calls.front().pos) +
                    "): the generated segment kernels pool by sum, mean, max or min (amax / amin)";
      return r;
    }
    // The reduction applied to each piece: the first reducing call after the slice / split. It
    // must reduce the dim the pieces were cut along (else it is no pooling of the segment's rows),
    // and what is done to its result must be a division by the segment's row count (a mean) or nothing.
    for (const auto& c : pooled) {
      kind = method_reduce(c.name);
      std::string d;
      if (c.kwargs.count("dim")) d = c.kwargs.at("dim");
      else if (c.kwargs.count("axis")) d = c.kwargs.at("axis");
      else if (tensor_method(body, c.pos) && !c.args.empty())
        d = c.args[0];                            // piece.mean(0)
      else if (!tensor_method(body, c.pos) && c.args.size() > 1) d = c.args[1];  // torch.mean(piece, 0)
      const std::string at = where(code, body, c.pos);
      r.matched = true;
      r.spec.source_form = form;
      if (d.empty()) {
        r.rejection = at + ": " + c.name + " without a dim reduces every element of the segment, not its rows: the "
                      "generated op pools each segment's rows per feature (write ." + c.name + "(" + std::to_string(dim) + "))";
        return r;
      }
      if (int_arg(d, -99) != dim) {
        r.rejection = at + ": each segment is reduced over dim " + d + " but cut along dim " + std::to_string(dim) +
                      ": the generated op pools the rows the segments are cut into (reduce over dim " +
                      std::to_string(dim) + ", written non-negative)";
        return r;
      }
      // The call's end, past .values / [0] of a max or min.
      std::size_t end = body.find('(', c.pos);
      end = end == std::string::npos ? std::string::npos : matching(body, end);
      if (end != std::string::npos) {
        std::smatch m;
        std::string rest = body.substr(end + 1);
        if (std::regex_search(rest, m, std::regex(R"(^(?:\.values|\[\s*0\s*\])?\s*(\*\*|[*/%+-])(?!=)\s*)"))) {
          // The operand: up to a delimiter at this depth.
          std::string operand;
          int depth = 0;
          for (std::size_t i = static_cast<std::size_t>(m.length(0)); i < rest.size(); ++i) {
            const char ch = rest[i];
            if (ch == '(' || ch == '[') ++depth;
            if ((ch == ')' || ch == ']' || ch == ',' || ch == '\n') && depth == 0) break;
            if (ch == ')' || ch == ']') --depth;
            operand += ch;
          }
          operand = trim(std::regex_replace(operand, std::regex(R"(\s+for\s[\s\S]*$)"), ""));
          // Counts: the index tensor or a loop variable (offsets[i + 1] - offsets[i], e - s, n), or the piece's size.
          bool counts = std::regex_search(operand, std::regex(R"(\blen\s*\(|\.shape\s*\[|\.size\s*\(|numel|nelement)"));
          for (const auto& p : sig.params)
            counts = counts || (p != data && mentions(operand, p));
          static const std::regex loop_var(R"(\bfor\s+([\w\s,()]+?)\s+in\b)");
          for (auto it = std::sregex_iterator(body.begin(), body.end(), loop_var); it != std::sregex_iterator(); ++it)
            for (const auto& v : split_top((*it)[1].str()))
              counts = counts || (!trim(v).empty() && std::regex_match(trim(v), std::regex(R"(\w+)")) && mentions(operand, trim(v)));
          if (m[1].str() == "/" && kind == "sum" && counts) {
            kind = "mean";
          } else {
            r.rejection = at + ": each segment's " + kind + " is combined with `" + m[1].str() + " " + operand +
                          "`: the generated op pools by sum, mean, max or min alone (a sum divided by the segment's "
                          "row count is its mean); apply the rest separately";
            return r;
          }
        }
      }
      break;
    }
    if (kind.empty()) return r;
  }
  if (form.empty() || data.empty()) {
    if (!form.empty() && r.rejection.empty()) r.matched = false;
    if (r.rejection.empty()) return r;
  }
  r.matched = true;
  r.spec.reduce = kind.empty() ? "mean" : kind;
  r.spec.source_form = form;
  r.spec.pooled_dim = dim;

  // The index tensor: named by the spelling, else the parameter used as boundaries or counts.
  std::vector<std::string> candidates;
  if (!index_name.empty()) candidates.push_back(index_name);
  for (const auto& p : sig.params)
    if (p != data && p != index_name) candidates.push_back(p);
  std::string chosen, index;
  int best = 0;
  for (const auto& c : candidates) {
    const int score = index_evidence(body, c);
    if (score != 0 && (chosen.empty() || std::abs(score) > std::abs(best))) {
      chosen = c;
      best = score;
    }
  }
  if (!index_hint.empty()) {
    index = index_hint;
    if (chosen.empty()) chosen = index_name;
  } else if (!chosen.empty()) {
    index = best > 0 ? "offsets" : "lengths";
    // Both boundaries and counts passed (def f(x, offsets, lengths)): the boundaries win.
    for (const auto& c : candidates)
      if (index_evidence(body, c) > 0) {
        index = "offsets";
        chosen = c;
        break;
      }
  } else {
    for (const auto& c : candidates)
      if (!(index = index_from_name(c)).empty()) {
        chosen = c;
        break;
      }
  }
  if (index.empty()) {
    index = "offsets";
    r.notes.push_back("the code does not show whether its index tensor holds boundaries or counts: offsets [segments + 1] "
                      "assumed (edit segment.index to lengths for per-segment row counts)");
  }
  // A per-row segment id passed straight to index_add_ (torch_geometric's `batch`) is a third
  // index form, which the generated op does not take.
  if (!index_arg.empty() && std::find(sig.params.begin(), sig.params.end(), index_arg) != sig.params.end() &&
      index_evidence(body, index_arg) == 0 && index_from_name(index_arg).empty()) {
    r.rejection = "the code pools by a per-row segment id tensor (`" + index_arg + "`, passed to " + form +
                  " directly); the generated op takes offsets [segments + 1] or lengths [segments]: compute them "
                  "once (torch.bincount(" + index_arg + ") gives the lengths of sorted ids) and pass those";
  }
  r.spec.index = index;

  // Anything besides the pooling would be dropped by the generated kernel: name it.
  std::set<std::string> extra;
  std::size_t extra_pos = std::string::npos;  // the first of them
  static const std::regex call_re(R"(\b([A-Za-z_]\w*)\s*\()");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), call_re);
       it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1];
    if (!allowed_calls().count(name) && name != sig.klass && name != "def" && name != "return" && name != "in" &&
        name != "if" && name != "for" && name != "and" && name != "or" && name != "not") {
      extra.insert(name);
      extra_pos = std::min(extra_pos, static_cast<std::size_t>(it->position(0)));
    }
  }
  std::istringstream lines(body);
  std::size_t line_at = 0;
  for (std::string line; std::getline(lines, line); line_at += line.size() + 1) {
    if ((data.empty() || !mentions(line, data)) && line.find("return") == std::string::npos) continue;
    // Indexing ([...]) and call arguments may hold index arithmetic; operators outside them act on values.
    std::string outside;
    int depth = 0;
    for (char c : line) {
      if (c == '[' || c == '(') ++depth;
      if (depth == 0) outside += c;
      if ((c == ']' || c == ')') && depth > 0) --depth;
    }
    // The pooled tensor (or a slice of it) as an operand: x * w, (x[a:b] * 2), 2 * x.
    std::string flat = line;
    static const std::regex innermost(R"(\[[^\[\]]*\])");
    while (std::regex_search(flat, innermost)) flat = std::regex_replace(flat, innermost, "{}");
    const std::string d = regex_quote(data);
    const bool operand = !data.empty() && (std::regex_search(flat, std::regex("\\b" + d + R"(\s*(?:\{\})?\s*[*+@/-](?!=))")) ||
                                           std::regex_search(flat, std::regex(R"([*+@/-]\s*)" + d + R"(\b(?!\s*\.))")));
    if (operand || outside.find('*') != std::string::npos || outside.find('@') != std::string::npos ||
        std::regex_search(outside, std::regex(R"([^+]\+[^+=])")))
    {
      extra.insert("arithmetic in '" + trim(line) + "'");
      extra_pos = std::min(extra_pos, line_at + line.find_first_not_of(" \t"));
    }
  }
  const bool extra_refused = !extra.empty() && r.rejection.empty();
  if (extra_refused) {
    std::string list;
    for (const auto& e : extra) list += (list.empty() ? "" : ", ") + e;
    r.rejection = "the code computes more than a segment " + r.spec.reduce + " (" + list +
                  "); kernel-dev generates the pooling of one input tensor: apply the rest separately, or pool first";
  }
  // Every refusal of code says where (the construct's line and column).
  const std::size_t refused_at = extra_refused ? extra_pos : pooling_pos;
  if (!r.rejection.empty() && !std::regex_search(r.rejection, std::regex(R"(line \d+, column \d+)")) &&
      refused_at != std::string::npos)
    r.rejection = where(code, body, refused_at) + ": " + r.rejection;
  r.resolved_from = "PyTorch " + (sig.entry.empty() ? std::string("code") : sig.entry) + ": segment " + r.spec.reduce +
                    " of `" + data + "` over dim " + std::to_string(dim) + " via " + form + ", segments given by " +
                    index + (chosen.empty() ? "" : " (`" + chosen + "`)");
  return r;
}

bool looks_like_code(const std::string& text) {
  static const std::regex code(R"((\bdef\s+\w+\s*\(|\blambda\b|\btorch\.|\.\w+_?\(|\breturn\b|\bfor\b.*\bin\b.*:))");
  return std::regex_search(text, code);
}

}  // namespace

SegmentRecognition recognise_segment(const std::string& text) {
  // A pooling is a few lines; std::regex recursion on a long file could exhaust the stack.
  if (text.size() > 20000) return {};
  try {
    if (looks_like_code(text)) return recognise_code(text);
    // A longer text is not a description of one op (input_problem says so).
    if (text.size() > kMaxDescriptionBytes) return {};
    return recognise_words(text);
  } catch (const std::exception&) {  // a regex over a pathological input: not recognised
    return {};
  }
}

}  // namespace liger::kernel_dev
