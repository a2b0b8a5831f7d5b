// kernel-dev's expression language: the lexer and recursive-descent parser (grammar in expr.h).
#include "workflows/kernel_dev/expr.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>
#include <unordered_map>

namespace liger::kernel_dev {

// ============================================================================================
// Lexer and parser

ParseError::ParseError(const std::string& message, int line, int column, std::string expected)
    : std::runtime_error(message), line_(line), column_(column), expected_(std::move(expected)) {}

namespace {

enum class Tok { Number, Ident, Op, Newline, End };

struct Token {
  Tok type = Tok::End;
  std::string text;
  double number = 0.0;
  int line = 1;
  int column = 1;
};

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::Number: return "number '" + t.text + "'";
    case Tok::Ident: return "name '" + t.text + "'";
    case Tok::Op: return "'" + t.text + "'";
    case Tok::Newline: return t.text == ";" ? "';'" : "end of line";
    case Tok::End: return "end of input";
  }
  return "?";
}

[[noreturn]] void fail_at(const Token& t, const std::string& expected) {
  std::ostringstream message;
  message << "line " << t.line << ", column " << t.column << ": expected " << expected << ", found "
          << describe(t);
  throw ParseError(message.str(), t.line, t.column, expected);
}

std::vector<Token> lex(const std::string& text) {
  std::vector<Token> tokens;
  int line = 1, column = 1;
  std::size_t i = 0;
  int depth = 0;  // newlines inside parentheses are whitespace
  auto advance = [&](std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
      ++i;
    }
  };
  while (i < text.size()) {
    char c = text[i];
    if (c == '#') {  // comment to end of line
      while (i < text.size() && text[i] != '\n') advance(1);
      continue;
    }
    if (c == '\n' || c == ';') {
      if (depth == 0) tokens.push_back({Tok::Newline, std::string(1, c), 0.0, line, column});
      advance(1);
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      advance(1);
      continue;
    }
    Token t;
    t.line = line;
    t.column = column;
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1])))) {
      std::size_t j = i;
      while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) ++j;
      if (j < text.size() && (text[j] == 'e' || text[j] == 'E')) {
        std::size_t k = j + 1;
        if (k < text.size() && (text[k] == '+' || text[k] == '-')) ++k;
        if (k < text.size() && std::isdigit(static_cast<unsigned char>(text[k]))) {
          j = k;
          while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
        }
      }
      t.type = Tok::Number;
      t.text = text.substr(i, j - i);
      if (std::count(t.text.begin(), t.text.end(), '.') > 1) {
        Token bad = t;
        bad.type = Tok::Op;
        fail_at(bad, "a number");
      }
      t.number = std::strtod(t.text.c_str(), nullptr);
      advance(j - i);
      tokens.push_back(t);
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      t.type = Tok::Ident;
      t.text = text.substr(i, j - i);
      // Names become tensor and gradient names in the profile, the C++ and the Python it renders,
      // where the schema holds them to 64 characters: say so here, at the name, not as an
      // invalid generated profile later.
      if (t.text.size() > kMaxNameLength)
        throw ParseError("line " + std::to_string(t.line) + ", column " + std::to_string(t.column) + ": the name '" +
                             t.text.substr(0, 24) + "...' is " + std::to_string(t.text.size()) +
                             " characters long; names are at most " + std::to_string(kMaxNameLength) + " characters",
                         t.line, t.column, "a name of at most " + std::to_string(kMaxNameLength) + " characters");
      advance(j - i);
      tokens.push_back(t);
      continue;
    }
    static const char* two_char[] = {"**", "<=", ">=", "==", "!="};
    std::string op;
    for (const char* candidate : two_char)
      if (text.compare(i, 2, candidate) == 0) op = candidate;
    if (op.empty()) {
      if (std::string("+-*/^()<>=,:").find(c) == std::string::npos) {
        t.type = Tok::Op;
        t.text = std::string(1, c);
        fail_at(t, "a number, a name, an operator (+ - * / ^) or a parenthesis");
      }
      op = std::string(1, c);
    }
    if (op == "(") ++depth;
    if (op == ")") depth = std::max(0, depth - 1);
    t.type = Tok::Op;
    t.text = op;
    advance(op.size());
    tokens.push_back(t);
  }
  Token end;
  end.type = Tok::End;
  end.line = line;
  end.column = column;
  tokens.push_back(end);
  return tokens;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, const FunctionResolver& resolver, const std::map<std::string, Expr>& locals)
      : tokens_(std::move(tokens)), resolver_(resolver), locals_(locals) {}

  const Token& peek(std::size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() { return tokens_[std::min(pos_++, tokens_.size() - 1)]; }
  bool at_op(const char* op) const { return peek().type == Tok::Op && peek().text == op; }
  bool accept(const char* op) {
    if (!at_op(op)) return false;
    ++pos_;
    return true;
  }
  void expect(const char* op, const std::string& expected) {
    if (!accept(op)) fail_at(peek(), expected);
  }

  Expr expression() {
    Nest guard(*this);
    Expr left = additive();
    static const char* ops[] = {"<", "<=", ">", ">=", "==", "!="};
    for (const char* op : ops) {
      if (at_op(op)) {
        ++pos_;
        Expr right = additive();
        return compare(op, left, right);
      }
    }
    return left;
  }

  std::map<std::string, Expr>& locals() { return locals_; }
  std::size_t pos() const { return pos_; }

 private:
  // Counts source nesting (a parenthesised or argument expression, a sign, an exponent) so the
  // recursive descent cannot exhaust the stack: the error names where the limit was crossed.
  struct Nest {
    explicit Nest(Parser& p) : parser(p) {
      if (++parser.nesting_ > kMaxNesting) {
        const Token& t = parser.peek();
        std::string where = "line " + std::to_string(t.line) + ", column " + std::to_string(t.column);
        throw ParseError(where + ": the expression nests deeper than " + std::to_string(kMaxNesting) +
                             " levels (parentheses, function calls, signs, powers); write it with fewer nested levels",
                         t.line, t.column, "at most " + std::to_string(kMaxNesting) + " nesting levels");
      }
    }
    ~Nest() { --parser.nesting_; }
    Parser& parser;
  };

  Expr additive() {
    std::vector<Expr> terms{term()};
    std::vector<char> ops{'+'};
    while (true) {
      if (accept("+")) {
        ops.push_back('+');
      } else if (accept("-")) {
        ops.push_back('-');
      } else {
        return build_chain(terms, ops);
      }
      terms.push_back(term());
    }
  }
  Expr term() {
    std::vector<Expr> terms{unary()};
    std::vector<char> ops{'*'};
    while (true) {
      if (accept("*")) {
        ops.push_back('*');
      } else if (accept("/")) {
        ops.push_back('/');
      } else {
        return build_chain(terms, ops);
      }
      terms.push_back(unary());
    }
  }
  Expr unary() {
    if (at_op("-") || at_op("+")) {
      Nest guard(*this);
      return signed_unary();
    }
    return power();
  }
  Expr signed_unary() {
    if (accept("-")) {
      Expr operand = unary();
      if (operand->kind == Kind::Number) return num(-operand->value);
      return neg(operand);
    }
    if (accept("+")) return unary();
    return power();
  }
  Expr power() {
    Expr base = primary();
    if (accept("^") || accept("**")) {
      Nest guard(*this);
      return pow(base, unary());
    }
    return base;
  }
  Expr primary() {
    const Token& t = peek();
    if (t.type == Tok::Number) {
      ++pos_;
      return num(t.number);
    }
    if (t.type == Tok::Op && t.text == "(") {
      ++pos_;
      Expr inner = expression();
      expect(")", "')' to close the '(' at column " + std::to_string(t.column));
      return inner;
    }
    if (t.type == Tok::Ident) {
      Token name = next();
      if (at_op("(")) return call_of(name);
      if (name.text == "pi") return num(M_PI);
      if (name.text == "e") return num(M_E);
      auto local = locals_.find(name.text);
      if (local != locals_.end()) return local->second;
      return sym(name.text);
    }
    fail_at(t, "a number, a name, a function call or '('");
  }

  Expr call_of(const Token& name) {
    expect("(", "'('");
    std::vector<CallArgument> args;
    if (!at_op(")")) {
      while (true) {
        CallArgument arg;
        if (peek().type == Tok::Ident && peek(1).type == Tok::Op && peek(1).text == "=") {
          arg.keyword = next().text;
          ++pos_;
        }
        arg.value = expression();
        args.push_back(arg);
        if (accept(",")) continue;
        if (at_op(")")) break;
        fail_at(peek(), "',' or ')' in the arguments of " + name.text + "()");
      }
    }
    expect(")", "')'");
    // max(v) / min(v) with one argument are row reductions, which only a resolver knows.
    const bool one_argument_extremum = (name.text == "max" || name.text == "min") && args.size() == 1 && resolver_;
    const PrimitiveFunction* primitive = one_argument_extremum ? nullptr : find_primitive(name.text);
    if (primitive) {
      std::vector<Expr> ordered(primitive->parameters.size());
      std::size_t positional = 0;
      for (const auto& arg : args) {
        std::size_t index = positional;
        if (!arg.keyword.empty()) {
          auto it = std::find(primitive->parameters.begin(), primitive->parameters.end(), arg.keyword);
          if (it == primitive->parameters.end()) {
            Token at = name;
            throw ParseError("line " + std::to_string(at.line) + ", column " + std::to_string(at.column) + ": " +
                                 name.text + "() has no parameter '" + arg.keyword + "'",
                             at.line, at.column, "one of the parameters of " + name.text);
          }
          index = static_cast<std::size_t>(it - primitive->parameters.begin());
        } else {
          ++positional;
        }
        if (index >= ordered.size()) {
          throw ParseError("line " + std::to_string(name.line) + ", column " + std::to_string(name.column) + ": " +
                               name.text + "() takes " + std::to_string(ordered.size()) + " argument(s), got " +
                               std::to_string(args.size()),
                           name.line, name.column, std::to_string(ordered.size()) + " argument(s)");
        }
        ordered[index] = arg.value;
      }
      for (std::size_t k = 0; k < ordered.size(); ++k) {
        if (!ordered[k]) {
          // clamp(x, min=0) style: a missing clamp bound means unbounded on that side.
          if (name.text == "clamp" && k > 0) {
            ordered[k] = num(k == 1 ? -INFINITY : INFINITY);
            continue;
          }
          throw ParseError("line " + std::to_string(name.line) + ", column " + std::to_string(name.column) + ": " +
                               name.text + "() is missing argument '" + primitive->parameters[k] + "'",
                           name.line, name.column, std::to_string(ordered.size()) + " argument(s)");
        }
      }
      if (name.text == "pow") return pow(ordered[0], ordered[1]);
      if (name.text == "square") return pow(ordered[0], num(2));
      if (name.text == "clamp") {
        // One-sided clamps become relu-like max/min forms.
        bool no_low = is_number(ordered[1]) && std::isinf(ordered[1]->value);
        bool no_high = is_number(ordered[2]) && std::isinf(ordered[2]->value);
        if (no_low && no_high) return ordered[0];
      }
      return call(name.text, ordered);
    }
    if (std::all_of(args.begin(), args.end(), [](const auto& a) { return a.keyword.empty(); })) {
      std::vector<Expr> values;
      for (const auto& a : args) values.push_back(a.value);
      if (auto expanded = identity_function(name.text, values)) return *expanded;
    }
    if (resolver_) {
      try {
        if (auto expanded = resolver_(name.text, args)) return *expanded;
      } catch (const std::invalid_argument& error) {
        throw ParseError("line " + std::to_string(name.line) + ", column " + std::to_string(name.column) + ": " +
                             error.what(),
                         name.line, name.column, "valid arguments for " + name.text);
      }
    }
    std::string known;
    for (const auto& f : primitive_functions()) known += (known.empty() ? "" : ", ") + f.name;
    for (const auto& f : identity_function_names()) known += ", " + f;
    throw ParseError("line " + std::to_string(name.line) + ", column " + std::to_string(name.column) +
                         ": unknown function '" + name.text + "'; expected a known function (" + known +
                         "), a catalogue activation (gelu, silu, mish, ...) or a row reduction (sum, mean, max(v), min(v), "
                         "logsumexp, softmax, log_softmax, norm, var, std, rms_norm, layer_norm, normalize)",
                     name.line, name.column, "a known function");
  }

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
  const FunctionResolver& resolver_;
  std::map<std::string, Expr> locals_;
};

// Collects symbols in order of first appearance.
void ordered_symbols(const Expr& e, std::vector<std::string>& out) {
  if (e->kind == Kind::Symbol && std::find(out.begin(), out.end(), e->name) == out.end()) out.push_back(e->name);
  for (const auto& a : e->args) ordered_symbols(a, out);
}

}  // namespace

std::optional<ParamDecl> default_param_for_name(const std::string& name) {
  static const std::set<std::string> channel_one = {"gamma", "weight", "scale", "w"};
  static const std::set<std::string> channel_zero = {"beta", "bias", "shift"};
  static const std::set<std::string> scalar = {"alpha", "theta", "lambda_", "tau", "kappa"};
  if (channel_one.count(name)) return ParamDecl{name, ParamShape::Channel, 1.0, true};
  if (channel_zero.count(name)) return ParamDecl{name, ParamShape::Channel, 0.0, true};
  if (scalar.count(name)) return ParamDecl{name, ParamShape::Scalar, 1.0, true};
  return std::nullopt;
}

Program parse_program(const std::string& text, const FunctionResolver& resolver) {
  if (text.size() > kMaxSourceBytes)
    throw ParseError("line 1, column 1: the expression is " + std::to_string(text.size()) + " bytes, more than the " +
                         std::to_string(kMaxSourceBytes / 1024) + " KiB limit; write one element-wise op",
                     1, 1, "at most " + std::to_string(kMaxSourceBytes / 1024) + " KiB");
  std::vector<Token> tokens = lex(text);
  Parser parser(tokens, resolver, {});
  Program program;
  std::vector<ParamDecl> declared;
  Expr last;
  Token last_statement;
  std::string last_name = "y";
  // Statement boundaries are found on the token stream: IDENT '=' starts an assignment.
  std::size_t index = 0;
  auto skip_newlines = [&] {
    while (parser.peek().type == Tok::Newline) parser.next();
  };
  (void)index;
  skip_newlines();
  if (parser.peek().type == Tok::End) fail_at(parser.peek(), "an expression such as 'y = relu(x)^2'");
  while (parser.peek().type != Tok::End) {
    const Token& first = parser.peek();
    if (first.type == Tok::Ident && first.text == "param" && parser.peek(1).type == Tok::Ident) {
      parser.next();
      ParamDecl decl;
      decl.name = parser.next().text;
      if (auto guess = default_param_for_name(decl.name)) decl = *guess;
      bool explicit_shape = false;
      if (parser.accept(":")) {
        explicit_shape = true;
        const Token& shape = parser.next();
        if (shape.type != Tok::Ident || (shape.text != "scalar" && shape.text != "channel"))
          fail_at(shape, "'scalar' or 'channel'");
        decl.shape = shape.text == "scalar" ? ParamShape::Scalar : ParamShape::Channel;
      }
      if (parser.accept("=")) {
        bool negative = parser.accept("-");
        const Token& value = parser.next();
        if (value.type != Tok::Number) fail_at(value, "a number (the parameter's initial value)");
        decl.init = negative ? -value.number : value.number;
      }
      if (parser.peek().type == Tok::Ident && parser.peek().text == "fixed") {
        parser.next();
        decl.learnable = false;
        if (!explicit_shape) decl.shape = ParamShape::Scalar;  // module parameters are scalars
      }
      declared.push_back(decl);
    } else {
      std::string target;
      const Token first_token = first;
      if (first.type == Tok::Ident && parser.peek(1).type == Tok::Op && parser.peek(1).text == "=") {
        target = parser.next().text;
        parser.next();
      }
      Expr value = parser.expression();
      last_statement = first_token;
      if (target.empty()) target = "y";
      parser.locals()[target] = value;
      last = value;
      last_name = target;
    }
    const Token& after = parser.peek();
    if (after.type == Tok::End) break;
    if (after.type != Tok::Newline) fail_at(after, "an operator, ';' or the end of the line");
    skip_newlines();
  }
  if (!last) fail_at(parser.peek(), "an assignment such as 'y = relu(x)^2'");
  // Checked once, on the output: nothing walks the intermediate values during parsing.
  std::string problem = tree_limit_problem(last);
  if (!problem.empty()) {
    throw ParseError("line " + std::to_string(last_statement.line) + ", column " + std::to_string(last_statement.column) +
                         ": " + problem,
                     last_statement.line, last_statement.column,
                     "at most " + std::to_string(kMaxTreeDepth) + " levels and " + std::to_string(kMaxTreeNodes) +
                         " operations");
  }
  program.output = last_name;
  program.expression = last;
  std::vector<std::string> names;
  ordered_symbols(last, names);
  for (const auto& name : names) {
    auto it = std::find_if(declared.begin(), declared.end(), [&](const ParamDecl& d) { return d.name == name; });
    if (it != declared.end()) {
      program.params.push_back(*it);
    } else if (auto guess = default_param_for_name(name)) {
      program.params.push_back(*guess);
    } else {
      program.inputs.push_back(name);
    }
  }
  program.output = unclashing_output_name(program.output, program.inputs, program.params);
  return program;
}

std::string unclashing_output_name(const std::string& preferred, const std::vector<std::string>& inputs,
                                   const std::vector<ParamDecl>& params) {
  std::set<std::string> taken;
  for (const auto& n : inputs) taken.insert({n, "d" + n});
  for (const auto& p : params) taken.insert({p.name, "d" + p.name});
  auto free = [&](const std::string& n) { return !taken.count(n) && !taken.count("d" + n); };
  if (free(preferred)) return preferred;
  for (const char* candidate : {"y", "out", "z", "result", "output"})
    if (free(candidate)) return candidate;
  for (int i = 1;; ++i)
    if (std::string c = "y" + std::to_string(i); free(c)) return c;
}

Expr parse_expression(const std::string& text, const FunctionResolver& resolver) {
  return parse_program(text, resolver).expression;
}

}  // namespace liger::kernel_dev
