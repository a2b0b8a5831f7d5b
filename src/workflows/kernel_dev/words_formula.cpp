// Formulas said in words: "the square of the tanh of x", "the maximum of x and zero", "sigmoid
// of x times x", "x divided by one plus the absolute value of x", "the exponential of x minus one".
//
// A small recursive-descent reading of spoken arithmetic, so a description that composes
// functions and operators becomes the expression it says instead of the one catalogue entry
// whose name it contains (which silently dropped the rest: "sigmoid times x" used to stay
// undecided, "the maximum of x and zero" became a row max). Grammar, lowest precedence first:
//
//   clause  := sum { "," operator clause-rest }          a comma closes what came before:
//                                                         "x times relu6 of x plus 3, divided by 6"
//   sum     := product { ("plus" | "minus") product }
//   product := power { ("times" | "multiplied by") power | ("divided by" | "over") sum }
//              (a divisor said in words runs to the end of the clause: "x divided by one plus
//              the absolute value of x" is x / (1 + |x|))
//   power   := unary { "squared" | "cubed" | ("to the power of" | "raised to") number }
//   unary   := "negative" unary | "minus" unary | primary
//   primary := "the sum | difference | product | quotient | ratio | maximum | minimum | mean of" A "and" B
//            | function "of" power                      (a constant operand extends to the sum:
//                                                        "the log of one plus x" is log(1 + x);
//                                                        square, square root, reciprocal, exponential,
//                                                        log, absolute value, half, double, derivative,
//                                                        any function the resolver knows)
//            | function                                 (bare, before an operator or at the end: x)
//            | number | number word | input name
//
// Articles are dropped. Every reading is stated in the profile's note ("... is read as ..."), which
// the maintainer approves before any code is written, so an ambiguity of spoken precedence is
// visible, not guessed silently.
#include <cctype>
#include <map>
#include <optional>
#include <vector>
#include <set>
#include <stdexcept>

#include "liger/util.h"
#include "workflows/kernel_dev/embedded_formula.h"

namespace liger::kernel_dev {

namespace {

struct NoReading : std::runtime_error {
  NoReading() : std::runtime_error("no reading") {}
};

const std::map<std::string, std::string>& arithmetic_functions() {
  static const std::map<std::string, std::string> table = {
      {"square", "({})^2"},         {"squared", "({})^2"},        {"cube", "({})^3"},
      {"cubed", "({})^3"},          {"square root", "sqrt({})"},  {"root", "sqrt({})"},
      {"reciprocal", "1 / ({})"},   {"inverse", "1 / ({})"},      {"negative", "-({})"},
      {"negation", "-({})"},        {"opposite", "-({})"},        {"absolute value", "abs({})"},
      {"absolute", "abs({})"},      {"magnitude", "abs({})"},     {"modulus", "abs({})"},
      {"exponential", "exp({})"},   {"logarithm", "log({})"},     {"natural logarithm", "log({})"},
      {"natural log", "log({})"},   {"ln", "log({})"},            {"half", "0.5 * ({})"},
      {"double", "2 * ({})"},       {"twice", "2 * ({})"},         {"sine", "sin({})"},
      {"cosine", "cos({})"},        {"tangent", "tan({})"},       {"hyperbolic tangent", "tanh({})"},
      {"hyperbolic sine", "sinh({})"}, {"hyperbolic cosine", "cosh({})"}, {"error function", "erf({})"}};
  return table;
}

const std::map<std::string, std::string>& number_words() {
  static const std::map<std::string, std::string> table = {
      {"zero", "0"}, {"one", "1"}, {"two", "2"},   {"three", "3"}, {"four", "4"}, {"five", "5"},
      {"six", "6"},  {"seven", "7"}, {"eight", "8"}, {"nine", "9"},  {"ten", "10"}};
  return table;
}

// Binary heads: "the <head> of A and B".
const std::map<std::string, std::string>& binary_heads() {
  static const std::map<std::string, std::string> table = {
      {"sum", "({a}) + ({b})"},        {"difference", "({a}) - ({b})"}, {"product", "({a}) * ({b})"},
      {"quotient", "({a}) / ({b})"},   {"ratio", "({a}) / ({b})"},      {"maximum", "max({a}, {b})"},
      {"max", "max({a}, {b})"},        {"minimum", "min({a}, {b})"},    {"min", "min({a}, {b})"},
      {"mean", "0.5 * (({a}) + ({b}))"}, {"average", "0.5 * (({a}) + ({b}))"}};
  return table;
}

bool is_number(const std::string& w) {
  if (w.empty()) return false;
  std::size_t i = w[0] == '-' ? 1 : 0;
  bool digit = false;
  for (; i < w.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(w[i]))) digit = true;
    else if (w[i] != '.') return false;
  }
  return digit;
}

std::string fill(std::string pattern, const std::string& key, const std::string& value) {
  for (std::size_t at = pattern.find(key); at != std::string::npos; at = pattern.find(key, at + value.size()))
    pattern.replace(at, key.size(), value);
  return pattern;
}

class WordsReader {
 public:
  WordsReader(std::vector<std::string> words, const FunctionResolver& resolver)
      : words_(std::move(words)), resolver_(resolver) {}

  std::string read() {
    std::string e = clause();
    if (pos_ != words_.size()) throw NoReading();
    return e;
  }
  int operations() const { return operations_; }
  int functions() const { return functions_; }
  const std::set<std::string>& inputs() const { return inputs_; }
  // The function words met, outermost first (names the op when there is no operator).
  const std::vector<std::string>& name_words() const { return name_words_; }

 private:
  bool at(const std::string& w, std::size_t ahead = 0) const {
    return pos_ + ahead < words_.size() && words_[pos_ + ahead] == w;
  }
  bool accept(const std::string& w) {
    if (!at(w)) return false;
    ++pos_;
    return true;
  }
  bool accept2(const std::string& a, const std::string& b) {
    if (!at(a) || !at(b, 1)) return false;
    pos_ += 2;
    return true;
  }
  // Articles are dropped, except an "a" that is an operand ("the maximum of a and b"): one followed
  // by "and", a comma, an operator word or the end.
  void skip_articles() {
    for (;;) {
      if (at("the") || at("an") || at("its")) ++pos_;
      else if (at("a") && !(pos_ + 1 == words_.size() || at("and", 1) || at(",", 1) || at("plus", 1) ||
                            at("minus", 1) || at("times", 1) || at("over", 1) || at("divided", 1) ||
                            at("multiplied", 1) || at("squared", 1) || at("cubed", 1)))
        ++pos_;
      else return;
    }
  }
  // An infix operator word comes next (a bare function before it applies to the default input).
  // Not "squared": "relu squared" is a name the catalogue knows, with its own entry.
  bool operator_next() const {
    return at("plus") || at("minus") || at("times") || at("over") || at(",") || at("and") ||
           (at("divided") && at("by", 1)) || (at("multiplied") && at("by", 1));
  }

  std::string clause() {
    std::string e = sum();
    while (accept(",")) {
      // ", divided by 6", ", plus one", ", squared": the operator applies to everything before.
      if (accept("plus")) e = "(" + e + ") + (" + product() + ")";
      else if (accept("minus")) e = "(" + e + ") - (" + product() + ")";
      else if (accept("times") || accept2("multiplied", "by")) e = "(" + e + ") * (" + sum() + ")";
      else if (accept2("divided", "by") || accept("over")) e = "(" + e + ") / (" + sum() + ")";
      else if (accept("squared")) e = "(" + e + ")^2";
      else throw NoReading();
      ++operations_;
    }
    return e;
  }

  std::string sum() {
    std::string e = product();
    for (;;) {
      if (accept("plus")) e = e + " + " + product();
      else if (accept("minus")) e = e + " - (" + product() + ")";
      else return e;
      ++operations_;
    }
  }

  std::string product() {
    std::string e = power();
    for (;;) {
      if (accept("times") || accept2("multiplied", "by")) e = "(" + e + ") * (" + power() + ")";
      else if (accept2("divided", "by") || accept("over")) e = "(" + e + ") / (" + sum() + ")";
      else return e;
      ++operations_;
    }
  }

  std::string power() {
    std::string e = unary();
    for (;;) {
      if (accept("squared")) e = "(" + e + ")^2";
      else if (accept("cubed")) e = "(" + e + ")^3";
      else if ((at("to") && at("the", 1) && at("power", 2)) || (at("raised") && at("to", 1))) {
        while (at("to") || at("the") || at("power") || at("raised") || at("of")) ++pos_;
        e = "(" + e + ")^(" + number() + ")";
      } else {
        return e;
      }
      ++operations_;
    }
  }

  std::string number() {
    if (pos_ >= words_.size()) throw NoReading();
    const std::string& w = words_[pos_];
    if (is_number(w)) return ++pos_, w;
    if (auto n = number_words().find(w); n != number_words().end()) return ++pos_, n->second;
    throw NoReading();
  }

  std::string unary() {
    skip_articles();
    if (accept("minus")) {
      ++operations_;
      return "-(" + unary() + ")";
    }
    return primary();
  }

  bool known_function(const std::string& name) const {
    try {
      return !parse_program("y = " + name + "(x)", resolver_).inputs.empty();
    } catch (const std::exception&) {
      return false;
    }
  }

  // The longest run of 1-3 words here that names a function (arithmetic word or a resolver's
  // function, words joined by '_', a plural read as its singular); advances past it.
  std::optional<std::pair<std::string, std::string>> function_here() {
    for (std::size_t n = 3; n >= 1; --n) {
      if (pos_ + n > words_.size()) continue;
      std::string phrase;
      bool plain = true;
      for (std::size_t k = 0; k < n; ++k) {
        const std::string& w = words_[pos_ + k];
        if (w == "of" || w == "," || w == "and" || is_number(w)) plain = false;
        phrase += (k ? " " : "") + w;
      }
      if (!plain) continue;
      for (const std::string& candidate : {phrase, phrase.size() > 3 && phrase.back() == 's'
                                                       ? phrase.substr(0, phrase.size() - 1)
                                                       : std::string()}) {
        if (candidate.empty()) continue;
        std::string joined = candidate;
        for (char& c : joined)
          if (c == ' ') c = '_';
        if (candidate == "derivative" || candidate == "first derivative" || candidate == "gradient" || candidate == "slope") {
          pos_ += n;
          return std::make_pair(std::string("derivative"), candidate);
        }
        if (auto a = arithmetic_functions().find(candidate); a != arithmetic_functions().end()) {
          pos_ += n;
          return std::make_pair(a->second, candidate);
        }
        if (known_function(joined)) {
          pos_ += n;
          return std::make_pair(joined + "({})", candidate);
        }
      }
    }
    return std::nullopt;
  }

  std::string primary() {
    skip_articles();
    if (pos_ >= words_.size()) throw NoReading();
    const std::string w = words_[pos_];
    // "the maximum of x and zero": a head of two operands (else, for sum/mean/max/min, the row
    // reduction of one: "the sum of the exponentials of x").
    if (auto head = binary_heads().find(w); head != binary_heads().end() && at("of", 1)) {
      const std::size_t start = pos_, named = name_words_.size();
      const int ops = operations_, fns = functions_;
      name_words_.push_back(w);
      pos_ += 2;
      try {
        std::string a = sum();
        if (accept("and")) {
          std::string b = sum();
          ++operations_;
          return "(" + fill(fill(head->second, "{a}", a), "{b}", b) + ")";
        }
      } catch (const NoReading&) {
      }
      pos_ = start;  // not two operands: read again as a function of one
      name_words_.resize(named);
      operations_ = ops;
      functions_ = fns;
    }
    if (is_number(w) || number_words().count(w)) return number();
    if (auto f = function_here()) {
      const auto& [pattern, word] = *f;
      name_words_.push_back(word);  // outermost first
      std::string arg;
      if (accept("of")) {
        // "f of" takes the next operand ("sigmoid of x times x" is sigmoid(x) * x, "the exponential
        // of x minus one" exp(x) - 1), unless that operand is a constant alone, which no one
        // applies a function to: "the log of one plus the exponential of x" is log(1 + exp(x)).
        const std::size_t start = pos_;
        const int ops = operations_, fns = functions_;
        const std::size_t named = name_words_.size();
        arg = power();
        bool constant = false;
        try {
          constant = parse_program("y = " + arg, resolver_).inputs.empty();
        } catch (const std::exception&) {
        }
        if (constant && (at("plus") || at("minus"))) {
          pos_ = start;
          operations_ = ops;
          functions_ = fns;
          name_words_.resize(named);
          arg = sum();
        }
      } else if (pos_ == words_.size() || operator_next()) {
        arg = default_input_;  // "the cube of tanh", "sigmoid times x"
        inputs_.insert(default_input_);
      } else {
        throw NoReading();
      }
      ++functions_;
      if (pattern == "derivative") {
        const Program inner = parse_program("y = " + arg, resolver_);
        if (inner.inputs.size() != 1) throw NoReading();
        return "(" + to_string(simplify(differentiate(inner.expression, inner.inputs.front()))) + ")";
      }
      return fill(pattern, "{}", arg);
    }
    // "each row" / "every row" / "the row" (of x): the input, which a row reduction around it reduces
    // ("the sum of the squares of each row").
    if ((w == "each" || w == "every" || w == "row" || w == "rows") &&
        (w == "row" || w == "rows" || at("row", 1) || at("rows", 1))) {
      pos_ += (w == "row" || w == "rows") ? 1 : 2;
      if (at("of") && pos_ + 1 < words_.size() && words_[pos_ + 1].size() <= 2) {
        ++pos_;
        skip_articles();
        const std::string name = words_[pos_++];
        inputs_.insert(name);
        return name;
      }
      inputs_.insert(default_input_);
      return default_input_;
    }
    // An input: one short name ("x", "z", "h"), or "input" / "input tensor" for x.
    if (w == "input") {
      ++pos_;
      accept("tensor");
      inputs_.insert(default_input_);
      return default_input_;
    }
    if (w.size() <= 2 && std::isalpha(static_cast<unsigned char>(w[0])) && w != "by" && w != "to" && w != "of" &&
        w != "is" && w != "as" && w != "in" && w != "or") {
      ++pos_;
      inputs_.insert(w);
      return w;
    }
    throw NoReading();
  }

 private:
  std::vector<std::string> name_words_;
  std::vector<std::string> words_;
  const FunctionResolver& resolver_;
  std::size_t pos_ = 0;
  int operations_ = 0, functions_ = 0;
  std::set<std::string> inputs_;
  std::string default_input_ = "x";
};

}  // namespace

std::optional<EmbeddedFormula> find_composition_in_words(const std::string& text, const FunctionResolver& resolver) {
  // Lowercase words; a hyphen joins ("log-sigmoid" is one function), a comma is a word of its own,
  // a period inside a number is the number's; any other punctuation makes it a formula, not words.
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(word);
    word.clear();
  };
  std::string body = text;
  while (!body.empty() && (body.back() == '.' || std::isspace(static_cast<unsigned char>(body.back())))) body.pop_back();
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    const bool digit_next = i + 1 < body.size() && std::isdigit(static_cast<unsigned char>(body[i + 1]));
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (c == '.' && digit_next && is_number(word)) word += '.';
    else if (c == '-' && word.empty() && digit_next) word += '-';
    else if (c == '-' && !word.empty()) word += '_';
    else if (c == ',') flush(), words.push_back(",");
    else if (std::isspace(static_cast<unsigned char>(c))) flush();
    else return std::nullopt;  // an operator or bracket: a formula, not words (find_embedded_formula)
  }
  flush();
  // A description is a few words (the CLI caps it at kMaxDescriptionBytes); more than this is
  // never a spoken formula, and the reader's recursion stays shallow on any input.
  constexpr std::size_t kMaxWords = 64;
  if (words.empty() || words.size() > kMaxWords) return std::nullopt;
  WordsReader reader(words, resolver);
  std::string expression;
  try {
    expression = reader.read();
  } catch (const std::exception&) {
    return std::nullopt;
  }
  // One function of one input is a name, not a composition: the catalogue's.
  if (reader.operations() == 0 && reader.functions() < 2) return std::nullopt;
  if (reader.inputs().empty()) return std::nullopt;  // "two plus three": nothing to compute on
  const std::string output = reader.inputs().count("y") ? "out" : "y";
  const std::string formula = output + " = " + expression;
  try {
    if (parse_program(formula, resolver).inputs.empty()) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  // The name: a composition of functions by its function words, outermost first ("square tanh");
  // anything with operators by the description's own words ("x times sigmoid x"); at most four.
  std::vector<std::string> naming = reader.name_words();
  if (reader.operations() > 0) {
    naming.clear();
    for (const auto& w : words)
      if (w != "the" && w != "a" && w != "an" && w != "its" && w != "of" && w != "," && w != "by") naming.push_back(w);
  }
  std::string name;
  for (std::size_t i = 0; i < naming.size() && i < 4; ++i) {
    std::string w = naming[i];
    for (char& c : w)
      if (c == ' ' || c == '.' || c == '-') c = '_';
    name += (name.empty() ? "" : " ") + w;
  }
  return EmbeddedFormula{util::trim(text), formula, name, true};
}

}  // namespace liger::kernel_dev
