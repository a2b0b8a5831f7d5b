#include "workflows/kernel_dev/pytorch.h"
#include "workflows/kernel_dev/pytorch_detail.h"
#include "workflows/kernel_dev/tier2_derive.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <regex>
#include <sstream>

namespace liger::kernel_dev {

namespace {

using namespace torch_detail;

class Translator {
 public:
  Translator(const Catalogue& catalogue, std::vector<std::string>& notes) : catalogue_(catalogue), notes_(notes) {}

  std::map<std::string, Value> locals;
  std::set<std::string> inputs;                 // function parameters (tensors)
  std::map<std::string, Value> self_attributes; // self.<name>
  struct Helper {
    std::vector<std::string> params;
    std::vector<LogicalLine> body;
  };
  std::map<std::string, Helper> helpers;  // top-level defs usable as functions
  std::set<std::string> methods;          // the module's own methods, called as self.<name>(...)
  std::vector<std::string> row_callees;   // row functions called, first call first
  std::function<Value(const std::string&, const std::vector<Arg>&)> call_helper;
  // Where the text given to evaluate() starts in the file, for error positions.
  int line = 0;
  int column_base = 0;

  Value evaluate(const std::string& text) {
    // Reentrant: a helper function called inside an expression evaluates its own body, and the
    // caller's expression continues after the call.
    struct Saved {
      Translator& t;
      std::vector<PyToken> tokens;
      std::size_t pos;
      int nesting, line, column_base;
      ~Saved() {
        t.tokens_ = std::move(tokens);
        t.pos_ = pos;
        t.nesting_ = nesting;
        t.line = line;
        t.column_base = column_base;
      }
    } saved{*this, std::move(tokens_), pos_, nesting_, line, column_base};
    tokens_ = py_lex(text);
    pos_ = 0;
    nesting_ = 0;
    try {
      return evaluate_tokens();
    } catch (Reject& r) {
      // A refusal found inside the expression names where: the token the parser had just read (the
      // operator or name at fault) unless the thrower knew better.
      if (r.column == 0) r.column = column_base + static_cast<int>(tokens_[pos_ > 0 ? pos_ - 1 : 0].offset) + 1;
      throw;
    }
  }

  Value evaluate_tokens() {
    Value v = expression();
    if (peek().type != PyTok::End) {
      if (peek().text == ",") {  // a tuple
        Value tuple;
        tuple.type = Value::Tuple;
        tuple.items.push_back(v);
        while (accept(",")) {
          if (peek().type == PyTok::End) break;
          tuple.items.push_back(expression());
        }
        if (peek().type == PyTok::End) return tuple;
      }
      throw Reject{"cannot translate the expression near '" + peek().text + "'", 0,
                   column_base + static_cast<int>(peek().offset) + 1};
    }
    return v;
  }

  Expr as_tensor(const Value& v, const std::string& what) {
    if (v.type == Value::Tensor) return v.expr;
    if (v.type == Value::Tuple) throw Reject{"a tuple is used where " + what + " is expected", 0};
    throw Reject{"'" + v.text + "' is used where " + what + " is expected", 0};
  }

 private:
  const PyToken& peek(std::size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  bool accept(const char* op) {
    if (peek().type == PyTok::Op && peek().text == op) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(const char* op) {
    if (accept(op)) return;
    const std::string found = peek().type == PyTok::End ? "the end of the line" : "'" + peek().text + "'";
    throw Reject{std::string("expected '") + op + "', found " + found, 0,
                 column_base + static_cast<int>(peek().offset) + 1};
  }

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
  void sequence_items(const char* close, Value& into) {
    while (!accept(close)) {
      into.items.push_back(expression());
      if (!accept(",")) {
        expect(close);
        break;
      }
    }
  }

  Value expression() {
    Nest guard(*this);
    if (peek().type == PyTok::Name && peek().text == "lambda") throw Reject{"lambda expressions are not supported", 0};
    Value left = additive();
    static const char* ops[] = {"<", "<=", ">", ">=", "==", "!="};
    for (const char* op : ops)
      if (accept(op)) {
        Value right = additive();
        return tensor(compare(op, as_tensor(left, "a tensor"), as_tensor(right, "a tensor")));
      }
    if (peek().type == PyTok::Name && peek().text == "if")
      throw Reject{"conditional expressions (a if c else b) are not supported; use torch.where", 0};
    return left;
  }
  // Chains are collected and built by build_chain (balanced when long: a 20 000-term sum must not
  // become a 20 000-deep tree).
  Value additive() {
    Value first = term();
    std::vector<Expr> terms;
    std::vector<char> ops{'+'};
    while (true) {
      char op = accept("+") ? '+' : accept("-") ? '-' : 0;
      if (!op) return terms.empty() ? first : tensor(build_chain(terms, ops));
      if (terms.empty()) terms.push_back(as_tensor(first, "a tensor"));
      ops.push_back(op);
      terms.push_back(as_tensor(term(), "a tensor"));
    }
  }
  Value term() {
    Value first = unary();
    std::vector<Expr> terms;
    std::vector<char> ops{'*'};
    while (true) {
      char op = 0;
      if (accept("*")) op = '*';
      else if (accept("/")) op = '/';
      else if (accept("@")) throw Reject{"'@' is a matrix multiplication (GEMM)", 3};
      else if (accept("//") || accept("%")) throw Reject{"integer division / modulo is not a floating-point element-wise op", 0};
      if (!op) return terms.empty() ? first : tensor(build_chain(terms, ops));
      if (terms.empty()) terms.push_back(as_tensor(first, "a tensor"));
      ops.push_back(op);
      terms.push_back(as_tensor(unary(), "a tensor"));
    }
  }
  Value unary() {
    if (peek().type == PyTok::Op && (peek().text == "-" || peek().text == "+")) {
      Nest guard(*this);
      return signed_unary();
    }
    return power();
  }
  Value signed_unary() {
    if (accept("-")) {
      Expr e = as_tensor(unary(), "a tensor");
      return tensor(is_number(e) ? num(-e->value) : neg(e));
    }
    if (accept("+")) return unary();
    return power();
  }
  Value power() {
    Value base = postfix();
    if (accept("**")) {
      Nest guard(*this);
      return tensor(pow(as_tensor(base, "a tensor"), as_tensor(unary(), "an exponent")));
    }
    return base;
  }
  std::vector<Arg> arguments() {
    std::vector<Arg> args;
    if (accept(")")) return args;
    while (true) {
      Arg arg;
      if (peek().type == PyTok::Name && peek(1).type == PyTok::Op && peek(1).text == "=") {
        arg.keyword = peek().text;
        pos_ += 2;
      }
      arg.value = expression();
      args.push_back(arg);
      if (accept(",")) {
        if (accept(")")) return args;
        continue;
      }
      expect(")");
      return args;
    }
  }
  Value postfix() {
    Value v = atom();
    while (true) {
      if (accept(".")) {
        if (peek().type != PyTok::Name) throw Reject{"expected an attribute name after '.'", 0};
        std::string attribute = peek().text;
        ++pos_;
        if (v.type == Value::Path) {
          std::string path = v.text + "." + attribute;
          if (v.text == "self") {
            auto it = self_attributes.find(attribute);
            if (it != self_attributes.end()) {
              v = it->second;
            } else if (methods.count(attribute)) {
              v.text = path;  // self.<method>: inlined when called (apply)
            } else {
              throw Reject{"self." + attribute + " is not set in __init__ (unknown attribute)", 0};
            }
          } else if (path == "math.pi" || path == "torch.pi" || path == "np.pi") {
            v = tensor(num(M_PI));
          } else if (path == "math.e") {
            v = tensor(num(M_E));
          } else {
            v.text = path;
          }
        } else if (v.type == Value::Tuple && v.text == "max" && attribute == "values") {
          v = v.items[0];
        } else if (v.type == Value::Tensor && attribute == "shape") {
          v.type = Value::Path;  // x.shape[-1]: the row length, read by the indexing below
          v.text = "<shape>";
        } else if (v.type == Value::Tensor) {
          Value method;
          method.type = Value::Method;
          method.receiver = v.expr;
          method.text = attribute;
          v = method;
        } else {
          throw Reject{"attribute '" + attribute + "' of a non-tensor value", 0};
        }
      } else if (accept("(")) {
        // The callee's name, for the column of a refusal.
        const int column = column_base + static_cast<int>(tokens_[pos_ >= 2 ? pos_ - 2 : 0].offset) + 1;
        std::vector<Arg> args = arguments();
        try {
          v = apply(v, args);
        } catch (Reject& r) {
          if (r.column == 0) r.column = column;
          throw;
        }
      } else if (accept("[")) {
        // x.shape[-1] is the row length n; x.shape[-1:] the one-element shape (n,) that
        // layer_norm / rms_norm take as normalized_shape; max(dim=...)[0] its values. Other
        // indexing is not element-wise.
        const int column = column_base + static_cast<int>(tokens_[pos_ - 1].offset) + 1;
        const bool shape = v.type == Value::Path && v.text == "<shape>";
        if (!shape && !(v.type == Value::Tuple && v.text == "max"))
          throw Reject{"indexing / slicing a tensor is not element-wise", 0};
        auto slice_refusal = [&] {
          return Reject{"x.shape[...] slice: only x.shape[-1:] (the last dimension, as a normalized_shape) is "
                        "translated; the Tier-2 row program reduces over the last dimension only",
                        2, column};
        };
        if (accept(":")) throw slice_refusal();
        Value index = expression();
        if (accept(":")) {
          const Expr start = index.type == Value::Tensor ? simplify(index.expr) : nullptr;
          if (!shape || !start || !is_number(start, -1) || !accept("]")) {
            if (!shape) throw Reject{"slicing a tensor is not element-wise", 0, column};
            throw slice_refusal();
          }
          Value tuple;
          tuple.type = Value::Tuple;
          tuple.items.push_back(tensor(sym("n")));
          v = tuple;
          continue;
        }
        expect("]");
        const Expr i = index.type == Value::Tensor ? simplify(index.expr) : nullptr;
        if (shape && i && is_number(i, -1)) v = tensor(sym("n"));
        else if (!shape && i && is_number(i, 0)) v = v.items[0];
        else
          throw Reject{shape ? "x.shape[...]: only x.shape[-1] (the row length) is translated"
                             : "max/min(dim=...)[...]: only [0] (the values) is translated; the indices are not",
                       0};
      } else {
        return v;
      }
    }
  }
  Value atom() {
    const PyToken t = peek();
    ++pos_;
    if (t.type == PyTok::Number) return tensor(num(t.number));
    if (t.type == PyTok::String) {
      Value v;
      v.type = Value::String;
      v.text = t.text;
      return v;
    }
    if (t.type == PyTok::Op && t.text == "(") {
      Value inner = expression();
      if (accept(",")) {  // (a,) or (a, b): a shape argument such as normalized_shape
        Value tuple;
        tuple.type = Value::Tuple;
        tuple.items.push_back(inner);
        sequence_items(")", tuple);
        return tuple;
      }
      expect(")");
      return inner;
    }
    if (t.type == PyTok::Op && t.text == "[") {  // [a, b]: a shape argument such as [x.shape[-1]]
      Value list;
      list.type = Value::Tuple;
      sequence_items("]", list);
      return list;
    }
    if (t.type == PyTok::Name) {
      if (t.text == "None" || t.text == "True" || t.text == "False") {
        if (t.text == "None") return Value{};
        return tensor(num(t.text == "True" ? 1 : 0));
      }
      auto local = locals.find(t.text);
      if (local != locals.end()) return local->second;
      if (inputs.count(t.text)) return tensor(sym(t.text));
      Value path;
      path.type = Value::Path;
      path.text = t.text;
      return path;
    }
    throw Reject{"unexpected '" + t.text + "'", 0};
  }

  // The function name with torch./F./nn.functional. prefixes removed, or "" when not torch's.
  static std::string torch_function(const std::string& path) {
    static const char* prefixes[] = {"torch.nn.functional.", "nn.functional.", "F.", "torch.special.", "torch."};
    for (const char* prefix : prefixes)
      if (path.rfind(prefix, 0) == 0) return path.substr(std::string(prefix).size());
    return "";
  }

  Expr catalogue_call(const std::string& name, Expr x, const std::vector<std::pair<std::string, Expr>>& named) {
    std::vector<CallArgument> args = {{"", x}};
    for (const auto& [k, v] : named) args.push_back({k, v});
    auto resolved = catalogue_.resolver()(name, args);
    if (!resolved) throw Reject{"the catalogue has no '" + name + "'", 0};
    return *resolved;
  }

  // Binds positional/keyword arguments after the first tensor to `names`.
  std::vector<std::pair<std::string, Expr>> bind(const std::string& fn, const std::vector<Arg>& args, std::size_t skip,
                                                 const std::vector<std::string>& names) {
    std::vector<std::pair<std::string, Expr>> out;
    std::size_t positional = 0;
    for (std::size_t i = skip; i < args.size(); ++i) {
      const Arg& a = args[i];
      if (a.keyword == "inplace") continue;
      std::string name = a.keyword;
      if (name.empty()) {
        if (positional >= names.size()) throw Reject{fn + "(): too many arguments", 0};
        name = names[positional++];
      } else if (std::find(names.begin(), names.end(), name) == names.end()) {
        throw Reject{fn + "(): unsupported argument '" + name + "'", 0};
      }
      out.push_back({name, as_tensor(a.value, "a number")});
    }
    return out;
  }

  Value elementwise(const std::string& fn, const std::vector<Arg>& args, Expr receiver = nullptr) {
    std::vector<Arg> all = args;
    if (receiver) all.insert(all.begin(), Arg{"", tensor(receiver)});
    auto arg_tensor = [&](std::size_t i, const char* keyword = nullptr) -> Expr {
      if (keyword)
        for (const auto& a : all)
          if (a.keyword == keyword) return as_tensor(a.value, std::string("argument ") + keyword);
      std::size_t positional = 0;
      for (const auto& a : all) {
        if (!a.keyword.empty()) continue;
        if (positional++ == i) return as_tensor(a.value, "argument " + std::to_string(i + 1) + " of " + fn);
      }
      return nullptr;
    };
    auto has_keyword = [&](const char* k) {
      return std::any_of(all.begin(), all.end(), [&](const Arg& a) { return a.keyword == k; });
    };
    static const std::set<std::string> unary = {"relu", "sigmoid", "tanh", "exp", "log", "log1p", "expm1", "sqrt",
                                                "rsqrt", "abs", "erf", "sin", "cos", "sign"};
    std::string f = fn;
    if (f.size() > 1 && f.back() == '_' && f != "relu_") f.pop_back();  // in-place variants
    if (f == "relu_") f = "relu";
    if (f == "expit") f = "sigmoid";
    if (f == "absolute") f = "abs";
    if (f == "sgn") f = "sign";
    Expr x = arg_tensor(0, "input");
    if (!x && f != "tensor") throw Reject{fn + "() needs a tensor argument", 0};
    if (unary.count(f)) return tensor(call(f, {x}));
    if (f == "square") return tensor(pow(x, num(2)));
    // Functions the expression language lacks, written with those it has (same values; the
    // derivatives follow from the identities).
    if (f == "logit") {  // logit(x, eps) clamps x to [eps, 1 - eps] first
      Expr eps = arg_tensor(1, "eps");
      Expr p = eps ? call("clamp", {x, eps, sub(num(1), eps)}) : x;
      return tensor(sub(call("log", {p}), call("log1p", {neg(p)})));
    }
    if (f == "sinh") return tensor(div(sub(call("exp", {x}), call("exp", {neg(x)})), num(2)));
    if (f == "cosh") return tensor(div(add(call("exp", {x}), call("exp", {neg(x)})), num(2)));
    if (f == "tan") return tensor(div(call("sin", {x}), call("cos", {x})));
    if (f == "exp2") return tensor(call("exp", {mul(num(M_LN2), x)}));
    if (f == "log2") return tensor(div(call("log", {x}), num(M_LN2)));
    if (f == "log10") return tensor(div(call("log", {x}), num(M_LN10)));
    if (f == "pow" || f == "float_power") {
      Expr e = arg_tensor(1, "exponent");
      if (!e) throw Reject{"pow() needs an exponent", 0};
      return tensor(pow(x, e));
    }
    if (f == "neg" || f == "negative") return tensor(neg(x));
    if (f == "reciprocal") return tensor(div(num(1), x));
    if (f == "mul" || f == "multiply") return tensor(mul(x, arg_tensor(1, "other")));
    if (f == "add") return tensor(add(x, arg_tensor(1, "other")));
    if (f == "sub" || f == "subtract") return tensor(sub(x, arg_tensor(1, "other")));
    if (f == "div" || f == "divide" || f == "true_divide") return tensor(div(x, arg_tensor(1, "other")));
    if (f == "where") {
      Expr a = arg_tensor(1, "input"), b = arg_tensor(2, "other");
      if (!a || !b) throw Reject{"where() needs a condition and two values", 0};
      return tensor(call("where", {x, a, b}));
    }
    if (f == "clamp" || f == "clip" || f == "clamp_min" || f == "clamp_max") {
      Expr lo = f == "clamp_max" ? nullptr : arg_tensor(1, "min");
      Expr hi = f == "clamp_min" ? nullptr : (f == "clamp_max" ? arg_tensor(1, "max") : arg_tensor(2, "max"));
      if (lo && hi) return tensor(call("clamp", {x, lo, hi}));
      if (lo) return tensor(is_number(lo, 0) ? call("relu", {x}) : call("max", {x, lo}));
      if (hi) return tensor(call("min", {x, hi}));
      return tensor(x);
    }
    if (auto reduction = row_function(f, fn, all, notes_)) {
      if (f != "size" && std::find(row_callees.begin(), row_callees.end(), f) == row_callees.end())
        row_callees.push_back(f);
      return *reduction;
    }
    if (f == "maximum" || f == "fmax" || f == "minimum" || f == "fmin" || f == "max" || f == "min") {
      Expr other = arg_tensor(1, "other");
      if (!other || has_keyword("dim"))
        throw Reject{fn + "() over a dimension is a reduction", 2};
      bool is_max = f == "maximum" || f == "fmax" || f == "max";
      return tensor(call(is_max ? "max" : "min", {x, other}));
    }
    if (f == "gelu") {
      std::string approximate = "none";
      for (const auto& a : all)
        if (a.keyword == "approximate") {
          if (a.value.type != Value::String) throw Reject{"gelu(): approximate must be a string literal", 0};
          approximate = a.value.text;
        }
      if (approximate != "none" && approximate != "tanh")
        throw Reject{"gelu(): approximate must be 'none' or 'tanh', got '" + approximate + "'", 0};
      notes_.push_back(approximate == "tanh" ? "F.gelu(approximate='tanh') -> gelu_tanh" : "F.gelu -> gelu (erf)");
      return tensor(catalogue_call(approximate == "tanh" ? "gelu_tanh" : "gelu", x, {}));
    }
    auto cat = catalogue_functionals().find(f);
    if (cat != catalogue_functionals().end()) {
      std::vector<Arg> rest;
      bool first = true;
      for (const auto& a : all) {
        if (first && a.keyword.empty()) {
          first = false;
          continue;
        }
        if (a.keyword == "input") continue;
        rest.push_back(a);
      }
      return tensor(catalogue_call(f, x, bind(fn, rest, 0, cat->second)));
    }
    if (f == "float" || f == "half" || f == "bfloat16" || f == "to" || f == "type_as" || f == "contiguous" ||
        f == "type" || f == "clone" || f == "detach") {
      notes_.push_back("." + f + "() dropped: the kernel loads its storage type and computes in fp32");
      return tensor(x);
    }
    if (f == "zeros_like") return tensor(num(0));
    if (f == "ones_like") return tensor(num(1));
    auto ne = non_elementwise().find(f);
    if (ne != non_elementwise().end())
      throw Reject{fn + "() is " + ne->second.second +
                       (ne->second.first == 2 ? "; the row reductions the built-in analyser derives are sum, mean, amax, "
                                                "amin, max/min(dim), logsumexp, norm, var, std, softmax, log_softmax, "
                                                "softmin, normalize, rms_norm and layer_norm over dim=-1"
                                              : ""),
                   ne->second.first};
    if (f == "view" || f == "reshape" || f == "transpose" || f == "permute" || f == "chunk" || f == "split" ||
        f == "cat" || f == "stack" || f == "flatten" || f == "unsqueeze" || f == "squeeze" || f == "expand")
      throw Reject{fn + "() changes the tensor layout; the built-in analyser handles element-wise ops on same-shape inputs only", 0};
    throw Reject{fn + "() is not in the element-wise subset the built-in analyser translates; write it with the "
                      "functions it reads (exp, log, log1p, expm1, sqrt, rsqrt, tanh, sigmoid, erf, abs, sin, cos, sign, "
                      "pow, clamp, where, maximum, minimum and the F.* activations) or as an expression (y = ...)",
                 0};
  }

  Value apply(const Value& callee, const std::vector<Arg>& args) {
    if (callee.type == Value::Method) return elementwise(callee.text, args, callee.receiver);
    if (callee.type == Value::Module) {
      // A module: its constructor arguments follow the input.
      std::vector<Arg> all = args;
      for (const auto& [k, v] : callee.module_args) all.push_back(Arg{k, v});
      if (callee.text == "identity") return args.at(0).value;
      return elementwise(callee.text, all);
    }
    if (callee.type != Value::Path) throw Reject{"calling a value that is not a function", 0};
    const std::string& path = callee.text;
    // nn.<Module>(...) builds a module; nn.functional.<f> / torch.nn.functional.<f> is a function.
    const bool functional = path.rfind("nn.functional.", 0) == 0 || path.rfind("torch.nn.functional.", 0) == 0;
    if (!functional && (path.rfind("nn.", 0) == 0 || path.rfind("torch.nn.", 0) == 0)) {
      std::string cls = path.substr(path.rfind('.') + 1);
      auto it = module_functionals().find(cls);
      if (it == module_functionals().end()) throw Reject{path + " is not a module the built-in analyser knows", 0};
      Value module;
      module.type = Value::Module;
      module.text = it->second;
      static const std::map<std::string, std::vector<std::string>> ctor = {
          {"leaky_relu", {"negative_slope"}}, {"elu", {"alpha"}}, {"celu", {"alpha"}},
          {"softplus", {"beta", "threshold"}}, {"hardtanh", {"min_val", "max_val"}}, {"gelu", {"approximate"}},
          {"softmax", {"dim"}}, {"log_softmax", {"dim"}},
          {"layer_norm", {"normalized_shape", "eps", "elementwise_affine", "bias"}},
          {"rms_norm", {"normalized_shape", "eps", "elementwise_affine"}}};
      auto names = ctor.find(module.text);
      std::size_t positional = 0;
      for (const auto& a : args) {
        if (a.keyword == "inplace") continue;
        std::string k = a.keyword;
        if (k.empty()) {
          if (names == ctor.end() || positional >= names->second.size()) continue;  // dims of Linear etc.
          k = names->second[positional++];
        }
        module.module_args.push_back({k, a.value});
      }
      // nn.LayerNorm / nn.RMSNorm have a learnable weight unless elementwise_affine=False.
      if ((module.text == "layer_norm" || module.text == "rms_norm") &&
          std::none_of(module.module_args.begin(), module.module_args.end(),
                       [](const NamedValue& a) { return a.first == "elementwise_affine"; }))
        module.module_args.push_back({"elementwise_affine", tensor(num(1))});
      return module;
    }
    if (path == "math.sqrt" || path == "math.exp" || path == "math.log" || path == "math.tanh") {
      Expr x = as_tensor(args.at(0).value, "a number");
      std::string problem = tree_limit_problem(x);
      if (!problem.empty()) throw Reject{problem, 0};
      return tensor(simplify(call(path.substr(5), {x})));
    }
    if (path == "float" || path == "torch.tensor" || path == "torch.as_tensor") return args.at(0).value;
    if (helpers.count(path)) return call_helper(path, args);
    if (path.rfind("self.", 0) == 0 && methods.count(path.substr(5))) return call_helper(path, args);
    std::string fn = torch_function(path);
    if (fn.empty()) throw Reject{"unknown function '" + path + "'", 0};
    return elementwise(fn, args);
  }

  const Catalogue& catalogue_;
  std::vector<std::string>& notes_;
  std::vector<PyToken> tokens_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
};

// The 0-based column where a logical line's text starts in its physical line.
int start_column(const LogicalLine& l) { return l.column >= 0 ? l.column : l.indent; }

}  // namespace

bool looks_like_pytorch(const std::string& text) {
  static const char* markers[] = {"import torch", "def ", "nn.Module", "torch.", "F.", "return ", "class "};
  for (const char* m : markers)
    if (text.find(m) != std::string::npos) return true;
  // A method call or attribute (x.tanh(), self.alpha): the expression language has no '.'
  // outside numbers.
  for (std::size_t i = 0; i + 1 < text.size(); ++i)
    if (text[i] == '.' && (std::isalpha(static_cast<unsigned char>(text[i + 1])) || text[i + 1] == '_')) return true;
  return false;
}

TorchTranslation translate_pytorch(const std::string& source, const Catalogue& catalogue) {
  TorchTranslation result;
  if (source.size() > kMaxSourceBytes) {
    result.rejection = "the PyTorch source is " + std::to_string(source.size()) + " bytes, more than the " +
                       std::to_string(kMaxSourceBytes / 1024) + " KiB limit; pass the function that defines the op";
    return result;
  }
  std::vector<LogicalLine> lines = expand_compound(logical_lines(source));
  // Structure: top-level defs and classes with their methods.
  SourceStructure structure = source_structure(lines);
  std::vector<Def>& functions = structure.functions;
  const std::vector<ClassDef>& classes = structure.classes;

  Translator translator(catalogue, result.notes);
  const LogicalLine* current = nullptr;
  auto reject = [&](const Reject& r) {
    result.elementwise = false;
    result.rejection = r.message;
    result.tier_guess = r.tier;
    result.column = r.column;
    if (current) {
      result.line = current->number;
      result.offending_line = current->raw.substr(std::min(current->raw.find_first_not_of(" \t"), current->raw.size()));
    }
    return result;
  };

  // Runs a body; returns the value of its `return`.
  std::function<Value(const std::vector<LogicalLine>&)> run_body = [&](const std::vector<LogicalLine>& body) -> Value {
    for (const auto& l : body) {
      current = &l;
      const std::string& t = l.text;
      if (t == "pass" || t.rfind("super(", 0) == 0 || t.rfind("assert ", 0) == 0) continue;
      if (t.rfind("return", 0) == 0) {
        std::string rest = t.substr(6);
        translator.line = l.number;
        translator.column_base = start_column(l) + 6;
        Value v = translator.evaluate(rest);
        if (v.type == Value::Tuple)
          throw Reject{"the function returns several outputs; the built-in analyser handles one: return one tensor "
                       "per op (one kernel-dev request each)",
                       0, start_column(l) + 1};
        return v;
      }
      // Control flow: the kernel applies one formula to every element, so a branch becomes a select
      // and a loop of fixed count an unrolled sequence of statements.
      static const std::pair<const char*, const char*> control[] = {
          {"if ", "write a branch on values as torch.where(condition, a, b), computed per element"},
          {"elif ", "write a branch on values as torch.where(condition, a, b), computed per element"},
          {"else:", "write a branch on values as torch.where(condition, a, b), computed per element"},
          {"for ", "unroll a loop of fixed count into separate statements"},
          {"while ", "unroll a loop of fixed count into separate statements"},
          {"with ", "drop the context manager (autocast and no_grad do not change the formula)"},
          {"try:", "drop the exception handling"}};
      for (const auto& [c, alternative] : control)
        if (t.rfind(c, 0) == 0)
          throw Reject{std::string("control flow ('") + c + "...') is not supported by the built-in analyser: " +
                           alternative,
                       0, start_column(l) + 1};
      // An in-place method as a statement (x.relu_(), y.mul_(2)) updates its receiver: the same as
      // assigning the out-of-place result to it.
      static const std::regex in_place(R"(^([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*_)\((.*)\)$)");
      std::smatch m;
      if (std::regex_match(t, m, in_place) && top_level(t, '=').empty()) {
        std::string target = m[1].str();
        if (target == "torch" || target == "F") {  // torch.relu_(x): the receiver is the first argument
          const std::string args = m[3].str();
          const auto commas = top_level(args, ',');
          target = trimmed(args.substr(0, commas.empty() ? std::string::npos : commas.front()));
          if (!std::regex_match(target, std::regex("[A-Za-z_][A-Za-z0-9_]*")))
            throw Reject{"in-place " + m[1].str() + "." + m[2].str() + "() on '" + target +
                             "': only a named tensor can be updated in place; assign the result instead",
                         0, start_column(l) + 1};
        }
        translator.line = l.number;
        translator.column_base = start_column(l);
        translator.locals[target] = translator.evaluate(t);
        result.notes.push_back("in-place " + m[1].str() + "." + m[2].str() + "(...) read as " + target + " = " +
                               m[1].str() + "." + m[2].str().substr(0, m[2].str().size() - 1) + "(...)");
        continue;
      }
      // Assignment (possibly augmented).
      std::size_t eq = std::string::npos;
      int depth = 0;
      for (std::size_t k = 0; k < t.size(); ++k) {
        char c = t[k];
        if (c == '(' || c == '[') ++depth;
        if (c == ')' || c == ']') --depth;
        if (c == '=' && depth == 0 && (k + 1 >= t.size() || t[k + 1] != '=') &&
            (k == 0 || std::string("=!<>").find(t[k - 1]) == std::string::npos)) {
          eq = k;
          break;
        }
      }
      if (eq == std::string::npos)
        throw Reject{"statement not understood: the built-in analyser reads assignments (name = expression), "
                     "augmented assignments, in-place method calls (x.mul_(2)) and one return",
                     0, start_column(l) + 1};
      std::string target = t.substr(0, eq);
      std::string value = t.substr(eq + 1);
      std::string augmented;
      if (!target.empty() && std::string("+-*/").find(target.back()) != std::string::npos) {
        augmented = std::string(1, target.back());
        target.pop_back();
      }
      std::size_t colon = target.find(':');  // annotated assignment
      if (colon != std::string::npos) target = target.substr(0, colon);
      target.erase(std::remove_if(target.begin(), target.end(), ::isspace), target.end());
      if (target.find(',') != std::string::npos)
        throw Reject{"tuple unpacking ('" + target + " = ...') splits a tensor; not element-wise on one shape", 0};
      if (target.find('[') != std::string::npos)
        throw Reject{"assigning to '" + target + "' (indexed or masked assignment) is not translated: write it as "
                     "y = torch.where(condition, value, y)",
                     0, start_column(l) + 1};
      if (target.rfind("self.", 0) == 0)
        throw Reject{"assigning to '" + target + "' in forward (module state) is not element-wise: keep the state "
                     "out of the op and pass it as an input",
                     0, start_column(l) + 1};
      translator.line = l.number;
      translator.column_base = start_column(l) + static_cast<int>(eq) + 1;
      if (!augmented.empty()) {
        value = target + " " + augmented + " (" + value + ")";
        translator.column_base -= static_cast<int>(target.size()) + 4;  // the text added in front
      }
      translator.locals[target] = translator.evaluate(value);
    }
    throw Reject{"no return statement", 0};
  };

  // Helpers (top-level functions, and the module's own methods called as self.<name>(...)) are
  // inlined: arguments bound to parameters, defaults evaluated in the helper's scope, the body run
  // with its own locals. Recursion is refused at the call that closes the cycle (a kernel applies
  // one formula; a recursion depth depends on values the analyser does not have).
  constexpr int kMaxHelperDepth = 32;
  std::vector<std::string> active;  // helpers being inlined, outermost first
  const ClassDef* module_class = nullptr;
  translator.call_helper = [&](const std::string& name, const std::vector<Arg>& args) -> Value {
    const bool method = name.rfind("self.", 0) == 0;
    const Def* def = nullptr;
    if (method) {
      for (const auto& m : module_class->methods)
        if (m.name == name.substr(5)) def = &m;
    } else {
      for (const auto& f : functions)
        if (f.name == name) def = &f;
    }
    if (!def) throw Reject{name + "() is not defined in the source", 0};
    if (std::find(active.begin(), active.end(), name) != active.end()) {
      std::string chain;
      for (auto it = std::find(active.begin(), active.end(), name); it != active.end(); ++it) chain += *it + "() -> ";
      throw Reject{"recursion: " + chain + name + "() cannot be inlined (the built-in analyser inlines helper "
                       "functions and methods, and a recursion's depth depends on values it does not have); write "
                       "the computation without calling " + name + "() from itself",
                   0};
    }
    if (static_cast<int>(active.size()) >= kMaxHelperDepth)
      throw Reject{name + "(): helper functions call each other more than " + std::to_string(kMaxHelperDepth) +
                       " levels deep; the built-in analyser inlines at most that many",
                   0};
    if (def->variadic)
      throw Reject{name + "() takes *args or **kwargs, which the built-in analyser cannot bind when it inlines the "
                       "call: give the helper named parameters",
                   0};
    // A method's `self` (first parameter, unless a @staticmethod without one) is the module itself.
    std::vector<std::string> params = def->params;
    if (method && !params.empty() && (params.front() == "self" || params.front() == "cls")) params.erase(params.begin());
    std::map<std::string, Value> bound;
    std::size_t positional = 0;
    for (const auto& a : args) {
      std::string p = a.keyword;
      if (p.empty()) {
        if (positional >= params.size())
          throw Reject{name + "() takes " + std::to_string(params.size()) + " argument(s), more were given", 0};
        p = params[positional++];
      } else if (std::find(params.begin(), params.end(), p) == params.end()) {
        throw Reject{name + "() has no parameter '" + p + "'", 0};
      }
      if (bound.count(p)) throw Reject{name + "() got two values for '" + p + "'", 0};
      bound[p] = a.value;
    }
    const LogicalLine* call_line = current;
    auto saved_locals = translator.locals;
    auto saved_inputs = translator.inputs;
    // The helper sees its parameters (and the module's self.*), not the caller's names.
    translator.locals.clear();
    translator.inputs.clear();
    struct Active {
      std::vector<std::string>& stack;
      Active(std::vector<std::string>& s, const std::string& n) : stack(s) { stack.push_back(n); }
      ~Active() { stack.pop_back(); }
    } guard(active, name);
    try {
      for (const auto& p : params) {
        if (bound.count(p)) {
          translator.locals[p] = bound.at(p);
          continue;
        }
        auto d = def->defaults.find(p);
        if (d == def->defaults.end()) throw Reject{name + "(): missing argument '" + p + "'", 0};
        translator.locals[p] = translator.evaluate(d->second);
      }
      Value v = run_body(def->body);
      translator.locals = std::move(saved_locals);
      translator.inputs = std::move(saved_inputs);
      current = call_line;
      return v;
    } catch (Reject& r) {
      // Reported at the helper's line that failed; the message says which call inlined it.
      if (current == call_line) throw;
      if (r.column == 0 && current) r.column = start_column(*current) + 1;
      if (call_line)
        r.message = "in " + name + "(), inlined from line " + std::to_string(call_line->number) + ": " + r.message;
      throw;
    }
  };

  try {
    const Def* entry = nullptr;
    const ClassDef* module = nullptr;
    for (const auto& c : classes)
      for (const auto& m : c.methods)
        if (m.name == "forward") {
          module = &c;
          entry = &m;
        }
    for (const auto& f : functions) translator.helpers[f.name] = {};
    module_class = module;
    if (module)
      for (const auto& m : module->methods)
        if (m.name != "__init__") translator.methods.insert(m.name);
    if (!entry) {
      // The last top-level function that is not called by another one is the entry point.
      for (const auto& f : functions) entry = &f;
      if (!entry) {
        // A bare snippet: statements and a final expression or assignment.
        if (lines.empty()) throw Reject{"empty source", 0};
        Def snippet;
        snippet.name = "<snippet>";
        snippet.body = lines;
        LogicalLine& last = snippet.body.back();
        if (last.text.rfind("return", 0) != 0) {
          std::size_t eq = last.text.find('=');
          bool assignment = eq != std::string::npos && eq + 1 < last.text.size() && last.text[eq + 1] != '=' &&
                            (eq == 0 || std::string("=!<>").find(last.text[eq - 1]) == std::string::npos);
          // Keep error columns on the written text: "return " is added in front of it.
          last.column = start_column(last) + (assignment ? static_cast<int>(eq) - 6 : -7);
          last.text = "return " + (assignment ? last.text.substr(eq + 1) : last.text);
        }
        // Free names of the snippet are its inputs: collect them by a first pass.
        std::set<std::string> assigned;
        for (const auto& l : snippet.body) {
          std::size_t eq = l.text.find('=');
          if (eq != std::string::npos && l.text.rfind("return", 0) != 0) {
            std::string target = l.text.substr(0, eq);
            target.erase(std::remove_if(target.begin(), target.end(), ::isspace), target.end());
            assigned.insert(target);
          }
        }
        for (const auto& l : snippet.body)
          for (const auto& tok : py_lex(l.text))
            if (tok.type == PyTok::Name && !assigned.count(tok.text) && tok.text != "return" && tok.text != "torch" &&
                tok.text != "F" && tok.text != "nn" && tok.text != "math" && tok.text != "self" &&
                tok.text != "None" && tok.text != "True" && tok.text != "False" && !translator.helpers.count(tok.text))
              translator.inputs.insert(tok.text);
        // Attribute names (after '.') are not inputs.
        for (const auto& l : snippet.body) {
          auto toks = py_lex(l.text);
          for (std::size_t k = 1; k < toks.size(); ++k)
            if (toks[k].type == PyTok::Name && toks[k - 1].type == PyTok::Op && toks[k - 1].text == ".")
              translator.inputs.erase(toks[k].text);
          for (std::size_t k = 0; k + 1 < toks.size(); ++k)
            if (toks[k].type == PyTok::Name && toks[k + 1].type == PyTok::Op && toks[k + 1].text == "=" &&
                (k + 2 < toks.size()))
              translator.inputs.erase(toks[k].text);  // keyword arguments
        }
        functions.push_back(snippet);
        entry = &functions.back();
      }
    }
    result.entry = module ? module->name + ".forward" : entry->name;
    std::vector<ParamDecl> params;
    if (module) {
      result.module_class = module->name;
      if (module->bases.find("Module") == std::string::npos)
        result.notes.push_back("class " + module->name + " does not name nn.Module as its base; treated as one");
      for (const auto& m : module->methods) {
        if (m.name != "__init__") continue;
        // Constructor defaults give hyperparameter values.
        std::map<std::string, double> defaults;
        for (const auto& [k, v] : m.defaults) {
          char* end = nullptr;
          double d = std::strtod(v.c_str(), &end);
          if (end && *end == 0 && !v.empty()) defaults[k] = d;
        }
        // Submodules: which self.<attr> the other methods read (an unknown submodule nobody calls
        // is no reason to refuse), and whether one norm module may take the plain names
        // weight/bias for its implicit parameters.
        std::set<std::string> read_attributes;
        for (const auto& other : module->methods)
          if (other.name != "__init__")
            for (const auto& l : other.body) {
              const auto toks = py_lex(l.text);
              for (std::size_t k = 0; k + 2 < toks.size(); ++k)
                if (toks[k].text == "self" && toks[k + 1].text == "." && toks[k + 2].type == PyTok::Name)
                  read_attributes.insert(toks[k + 2].text);
            }
        int norm_modules = 0;
        bool own_weight = false;
        for (const auto& l : m.body) {
          const std::size_t eq = l.text.find('=');
          if (l.text.rfind("self.", 0) != 0 || eq == std::string::npos) continue;
          const std::string target = trimmed(l.text.substr(5, eq - 5));
          own_weight = own_weight || target == "weight" || target == "bias";
          const std::string callee = constructor_callee(trimmed(l.text.substr(eq + 1)));
          const std::string cls = callee.substr(callee.rfind('.') + 1);
          if (cls == "LayerNorm" || cls == "RMSNorm") ++norm_modules;
        }
        std::set<std::string> source_classes;
        for (const auto& c : classes) source_classes.insert(c.name);
        for (const auto& l : m.body) {
          current = &l;
          if (l.text.rfind("self.", 0) != 0) continue;
          std::size_t eq = l.text.find('=');
          if (eq == std::string::npos) continue;
          std::string attr = l.text.substr(5, eq - 5);
          attr.erase(std::remove_if(attr.begin(), attr.end(), ::isspace), attr.end());
          std::string rhs = l.text.substr(eq + 1);
          const int rhs_column = start_column(l) + static_cast<int>(eq + 1 + std::min(rhs.find_first_not_of(" \t"), rhs.size()));
          rhs = rhs.substr(std::min(rhs.find_first_not_of(" \t"), rhs.size()));
          const std::string callee = constructor_callee(rhs);
          if (!callee.empty()) {
            // A submodule. nn.<Class> (or the class imported by name from torch.nn) is read through
            // its functional form; any other class is not inlined.
            const std::string cls = callee.substr(callee.rfind('.') + 1);
            const bool torch_nn = callee.rfind("nn.", 0) == 0 || callee.rfind("torch.nn.", 0) == 0 ||
                                  (callee == cls && !source_classes.count(cls) && module_functionals().count(cls));
            if (!torch_nn || !module_functionals().count(cls)) {
              if (!read_attributes.count(attr)) {
                result.notes.push_back("self." + attr + " = " + callee + "(...) is not used by forward; ignored");
                continue;
              }
              throw Reject{"self." + attr + " = " + callee + "(...): " +
                               (torch_nn ? callee + " is not a module the built-in analyser knows"
                                         : "a submodule of class " + cls + ", which the built-in analyser does not inline") +
                               "; as submodules it reads nn.LayerNorm, nn.RMSNorm, nn.Softmax, nn.LogSoftmax and the nn "
                               "activation modules (nn.ReLU, nn.GELU, nn.SiLU, ...): write " + cls +
                               "'s computation in forward with torch / F functions" +
                               (source_classes.count(cls) ? ", or pass class " + cls + " itself as the op" : ""),
                           0, rhs_column + 1};
            }
            // Constructor arguments may name __init__'s parameters: a numeric default is a fixed
            // module parameter of the op (eps=eps), any other a size (normalized_shape).
            translator.locals.clear();
            for (const auto& [k, v] : defaults) translator.locals[k] = tensor(sym(k));
            translator.line = l.number;
            const std::string text = callee == cls ? "nn." + rhs : rhs;
            translator.column_base = rhs_column - static_cast<int>(text.size() - rhs.size());
            Value built = translator.evaluate(text);
            translator.locals.clear();
            if (built.type == Value::Module && (built.text == "layer_norm" || built.text == "rms_norm")) {
              try {
                adopt_norm_parameters(built, attr, callee, norm_modules == 1 && !own_weight, params, result.notes);
              } catch (Reject& r) {
                if (r.column == 0) r.column = rhs_column + 1;
                throw;
              }
            }
            for (const auto& a : built.module_args)
              if (a.second.type == Value::Tensor)
                for (const auto& name : free_symbols(a.second.expr))
                  if (defaults.count(name) &&
                      std::none_of(params.begin(), params.end(), [&](const ParamDecl& p) { return p.name == name; }))
                    params.push_back(ParamDecl{name, ParamShape::Scalar, defaults.at(name), false});
            translator.self_attributes[attr] = built;
            continue;
          }
          if (rhs.find("Parameter(") != std::string::npos) {
            ParamDecl p = parameter_decl(attr, rhs, defaults);
            params.push_back(p);
            translator.self_attributes[attr] = tensor(sym(attr));
          } else if (rhs.rfind("nn.", 0) == 0 || rhs.rfind("torch.nn.", 0) == 0) {
            translator.line = l.number;
            translator.column_base = rhs_column;
            translator.self_attributes[attr] = translator.evaluate(rhs);
          } else {
            // A plain attribute: a fixed module parameter when numeric.
            char* end = nullptr;
            std::string value = rhs;
            value.erase(std::remove_if(value.begin(), value.end(), ::isspace), value.end());
            if (value.rfind("float(", 0) == 0) value = value.substr(6, value.size() - 7);
            double d = std::strtod(value.c_str(), &end);
            bool numeric = end && *end == 0 && !value.empty();
            if (!numeric && defaults.count(value)) {
              d = defaults[value];
              numeric = true;
            }
            if (numeric) {
              params.erase(std::remove_if(params.begin(), params.end(), [&](const ParamDecl& p) { return p.name == attr; }),
                           params.end());
              params.push_back(ParamDecl{attr, ParamShape::Scalar, d, false});
              translator.self_attributes[attr] = tensor(sym(attr));
            } else if (value.size() > 2 && (value.front() == '(' || value.front() == '[') &&
                       (value.back() == ')' || value.back() == ']')) {
              // A shape (self.normalized_shape = (hidden_size,)): a tuple of its sizes, which the
              // norms check for one dimension; the sizes themselves are the input's.
              Value shape;
              shape.type = Value::Tuple;
              const std::string inner = value.substr(1, value.size() - 2);
              std::size_t begin = 0;
              while (begin < inner.size()) {
                std::size_t comma = inner.find(',', begin);
                if (comma == std::string::npos) comma = inner.size();
                if (comma > begin) shape.items.push_back(tensor(num(0)));
                begin = comma + 1;
              }
              translator.self_attributes[attr] = shape;
            } else if (m.defaults.count(value)) {
              Value s;
              s.type = Value::String;
              s.text = m.defaults.at(value);
              if (s.text.size() >= 2 && (s.text[0] == '"' || s.text[0] == '\'')) s.text = s.text.substr(1, s.text.size() - 2);
              translator.self_attributes[attr] = s;
            }
          }
        }
      }
    }
    // A parameter with a numeric default (def f(x, eps=1e-6)) is a fixed module parameter, not a
    // tensor input.
    for (const auto& p : entry->params) {
      if (p == "self") continue;
      auto d = entry->defaults.find(p);
      char* end = nullptr;
      const double value = d == entry->defaults.end() ? 0.0 : std::strtod(d->second.c_str(), &end);
      if (d != entry->defaults.end() && end && *end == 0 && !d->second.empty()) {
        params.push_back(ParamDecl{p, ParamShape::Scalar, value, false});
        translator.locals[p] = tensor(sym(p));
      } else {
        translator.inputs.insert(p);
      }
    }
    current = nullptr;
    active.push_back(module ? "self.forward" : entry->name);  // a call back into the entry is recursion too
    Value out = run_body(entry->body);
    Expr expression = translator.as_tensor(out, "a tensor result");
    if (std::string problem = tree_limit_problem(expression); !problem.empty()) throw Reject{problem, 0};
    result.elementwise = true;
    result.program.output = "y";
    result.program.expression = expression;
    std::set<std::string> used = free_symbols(expression);
    std::vector<std::string> order = entry->params;
    if (entry->name == "<snippet>") order.assign(translator.inputs.begin(), translator.inputs.end());
    for (const auto& p : order)
      if (p != "self" && used.count(p) && translator.inputs.count(p)) result.program.inputs.push_back(p);
    for (const auto& p : params)
      if (used.count(p.name)) result.program.params.push_back(p);
    const bool rows = has_row_reduction(expression);
    result.row_reduction = rows;
    for (const auto& name : used) {
      if (rows && name == "n") continue;  // the row length, of x.shape[-1], var's n - 1
      bool known = std::find(result.program.inputs.begin(), result.program.inputs.end(), name) != result.program.inputs.end() ||
                   std::any_of(params.begin(), params.end(), [&](const ParamDecl& p) { return p.name == name; });
      if (!known) throw Reject{"name '" + name + "' is neither an input nor a parameter", 0};
    }
    if (result.program.inputs.empty()) throw Reject{"the result does not depend on any tensor input", 0};
    // Input and parameter names become profile, C++ and Python names, held to 64 characters.
    for (const auto& name : used)
      if (name.size() > kMaxNameLength)
        throw Reject{"the name '" + name.substr(0, 24) + "...' is " + std::to_string(name.size()) +
                         " characters long; input and parameter names are at most " + std::to_string(kMaxNameLength) +
                         " characters: rename it",
                     0};
    result.program.output = unclashing_output_name("y", result.program.inputs, result.program.params);
    if (rows) {
      result.elementwise = false;
      result.tier_guess = 2;
      for (std::size_t k = 0; k < translator.row_callees.size() && k < 3; ++k) {
        std::string name = translator.row_callees[k];
        std::replace(name.begin(), name.end(), '.', '_');  // linalg.vector_norm
        result.row_callees += (k ? "_" : "") + name;
      }
    }
    return result;
  } catch (const Reject& r) {
    return reject(r);
  } catch (const std::exception& e) {
    return reject(Reject{e.what(), 0});
  }
}

}  // namespace liger::kernel_dev
