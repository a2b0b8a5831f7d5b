// The PyTorch translator's modules (pytorch_translator.h, ModuleBuilder): what __init__ builds
// (learnable parameters, fixed numbers, nn submodules with their implicit weights) for the op's
// module and, recursively, for the instances of the source's own module classes it holds.
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "workflows/kernel_dev/pytorch_translator.h"

namespace liger::kernel_dev::torch_detail {

namespace {

std::optional<double> numeric_text(const std::string& text) {
  char* end = nullptr;
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

void ModuleBuilder::declare(const ParamDecl& p) {
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
  if (const Def* init = method_of(cls, "__init__")) {
    // Constructor defaults give hyperparameter values.
    std::map<std::string, double> numeric;
    for (const auto& [k, v] : init->defaults)
      if (auto d = numeric_text(v)) numeric[k] = *d;
    read_init(instances_.front(), *init, numeric, {}, init->defaults);
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
  if (!init) return index;
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
    Value v;
    if (auto it = given.find(p); it != given.end()) {
      v = it->second;
    } else if (auto d = init->defaults.find(p); d != init->defaults.end()) {
      translator_.locals.clear();
      v = translator_.evaluate(d->second);
    } else {
      throw Reject{cls.name + "(): missing argument '" + p + "' (" + path + " = " + cls.name + "(...))", 0, column};
    }
    if (auto d = numeric_value(v)) numeric[p] = *d;
    else bound[p] = v;
  }
  building_.push_back(cls.name);
  read_init(instances_[static_cast<std::size_t>(index)], *init, numeric, bound, {});
  building_.pop_back();
  notes_.push_back(path + " = " + cls.name + "(...): class " + cls.name + " of the source inlined (its forward into the "
                   "op, its parameters named " + instances_[static_cast<std::size_t>(index)].prefix + "<name>)");
  return index;
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
  for (const auto& l : init.body) {
    current_ = &l;
    if (l.text.rfind("self.", 0) != 0) continue;
    std::size_t eq = l.text.find('=');
    if (eq == std::string::npos) continue;
    std::string attr = l.text.substr(5, eq - 5);
    attr.erase(std::remove_if(attr.begin(), attr.end(), ::isspace), attr.end());
    if (const auto colon = attr.find(':'); colon != std::string::npos) attr.resize(colon);  // self.w: Tensor = ...
    std::string rhs = l.text.substr(eq + 1);
    const int rhs_column = start_column(l) + static_cast<int>(eq + 1 + std::min(rhs.find_first_not_of(" \t"), rhs.size()));
    rhs = rhs.substr(std::min(rhs.find_first_not_of(" \t"), rhs.size()));
    const std::string callee = constructor_callee(rhs);
    if (!callee.empty()) {
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
                         "same source (inlined): define " + cls + " in the source, or write its computation in "
                         "forward with torch / F functions",
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
          // A number of this __init__ passed on (MyNorm(d, eps=eps)) is this module's parameter.
          for (const auto& a : args)
            if (a.value.type == Value::Tensor)
              for (const auto& name : free_symbols(a.value.expr))
                for (const auto& [k, v] : numeric)
                  if (name == prefix + k &&
                      std::none_of(params_.begin(), params_.end(), [&](const ParamDecl& p) { return p.name == name; }))
                    params_.push_back(ParamDecl{name, ParamShape::Scalar, v, false});
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
        module.text = own->name;
        module.instance = index;
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
      for (const auto& a : built.module_args)
        if (a.second.type == Value::Tensor)
          for (const auto& name : free_symbols(a.second.expr))
            for (const auto& [k, v] : numeric)
              if (name == prefix + k &&
                  std::none_of(params_.begin(), params_.end(), [&](const ParamDecl& p) { return p.name == name; }))
                params_.push_back(ParamDecl{name, ParamShape::Scalar, v, false});
      inst.attributes[attr] = built;
      continue;
    }
    if (rhs.find("Parameter(") != std::string::npos) {
      ParamDecl p = parameter_decl(attr, rhs, numeric);
      p.name = prefix + attr;
      declare(p);
      inst.attributes[attr] = tensor(sym(p.name));
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
        declare(ParamDecl{prefix + attr, ParamShape::Scalar, *d, false});
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
      }
    }
  }
}

}  // namespace liger::kernel_dev::torch_detail
