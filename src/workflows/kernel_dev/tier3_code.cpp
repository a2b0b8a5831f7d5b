// Reading a fused-linear loss's PyTorch code as expressions (see tier3_code.h). The code is cut
// into logical statements (brackets joined, comments dropped, one-line defs and lambdas split);
// assignments bind names to their right-hand sides, and the returned value is expanded through
// them into its top-level additive terms and each term's multiplicative factors. A term holding
// the loss call must be that call alone; a term holding logsumexp squared is the z-loss; any other
// term, factor or addition to the logits is something the generated op would not compute.
#include "workflows/kernel_dev/tier3_code.h"

#include <fmt/format.h>

#include "workflows/kernel_dev/expr.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <regex>
#include <set>

namespace liger::kernel_dev {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

bool ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

struct Statement {
  std::string text;
  std::size_t origin = 0;  // offset of text[0] in the source
};

// Logical statements: a newline inside brackets or after a backslash continues; ';' separates;
// `def f(..): body` and `lambda ..: body` give the body as its own statement ("return body").
std::vector<Statement> statements(const std::string& code) {
  std::vector<Statement> out;
  std::string cur;
  std::size_t start = 0;
  int depth = 0;
  char quote = 0;
  bool comment = false;
  auto flush = [&](std::size_t next) {
    const std::string t = trim(cur);
    if (!t.empty()) out.push_back({t, start + cur.find(t.front())});
    cur.clear();
    start = next;
  };
  for (std::size_t i = 0; i < code.size(); ++i) {
    const char c = code[i];
    if (comment) {
      if (c != '\n') continue;
      comment = false;
    }
    if (quote) {
      if (c == quote) quote = 0;
      cur += c;
      continue;
    }
    if (c == '#') {
      comment = true;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    if ((c == '\n' || c == ';') && depth == 0 && !(c == '\n' && !cur.empty() && cur.back() == '\\')) {
      flush(i + 1);
      continue;
    }
    if (c == '\n') {
      cur += ' ';
      continue;
    }
    if (cur.empty()) start = i;
    cur += c;
  }
  flush(code.size());
  // Split `def f(x): return y` / `class A(nn.Module): ...` / `lambda a, b: e` at the header's colon.
  std::vector<Statement> split;
  for (const auto& s : out) {
    static const std::regex header(R"(^(?:async\s+)?(?:def|class)\b|^(?:[A-Za-z_]\w*\s*=\s*)?lambda\b)");
    if (!std::regex_search(s.text, header)) {
      split.push_back(s);
      continue;
    }
    int d = 0;
    std::size_t colon = std::string::npos;
    for (std::size_t i = 0; i < s.text.size(); ++i) {
      const char c = s.text[i];
      if (c == '(' || c == '[' || c == '{') ++d;
      if (c == ')' || c == ']' || c == '}') --d;
      if (c == ':' && d == 0) {
        colon = i;
        break;
      }
    }
    split.push_back({s.text.substr(0, colon == std::string::npos ? s.text.size() : colon + 1), s.origin});
    if (colon == std::string::npos) continue;
    const std::string body = trim(s.text.substr(colon + 1));
    if (body.empty()) continue;
    const std::size_t at = s.origin + s.text.find(body, colon + 1);
    const bool lambda = s.text.find("lambda") != std::string::npos && s.text.find("def") != 0;
    split.push_back({lambda && body.rfind("return", 0) != 0 ? "return " + body : body, lambda ? at - 7 : at});
  }
  return split;
}

std::string location(const std::string& code, std::size_t at) {
  at = std::min(at, code.size());
  const auto line = 1 + std::count(code.begin(), code.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  const std::size_t nl = at == 0 ? std::string::npos : code.rfind('\n', at - 1);
  const std::size_t column = nl == std::string::npos ? at + 1 : at - nl;
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// The index of the bracket that closes the one at `open` (round or square, nested), or
// text.size() when the text ends first.
std::size_t closing_bracket(const std::string& text, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < text.size(); ++i) {
    if (text[i] == '(' || text[i] == '[') ++depth;
    if ((text[i] == ')' || text[i] == ']') && --depth == 0) return i;
  }
  return text.size();
}

// Top-level pieces split at `seps` (one character each); a '*' of '**' and a sign of an exponent
// (1e-4) or a unary sign never split. Each piece keeps the operator before it (' ' for the first).
std::vector<std::pair<char, std::string>> split_at(const std::string& e, const std::string& seps) {
  std::vector<std::pair<char, std::string>> out;
  int depth = 0;
  char op = ' ';
  std::string cur;
  for (std::size_t i = 0; i < e.size(); ++i) {
    const char c = e[i];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    bool cut = depth == 0 && seps.find(c) != std::string::npos;
    if (cut && c == '*' && ((i + 1 < e.size() && e[i + 1] == '*') || (i > 0 && e[i - 1] == '*'))) cut = false;
    if (cut && c == '/' && i + 1 < e.size() && e[i + 1] == '/') cut = false;  // the second '/' cuts
    if (cut && (c == '+' || c == '-')) {
      const std::string before = trim(cur);
      // unary (nothing before, or an operator before) or an exponent's sign (1e-4)
      if (before.empty() || std::string("+-*/@(,=<>").find(before.back()) != std::string::npos) cut = false;
      else if (std::regex_search(before, std::regex(R"((?:^|[^\w.])\d+\.?\d*[eE]$)"))) cut = false;
    }
    if (cut) {
      out.emplace_back(op, trim(cur));
      cur.clear();
      op = c;
      continue;
    }
    cur += c;
  }
  out.emplace_back(op, trim(cur));
  return out;
}

std::string strip_parens(std::string e) {
  for (;;) {
    e = trim(e);
    if (e.size() < 2 || e.front() != '(' || e.back() != ')') return e;
    int depth = 0;
    for (std::size_t i = 0; i < e.size(); ++i) {
      if (e[i] == '(') ++depth;
      if (e[i] == ')' && --depth == 0 && i + 1 != e.size()) return e;
    }
    e = e.substr(1, e.size() - 2);
  }
}

std::optional<double> number(const std::string& e) {
  static const std::regex re(R"(^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$)");
  std::smatch m;
  if (std::regex_match(e, m, re)) return std::stod(m[1].str());
  return std::nullopt;
}

struct Binding {
  std::string expr;
  std::size_t origin = 0;
};

class Reader {
 public:
  Reader(const std::string& code, std::string loss, std::string reduction, std::optional<double> temperature)
      : code_(code), loss_(std::move(loss)), reduction_(std::move(reduction)), temperature_(temperature) {}

  LossCodeReading run(double beta);

 private:
  const std::string& code_;
  std::string loss_, reduction_;
  std::optional<double> temperature_;
  std::map<std::string, Binding> env_;
  std::set<std::string> logits_names_;
  LossCodeReading out_;

  void refuse(const std::string& why) {
    if (out_.rejection.empty()) out_.rejection = why;
  }

  // `factors` ("* T * T", "/ 2", "0.5") as a positive number: numbers, and the temperature's names
  // where the code gives its value. nullopt for anything else (a tensor, an unknown name).
  std::optional<double> constant_factor(const std::string& factors) const {
    const std::string trimmed = std::regex_replace(factors, std::regex(R"(^\s+)"), "");
    // "* T * T" follows the loss call, "0.5" precedes it.
    const bool leading_operator = !trimmed.empty() && (trimmed[0] == '*' || trimmed[0] == '/');
    try {
      const Expr e = parse_expression((leading_operator ? "1 " : "1 * ") + trimmed);
      Environment values;
      for (const auto& name : free_symbols(e)) {
        if (!temperature_ || !std::regex_match(name, std::regex("T|temperature|temp|tau"))) return std::nullopt;
        values[name] = *temperature_;
      }
      const double value = eval_f64(e, values);
      if (!std::isfinite(value) || value <= 0) return std::nullopt;
      return value;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }

  // `e` with bound names replaced by their expressions (bounded: expansions only ever shrink
  // toward the parameters, but a long chain is cut off).
  std::string expand(const std::string& e, int depth = 0) const {
    if (depth > 8 || e.size() > 20000) return e;
    std::string out;
    bool changed = false;
    for (std::size_t i = 0; i < e.size();) {
      if (ident(e[i]) && (i == 0 || (!ident(e[i - 1]) && e[i - 1] != '.')) && !std::isdigit(static_cast<unsigned char>(e[i]))) {
        std::size_t j = i;
        while (j < e.size() && (ident(e[j]) || (e[j] == '.' && j + 1 < e.size() && ident(e[j + 1])))) ++j;
        // the longest bound prefix of a dotted name (self.loss_fn.weight -> self.loss_fn)
        std::string name = e.substr(i, j - i);
        for (;;) {
          if (env_.count(name)) break;
          const auto dot = name.rfind('.');
          if (dot == std::string::npos) break;
          name = name.substr(0, dot);
        }
        if (env_.count(name)) {
          out += "(" + env_.at(name).expr + ")";
          i += name.size();
          changed = true;
          continue;
        }
        out += e.substr(i, j - i);
        i = j;
        continue;
      }
      out += e[i++];
    }
    return changed ? expand(out, depth + 1) : out;
  }

  static bool loss_call(const std::string& e) {
    static const std::regex re(R"(\b(?:cross_entropy|nll_loss|kl_div)\s*\(|CrossEntropyLoss|KLDivLoss|NLLLoss)");
    return std::regex_search(e, re);
  }
  static bool squared(const std::string& e) {
    static const std::regex re(R"(\*\*\s*2\b|\bpow\s*\(\s*2\b|\bsquare\s*\()");
    return std::regex_search(e, re);
  }

  void read_statements(const std::vector<Statement>& stmts, std::vector<Statement>& returns);
  void check_logits(const Statement& s, const std::string& rhs);
  void check_loss_arguments(const std::vector<Statement>& stmts);
  void read_terms(const Statement& ret);
  void check_ce_logits(const std::vector<Statement>& stmts);
  std::string normal_logits(std::string e, bool log_probs, const std::string& where);
  void read_jsd(const std::vector<Statement>& stmts, double beta);
  void read_params(const std::vector<Statement>& stmts);
  int side(const std::string& expr) const;
  void check_kl_calls(const std::vector<Statement>& stmts);
  std::vector<std::string> params_;
};

void Reader::read_statements(const std::vector<Statement>& stmts, std::vector<Statement>& returns) {
  static const std::regex assign(R"(^([A-Za-z_][\w.]*)\s*(?::\s*[^=]+)?([-+*/]?)=(?!=)\s*([\s\S]*)$)");
  static const std::regex linear(R"(@|\blinear\s*\(|\bmatmul\s*\(|\bmm\s*\(|\beinsum\s*\()");
  static const std::regex reads_logits(R"(softmax|cross_entropy|kl_div|nll_loss|logsumexp|Loss\b)");
  for (const auto& s : stmts) {
    if (s.text.rfind("return", 0) == 0 && (s.text.size() == 6 || !ident(s.text[6]))) {
      returns.push_back({trim(s.text.substr(6)), s.origin + (s.text.size() - trim(s.text.substr(6)).size())});
      check_logits(returns.back(), returns.back().text);
      continue;
    }
    std::smatch m;
    if (!std::regex_match(s.text, m, assign)) {
      check_logits(s, s.text);
      continue;
    }
    const std::string name = m[1].str(), op = m[2].str();
    std::string rhs = trim(m[3].str());
    // A parameter tensor (self.weight = nn.Parameter(..)) is a leaf, not an expression to expand.
    if (std::regex_search(rhs, std::regex(R"(^(?:torch\.)?(?:nn\.)?Parameter\s*\()"))) continue;
    if (rhs.find(name) != std::string::npos || !op.empty()) {
      // x = x + y / x += y: the earlier binding is substituted now (lazy lookup would loop).
      const std::string before = env_.count(name) ? "(" + env_[name].expr + ")" : name;
      if (!op.empty()) rhs = name + " " + op + " (" + rhs + ")";
      rhs = std::regex_replace(rhs, std::regex("(^|[^\\w.])" + std::regex_replace(name, std::regex(R"(\.)"), R"(\.)") + "\\b"),
                               "$1" + before);
    }
    check_logits(s, rhs);
    const bool holds_logits = (std::regex_search(rhs, linear) || [&] {
                                for (const auto& l : logits_names_)
                                  if (std::regex_search(rhs, std::regex("(^|[^\\w.])" + l + "\\b"))) return true;
                                return false;
                              }()) && !std::regex_search(rhs, reads_logits);
    if (holds_logits) logits_names_.insert(name);
    else logits_names_.erase(name);
    env_[name] = {rhs, s.origin + s.text.find(m[3].str())};
  }
}

// Something added to the linear layer's output (a bias, a mask, a penalty) changes the logits the
// fused op computes: every piece of an expression holding x @ w.T (or a name bound to it) must be
// that product alone, up to factors and functions (softcapping, a temperature).
void Reader::check_logits(const Statement& s, const std::string& rhs) {
  static const std::regex linear(R"(@|\blinear\s*\(|\bmatmul\s*\(|\bmm\s*\()");
  // Every bracketed argument list and the whole expression: split into arguments, then terms.
  std::vector<std::string> pieces = {rhs};
  for (std::size_t i = 0; i < rhs.size(); ++i) {
    if (rhs[i] != '(' && rhs[i] != '[') continue;
    int depth = 0;
    for (std::size_t j = i; j < rhs.size(); ++j) {
      if (rhs[j] == '(' || rhs[j] == '[') ++depth;
      if ((rhs[j] == ')' || rhs[j] == ']') && --depth == 0) {
        for (const auto& [op, arg] : split_at(rhs.substr(i + 1, j - i - 1), ",")) pieces.push_back(arg);
        break;
      }
    }
  }
  for (const auto& piece : pieces) {
    const auto terms = split_at(piece, "+-");
    if (terms.size() < 2) continue;
    // A per-row shift (z - z.max(-1, keepdim=True)) leaves every softmax-based loss unchanged.
    auto shift = [](char op, const std::string& term) {
      return op == '-' && std::regex_search(term, std::regex(R"(\b(?:max|amax|logsumexp)\s*\()")) &&
             term.find("keepdim") != std::string::npos;
    };
    for (const auto& [op, term] : terms) {
      if (shift(op, term)) continue;
      const std::string t = strip_parens(term);
      bool logits = std::regex_search(t, linear) && t.find("softmax") == std::string::npos;
      for (const auto& l : logits_names_)
        logits = logits || std::regex_match(t, std::regex("^" + l + R"((?:\.(?:float|to|contiguous|view|reshape)\([^()]*\))*$)"));
      if (!logits) continue;
      for (const auto& [op2, other] : terms) {
        if (&other == &term || shift(op2, other)) continue;
        refuse("the linear layer's output gets `" + std::string(op2 == '-' ? "- " : "+ ") + strip_parens(other) +
               "` (" + location(code_, s.origin + s.text.find(other.substr(0, std::min<std::size_t>(other.size(), 20)))) +
               "): the generated fused-linear op computes logits = x @ weight.T alone (no bias or added term); LM "
               "heads have no bias, or fold it into an extra input column");
        return;
      }
    }
  }
}

// Arguments of the loss call the generated op has no equivalent for (class weights, the legacy
// size_average / reduce flags), whether keyword or positional.
void Reader::check_loss_arguments(const std::vector<Statement>& stmts) {
  static const std::regex call(R"(\b(F\.|functional\.|nn\.|torch\.nn\.)?(cross_entropy|nll_loss|kl_div|CrossEntropyLoss|NLLLoss|KLDivLoss)\s*\()");
  for (const auto& s : stmts) {
    for (auto it = std::sregex_iterator(s.text.begin(), s.text.end(), call); it != std::sregex_iterator(); ++it) {
      const std::size_t open = static_cast<std::size_t>(it->position(0) + it->length(0) - 1);
      const std::size_t close = closing_bracket(s.text, open);
      const std::string fn = (*it)[2].str();
      const bool module = std::isupper(static_cast<unsigned char>(fn[0])) != 0;
      // Positional arguments after the ones the op maps: (input, target) for the functions, none for the modules.
      const std::size_t mapped = module ? 0 : 2;
      std::size_t positional = 0;
      for (const auto& [op, arg] : split_at(s.text.substr(open + 1, close - open - 1), ",")) {
        std::smatch m;
        const bool kw = std::regex_match(arg, m, std::regex(R"(^([A-Za-z_]\w*)\s*=(?!=)\s*([\s\S]*)$)"));
        const std::string key = kw ? m[1].str() : "", value = kw ? trim(m[2].str()) : arg;
        if (arg.empty()) continue;
        if (!kw) ++positional;
        const bool unsupported = (kw && (key == "weight" || key == "pos_weight" || key == "size_average" || key == "reduce")) ||
                                 (!kw && positional > mapped);
        if (unsupported && value != "None") {
          refuse(fn + "(" + (kw ? key + "=" : "") + value + ") (" +
                 location(code_, s.origin + static_cast<std::size_t>(it->position(0))) + "): " +
                 (key == "weight" || (!kw && positional == mapped + 1)
                      ? "per-class weights are not in the generated fused-linear op"
                      : "an argument the generated fused-linear op has no equivalent for") +
                 "; it takes ignore_index, label_smoothing and reduction (mean/sum) for cross-entropy, reduction and "
                 "log_target for kl_div");
          return;
        }
      }
    }
  }
}

// The cross-entropy's input, normalised: casts and reshapes dropped, log_softmax unwrapped for
// nll_loss, a per-row shift dropped and softcapping (c * tanh(z / c)) unwrapped. What remains must
// be the linear layer itself; returns "" when it is (a refusal is recorded otherwise).
std::string Reader::normal_logits(std::string e, bool log_probs, const std::string& where) {
  static const std::regex log_softmax(R"(^(?:torch\.|F\.|functional\.|torch\.nn\.functional\.|nn\.functional\.)?log_softmax\s*\(([\s\S]*)\)$)");
  static const std::regex log_softmax_method(R"(^([\s\S]+?)\.log_softmax\s*\([^()]*\)$)");
  static const std::regex tanh_left(R"(^([\w.]+)\s*\*\s*(?:torch\.|F\.)?tanh\s*\(([\s\S]*)\)$)");
  static const std::regex tanh_right(R"(^(?:torch\.|F\.)?tanh\s*\(([\s\S]*)\)\s*\*\s*([\w.]+)$)");
  // The linear layer with the weight [vocab, hidden] transposed: x @ w.T, F.linear(x, w),
  // (torch.)matmul / mm (x, w.t()), x.matmul(w.T), einsum("..h,vh->..v", x, w), a module call.
  static const std::string wt = R"([\w.]+\s*\.\s*(?:T|mT|t\s*\(\s*\)|transpose\s*\([^()]*\)))";
  static const std::regex linear(
      R"(^(?:[\w.]+(?:\(\))?\s*@\s*)" + wt + R"(|(?:F|functional|torch\.nn\.functional|nn\.functional)\.linear\s*\([^()]*\))" +
      R"(|(?:torch\.)?(?:matmul|mm)\s*\(\s*[\w.]+\s*,\s*)" + wt + R"(\s*\)|[\w.]+\s*\.\s*(?:matmul|mm)\s*\(\s*)" + wt +
      R"(\s*\)|(?:torch\.)?einsum\s*\(\s*['"]\s*[a-z.]*([a-z])\s*,\s*([a-z])\1\s*->\s*[a-z.]*\2\s*['"]\s*,\s*[\w.]+\s*,\s*[\w.]+\s*\))" +
      R"(|[\w.]+\s*\(\s*[\w.]+\s*\)|\(?(?:torch\.)?nn\.Linear\s*\([^()]*\)\)?\s*\(\s*[\w.]+\s*\))$)");
  bool unwrapped_log = !log_probs;
  for (int guard = 0; guard < 20; ++guard) {
    e = strip_parens(e);
    std::smatch m;
    if (!e.empty() && e.back() == ')') {  // a cast or reshape method at the end: z.view(-1, z.size(-1))
      int depth = 0;
      std::size_t open = e.size() - 1;
      for (;; --open) {
        if (e[open] == ')' || e[open] == ']') ++depth;
        if ((e[open] == '(' || e[open] == '[') && --depth == 0) break;
        if (open == 0) break;
      }
      std::size_t b = open;
      while (b > 0 && ident(e[b - 1])) --b;
      static const std::set<std::string> casts = {"float", "double", "half", "bfloat16", "contiguous", "to", "view",
                                                  "reshape", "flatten", "view_as", "type_as", "squeeze", "unsqueeze"};
      if (depth == 0 && b > 0 && e[b - 1] == '.' && casts.count(e.substr(b, open - b))) {
        e = e.substr(0, b - 1);
        continue;
      }
    }
    if (!unwrapped_log && std::regex_match(e, m, log_softmax)) {
      e = split_at(m[1].str(), ",").front().second;
      unwrapped_log = true;
      continue;
    }
    if (!unwrapped_log && std::regex_match(e, m, log_softmax_method)) {
      e = m[1].str();
      unwrapped_log = true;
      continue;
    }
    const auto terms = split_at(e, "+-");
    if (terms.size() > 1) {
      std::vector<std::string> kept;
      for (const auto& [op, t] : terms)
        if (!(op == '-' && std::regex_search(t, std::regex(R"(\b(?:max|amax|logsumexp)\s*\()")) &&
              t.find("keepdim") != std::string::npos))
          kept.push_back(t);
      if (kept.size() == 1) {
        e = kept.front();
        continue;
      }
    }
    std::string cap_out, inner;
    if (std::regex_match(e, m, tanh_left)) cap_out = m[1].str(), inner = m[2].str();
    else if (std::regex_match(e, m, tanh_right)) inner = m[1].str(), cap_out = m[2].str();
    if (!inner.empty()) {
      const auto parts = split_at(inner, "*/");
      if (parts.size() == 2 && parts[1].first == '/') {
        const auto a = number(cap_out), b = number(parts[1].second);
        if ((a && b && *a == *b) || (!a && !b && trim(cap_out) == trim(parts[1].second))) {
          e = parts[0].second;
          continue;
        }
        refuse("the logits are softcapped as `" + e.substr(0, 120) + "` (" + where + "), multiplying by " + cap_out +
               " but dividing by " + parts[1].second + ": the generated op's softcapping is cap * tanh(logits / cap) with one cap");
        return e;
      }
    }
    break;
  }
  if (!log_probs || unwrapped_log) {
    if (std::regex_match(e, linear)) return "";
  }
  if (!unwrapped_log) {
    refuse("nll_loss over `" + e.substr(0, 120) + "` (" + where + "): the fused cross-entropy needs log_softmax(x @ weight.T) as its input");
    return e;
  }
  std::smatch m;
  if (std::regex_search(e, m, std::regex(R"(\[[^\[\]]*\]$)")))
    refuse("the logits are sliced (`" + m[0].str() + "`, " + where + "): the generated op computes a loss for every row "
           "of x; slice x and the targets before the loss (e.g. shift the labels) instead");
  else
    refuse("the cross-entropy's logits are `" + e.substr(0, 160) + "` (" + where + "): the generated op takes logits = "
           "x @ weight.T, optionally softcapped as cap * tanh(logits / cap); a scale, temperature or other change of the "
           "logits is not in it (scale x or the weight instead)");
  return e;
}

void Reader::check_ce_logits(const std::vector<Statement>& stmts) {
  std::string callee = R"(\b(cross_entropy|nll_loss)\s*\(|\b(?:CrossEntropyLoss|NLLLoss)\s*\([^()]*\)\s*\()";
  for (const auto& [name, b] : env_) {
    std::smatch m;
    if (std::regex_search(b.expr, m, std::regex(R"(^(?:torch\.)?(?:nn\.)?(CrossEntropyLoss|NLLLoss)\s*\([^()]*\)$)")))
      callee += "|(?:^|[^\\w.])" + std::regex_replace(name, std::regex(R"(\.)"), R"(\.)") + "\\s*\\(";
  }
  const std::regex call(callee);
  for (const auto& s : stmts) {
    for (auto it = std::sregex_iterator(s.text.begin(), s.text.end(), call); it != std::sregex_iterator(); ++it) {
      const std::size_t open = static_cast<std::size_t>(it->position(0) + it->length(0) - 1);
      const std::size_t close = closing_bracket(s.text, open);
      if (close >= s.text.size()) continue;
      const auto args = split_at(s.text.substr(open + 1, close - open - 1), ",");
      std::string first = args.front().second;
      if (first.rfind("input", 0) == 0 && first.find('=') != std::string::npos) first = trim(first.substr(first.find('=') + 1));
      const bool nll = it->str().find("nll") != std::string::npos || it->str().find("NLL") != std::string::npos;
      normal_logits(expand(first), nll, location(code_, s.origin + static_cast<std::size_t>(it->position(0))));
      if (!out_.rejection.empty()) return;
    }
  }
}

// The returned loss: its additive terms, each the loss call alone or a z-loss.
void Reader::read_terms(const Statement& ret) {
  const auto values = split_at(ret.text, ",");
  if (values.size() > 1) {
    refuse("the code returns " + std::to_string(values.size()) + " values (" + location(code_, ret.origin) +
           "): the fused op returns the loss alone (it never materialises the logits); return the loss only");
    return;
  }
  // Expand bare names and parenthesised sums into the terms they stand for.
  struct Term {
    char sign;
    std::string text;
    std::size_t origin;
  };
  std::vector<Term> terms;
  std::vector<Term> work = {{'+', ret.text, ret.origin}};
  int guard = 0;
  while (!work.empty() && ++guard < 200) {
    const Term t = work.back();
    work.pop_back();
    const auto parts = split_at(t.text, "+-");
    for (const auto& [op, part] : parts) {
      const char sign = (op == '-') == (t.sign == '-') ? '+' : '-';
      const std::string bare = strip_parens(part);
      if (env_.count(bare)) {
        work.push_back({sign, env_.at(bare).expr, env_.at(bare).origin});
      } else if (bare != part && split_at(bare, "+-").size() > 1) {
        work.push_back({sign, bare, t.origin});
      } else if (parts.size() == 1 && !bare.empty() && bare.front() == '-' ) {
        work.push_back({sign == '-' ? '+' : '-', bare.substr(1), t.origin});
      } else {
        terms.push_back({sign, part, t.origin});
      }
    }
  }
  int losses = 0;
  for (const auto& t : terms) {
    const std::string where = location(code_, t.origin);
    const std::string full = expand(t.text);
    const auto factors = split_at(t.text, "*/");
    if (loss_call(full)) {
      ++losses;
      std::string others;
      for (const auto& [op, f] : factors)
        if (!loss_call(expand(f))) others += std::string(others.empty() ? "" : " ") + (op == ' ' ? "" : std::string(1, op) + " ") + f;
      if (t.sign == '-') others = "-1 " + others;
      // sum / (targets != ignore).sum(): the mean over the counted rows (Hugging Face's num_items_in_batch form).
      std::smatch cm;
      static const std::regex counted(R"(^/\s*\(*\s*\(?\s*[\w.]+(?:\[[^\]]*\])?\s*!=\s*(-?\d+)\s*\)?\s*(?:\.(?:float|long|int)\(\))?\s*\.sum\(\s*\)\s*(?:\.(?:clamp|clamp_min)\([^()]*\))?(?:\.(?:float|item)\(\))?\s*\)*$)");
      const std::string scale = trim(others);
      if (loss_ == "cross_entropy" && reduction_ == "sum" && std::regex_match(scale, cm, counted)) {
        out_.counted_ignore_index = std::stoll(cm[1].str());
        continue;
      }
      if (!trim(others).empty()) {
        const bool temperature = std::regex_search(others, std::regex(R"(\b(?:T|temperature|temp|tau)\b)"));
        // A constant factor on the only term (numbers and the temperature the code gives): the
        // entry scales the result by it.
        if (terms.size() == 1) {
          if (const auto factor = constant_factor(others)) {
            out_.loss_scale = *factor;
            out_.notes.push_back(fmt::format("the loss is scaled by `{}` ({}): fused_linear.loss_scale {}, applied by the "
                                             "Python entry to the op's result", trim(others), where, *factor));
            continue;
          }
        }
        refuse("the loss is scaled by `" + trim(others) + "` (" + where + ")" +
               (temperature ? " (the T * T of temperature distillation)" : "") +
               ": the generated op returns the " + (loss_ == "cross_entropy" ? "cross-entropy" : "divergence") +
               " unscaled; multiply its result instead (the gradients follow through the upstream gradient)");
        return;
      }
      continue;
    }
    if (loss_ == "cross_entropy" && full.find("logsumexp") != std::string::npos && squared(full)) {
      if (t.sign == '-') {
        refuse("a z-loss is subtracted (" + where + "): the generated op adds z_loss * lse^2");
        return;
      }
      double coefficient = 1.0;
      for (const auto& [op, f] : factors) {
        const std::string ef = expand(f);
        if (ef.find("logsumexp") != std::string::npos) continue;
        std::optional<double> v = number(ef);
        if (!v) {  // a parameter with a numeric default: def f(..., z_loss=1e-4)
          std::smatch m;
          const std::string name = strip_parens(f);
          if (std::regex_match(name, std::regex(R"([A-Za-z_]\w*)")) &&
              std::regex_search(code_, m, std::regex("[(,]\\s*" + name + R"(\s*(?::\s*\w+\s*)?=\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))")))
            v = std::stod(m[1].str());
        }
        if (!v) {
          refuse("a z-loss (logsumexp squared) is scaled by `" + f + "` (" + where + "), which the analyser cannot read "
                 "as a number: write it as a literal (e.g. 1e-4 * torch.logsumexp(logits, -1).pow(2).mean()) or edit "
                 "fused_linear.z_loss");
          return;
        }
        coefficient = op == '/' ? coefficient / *v : coefficient * *v;
      }
      // The generated op adds it per counted row, under the cross-entropy's own reduction.
      const bool mean = std::regex_search(full, std::regex(R"(\.mean\s*\(|torch\.mean\s*\()"));
      const bool sum = std::regex_search(full, std::regex(R"(\.sum\s*\(|torch\.sum\s*\()"));
      if ((reduction_ == "mean" && !mean) || (reduction_ == "sum" && !sum)) {
        refuse("the z-loss (" + where + ") is " + (mean ? "averaged" : sum ? "summed" : "not reduced") +
               " while the cross-entropy is " + (reduction_ == "mean" ? "averaged" : "summed") +
               ": the generated op adds z_loss * lse^2 to each row's loss under the cross-entropy's reduction; "
               "reduce both the same way");
        return;
      }
      if (mean)
        out_.notes.push_back("the z-loss term averages lse^2 over every row; the generated op averages it over the "
                             "rows whose target is not ignore_index (the same when no target is ignored)");
      out_.z_loss = coefficient;
      continue;
    }
    refuse("the loss adds `" + std::string(t.sign == '-' ? "- " : "") + t.text + "` (" + where +
           "), which the generated fused-linear op does not compute: it computes " +
           (loss_ == "cross_entropy" ? "the cross-entropy (+ a z-loss written as c * logsumexp(logits, -1) ** 2)"
                                     : "the KL divergence alone") +
           "; add other terms outside");
    return;
  }
  if (losses > 1)
    refuse("the code adds " + std::to_string(losses) + " losses (" + location(code_, ret.origin) +
           "): the fused op computes one loss over one linear layer's logits");
}

// The student's parameters come first (the generated op's order: x, weight, teacher_x,
// teacher_weight); the entry is forward when a class defines one, else the first def or lambda.
// Parameters with defaults (beta=0.5, T=2.0) are options, not tensors.
void Reader::read_params(const std::vector<Statement>& stmts) {
  bool forward = false;
  for (const auto& s : stmts) {
    std::smatch m;
    if (!std::regex_search(s.text, m, std::regex(R"(^(?:def\s+(\w+)\s*\(|lambda\b)([\s\S]*?)\)?\s*(?:->[^:]*)?:$)"))) continue;
    const std::string fn = m[1].str();
    if (fn == "__init__" || forward || (!params_.empty() && fn != "forward")) continue;
    forward = fn == "forward";
    params_.clear();
    for (const auto& piece : split_at(m[2].str(), ",")) {
      if (piece.second.find('=') != std::string::npos) continue;
      const std::string name = trim(piece.second.substr(0, piece.second.find(':')));
      if (!name.empty() && name != "self" && name.find('*') == std::string::npos) params_.push_back(name);
    }
  }
}

// Which model an expression comes from: 0 the student, 1 the teacher, -1 unknown (named by the
// words student / teacher, else by the parameters it uses: the first half are the student's).
int Reader::side(const std::string& expr) const {
  const std::string e = expand(expr);
  const bool teacher_word = std::regex_search(e, std::regex(R"(teacher)", std::regex::icase));
  const bool student_word = std::regex_search(e, std::regex(R"(student)", std::regex::icase));
  if (teacher_word != student_word) return teacher_word ? 1 : 0;
  std::vector<std::size_t> found;
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (std::regex_search(e, std::regex("(^|[^\\w.])" + params_[i] + "\\b"))) found.push_back(i);
  if (found.empty() || params_.size() < 4) return -1;
  const std::size_t half = params_.size() / 2;
  const bool early = std::all_of(found.begin(), found.end(), [half](std::size_t i) { return i < half; });
  const bool late = std::all_of(found.begin(), found.end(), [half](std::size_t i) { return i >= half; });
  return early ? 0 : late ? 1 : -1;
}

// F.kl_div(input, target) reads its target as probabilities unless log_target=True: a target
// given as log-probabilities without it (or probabilities with it) is a different function. The
// input must be the student's log-probabilities; with the teacher there, the divergence is
// KL(student || teacher), the generalised JSD's beta = 0 end.
void Reader::check_kl_calls(const std::vector<Statement>& stmts) {
  static const std::regex call(R"(\bkl_div\s*\()");
  for (const auto& s : stmts) {
    for (auto it = std::sregex_iterator(s.text.begin(), s.text.end(), call); it != std::sregex_iterator(); ++it) {
      const std::size_t open = static_cast<std::size_t>(it->position(0) + it->length(0) - 1);
      const std::size_t close = closing_bracket(s.text, open);
      if (close >= s.text.size()) continue;
      std::vector<std::string> positional;
      bool log_target = false;
      for (const auto& [op, arg] : split_at(s.text.substr(open + 1, close - open - 1), ",")) {
        std::smatch m;
        if (std::regex_match(arg, m, std::regex(R"(^(\w+)\s*=(?!=)\s*([\s\S]*)$)"))) {
          if (m[1].str() == "log_target") log_target = trim(m[2].str()) == "True";
          else if (m[1].str() == "input" || m[1].str() == "target") positional.push_back(m[2].str());
        } else {
          positional.push_back(arg);
        }
      }
      if (positional.size() < 2) continue;
      const std::string where = location(code_, s.origin + static_cast<std::size_t>(it->position(0)));
      const std::string target = strip_parens(expand(positional[1]));
      const bool target_log = std::regex_search(target, std::regex(R"(^(?:torch\.|F\.|functional\.|torch\.nn\.functional\.)?log_softmax\s*\(|\.log_softmax\s*\(|\.log\s*\(\s*\)$|^torch\.log\s*\()"));
      const bool target_prob = std::regex_search(target, std::regex(R"(^(?:torch\.|F\.|functional\.|torch\.nn\.functional\.)?softmax\s*\(|\.softmax\s*\([^()]*\)$)"));
      if (target_log && !log_target) {
        refuse("kl_div's target `" + positional[1] + "` is log-probabilities but log_target is not True (" + where +
               "): PyTorch then reads it as probabilities, a different function; pass log_target=True or give softmax");
        return;
      }
      if (target_prob && log_target) {
        refuse("kl_div's target `" + positional[1] + "` is probabilities but log_target=True (" + where +
               "): PyTorch then reads it as log-probabilities, a different function; drop log_target or give log_softmax");
        return;
      }
      if (loss_ == "kl_div" && side(positional[0]) == 1 && side(positional[1]) == 0) {
        out_.reverse_kl = true;
        out_.notes.push_back("kl_div's input is the teacher's and its target the student's (" + where +
                             "): KL(student || teacher), generated as the generalised JSD with beta = 0");
      }
    }
  }
}

// The generalised JSD's beta: the generator mixes M = beta * student + (1 - beta) * teacher and
// weights KL(teacher || M) by beta. Code that weights by beta the same distribution in the mixture
// and among the KLs (TRL's and Liger-Kernel's form) is a different function unless beta = 0.5.
void Reader::read_jsd(const std::vector<Statement>& stmts, double beta) {
  if (std::fabs(beta - 0.5) < 1e-12) return;
  int mixture = -1, kl = -1;  // the side beta weights in M, and in the sum of KLs
  std::string where;          // the mixture's line and column
  std::smatch m;
  // The first statement matching `re` (m refers into it); `at` gets its location.
  auto find = [&](const std::regex& re, std::string& at) {
    for (const auto& st : stmts)
      if (std::regex_search(st.text, m, re)) {
        at = location(code_, st.origin + static_cast<std::size_t>(m.position(0)));
        return true;
      }
    return false;
  };
  // beta * a + (1 - beta) * b, either order
  const std::string w = R"(([A-Za-z_][\w.]*(?:\(\))?))";
  std::string kl_where;
  if (find(std::regex(R"(\b(beta|[0-9.]+)\s*\*\s*)" + w + R"(\s*\+\s*\(\s*1(?:\.0*)?\s*-\s*\1\s*\)\s*\*\s*)" + w), where))
    mixture = side(m[2].str());
  else if (find(std::regex(R"(\(\s*1(?:\.0*)?\s*-\s*(beta|[0-9.]+)\s*\)\s*\*\s*)" + w + R"(\s*\+\s*\1\s*\*\s*)" + w), where))
    mixture = side(m[3].str());
  else if (find(std::regex(w + R"(\s*\+\s*(?:torch|math|np)\.log\(\s*(?:torch\.tensor\(\s*)?beta\b)"), where))
    mixture = side(m[1].str());  // log-space: lp + log(beta)
  // beta * F.kl_div(input, target): KL(target || input)
  if (find(std::regex(R"(\bbeta\s*\*\s*(?:F\.|functional\.)?kl_div\s*\(\s*[^,]+,\s*)" + w), kl_where))
    kl = side(m[1].str());
  else if (find(std::regex(R"(\(\s*1(?:\.0*)?\s*-\s*beta\s*\)\s*\*\s*(?:F\.|functional\.)?kl_div\s*\(\s*[^,]+,\s*)" + w), kl_where))
    kl = side(m[1].str()) < 0 ? -1 : 1 - side(m[1].str());
  if (where.empty()) where = kl_where;
  if (where.empty() && !stmts.empty()) where = location(code_, stmts.front().origin);
  if (mixture < 0 || kl < 0) {
    refuse("a generalised JSD with beta = " + std::to_string(beta) + " (" + where + ") whose weighting the analyser cannot read: the "
           "generated op computes beta * KL(teacher || M) + (1 - beta) * KL(student || M) with M = beta * p_student + "
           "(1 - beta) * p_teacher; write the mixture as beta * p + (1 - beta) * q and the KLs with F.kl_div, or "
           "describe it in words");
    return;
  }
  if (mixture == kl) {
    refuse(std::string("this JSD (") + where + ") weights the " + (mixture == 0 ? "student" : "teacher") +
           " by beta both in the mixture M and among the KL terms (TRL's and Liger-Kernel's form); the generated op's "
           "generalised JSD is beta * KL(teacher || M) + (1 - beta) * KL(student || M) with M = beta * p_student + "
           "(1 - beta) * p_teacher, the same function only at beta = 0.5");
    return;
  }
  out_.beta = mixture == 0 ? beta : 1.0 - beta;
  if (mixture == 1)
    out_.notes.push_back("the code mixes the teacher by beta: the generator's beta (the student's share of M) is 1 - beta");
}

LossCodeReading Reader::run(double beta) {
  const std::vector<Statement> stmts = statements(code_);
  std::vector<Statement> returns;
  read_statements(stmts, returns);
  read_params(stmts);
  check_loss_arguments(stmts);
  if (loss_ != "cross_entropy") check_kl_calls(stmts);
  if (loss_ == "jsd") {
    read_jsd(stmts, beta);
    // A temperature's square multiplying the result (Hinton's T * T) is not in the generated op.
    const std::regex squared_t(R"((?:\b(T|temperature|temp|tau)\s*\*\s*\1\b|\b(?:T|temperature|temp|tau)\s*\*\*\s*2))");
    std::smatch m;
    for (const auto& s : stmts)
      if (std::regex_search(s.text, m, squared_t))
        refuse("the loss is scaled by `" + m[0].str() + "` (" + location(code_, s.origin + static_cast<std::size_t>(m.position(0))) +
               ") (the T * T of temperature distillation): the generated op returns the divergence unscaled; multiply "
               "its result instead (the gradients follow through the upstream gradient)");
  } else if (!returns.empty()) {
    read_terms(returns.back());
  }
  if (loss_ == "cross_entropy") check_ce_logits(stmts);
  return out_;
}

}  // namespace

bool kl_terms_share_input(const std::string& code) {
  try {
    static const std::regex call(R"(\bkl_div\s*\()");
    std::set<std::string> firsts;
    int calls = 0;
    for (auto it = std::sregex_iterator(code.begin(), code.end(), call); it != std::sregex_iterator(); ++it) {
      const std::size_t open = static_cast<std::size_t>(it->position(0) + it->length(0) - 1);
      const std::size_t close = closing_bracket(code, open);
      if (close >= code.size()) continue;
      ++calls;
      firsts.insert(split_at(code.substr(open + 1, close - open - 1), ",").front().second);
    }
    return calls >= 2 && firsts.size() < static_cast<std::size_t>(calls);
  } catch (const std::exception&) {
    return false;
  }
}

LossCodeReading read_loss_code(const std::string& code, const std::string& loss, const std::string& reduction,
                               double beta, std::optional<double> temperature) {
  try {
    return Reader(code, loss, reduction, temperature).run(beta);
  } catch (const std::exception&) {  // a regex over a pathological input: nothing read
    return {};
  }
}

}  // namespace liger::kernel_dev
