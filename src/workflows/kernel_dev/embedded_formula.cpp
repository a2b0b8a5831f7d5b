#include "workflows/kernel_dev/embedded_formula.h"

#include <cctype>
#include <map>
#include <set>
#include <vector>

#include "liger/util.h"

namespace liger::kernel_dev {
namespace {

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

using util::trim;

// A sentence's full stop is not part of the formula; a decimal point ("x * 2.") is rare enough in a
// description to lose.
std::string without_final_period(std::string s) {
  s = trim(s);
  while (!s.empty() && (s.back() == '.' || s.back() == ';')) s.pop_back();
  return trim(s);
}

// Written as a formula: a product, quotient, power, assignment or call (a name against its
// parenthesis). '-' and '+' alone are how words are hyphenated ("z-loss", "log-sum-exp"), and a
// word in parentheses is an aside ("GELU (erf) activation", "Dynamic Tanh (DyT) layer").
bool written_as_formula(const std::string& s) {
  if (s.find_first_of("*/^=") != std::string::npos) return true;
  for (std::size_t i = 1; i < s.size(); ++i)
    if (s[i] == '(' && (std::isalnum(static_cast<unsigned char>(s[i - 1])) || s[i - 1] == '_')) return true;
  return false;
}

// The words that introduce a formula rather than name the op.
const std::set<std::string>& connectives() {
  static const std::set<std::string> words = {"activation", "function", "op", "operation", "kernel", "defined", "as",
                                              "is", "i", "e", "ie", "computing", "computes", "compute", "which",
                                              "that", "where", "given", "by", "with", "the", "a", "an", "formula",
                                              "equation", "namely", "of", "f", "y", "x", "out"};
  return words;
}

std::string name_words_before(const std::string& prefix) {
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(word);
    word.clear();
  };
  for (char c : prefix) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else flush();
  }
  flush();
  while (!words.empty() && connectives().count(words.back())) words.pop_back();
  while (!words.empty() && connectives().count(words.front())) words.erase(words.begin());
  std::string out;
  for (std::size_t k = 0; k < words.size() && k < 4; ++k) out += (out.empty() ? "" : " ") + words[k];
  return out;
}

// The words before a formula end with a separator or a word of prose, never with what a formula
// is made of ("0.5 x (1 + ...)" must not lose "0.5 x"): a number, a one-letter name, a bracket
// or an operator.
bool ends_in_prose(const std::string& prefix) {
  const std::string t = trim(prefix);
  if (t.empty()) return false;
  const char last = t.back();
  if (last == ':' || last == ',' || last == '=') return true;
  if (!std::isalpha(static_cast<unsigned char>(last))) return false;
  std::size_t start = t.size();
  while (start > 0 && (std::isalnum(static_cast<unsigned char>(t[start - 1])) || t[start - 1] == '_')) --start;
  return t.size() - start >= 2;
}

// "bipolar sigmoid = 2 * sigmoid(x) - 1": a word of the op's name assigned to is prose, and the
// formula is what follows the '='. An output is named like a variable (y, z, out, result).
bool names_the_op(const std::string& candidate) {
  std::size_t k = 0;
  while (k < candidate.size() && (std::isalnum(static_cast<unsigned char>(candidate[k])) || candidate[k] == '_')) ++k;
  if (k == 0 || !is_ident_start(candidate[0])) return false;
  std::size_t e = k;
  while (e < candidate.size() && candidate[e] == ' ') ++e;
  if (e >= candidate.size() || candidate[e] != '=' || (e + 1 < candidate.size() && candidate[e + 1] == '=')) return false;
  static const std::set<std::string> output_names = {"out", "output", "result", "res", "act"};
  const std::string target = candidate.substr(0, k);
  return target.size() > 2 && !output_names.count(target);
}

}  // namespace

std::string explicit_products(const std::string& formula) {
  std::string out;
  const std::size_t n = formula.size();
  for (std::size_t i = 0; i < n; ++i) {
    const char c = formula[i];
    // A number: digits and a point, with its exponent if it has one.
    if ((is_digit(c) || (c == '.' && i + 1 < n && is_digit(formula[i + 1]))) &&
        (i == 0 || !(is_ident_start(formula[i - 1]) || is_digit(formula[i - 1]) || formula[i - 1] == '_'))) {
      std::size_t j = i;
      while (j < n && (is_digit(formula[j]) || formula[j] == '.')) ++j;
      if (j < n && (formula[j] == 'e' || formula[j] == 'E')) {
        std::size_t k = j + 1;
        if (k < n && (formula[k] == '+' || formula[k] == '-')) ++k;
        if (k < n && is_digit(formula[k])) {
          j = k;
          while (j < n && is_digit(formula[j])) ++j;
        }
      }
      out += formula.substr(i, j - i);
      std::size_t k = j;
      while (k < n && formula[k] == ' ') ++k;
      if (k < n && (is_ident_start(formula[k]) || formula[k] == '(')) out += k == j ? " * " : " *";
      i = j - 1;
      continue;
    }
    // A one-letter name before a spaced '(' is a product ("x (1 + ...)"); functions have longer
    // names and are written against their parenthesis.
    if (is_ident_start(c) && (i == 0 || !(std::isalnum(static_cast<unsigned char>(formula[i - 1])) || formula[i - 1] == '_')) &&
        (i + 1 == n || !(std::isalnum(static_cast<unsigned char>(formula[i + 1])) || formula[i + 1] == '_'))) {
      out += c;
      std::size_t k = i + 1;
      if (k < n && formula[k] == ' ') {
        while (k < n && formula[k] == ' ') ++k;
        if (k < n && formula[k] == '(') out += " *";
      }
      continue;
    }
    out += c;
    if (c == ')') {  // ") (": a product; ") word" stays as written (prose after an aside)
      std::size_t k = i + 1;
      while (k < n && formula[k] == ' ') ++k;
      if (k < n && formula[k] == '(') out += " *";
    }
  }
  return out;
}

std::optional<EmbeddedFormula> find_embedded_formula(const std::string& text, const FunctionResolver& resolver) {
  // The tails that start a token after a separator, longest first: the first that parses wins.
  for (std::size_t i = 1; i < text.size(); ++i) {
    const char before = text[i - 1];
    if (!(std::isspace(static_cast<unsigned char>(before)) || before == ':' || before == ',')) continue;
    if (std::isspace(static_cast<unsigned char>(text[i]))) continue;
    const std::string prefix = text.substr(0, i);
    if (trim(prefix).empty() || !ends_in_prose(prefix)) continue;
    const std::string written = without_final_period(text.substr(i));
    if (written.empty() || !written_as_formula(written) || names_the_op(written)) continue;
    const std::string formula = explicit_products(written);
    try {
      const Program program = parse_program(formula, resolver);
      if (program.inputs.empty()) continue;  // "beta=2", "ELU(0.5)": a parameter, not the op
    } catch (const std::exception&) {
      continue;
    }
    return EmbeddedFormula{written, formula, name_words_before(prefix)};
  }
  return std::nullopt;
}

}  // namespace liger::kernel_dev
