// kernel-dev's expression language: an immutable expression IR, a lexer and recursive-descent
// parser, an fp64/fp32 evaluator with the numerically safe forms the generated CUDA uses,
// symbolic differentiation and simplification.
//
// Grammar (statements separated by ';' or newlines; the last assignment is the output):
//   program    := statement { (';' | NEWLINE) statement }
//   statement  := IDENT '=' expr
//               | 'param' IDENT [ ':' ('scalar' | 'channel') ] [ '=' NUMBER ] [ 'fixed' ]
//   expr       := comparison
//   comparison := additive [ ('<' | '<=' | '>' | '>=' | '==' | '!=') additive ]
//   additive   := term { ('+' | '-') term }
//   term       := unary { ('*' | '/') unary }
//   unary      := ('-' | '+') unary | power
//   power      := postfix [ ('^' | '**') unary ]          (right-associative, binds tighter than unary minus on its left: -x^2 = -(x^2))
//   postfix    := primary
//   primary    := NUMBER | IDENT | IDENT '(' [ arg { ',' arg } ] ')' | '(' expr ')'
//   arg        := [ IDENT '=' ] expr
// Named constants: pi, e. Functions: see primitive_functions(); other names resolve through a
// FunctionResolver (the activation catalogue: gelu(a), silu(x), leaky_relu(x, 0.2)...).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace liger::kernel_dev {

enum class Kind { Number, Symbol, Add, Sub, Mul, Div, Pow, Neg, Call, Compare };

struct Node;
using Expr = std::shared_ptr<const Node>;

struct Node {
  Kind kind = Kind::Number;
  double value = 0.0;      // Number
  std::string name;        // Symbol name, Call function name, Compare operator ("<", ">=", ...)
  std::vector<Expr> args;  // operands
};

// Constructors (no simplification; see simplify()).
Expr num(double value);
Expr sym(const std::string& name);
Expr add(Expr a, Expr b);
Expr sub(Expr a, Expr b);
Expr mul(Expr a, Expr b);
Expr div(Expr a, Expr b);
Expr pow(Expr a, Expr b);
Expr neg(Expr a);
Expr call(const std::string& function, std::vector<Expr> args);
Expr compare(const std::string& op, Expr a, Expr b);

bool is_number(const Expr& e, double value);
bool is_number(const Expr& e);
// Structural equality.
bool equal(const Expr& a, const Expr& b);
// Infix text with minimal parentheses; parses back to an equal expression.
std::string to_string(const Expr& e);
std::set<std::string> free_symbols(const Expr& e);
Expr substitute(const Expr& e, const std::map<std::string, Expr>& bindings);
// Functions the expression language has no primitive for, written with those it has (same values,
// derivatives from the identities): sinh, cosh, tan, asinh, acosh, atanh, asin, acos, exp2, log2,
// log10, reciprocal, logsigmoid, logit, sinc, erfc, ndtr, entr of one argument; logaddexp,
// logaddexp2, hypot, atan2, xlogy, xlog1py, copysign of two; lerp of three. Shared by the
// expression parser and the PyTorch translator, so `y = log(cosh(x))` and
// `torch.log(torch.cosh(x))` mean the same. nullopt for any other name or argument count.
std::optional<Expr> identity_function(const std::string& name, const std::vector<Expr>& args);
// The names identity_function knows, with the arguments of those of several (for error messages).
const std::vector<std::string>& identity_function_names();
bool contains_function(const Expr& e, const std::string& function);
// Number of nodes (used to report how much simplification removed).
std::size_t node_count(const Expr& e);

// --------------------------------------------------------------------------------------------
// Limits. Every walker over the IR (printing, evaluation, differentiation, simplification, code
// generation) recurses over the tree, and intermediate assignments are substituted by sharing,
// so a few lines of input can describe a tree that is very deep or astronomically large once
// expanded. The parsers enforce these limits so that the walkers stay within a bounded stack
// and bounded time, whatever the input.
inline constexpr int kMaxNesting = 200;                  // parentheses, call arguments, signs, powers in the source
inline constexpr std::size_t kMaxNameLength = 64;       // as the profile schema's name pattern
inline constexpr int kMaxTreeDepth = 1000;               // the IR after substitution
// 50 000 operations written out are about 250 KiB of the profile (each formula is printed in full,
// and the 1 MiB profile also holds the derivatives): a limit that fits the document it feeds.
inline constexpr std::uint64_t kMaxTreeNodes = 50000;    // the IR after substitution, expanded
inline constexpr std::size_t kMaxSourceBytes = 256 * 1024;  // expression or PyTorch text (util::kMaxKernelDevInputBytes)
// The raw (unsimplified) derivative with respect to any input or parameter, expanded. The product
// rule roughly triples a term, so a sum at the kMaxTreeNodes limit still has its gradient.
inline constexpr std::uint64_t kMaxDerivativeNodes = 4 * kMaxTreeNodes;
inline constexpr std::uint64_t kTreeNodesCap = std::uint64_t{1} << 62;  // TreeShape::nodes saturates here

struct TreeShape {
  int depth = 0;
  std::uint64_t nodes = 0;  // expanded (shared subtrees once per use); saturates at kTreeNodesCap
};
// Iterative (works on any tree, shared subtrees counted once per use).
TreeShape tree_shape(const Expr& e);
// "" when `e` is within kMaxTreeDepth / kMaxTreeNodes and its derivative with respect to each
// free symbol within kMaxDerivativeNodes, else a sentence naming the limit.
std::string tree_limit_problem(const Expr& e);

// One precedence level of a chain: terms[0] ops[1] terms[1] ops[2] terms[2] ... with ops '+'/'-'
// (or '*'/'/'); ops[0] is ignored. Short chains are left-associative as written; long ones are
// grouped into a balanced tree of the same value, so a 20 000-term sum is a tree of depth ~30
// rather than 20 000.
Expr build_chain(const std::vector<Expr>& terms, const std::vector<char>& ops);

// --------------------------------------------------------------------------------------------
// Functions the IR knows natively (evaluation, differentiation, CUDA emission).
struct PrimitiveFunction {
  std::string name;
  std::vector<std::string> parameters;  // positional names (keyword arguments use them)
  std::string description;
};
const std::vector<PrimitiveFunction>& primitive_functions();
const PrimitiveFunction* find_primitive(const std::string& name);

// --------------------------------------------------------------------------------------------
// Parsing.
class ParseError : public std::runtime_error {
 public:
  ParseError(const std::string& message, int line, int column, std::string expected);
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& expected() const { return expected_; }

 private:
  int line_;
  int column_;
  std::string expected_;
};

struct CallArgument {
  std::string keyword;  // "" when positional
  Expr value;
};

// Expands a call to a non-primitive function (catalogue activations used as functions).
// Returns nullopt when the name is unknown; throws std::invalid_argument for bad arguments.
using FunctionResolver =
    std::function<std::optional<Expr>(const std::string& name, const std::vector<CallArgument>& args)>;

enum class ParamShape { Scalar, Channel };

struct ParamDecl {
  std::string name;
  ParamShape shape = ParamShape::Scalar;
  double init = 1.0;
  bool learnable = true;
};

struct Program {
  std::string output = "y";
  Expr expression;                 // the output with every intermediate assignment substituted
  std::vector<std::string> inputs; // tensor inputs, in order of first appearance
  std::vector<ParamDecl> params;   // learnable parameters and fixed (module) parameters
  // Inputs a PyTorch function documents a range for (F.binary_cross_entropy's probabilities and
  // targets in [0, 1]), by sample kind (input_sampling.h): the tests draw them from there even
  // where the formula would be finite outside it (PyTorch's CUDA kernel asserts the range).
  std::map<std::string, std::string> sample_hints;
  // Arguments the code passes where PyTorch takes a per-column tensor (F.layer_norm's weight and
  // bias), with that role's initial value (1 for a weight, 0 for a bias): the Tier-2 analysis takes
  // them as learnable per-column parameters whatever their names.
  std::map<std::string, double> column_roles;
  // Inputs that are equal parts of one argument along the last dimension (`a, b = x.chunk(2, dim=-1)`,
  // F.glu(x)): input -> (argument, part index, part count). The kernel takes the parts; the Python
  // entry takes the argument (input_split.h).
  struct Split {
    std::string source;
    int index = 0;
    int parts = 0;
  };
  std::map<std::string, Split> splits;
};

// Parses `text`. Names that are neither assigned, declared params, constants, nor recognised
// learnable-parameter names (alpha, beta, gamma, weight, bias, scale, shift...) are inputs.
// Throws ParseError naming line, column and what was expected.
Program parse_program(const std::string& text, const FunctionResolver& resolver = {});

// The output's name: `preferred` unless it (or its gradient d<name>) collides with an input's or a
// parameter's name or gradient, else the first free of y, out, z, result, ... Inputs may be named
// anything (`def f(x, y): return x * y`), and the generated code names every gradient d<name>.
std::string unclashing_output_name(const std::string& preferred, const std::vector<std::string>& inputs,
                                   const std::vector<ParamDecl>& params);
Expr parse_expression(const std::string& text, const FunctionResolver& resolver = {});

// Heuristic shape/initial value for a parameter named in an expression without a declaration.
std::optional<ParamDecl> default_param_for_name(const std::string& name);

// --------------------------------------------------------------------------------------------
// Evaluation with the same numerically safe forms the generated code uses (sigmoid by the
// sign-split formula, softplus as log1p(exp(-|x|)) + max(x, 0), relu'(0) = 0).
using Environment = std::map<std::string, double>;
double eval_f64(const Expr& e, const Environment& env);
float eval_f32(const Expr& e, const Environment& env);

// --------------------------------------------------------------------------------------------
// Calculus and rewriting.
Expr differentiate(const Expr& e, const std::string& variable);  // raw, unsimplified
Expr simplify(const Expr& e);
// The terms of a sum or difference (a - b + c), each with whether it is subtracted; appended to
// `out`, `negative` flipping every sign.
void sum_terms(const Expr& e, bool negative, std::vector<std::pair<Expr, bool>>& out);
// Terms in sum_terms' form added up, simplified.
Expr sum_of(const std::vector<std::pair<Expr, bool>>& terms);
// d e / d variable, simplified.
Expr derivative(const Expr& e, const std::string& variable);

}  // namespace liger::kernel_dev
