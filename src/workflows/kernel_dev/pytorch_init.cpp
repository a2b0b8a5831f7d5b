// The PyTorch translator's modules (pytorch_translator.h, ModuleBuilder): what __init__ builds
// (learnable parameters, fixed numbers, nn submodules with their implicit weights) for the op's
// module and, recursively, for the instances of the source's own module classes it holds.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>

#include "workflows/kernel_dev/pytorch_translator.h"

namespace liger::kernel_dev::torch_detail {

namespace {

std::optional<double> numeric_text(const std::string& text) {
  char* end = nullptr;
  if (text == "True" || text == "False") return text == "True" ? 1.0 : 0.0;
  const double d = std::strtod(text.c_str(), &end);
  if (text.empty() || !end || *end != 0) return std::nullopt;
  return d;
}

std::optional<double> numeric_value(const Value& v) {
  if (v.type != Value::Tensor) return std::nullopt;
  const Expr e = simplify(v.expr);
  if (!is_number(e)) return std::nullopt;
  return e->value;
}

const Def* method_of(const ClassDef& cls, const std::string& name) {
  for (const auto& m : cls.methods)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace

const ClassDef* ModuleBuilder::source_class(const std::string& name) const {
  for (const auto& c : classes_)
    if (c.name == name) return &c;
  return nullptr;
}

void ModuleBuilder::declare(Instance& inst, const ParamDecl& p) {
  if (!inst.declared.count(p.name))
    for (const auto& other : instances_)
      if (&other != &inst && other.declared.count(p.name))
        throw Reject{inst.path + "'s parameter and " + other.path + "'s are both named '" + p.name +
                         "' (a submodule's parameters are named <attribute>_<name>): rename one of them",
                     0};
  inst.declared.insert(p.name);
  params_.erase(std::remove_if(params_.begin(), params_.end(), [&](const ParamDecl& q) { return q.name == p.name; }),
                params_.end());
  params_.push_back(p);
}

int ModuleBuilder::build_op_module(const ClassDef& cls) {
  Instance inst;
  inst.cls = &cls;
  inst.path = "self";
  for (const auto& m : cls.methods)
    if (m.name != "__init__") inst.methods.insert(m.name);
  instances_.push_back(inst);
  building_.push_back(cls.name);
  if (const Def* init = init_with_class_statements(cls, method_of(cls, "__init__"))) {
    // Constructor defaults give hyperparameter values.
    std::map<std::string, double> numeric;
    for (const auto& [k, v] : init->defaults)
      if (auto d = numeric_text(v)) numeric[k] = *d;
    read_init_at_line(instances_.front(), *init, numeric, {}, init->defaults);
  }
  building_.pop_back();
  return 0;
}

int ModuleBuilder::build_submodule(const Instance& outer, const std::string& attr, const ClassDef& cls,
                                   const std::vector<Arg>& args, int column) {
  const std::string path = outer.path + "." + attr;
  if (std::find(building_.begin(), building_.end(), cls.name) != building_.end()) {
    std::string chain;
    for (auto it = std::find(building_.begin(), building_.end(), cls.name); it != building_.end(); ++it) chain += *it + " -> ";
    throw Reject{"recursion: " + chain + cls.name + ": class " + cls.name + " contains itself (" + path + " = " +
                     cls.name + "(...)), which cannot be inlined; build the module without a " + cls.name + " inside it",
                 0, column};
  }
  const Def* forward = method_of(cls, "forward");
  if (!forward)
    throw Reject{path + " = " + cls.name + "(...): class " + cls.name + " of the source has no forward to inline; "
                     "give it one, or write its computation in the calling forward with torch / F functions",
                 0, column};
  const Def* init = method_of(cls, "__init__");
  // __init__'s arguments bound as Python binds them: positional, then keywords, then defaults.
  std::vector<std::string> names;
  if (init) names = init->params;
  if (!names.empty() && names.front() == "self") names.erase(names.begin());
  if (init && init->variadic)
    throw Reject{cls.name + ".__init__ takes *args or **kwargs, which the built-in analyser cannot bind when it "
                     "inlines " + path + ": give it named parameters",
                 0, column};
  std::map<std::string, Value> given;
  std::size_t positional = 0;
  for (const auto& a : args) {
    std::string p = a.keyword;
    if (p.empty()) {
      if (positional >= names.size())
        throw Reject{cls.name + "() takes " + std::to_string(names.size()) + " argument(s), more were given", 0, column};
      p = names[positional++];
    } else if (std::find(names.begin(), names.end(), p) == names.end()) {
      throw Reject{cls.name + "() has no parameter '" + p + "'", 0, column};
    }
    if (given.count(p)) throw Reject{cls.name + "() got two values for '" + p + "'", 0, column};
    given[p] = a.value;
  }
  Instance inst;
  inst.cls = &cls;
  inst.path = path;
  // The submodule's names carry the attribute's: two norms of one class, or a weight of the outer
  // module and one of its norm, never clash.
  inst.prefix = outer.prefix + attr + "_";
  for (const auto& m : cls.methods)
    if (m.name != "__init__") inst.methods.insert(m.name);
  instances_.push_back(inst);
  const int index = static_cast<int>(instances_.size()) - 1;
  const Def* body = init_with_class_statements(cls, init);
  if (!body) return index;
  // The caller's __init__ scope comes back after this one (its call may be inside an expression).
  const auto saved_locals = translator_.locals;
  struct Restore {
    Translator& t;
    const std::map<std::string, Value>& locals;
    ~Restore() { t.locals = locals; }
  } restore{translator_, saved_locals};
  std::map<std::string, double> numeric;
  std::map<std::string, Value> bound;
  for (const auto& p : names) {
    if (!init) break;
    Value v;
    if (auto it = given.find(p); it != given.end()) {
      v = it->second;
    } else if (auto d = init->defaults.find(p); d != init->defaults.end()) {
      translator_.locals.clear();
      v = translator_.evaluate(d->second);
    } else {
      throw Reject{cls.name + "(): missing argument '" + p + "' (" + path + " = " + cls.name + "(...))", 0, column};
    }
    const auto d = init->defaults.find(p);
    const std::optional<double> fallback = d == init->defaults.end() ? std::nullopt : numeric_text(d->second);
    if (auto value = numeric_value(v)) {
      numeric[p] = *value;
    } else if (fallback && v.type != Value::Tensor) {
      // A value from outside the source (eps=config.rms_norm_eps): the class's default, declared
      // as the op's module parameter so it can be set to the model's value.
      numeric[p] = *fallback;
      notes_.push_back(path + " = " + cls.name + "(" + p + "=" + (v.text.empty() ? std::string("...") : v.text) +
                       "): the value is not in the source; the op's module parameter '" + inst.prefix + p +
                       "' takes " + cls.name + "'s default " + d->second + ": set it to the model's value");
    } else {
      bound[p] = v;
    }
  }
  building_.push_back(cls.name);
  read_init_at_line(instances_[static_cast<std::size_t>(index)], *body, numeric, bound, {});
  building_.pop_back();
  notes_.push_back(path + " = " + cls.name + "(...): class " + cls.name + " of the source inlined (its forward into the "
                   "op, its parameters named " + instances_[static_cast<std::size_t>(index)].prefix + "<name>)");
  return index;
}

void ModuleBuilder::read_init_at_line(Instance& inst, const Def& init, const std::map<std::string, double>& numeric,
                                      const std::map<std::string, Value>& bound,
                                      const std::map<std::string, std::string>& text_defaults) {
  try {
    read_init(inst, init, numeric, bound, text_defaults);
  } catch (Reject& r) {
    if (r.column == 0 && current_) r.column = start_column(*current_) + 1;  // the statement that failed
    throw;
  }
}

void ModuleBuilder::read_init(Instance& inst, const Def& init, const std::map<std::string, double>& numeric,
                              const std::map<std::string, Value>& bound,
                              const std::map<std::string, std::string>& text_defaults) {
  const ClassDef& module = *inst.cls;
  const std::string& prefix = inst.prefix;
  // __init__'s parameters inside its body: a number is the module parameter <prefix><name> (used
  // where a submodule's constructor takes it), any other value as bound.
  auto init_locals = [&] {
    translator_.locals.clear();
    for (const auto& [k, v] : numeric) translator_.locals[k] = tensor(sym(prefix + k));
    for (const auto& [k, v] : bound) translator_.locals[k] = v;
  };
  // A number of this __init__ passed on to a submodule (MyNorm(d, eps=eps), nn.LayerNorm(d,
  // eps=eps)) is this module's fixed parameter <prefix><name>, declared once.
  auto declare_passed_numbers = [&](const Value& arg) {
    if (arg.type != Value::Tensor) return;
    for (const auto& name : free_symbols(arg.expr))
      for (const auto& [k, v] : numeric)
        if (name == prefix + k &&
            std::none_of(params_.begin(), params_.end(), [&](const ParamDecl& p) { return p.name == name; }))
          params_.push_back(ParamDecl{name, ParamShape::Scalar, v, false});
  };
  // Submodules: which self.<attr> the other methods read (an unknown submodule nobody calls is no
  // reason to refuse), and whether one norm module may take the plain names weight/bias for its
  // implicit parameters.
  std::set<std::string> read_attributes;
  for (const auto& other : module.methods)
    if (other.name != "__init__")
      for (const auto& l : other.body) {
        const auto toks = py_lex(l.text);
        for (std::size_t k = 0; k + 2 < toks.size(); ++k)
          if (toks[k].text == "self" && toks[k + 1].text == "." && toks[k + 2].type == PyTok::Name)
            read_attributes.insert(toks[k + 2].text);
      }
  int norm_modules = 0;
  bool own_weight = false;
  for (const auto& l : init.body) {
    const std::size_t eq = l.text.find('=');
    if (l.text.rfind("self.", 0) != 0 || eq == std::string::npos) continue;
    const std::string target = trimmed(l.text.substr(5, eq - 5));
    own_weight = own_weight || target == "weight" || target == "bias";
    const std::string callee = constructor_callee(trimmed(l.text.substr(eq + 1)));
    const std::string cls = callee.substr(callee.rfind('.') + 1);
    if (cls == "LayerNorm" || cls == "RMSNorm") ++norm_modules;
  }
  static const std::regex buffer(
      R"(^self\.register_buffer\(\s*["']([A-Za-z_][A-Za-z0-9_]*)["']\s*,\s*(.+?)\s*(,\s*persistent\s*=\s*\w+\s*)?\)$)");
  // try / except in __init__ (an optional accelerated import, XIELU's CUDA object) is read along
  // its except path: the try body and its else are skipped, as if what they guard were absent, and
  // the except and finally bodies are read. A kernel of the module's math is the fallback the
  // except path keeps.
  int try_indent = -1;
  bool skipping = false;
  for (const auto& l : init.body) {
    current_ = &l;
    const std::string head = l.text.substr(0, l.text.find_first_of(" :("));
    if (try_indent >= 0 && l.indent <= try_indent) {
      if (l.indent == try_indent && (head == "except" || head == "finally")) {
        skipping = false;
        continue;
      }
      if (l.indent == try_indent && head == "else") {
        skipping = true;
        continue;
      }
      try_indent = -1;
      skipping = false;
    }
    if (skipping) continue;
    if (head == "try" && try_indent < 0) {
      try_indent = l.indent;
      skipping = true;
      notes_.push_back(inst.path + ".__init__ line " + std::to_string(l.number) +
                       ": the try block is read along its except path (what it guards taken as absent)");
      continue;
    }
    std::smatch registered;
    if (std::regex_match(l.text, registered, buffer)) {
      // A buffer: state the op does not learn, a fixed module parameter.
      translator_.line = l.number;
      translator_.column_base = start_column(l);
      read_parameter(inst, registered[1].str(), "nn.Parameter(" + registered[2].str() + ")", numeric, false);
      continue;
    }
    if (l.text.rfind("self.", 0) != 0) continue;
    std::size_t eq = l.text.find('=');
    if (eq == std::string::npos) continue;
    std::string attr = l.text.substr(5, eq - 5);
    attr.erase(std::remove_if(attr.begin(), attr.end(), ::isspace), attr.end());
    if (const auto colon = attr.find(':'); colon != std::string::npos) attr.resize(colon);  // self.w: Tensor = ...
    std::string rhs = l.text.substr(eq + 1);
    const int rhs_column = start_column(l) + static_cast<int>(eq + 1 + std::min(rhs.find_first_not_of(" \t"), rhs.size()));
    rhs = rhs.substr(std::min(rhs.find_first_not_of(" \t"), rhs.size()));
    // self.b = nn.Buffer(torch.tensor(v)) (PyTorch 2.5's spelling of register_buffer): a fixed value.
    static const std::regex buffer(R"(^(?:torch\.)?(?:nn\.)?Buffer\((.+)\)$)");
    if (std::smatch b; std::regex_match(rhs, b, buffer)) {
      translator_.line = l.number;
      translator_.column_base = rhs_column;
      read_parameter(inst, attr, "nn.Parameter(" + b[1].str() + ")", numeric, false);
      continue;
    }
    std::string callee = constructor_callee(rhs);
    if (!callee.empty()) {
      // Through the names imports gave (import torch.nn as tnn; from torch.nn import LayerNorm).
      const std::string head = callee.substr(0, callee.find('.'));
      if (auto alias = translator_.aliases.find(head); alias != translator_.aliases.end() && !source_class(head))
        callee = alias->second + callee.substr(head.size());
      // A submodule: nn.<Class> (or the class imported by name from torch.nn) is read through its
      // functional form, a class of the source is inlined; any other class is not.
      const std::string cls = callee.substr(callee.rfind('.') + 1);
      const ClassDef* own = callee == cls ? source_class(cls) : nullptr;
      const bool torch_nn = callee.rfind("nn.", 0) == 0 || callee.rfind("torch.nn.", 0) == 0 ||
                            (callee == cls && !own && module_functionals().count(cls));
      if (!own && (!torch_nn || !module_functionals().count(cls))) {
        if (!read_attributes.count(attr)) {
          notes_.push_back(inst.path + "." + attr + " = " + callee + "(...) is not used by forward; ignored");
          continue;
        }
        throw Reject{"self." + attr + " = " + callee + "(...): " +
                         (torch_nn ? callee + " is not a module the built-in analyser knows"
                                   : "class " + cls + " is neither defined in the source nor one the built-in analyser knows") +
                         "; as submodules it reads nn.LayerNorm, nn.RMSNorm, nn.Softmax, nn.LogSoftmax, the nn "
                         "activation modules (nn.ReLU, nn.GELU, nn.SiLU, ...) and the nn.Module classes defined in the "
                         "same source (inlined): " + (torch_nn ? std::string() : "define " + cls + " in the source, or ") +
                         "write its computation in forward with torch / F functions",
                     0, rhs_column + 1};
      }
      init_locals();
      translator_.line = l.number;
      if (own) {
        if (!read_attributes.count(attr)) {
          notes_.push_back(inst.path + "." + attr + " = " + callee + "(...) is not used by forward; ignored");
          continue;
        }
        // The constructor call evaluated in __init__'s scope: its arguments as any call's.
        int index = -1;
        translator_.construct = [&](const std::string&, const std::vector<Arg>& args) {
          for (const auto& a : args) declare_passed_numbers(a.value);
          index = build_submodule(inst, attr, *own, args, rhs_column + 1);
          return Value{};
        };
        translator_.column_base = rhs_column;
        try {
          translator_.evaluate(rhs);
        } catch (...) {
          translator_.construct = nullptr;
          throw;
        }
        translator_.construct = nullptr;
        Value module;
        module.type = Value::Module;
        module.instance = index;  // text "": called, its forward runs
        inst.attributes[attr] = module;
        translator_.locals.clear();
        continue;
      }
      // Constructor arguments may name __init__'s parameters: a numeric default is a fixed
      // module parameter of the op (eps=eps), any other a size (normalized_shape).
      const std::string text = callee == cls ? "nn." + rhs : rhs;
      translator_.column_base = rhs_column - static_cast<int>(text.size() - rhs.size());
      Value built = translator_.evaluate(text);
      translator_.locals.clear();
      if (built.type == Value::Module && (built.text == "layer_norm" || built.text == "rms_norm")) {
        // Flags are read as written: a number bound to __init__'s parameter is that number here.
        std::map<std::string, Expr> values;
        for (const auto& [k, v] : numeric) values[prefix + k] = num(v);
        for (auto& a : built.module_args)
          if ((a.first == "elementwise_affine" || a.first == "bias") && a.second.type == Value::Tensor)
            a.second.expr = substitute(a.second.expr, values);
        // The op's module names a lone norm's weights weight/bias; a submodule's carry its prefix.
        const bool plain = norm_modules == 1 && !own_weight;
        const std::string stem = prefix.empty() ? attr : (plain ? prefix.substr(0, prefix.size() - 1) : prefix + attr);
        try {
          adopt_norm_parameters(built, stem, callee, plain && prefix.empty(), params_, notes_);
        } catch (Reject& r) {
          if (r.column == 0) r.column = rhs_column + 1;
          throw;
        }
      }
      for (const auto& a : built.module_args) declare_passed_numbers(a.second);
      inst.attributes[attr] = built;
      continue;
    }
    if (rhs.find("Parameter(") != std::string::npos) {
      translator_.line = l.number;
      translator_.column_base = rhs_column;
      read_parameter(inst, attr, rhs, numeric);
    } else if (rhs.rfind("nn.", 0) == 0 || rhs.rfind("torch.nn.", 0) == 0) {
      translator_.line = l.number;
      translator_.column_base = rhs_column;
      init_locals();
      inst.attributes[attr] = translator_.evaluate(rhs);
      translator_.locals.clear();
    } else {
      // A plain attribute: a fixed module parameter when numeric.
      std::string value = rhs;
      value.erase(std::remove_if(value.begin(), value.end(), ::isspace), value.end());
      if (value.rfind("float(", 0) == 0) value = value.substr(6, value.size() - 7);
      std::optional<double> d = numeric_text(value);
      if (!d && numeric.count(value)) d = numeric.at(value);
      if (d) {
        declare(inst, ParamDecl{prefix + attr, ParamShape::Scalar, *d, false});
        inst.attributes[attr] = tensor(sym(prefix + attr));
      } else if (bound.count(value)) {
        inst.attributes[attr] = bound.at(value);  // a value the outer module passed (its own eps)
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
        inst.attributes[attr] = shape;
      } else if (text_defaults.count(value)) {
        Value s;
        s.type = Value::String;
        s.text = text_defaults.at(value);
        if (s.text.size() >= 2 && (s.text[0] == '"' || s.text[0] == '\'')) s.text = s.text.substr(1, s.text.size() - 2);
        inst.attributes[attr] = s;
      } else {
        // Arithmetic on __init__'s numbers (self.inv = 1.0 / eps) is an expression of them; one on
        // values the op does not have (self.scale = dim ** -0.5, a size) is refused where forward
        // reads it, not here: an attribute forward never reads is no reason to refuse.
        init_locals();
        translator_.line = l.number;
        translator_.column_base = rhs_column;
        try {
          Value v = translator_.evaluate(rhs);
          // A number, a torch function (self.act = F.silu), or one bound with its keyword arguments
          // (functools.partial(F.gelu, approximate="tanh")), called later with the tensor.
          if (v.type == Value::Path && !Translator::torch_function(v.text).empty()) {
            Value fn;
            fn.type = Value::Module;
            fn.text = Translator::torch_function(v.text);
            v = fn;
          }
          // None too: `self._cuda_obj = None`, which forward tests with `is None`.
          if (v.type != Value::Tensor && v.type != Value::Module && v.type != Value::None)
            throw Reject{"it is not a number", 0};
          inst.attributes[attr] = v;
        } catch (const Reject& r) {
          inst.unreadable[attr] = "self." + attr + " is set in __init__ (line " + std::to_string(l.number) + ": '" +
                                  trimmed(l.text) + "') from values the op does not have (" + r.message +
                                  "); the built-in analyser reads attributes that are numbers or arithmetic on "
                                  "__init__'s numeric arguments: write the value as a number or a default argument";
        }
        translator_.locals.clear();
      }
    }
  }
}

const Def* ModuleBuilder::init_with_class_statements(const ClassDef& cls, const Def* init) {
  if (!init && cls.statements.empty()) return nullptr;
  Def out;
  if (init) out = *init;
  std::vector<LogicalLine> body;
  for (LogicalLine l : cls.statements) {
    l.column = start_column(l) - 5;  // "self." is written in front
    l.text = "self." + l.text;
    body.push_back(l);
  }
  body.insert(body.end(), out.body.begin(), out.body.end());
  out.body = body;
  inits_.push_back(out);
  return &inits_.back();
}

void ModuleBuilder::read_parameter(Instance& inst, const std::string& attr, const std::string& rhs,
                                   const std::map<std::string, double>& numeric, bool learnable) {
  // The data argument of nn.Parameter(...), without requires_grad=.
  const std::size_t open = rhs.find("Parameter(") + 9;
  const std::size_t close = rhs.rfind(')');
  std::string data = close > open ? rhs.substr(open + 1, close - open - 1) : "";
  const auto commas = top_level(data, ',');
  if (!commas.empty()) data = data.substr(0, commas.front());
  data = trimmed(data);
  // The tensor constructor in it: its fill value stands in its place (torch.ones(3) / 3 is 1 / 3)
  // and its shape argument says how many values the parameter has.
  static const std::regex constructor(R"((?:torch\.)?(ones|zeros|full|tensor|empty|randn|rand)\s*\()");
  std::smatch m;
  std::optional<double> init;
  std::optional<long> elements;  // nullopt: one per column (a size the op does not have)
  bool scalar = false;
  if (std::regex_search(data, m, constructor)) {
    const std::size_t args_begin = static_cast<std::size_t>(m.position(0) + m.length(0));
    int depth = 1;
    std::size_t args_end = args_begin;
    for (; args_end < data.size() && depth > 0; ++args_end) {
      if (data[args_end] == '(' || data[args_end] == '[') ++depth;
      if (data[args_end] == ')' || data[args_end] == ']') --depth;
    }
    const std::string args = data.substr(args_begin, args_end - 1 - args_begin);
    std::vector<std::string> pieces;
    std::size_t from = 0;
    for (std::size_t at : top_level(args, ',')) {
      pieces.push_back(trimmed(args.substr(from, at - from)));
      from = at + 1;
    }
    pieces.push_back(trimmed(args.substr(from)));
    pieces.erase(std::remove_if(pieces.begin(), pieces.end(),
                                [](const std::string& p) { return p.empty() || p.find('=') != std::string::npos; }),
                 pieces.end());
    const std::string kind = m[1].str();
    std::string fill = kind == "ones" ? "1" : "0";
    if ((kind == "full" && pieces.size() == 2) || (kind == "tensor" && pieces.size() == 1)) fill = pieces.back();
    if (kind == "empty" || kind == "randn" || kind == "rand")
      notes_.push_back(inst.path + "." + attr + ": a random or uninitialised parameter; its init is taken as 0");
    // The shape: a size written as a number is a fixed count of values; one from __init__'s
    // arguments (torch.ones(dim), even with a default) is the row's length, one per column.
    translator_.locals.clear();
    auto count = [&](const std::string& text) -> std::optional<long> {
      try {
        const Value v = translator_.evaluate(text);
        const Value& one = v.type == Value::Tuple && v.items.size() == 1 ? v.items[0] : v;
        if (one.type != Value::Tensor) return std::nullopt;
        const Expr e = simplify(one.expr);
        if (!is_number(e) || e->value != std::floor(e->value) || e->value < 1) return std::nullopt;
        return static_cast<long>(e->value);
      } catch (const Reject&) {
        return std::nullopt;
      }
    };
    if (kind == "tensor") {
      const std::string value = pieces.empty() ? "" : pieces.front();
      if (!value.empty() && value.front() == '[') {
        // torch.tensor([a, b, c]): that many scalars, each its own init; the first stands for all.
        Value list;
        try {
          list = translator_.evaluate(value);
        } catch (const Reject&) {
        }
        elements = static_cast<long>(list.items.size());
        fill = value.substr(1, value.find_first_of(",]") - 1);
      } else {
        scalar = true;
      }
    } else if (!pieces.empty()) {
      const std::string shape = kind == "full" ? pieces.front() : (pieces.size() == 1 ? pieces.front() : "");
      elements = shape.empty() ? std::nullopt : count(shape);
      scalar = elements && *elements == 1;
    }
    for (const auto& [k, v] : numeric) translator_.locals[k] = tensor(num(v));
    std::string text = data;
    text.replace(static_cast<std::size_t>(m.position(0)), args_end - static_cast<std::size_t>(m.position(0)),
                 "(" + fill + ")");
    // Methods that only change the shape of the value (XIELU's torch.log(torch.expm1(torch.tensor(a)))
    // .unsqueeze(0)) do not change the number: dropped before it is evaluated.
    static const std::regex shape_only(
        R"(\.(?:unsqueeze|squeeze|view|reshape|expand|flatten|clone|detach|contiguous|requires_grad_)\([^()]*\))");
    text = std::regex_replace(text, shape_only, "");
    try {
      const Value v = translator_.evaluate(text);
      if (v.type == Value::Tensor && is_number(simplify(v.expr))) init = simplify(v.expr)->value;
    } catch (const Reject&) {
    }
    translator_.locals.clear();
    // The fallback below reads the text's fill and a factor only: right for torch.ones(d) * 0.5, not
    // for a fill passed through functions. Said, so a reviewer checks the init.
    if (!init && kind != "empty" && kind != "randn" && kind != "rand")
      notes_.push_back(inst.path + "." + attr + ": its initial value could not be computed from '" + data +
                       "'; the init in learnable_parameters is the constructor's fill (check it)");
  }
  ParamDecl p = parameter_decl(attr, rhs, numeric);  // what the text says when the reading above could not
  p.name = inst.prefix + attr;
  p.learnable = learnable;
  if (init) p.init = *init;
  if (scalar) p.shape = ParamShape::Scalar;
  if (elements && *elements > 1 && *elements <= 16) {
    // A few values read by index (PolyNorm's self.weight[0..2]): each is a scalar parameter.
    Value vector;
    vector.type = Value::Tuple;
    vector.text = kParameterVector;
    for (long k = 0; k < *elements; ++k) {
      ParamDecl element = p;
      element.name = p.name + "_" + std::to_string(k);
      element.shape = ParamShape::Scalar;
      declare(inst, element);
      vector.items.push_back(tensor(sym(element.name)));
    }
    inst.attributes[attr] = vector;
    return;
  }
  if (elements && *elements > 1)
    p.shape = ParamShape::Channel;  // a fixed size the op reads per column
  if (!learnable && p.shape != ParamShape::Scalar)
    throw Reject{inst.path + "." + attr + ": a buffer of one value per column is state the op would read, not a fixed "
                     "number; the built-in analyser reads buffers of one value (register_buffer(name, torch.tensor(v))): "
                     "make it an nn.Parameter or a number",
                 0};
  declare(inst, p);
  inst.attributes[attr] = tensor(sym(p.name));
}

}  // namespace liger::kernel_dev::torch_detail
