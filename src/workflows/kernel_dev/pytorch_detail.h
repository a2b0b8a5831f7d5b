// Internal to the PyTorch translator (pytorch.cpp, pytorch_reductions.cpp): Python logical lines,
// tokens, and the values an expression evaluates to during translation.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "workflows/kernel_dev/expr.h"

namespace liger::kernel_dev::torch_detail {

// A rejection travelling up from wherever the problem was found.
struct Reject {
  std::string message;
  int tier = 0;
  int column = 0;  // 1-based column of the call that failed in its physical line; 0 unknown
};

// --------------------------------------------------------------------------------------------
// Logical lines: physical lines joined while brackets are open or a line ends in '\\'.
struct LogicalLine {
  int number = 0;   // first physical line, 1-based
  int indent = 0;    // the block structure's indent (synthetic for one-line forms such as `def f(x): return ...`)
  int column = -1;   // 0-based offset of `text` in `raw`, for error columns; -1: use indent
  std::string text; // comment stripped, joined
  std::string raw;  // the first physical line as written
};

std::vector<LogicalLine> logical_lines(const std::string& source);
// Offsets of `wanted` outside brackets and strings.
std::vector<std::size_t> top_level(const std::string& text, char wanted);
std::string trimmed(const std::string& text);
std::vector<LogicalLine> expand_compound(const std::vector<LogicalLine>& lines);

// The source's functions and classes (pytorch_structure.cpp).
struct Def {
  std::string name;
  std::vector<std::string> params;
  std::map<std::string, std::string> defaults;
  int line = 0;
  int indent = 0;
  bool variadic = false;  // takes *args or **kwargs: its parameters cannot be bound by name
  std::vector<LogicalLine> body;
};

struct ClassDef {
  std::string name;
  std::string bases;
  int line = 0;
  int indent = 0;
  std::vector<Def> methods;
  std::vector<LogicalLine> statements;  // class-level assignments (eps = 1e-6): attributes of every instance
};
struct SourceStructure {
  std::vector<Def> functions;  // top level, in order
  std::vector<ClassDef> classes;
};
SourceStructure source_structure(const std::vector<LogicalLine>& lines);
// "def name(a, b=1.0, *, c: float = 2) -> T:" -> Def without its body; false when `l` is no def.
bool parse_def(const LogicalLine& l, Def& d);

// --------------------------------------------------------------------------------------------
// Python expression tokens.
enum class PyTok { Number, Name, String, Op, End };
struct PyToken {
  PyTok type = PyTok::End;
  std::string text;
  double number = 0.0;
  std::size_t offset = 0;  // in the text being lexed, for error columns
};

std::vector<PyToken> py_lex(const std::string& text);

// --------------------------------------------------------------------------------------------
// Values during translation.
// A named argument: a struct, not std::pair<std::string, Value>, because std::pair needs the
// complete Value where Value declares the vector (clang rejects it; GCC let it pass).
struct NamedValue;
struct Value {
  enum Type { Tensor, String, Path, Method, Module, None, Tuple } type = None;
  Expr expr;                 // Tensor
  std::string text;          // String literal / dotted path / module functional name
  Expr receiver;             // Method
  std::vector<NamedValue> module_args;  // Module: constructor arguments
  std::vector<Value> items;  // Tuple
  int instance = -1;         // Module: an instance of the source's own module class (ModuleBuilder)
};
struct NamedValue {
  std::string first;
  Value second;
};

inline Value tensor(Expr e) {
  Value v;
  v.type = Value::Tensor;
  v.expr = std::move(e);
  return v;
}

struct Arg {
  std::string keyword;
  Value value;
};

// Name tables (pytorch_tables.cpp): torch./F. functions that are not element-wise (tier, why),
// nn.<Class> modules -> functional name, catalogue functionals -> their hyperparameters in order.
const std::map<std::string, std::pair<int, std::string>>& non_elementwise();
const std::map<std::string, std::string>& module_functionals();
const std::map<std::string, std::vector<std::string>>& catalogue_functionals();

// The symbol standing for a tensor's rank (x.ndim, x.dim(), len(x.shape)): a dim written as
// `x.ndim - 1` is the last one. It has no value of its own in the op.
inline const std::string kRankSymbol = "x.ndim";
// Value::Tuple's text for a learnable parameter of a few elements (nn.Parameter(torch.ones(3))):
// its items are scalar parameters, read by constant indexes (self.weight[0]).
inline const std::string kParameterVector = "<parameter vector>";

// A reduction over the last dimension (sum, mean, amax, max(dim=...), logsumexp, norm, var, std,
// softmax, log_softmax, softmin, normalize, rms_norm, layer_norm, size(-1)) as the IR's row
// reductions; nullopt when `f` is not one (or is max/min's element-wise form). `f` is the function
// without its torch./F. prefix, `fn` as written (for messages), `all` the arguments with a method's
// receiver first; `fixed` the op's fixed module parameters with their values (a dim or keepdim
// given by one is its value). Throws Reject for a reduction outside the Tier-2 form (another dim).
// `column_roles` receives the names passed where PyTorch takes a per-column tensor (layer_norm's
// and rms_norm's weight and bias), with the initial value of that role (Program::column_roles).
std::optional<Value> row_function(const std::string& f, const std::string& fn, const std::vector<Arg>& all,
                                  std::vector<std::string>& notes, const std::map<std::string, double>& fixed,
                                  std::map<std::string, double>& column_roles);
// A value's number, when it is a constant (a one-element tuple's item too).
std::optional<double> constant(const Value& v);
// A dim counted from the rank (x.ndim - 1, x.dim() - 2) as the negative dim it is (-1, -2).
std::optional<double> dim_value(const Value& v);
// max/min(dim=...)'s (values, indices) pair.
Value max_result(const Value& values);
// The tuple a row reduction returns (max/min(dim=...): values and untranslated indices;
// var_mean / std_mean: two row values), which code indexes or unpacks.
inline bool is_reduction_tuple(const Value& v) {
  return v.type == Value::Tuple && (v.text == "max" || v.text == "var_mean" || v.text == "std_mean");
}

// Module attributes built in __init__ (pytorch_modules.cpp).
// `self.<attr> = nn.Parameter(<rhs>)`: learnable, a scalar when built from one element
// (torch.ones(1) * init, torch.tensor(v)), else per channel; the init value from ones/zeros,
// tensor(v) and `* factor`, constructor arguments read from `defaults`.
ParamDecl parameter_decl(const std::string& attr, const std::string& rhs, const std::map<std::string, double>& defaults);
// The class path of `rhs` when it is a constructor call (`nn.LayerNorm(d)`, `LayerNorm(d)`,
// `my.Block(...)`: the last name starts upper case), else "" (nn.Parameter is not a submodule).
std::string constructor_callee(const std::string& rhs);
// An nn.LayerNorm / nn.RMSNorm module value (module.text layer_norm / rms_norm) built as
// self.<attr>: its constructor flags (elementwise_affine, bias) consumed and its implicit learnable
// weight and bias declared in `params` (per column, init 1 and 0) and passed to the norm, as
// PyTorch's defaults say; nn.RMSNorm without eps gets a declared eps. `plain_names`: the weights
// are named weight/bias (the module's only norm), else <attr>_weight/<attr>_bias. Throws Reject for
// a constructor outside the row form.
void adopt_norm_parameters(Value& module, const std::string& attr, const std::string& constructor, bool plain_names,
                           std::vector<ParamDecl>& params, std::vector<std::string>& notes);

}  // namespace liger::kernel_dev::torch_detail
