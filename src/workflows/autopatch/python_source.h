// Python source analysis for autopatch: a tokenizer that follows Python's lexical rules
// (indentation, strings of every kind, comments, explicit and implicit line joining) and a light
// structural parser that recovers what a HuggingFace modeling file is made of: classes (bases,
// decorators, markers, line span), their methods (parameters, body statements), the attributes
// assigned in __init__ (`self.x = Foo(...)`), module-level functions, imports and assignments.
//
// It does not build a full AST: a statement is a logical line with its tokens, and expression
// questions ("what is multiplied with the weight", "which callee is applied to what") are
// answered from the tokens with the helpers below. That is what the analysis needs and it keeps
// working on files with syntax this parser does not know.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace liger::autopatch {

enum class TokKind { Name, Number, String, Op, Newline, Indent, Dedent, End };

struct Token {
  TokKind kind = TokKind::End;
  std::string text;  // strings keep their prefix and quotes
  int line = 0;      // 1-based line where the token starts
  int col = 0;       // 0-based column
};

struct Comment {
  int line = 0;
  std::string text;  // without the leading '#', trimmed
};

struct LexResult {
  std::vector<Token> tokens;
  std::vector<Comment> comments;
};

// Throws liger::Error (Usage) naming file:line on an unterminated string or bracket mismatch
// at end of input, and on inconsistent dedent.
LexResult tokenize(std::string_view source, const std::string& origin = "<source>");

// A logical line (a simple statement, or the header of a compound statement up to its ':').
struct Statement {
  int line = 0;       // first physical line
  int end_line = 0;   // last physical line
  int depth = 0;      // indentation level (0 = module level)
  std::vector<Token> tokens;  // without Newline/Indent/Dedent
  std::string text;   // normalised: tokens joined, spaces only between words ("a = b.c(d, e)" ->
                      // "a=b.c(d,e)"; "return x if y else z" -> "return x if y else z")
  bool is_compound_header() const;  // ends with ':' (class/def/if/for/with/...)
  std::string keyword() const;      // first token if it is a keyword, else ""
};

// A call expression found in a statement: callee is the dotted name ("nn.Linear",
// "self.gate_proj", "torch.rsqrt", "F.silu"); args/kwargs hold normalised argument text.
struct Call {
  std::string callee;
  std::vector<std::string> args;
  std::map<std::string, std::string> kwargs;
  std::string text;  // the whole call, normalised
  int line = 0;
};

// `targets = value` (also augmented assignments and annotated ones).
struct Assignment {
  std::vector<std::string> targets;  // "self.weight", "hidden_states", "q, k" split -> {"q","k"}
  std::string op;                    // "=", "+=", ...
  std::string value;                 // normalised right-hand side
  std::vector<Token> value_tokens;
  std::optional<Call> call;          // when the value is exactly one call
  int line = 0;
};

struct FunctionDef {
  std::string name;
  std::vector<std::string> params;  // names only, in order ("self", "x", ...)
  std::vector<std::string> decorators;
  int line = 0;
  int end_line = 0;
  std::vector<Statement> body;  // every statement inside, nested ones included, in order
};

struct ClassDef {
  std::string name;
  std::vector<std::string> bases;  // normalised base expressions
  std::vector<std::string> decorators;
  int line = 0;
  int end_line = 0;
  std::vector<FunctionDef> methods;
  std::vector<Statement> class_body;  // statements at class level (attributes, annotations)
  std::optional<std::string> copied_from;  // "# Copied from transformers.models.x.X" marker

  const FunctionDef* method(std::string_view name) const;
  // `self.<attr> = <value>` statements in __init__ (all of them, conditional ones included).
  std::vector<Assignment> init_assignments() const;
  // The value(s) assigned to self.<attr> in __init__.
  std::vector<Assignment> init_assignments_to(std::string_view attr) const;
  bool has_base(std::string_view base) const;  // suffix match on the dotted name
};

struct Import {
  std::string module;  // "...activations", "torch.nn"
  std::vector<std::string> names;  // imported names ("ACT2FN"), or empty for `import x`
  int line = 0;
};

struct PythonModule {
  std::filesystem::path path;
  std::string origin;  // the name used in evidence (usually the file name)
  std::vector<std::string> lines;  // raw source lines, for evidence fragments
  std::vector<Comment> comments;
  std::vector<Statement> statements;  // every logical line of the file
  std::vector<ClassDef> classes;
  std::vector<FunctionDef> functions;  // module level only
  std::vector<Assignment> assignments;  // module level only
  std::vector<Import> imports;

  const ClassDef* find_class(std::string_view name) const;
  const FunctionDef* find_function(std::string_view name) const;
  std::string line_text(int line) const;  // trimmed raw line, "" when out of range
  bool imports_name(std::string_view name) const;
};

PythonModule parse_python(std::string_view source, const std::string& origin);
PythonModule parse_python_file(const std::filesystem::path& path);

// ---- expression helpers over tokens / normalised text --------------------------------------

std::string join_tokens(const std::vector<Token>& tokens, size_t begin, size_t end);
std::vector<Call> find_calls(const std::vector<Token>& tokens, int line);
std::vector<Call> find_calls(const Statement& st);
std::optional<Assignment> as_assignment(const Statement& st);
// Splits normalised expression text on a top-level binary operator ("*", "+", ...), respecting
// brackets; returns one element when the operator does not occur at top level.
std::vector<std::string> split_top_level(std::string_view expr, char op);
// Removes redundant outer parentheses: "((a*b))" -> "a*b"; "(a)*(b)" unchanged.
std::string strip_parens(std::string_view expr);
// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace liger::autopatch
