// The PyTorch translator's expression evaluator (pytorch_eval.cpp): one Python expression at a
// time, over the function's locals, inputs and the module's attributes, into the expression IR.
// The statements, helpers and modules around it are read by pytorch.cpp and pytorch_init.cpp.
#pragma once

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "workflows/kernel_dev/catalogue.h"
#include "workflows/kernel_dev/pytorch_detail.h"

namespace liger::kernel_dev::torch_detail {

// At most this many parts of one argument (input_split.h's kMaxSplitParts).
constexpr int kMaxSplitPartsTranslated = 16;

class Translator {
 public:
  Translator(const Catalogue& catalogue, std::vector<std::string>& notes) : catalogue_(catalogue), notes_(notes) {}

  std::map<std::string, Value> locals;
  std::set<std::string> inputs;                 // function parameters (tensors)
  std::map<std::string, Value> globals;         // module-level constants (EPS = 1e-6), seen from every scope
  std::map<std::string, std::string> aliases;   // names imports give: th -> torch, softmax -> torch.nn.functional.softmax
  const std::vector<ParamDecl>* declared = nullptr;  // the op's parameters so far (a fixed one in a dim is its value)
  std::map<std::string, Value> self_attributes; // self.<name>
  // self.<name> set in __init__ from values the op does not have: why, refused where it is read.
  std::map<std::string, std::string> unreadable_attributes;
  struct Helper {
    std::vector<std::string> params;
    std::vector<LogicalLine> body;
  };
  std::map<std::string, Helper> helpers;  // top-level defs usable as functions
  std::set<std::string> methods;          // the module's own methods, called as self.<name>(...)
  std::vector<std::string> row_callees;   // row functions called, first call first
  std::map<std::string, std::string> sample_hints;  // input -> sample kind (Program::sample_hints)
  std::map<std::string, double> column_roles;       // argument -> init (Program::column_roles)
  // Arguments cut into equal parts along the last dimension (x.chunk(2, dim=-1), F.glu(x)):
  // argument -> its parts' input names, part 0 first (Program::splits), and the line of the cut.
  std::map<std::string, std::vector<std::string>> split_parts;
  std::map<std::string, int> split_line;
  // The names a tuple assignment (gate, up = x.chunk(2, dim=-1)) gives the parts of the next cut.
  std::vector<std::string> pending_part_names;
  // The op's tensor arguments: a cut is made of one of these (helpers see `inputs` cleared).
  std::set<std::string> op_arguments;
  std::function<Value(const std::string&, const std::vector<Arg>&)> call_helper;
  // An instance of one of the source's own module classes (self.norm = MyNorm(d), a Value::Module
  // with `instance` set): its forward inlined when called, its attributes read as self.norm.<attr>.
  std::function<Value(int, const std::string&, const std::vector<Arg>&)> call_instance;  // instance, method
  std::function<Value(int, const std::string&)> instance_attribute;
  // While __init__ is read: a call of one of the source's classes (`source_classes`) builds it.
  std::set<std::string> source_classes;
  std::function<Value(const std::string&, const std::vector<Arg>&)> construct;
  // Where the text given to evaluate() starts in the file, for error positions.
  int line = 0;
  int column_base = 0;

  // Evaluates one Python expression; reentrant (a helper inlined inside an expression evaluates
  // its own body, and the caller's expression continues after the call). Throws Reject.
  Value evaluate(const std::string& text);

  Expr as_tensor(const Value& v, const std::string& what);
  // The function name with torch./F./nn.functional. prefixes removed, or "" when not torch's.
  static std::string torch_function(const std::string& path);
  // Whether e depends on an input tensor's values (or on its rank): not decidable before the op runs.
  bool reads_inputs(const Expr& e) const;
  // F.mse_loss, l1, smooth L1, Huber, BCE with logits, soft margin with reduction='none' as
  // element-wise (input, target) ops; nullopt for other functions. Throws Reject.
  std::optional<Expr> pointwise_loss(const std::string& fn, const std::string& f, const std::vector<Arg>& all);

 private:
  Value evaluate_tokens();
  const PyToken& peek(std::size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  bool accept(const char* op);
  void expect(const char* op);

  // Source nesting (parentheses, arguments, signs, exponents) is bounded so the recursive descent
  // cannot exhaust the stack on adversarial input.
  struct Nest {
    explicit Nest(Translator& t) : translator(t) {
      if (++translator.nesting_ > kMaxNesting)
        throw Reject{"line " + std::to_string(translator.line) + ", column " +
                         std::to_string(translator.column_base + static_cast<int>(translator.peek().offset) + 1) +
                         ": the expression nests deeper than " + std::to_string(kMaxNesting) +
                         " levels (parentheses, calls, signs, powers); write it with fewer nested levels",
                     0};
    }
    ~Nest() { --translator.nesting_; }
    Translator& translator;
  };

  // The rest of a comma-separated sequence up to `close` (a trailing comma allowed), appended to
  // `into`'s items: the tail of a tuple or the body of a list.
  void sequence_items(const char* close, Value& into);

  Value expression();
  // Chains are collected and built by build_chain (balanced when long: a 20 000-term sum must not
  // become a 20 000-deep tree).
  Value comparison();  // additive, then one of < <= > >= == != (no chaining)
  Value additive();
  Value term();
  Value unary();
  Value signed_unary();
  Value power();
  std::vector<Arg> arguments();
  Value postfix();
  Value atom();


  Expr catalogue_call(const std::string& name, Expr x, const std::vector<std::pair<std::string, Expr>>& named);

  // Binds positional/keyword arguments after the first tensor to `names`.
  std::vector<std::pair<std::string, Expr>> bind(const std::string& fn, const std::vector<Arg>& args, std::size_t skip,
                                                 const std::vector<std::string>& names);

  Value elementwise(const std::string& fn, const std::vector<Arg>& args, Expr receiver = nullptr);
  // chunk / tensor_split / glu of an argument along the last dimension (pytorch_split.cpp): the
  // parts as new inputs (a Tuple, text "chunk"; glu's gated product). nullopt for other functions.
  // Throws Reject for a cut the kernel cannot take (another dim, an intermediate value, uneven parts).
  std::optional<Value> split_call(const std::string& fn, const std::string& f, const std::vector<Arg>& all);
  std::vector<std::string> cut_argument(const std::string& fn, const std::string& source, int parts);
  // Whether `source` is an argument of the op as it is passed (not a value computed in the op, not
  // a part of an earlier cut): what chunk and a last-dimension slice may cut.
  bool whole_argument(const Expr& source) const;
  // x[..., a:b] / x[:, a:b] after the '[' of a tensor: an equal part of an argument along the last
  // dimension (x[..., :d] and x[..., d:] with d = x.shape[-1] // 2 are its halves), as chunk's.
  Value last_dim_slice(const Value& tensor_value, int column);

  Value apply(const Value& callee, const std::vector<Arg>& args);

  const Catalogue& catalogue_;
  std::vector<std::string>& notes_;
  std::vector<PyToken> tokens_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
};

// --------------------------------------------------------------------------------------------
// Modules (pytorch_init.cpp): the op's nn.Module and, inlined, the instances of the source's own
// module classes it builds in __init__ (self.norm = MyRMSNorm(d)).
struct Instance {
  const ClassDef* cls = nullptr;
  std::string path;    // "self" for the op's module, "self.norm" for its submodule, for messages
  std::string prefix;  // of the names of its parameters: "" for the op's module, "norm_" for self.norm
  std::map<std::string, Value> attributes;  // self.<name>
  std::set<std::string> methods;            // its methods but __init__, called as self.<name>(...)
  std::map<std::string, std::string> unreadable;  // Translator::unreadable_attributes
  std::set<std::string> declared;                 // the parameter names it declared
};

class ModuleBuilder {
 public:
  // `current` is pointed at the line being read, for the line of a refusal.
  ModuleBuilder(Translator& translator, const std::vector<ClassDef>& classes, std::vector<ParamDecl>& params,
                std::vector<std::string>& notes, const LogicalLine*& current)
      : translator_(translator), classes_(classes), params_(params), notes_(notes), current_(current) {}

  // The instance of `cls` that is the op (index 0): __init__'s numeric defaults are its module
  // parameters, named as written.
  int build_op_module(const ClassDef& cls);
  // Indexes stay valid while instances are added (a deque).
  Instance& instance(int index) { return instances_.at(static_cast<std::size_t>(index)); }
  // The class of the source that `cls` names, or nullptr.
  const ClassDef* source_class(const std::string& name) const;

 private:
  // Reads `init`'s body for `inst`: its parameters (nn.Parameter), submodules (nn.<Class> and the
  // source's own classes, built recursively), and plain attributes. `numeric`: __init__'s
  // parameters with a number (written in the call or a default), by the symbol that stands for
  // them; `bound`: its other arguments' values.
  void read_init(Instance& inst, const Def& init, const std::map<std::string, double>& numeric,
                 const std::map<std::string, Value>& bound, const std::map<std::string, std::string>& text_defaults);
  // read_init, a refusal without a column placed at the statement that failed.
  void read_init_at_line(Instance& inst, const Def& init, const std::map<std::string, double>& numeric,
                         const std::map<std::string, Value>& bound,
                         const std::map<std::string, std::string>& text_defaults);
  // An instance of the source's class `cls` built as `self.<attr> = cls(args)` inside `outer`.
  int build_submodule(const Instance& outer, const std::string& attr, const ClassDef& cls, const std::vector<Arg>& args,
                      int column);
  // Declares `p` for `inst` (again: replaced); a name another instance declared is refused.
  void declare(Instance& inst, const ParamDecl& p);
  // `self.<attr> = nn.Parameter(<rhs inner>)`: its value(s) in attributes, declared in params.
  // A buffer (register_buffer) is read the same way as a fixed parameter.
  void read_parameter(Instance& inst, const std::string& attr, const std::string& rhs,
                      const std::map<std::string, double>& numeric, bool learnable = true);
  // __init__'s body with the class-level assignments in front, as `self.<name> = ...` (nullptr
  // and no statements: nothing to read).
  // The result is kept by the builder: a refusal points at its lines.
  const Def* init_with_class_statements(const ClassDef& cls, const Def* init);

  Translator& translator_;
  const std::vector<ClassDef>& classes_;
  std::vector<ParamDecl>& params_;
  std::vector<std::string>& notes_;
  const LogicalLine*& current_;
  std::deque<Instance> instances_;
  std::deque<Def> inits_;  // __init__ bodies with class-level statements (init_with_class_statements)
  std::vector<std::string> building_;  // classes being built, outermost first (a class may not contain itself)
};

// The 0-based column where a logical line's text starts in its physical line.
inline int start_column(const LogicalLine& l) { return l.column >= 0 ? l.column : l.indent; }

}  // namespace liger::kernel_dev::torch_detail
