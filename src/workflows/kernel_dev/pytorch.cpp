#include "workflows/kernel_dev/pytorch.h"
#include "workflows/kernel_dev/pytorch_detail.h"
#include "workflows/kernel_dev/pytorch_translator.h"
#include "workflows/kernel_dev/tier2_derive.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <regex>
#include <sstream>

namespace liger::kernel_dev {

using namespace torch_detail;

namespace {

// When body[at] opens an if / elif / else chain whose blocks only cast variables to another dtype
// (v = v.to(...), v.float(), v.half(), v.bfloat16(), v.type(...), v.type_as(...)), the index of
// the chain's last line; else `at`.
std::size_t cast_only_branch(const std::vector<LogicalLine>& body, std::size_t at) {
  static const std::regex cast(
      R"(^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([A-Za-z_][A-Za-z0-9_]*)\.(to|float|half|bfloat16|double|type|type_as)\(.*\)$)");
  if (body[at].text.rfind("if ", 0) != 0) return at;
  const int indent = body[at].indent;
  std::size_t k = at;
  while (k < body.size() && body[k].indent == indent &&
         (k == at || body[k].text.rfind("elif ", 0) == 0 || body[k].text.rfind("else", 0) == 0)) {
    std::size_t statements = 0;
    for (++k; k < body.size() && body[k].indent > indent; ++k, ++statements) {
      std::smatch m;
      if (!std::regex_match(body[k].text, m, cast) || m[1].str() != m[2].str()) return at;
    }
    if (statements == 0) return at;
  }
  return k - 1;
}

// A branch condition's truth value when it does not depend on an input's values: `or` / `and` /
// `not` over expressions that are numbers once the op's parameters take their defaults (as
// __init__ does when it builds the module); nullopt otherwise (the branch is then refused).
std::optional<bool> decided_truth(Translator& translator, const std::string& text) {
  const std::string c = trimmed(text);
  for (const std::string op : {" or ", " and "}) {
    int depth = 0;
    for (std::size_t i = 0; i + op.size() <= c.size(); ++i) {
      if (c[i] == '(' || c[i] == '[') ++depth;
      if (c[i] == ')' || c[i] == ']') --depth;
      if (depth == 0 && c.compare(i, op.size(), op) == 0) {
        const auto a = decided_truth(translator, c.substr(0, i));
        const auto z = decided_truth(translator, c.substr(i + op.size()));
        // One decided side settles it whatever the other is (`self._cuda_obj is not None and
        // x.is_cuda` with no CUDA object: False; the other side is never needed).
        if (op == " and " && ((a && !*a) || (z && !*z))) return false;
        if (op == " or " && ((a && *a) || (z && *z))) return true;
        if (!a || !z) return std::nullopt;
        return op == " or " ? (*a || *z) : (*a && *z);
      }
    }
  }
  if (c.rfind("not ", 0) == 0) {
    const auto a = decided_truth(translator, c.substr(4));
    return a ? std::optional<bool>(!*a) : std::nullopt;
  }
  Value v;
  try {
    v = translator.evaluate(c);
  } catch (const Reject&) {
    return std::nullopt;
  }
  if (v.type != Value::Tensor || translator.reads_inputs(v.expr)) return std::nullopt;
  Expr e = v.expr;
  if (translator.declared) {
    std::map<std::string, Expr> defaults;
    for (const auto& d : *translator.declared) defaults[d.name] = num(d.init);
    e = substitute(e, defaults);
  }
  e = simplify(e);
  if (!is_number(e)) return std::nullopt;
  return e->value != 0;
}

// The source's classes that another class builds in its __init__ (self.norm = MyNorm(d)).
std::set<std::string> built_classes(const std::vector<ClassDef>& classes) {
  std::set<std::string> out;
  for (const auto& c : classes)
    for (const auto& m : c.methods)
      if (m.name == "__init__")
        for (const auto& l : m.body)
          for (const auto& t : py_lex(l.text))
            if (t.type == PyTok::Name && t.text != c.name)
              for (const auto& other : classes)
                if (other.name == t.text) out.insert(t.text);
  return out;
}

// Where a statement assigns (`y = ...`, `y: T = ...`): its first '=' outside brackets and strings
// that is not part of a comparison (==, !=, <=, >=); npos for an expression (f(x, dim=-1)).
std::size_t assignment_at(const std::string& text) {
  for (std::size_t at : top_level(text, '=')) {
    const bool comparison = (at + 1 < text.size() && text[at + 1] == '=') ||
                            (at > 0 && std::string("=!<>").find(text[at - 1]) != std::string::npos);
    if (!comparison) return at;
  }
  return std::string::npos;
}

// The names imports give to torch's and math's modules and functions (import torch as th,
// import torch.nn.functional as nnf, from torch import nn, from torch.nn.functional import
// softmax as sm): name -> the dotted path it stands for.
void read_imports(const std::vector<LogicalLine>& lines, std::map<std::string, std::string>& aliases) {
  auto pieces = [](std::string list) {
    list.erase(std::remove(list.begin(), list.end(), '('), list.end());
    list.erase(std::remove(list.begin(), list.end(), ')'), list.end());
    std::vector<std::pair<std::string, std::string>> out;  // (name, as)
    std::size_t from = 0;
    for (std::size_t at = 0; at <= list.size(); ++at) {
      if (at < list.size() && list[at] != ',') continue;
      std::string item = trimmed(list.substr(from, at - from));
      from = at + 1;
      if (item.empty()) continue;
      const std::size_t as = item.find(" as ");
      if (as == std::string::npos) out.push_back({item, ""});
      else out.push_back({trimmed(item.substr(0, as)), trimmed(item.substr(as + 4))});
    }
    return out;
  };
  auto ours = [](const std::string& path) {
    return path == "torch" || path.rfind("torch.", 0) == 0 || path == "math";
  };
  for (const auto& l : lines) {
    const std::string& t = l.text;
    if (t.rfind("import ", 0) == 0) {
      for (const auto& [module, as] : pieces(t.substr(7)))
        if (!as.empty() && ours(module)) aliases[as] = module;
    } else if (t.rfind("from ", 0) == 0) {
      const std::size_t import = t.find(" import ");
      if (import == std::string::npos) continue;
      const std::string module = trimmed(t.substr(5, import - 5));
      if (!ours(module)) continue;
      for (const auto& [name, as] : pieces(t.substr(import + 8)))
        if (name != "*") aliases[as.empty() ? name : as] = module + "." + name;
    }
  }
}

// Whether `e` holds an infinite number.
bool has_infinity(const Expr& e) {
  if (e->kind == Kind::Number) return std::isinf(e->value);
  return std::any_of(e->args.begin(), e->args.end(), [](const Expr& a) { return has_infinity(a); });
}

// The top-level functions another one calls.
std::set<std::string> called_functions(const std::vector<Def>& functions) {
  std::set<std::string> out;
  for (const auto& f : functions)
    for (const auto& l : f.body)
      for (const auto& t : py_lex(l.text))
        if (t.type == PyTok::Name && t.text != f.name)
          for (const auto& other : functions)
            if (other.name == t.text) out.insert(t.text);
  return out;
}

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

  // Functions defined inside a body (def or name = lambda), with the names they close over as
  // they were at the definition.
  struct LocalDef {
    Def def;
    std::map<std::string, Value> captured;
  };
  std::map<std::string, LocalDef> local_defs;
  const std::map<std::string, Value>* closure = nullptr;  // for the next inline_def

  // Runs a body; returns the value of its `return`.
  std::function<Value(const std::vector<LogicalLine>&)> run_body = [&](const std::vector<LogicalLine>& body) -> Value {
    // Lines of if/elif/else blocks not taken (their conditions were decided before the block ran).
    std::set<std::size_t> not_taken;
    for (std::size_t index = 0; index < body.size(); ++index) {
      if (not_taken.count(index)) continue;
      const LogicalLine& l = body[index];
      current = &l;
      const std::string& t = l.text;
      if (t == "pass" || t.rfind("super(", 0) == 0 || t.rfind("assert ", 0) == 0) continue;
      if (t.rfind("import ", 0) == 0 || t.rfind("from ", 0) == 0) continue;  // read_imports has them
      if (t.rfind("def ", 0) == 0) {
        // A function defined in the body: inlined where it is called, like a top-level helper.
        LocalDef local;
        if (!parse_def(l, local.def))
          throw Reject{"a def the built-in analyser cannot read (def name(parameters):)", 0, start_column(l) + 1};
        while (index + 1 < body.size() && body[index + 1].indent > l.indent) local.def.body.push_back(body[++index]);
        local.captured = translator.locals;
        for (const auto& input : translator.inputs) local.captured.emplace(input, tensor(sym(input)));
        translator.helpers[local.def.name] = {};
        local_defs[local.def.name] = std::move(local);
        continue;
      }
      // A branch that only casts (HF's `if self.weight.dtype in [torch.float16, torch.bfloat16]:
      // h = h.to(self.weight.dtype)`) does not change the formula: the kernel computes in fp32 and
      // stores in the input's type, as for every other cast it drops.
      if (const std::size_t end = cast_only_branch(body, index); end > index) {
        result.notes.push_back("line " + std::to_string(l.number) + ": a branch that only casts (" + t +
                               " ...) dropped: the kernel loads its storage type and computes in fp32");
        index = end;
        continue;
      }
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
      // An if/elif/else whose conditions do not depend on the inputs (`if self.with_scale:`,
      // `if gate is not None:`) picks one block for every element: the op's scalar parameters take
      // their defaults (as __init__ does when it builds the module), an optional tensor argument is
      // one of the op's inputs (given). A condition on tensor values is refused below.
      if (t.rfind("if ", 0) == 0 && t.back() == ':') {
        struct Branch {
          std::size_t header;
          std::string condition;  // "" for else
        };
        std::vector<Branch> branches{{index, t.substr(3, t.size() - 4)}};
        std::size_t k = index + 1;
        while (true) {
          while (k < body.size() && body[k].indent > l.indent) ++k;
          if (k >= body.size() || body[k].indent != l.indent) break;
          const std::string& h = body[k].text;
          if (h.rfind("elif ", 0) == 0 && h.back() == ':') branches.push_back({k, h.substr(5, h.size() - 6)});
          else if (h == "else:") branches.push_back({k, ""});
          else break;
          ++k;
        }
        const std::size_t end = k;
        std::optional<std::size_t> taken;
        bool decided = true;
        for (std::size_t b = 0; b < branches.size() && decided && !taken; ++b) {
          if (branches[b].condition.empty()) {
            taken = b;
            break;
          }
          translator.line = body[branches[b].header].number;
          translator.column_base = start_column(body[branches[b].header]) + (b == 0 ? 3 : 5);
          const auto value = decided_truth(translator, branches[b].condition);
          if (!value) {
            decided = false;
            break;
          }
          if (*value) taken = b;
        }
        if (decided) {
          for (std::size_t b = 0; b < branches.size(); ++b) {
            const std::size_t first = branches[b].header, last = b + 1 < branches.size() ? branches[b + 1].header : end;
            for (std::size_t j = first; j < last; ++j)
              if (j != first && taken && *taken == b) continue;  // the taken block runs
              else not_taken.insert(j);
          }
          result.notes.push_back("line " + std::to_string(l.number) + ": '" + t + "' decided before the op runs (" +
                                 (taken ? (branches[*taken].condition.empty() ? std::string("else")
                                                                              : branches[*taken].condition)
                                        : std::string("no branch")) +
                                 " taken; the op's parameters at their defaults, optional tensors given)");
          continue;
        }
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
      if (target.find(',') != std::string::npos) {
        std::string names = target;
        std::replace(names.begin(), names.end(), ',', ' ');
        std::istringstream parts(names);
        std::vector<std::string> halves;
        for (std::string n; parts >> n;) halves.push_back(n);
        // A reduction's result tuple (var, mean = torch.var_mean(x, -1); values, _ = x.max(-1)):
        // each name is bound to its part; an untranslated part (max's indices) fails where it is used.
        // x.chunk(n, dim=-1) of an argument: each name is bound to its part, a new input
        // (pytorch_split.cpp).
        if (value.find("split") == std::string::npos && value.find("unbind") == std::string::npos) {
          translator.line = l.number;
          translator.column_base = start_column(l) + static_cast<int>(eq) + 1;
          translator.pending_part_names = halves;
          const Value parts_value = translator.evaluate(value);
          translator.pending_part_names.clear();
          if (parts_value.type == Value::Tuple && parts_value.text == "chunk") {
            if (parts_value.items.size() != halves.size())
              throw Reject{"'" + target + " = ...' names " + std::to_string(halves.size()) + " parts of a cut into " +
                               std::to_string(parts_value.items.size()),
                           0, start_column(l) + 1};
            for (std::size_t k = 0; k < halves.size(); ++k)
              if (halves[k] != "_") translator.locals[halves[k]] = parts_value.items[k];
            continue;
          }
          // a, b = e1, e2: each name bound to its value (the halves of x[..., :d], x[..., d:]).
          if (parts_value.type == Value::Tuple && parts_value.text.empty() && parts_value.items.size() == halves.size()) {
            for (std::size_t k = 0; k < halves.size(); ++k)
              if (halves[k] != "_") translator.locals[halves[k]] = parts_value.items[k];
            continue;
          }
          if (is_reduction_tuple(parts_value) && parts_value.items.size() == halves.size()) {
            for (std::size_t k = 0; k < halves.size(); ++k) {
              Value part = parts_value.items[k];
              if (part.type == Value::None) {  // max/min's indices: named when a later line uses them
                part.type = Value::Path;
                part.text = "the indices of " + parts_value.text + "(dim=...) (" + halves[k] +
                            "; indices are not translated, only the values)";
              }
              if (halves[k] != "_") translator.locals[halves[k]] = part;
            }
            continue;
          }
        }
        // x.split(...) / unbind parts of one tensor: the kernels take equal parts cut with chunk.
        std::string as_inputs;
        for (const auto& n : halves) as_inputs += (as_inputs.empty() ? "" : ", ") + n;
        const bool split = value.find("chunk") != std::string::npos || value.find("split") != std::string::npos ||
                           value.find("unbind") != std::string::npos;
        throw Reject{"tuple unpacking ('" + target + " = ...') splits a tensor; not element-wise on one shape" +
                         (split ? std::string("; for equal parts of an argument write ") + as_inputs +
                                      " = x.chunk(" + std::to_string(halves.size()) +
                                      ", dim=-1), or take the parts as inputs (def f(" + as_inputs + "): ...)"
                                : std::string()),
                     0};
      }
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
  // Helpers being inlined, outermost first: the key tells which instance's method (self.norm's
  // _norm is not self's), the name is as the code calls it.
  struct ActiveCall {
    std::string key, name;
  };
  std::vector<ActiveCall> active;
  const ClassDef* module_class = nullptr;
  std::string self_path = "self";  // the instance whose methods `self.` names
  std::function<Value(const Def&, const std::string&, const std::string&, bool, const std::vector<Arg>&)> inline_def;
  translator.call_helper = [&](const std::string& name, const std::vector<Arg>& args) -> Value {
    const bool method = name.rfind("self.", 0) == 0;
    const Def* def = nullptr;
    if (method) {
      for (const auto& m : module_class->methods)
        if (m.name == name.substr(5)) def = &m;
    } else if (auto local = local_defs.find(name); local != local_defs.end()) {
      closure = &local->second.captured;
      def = &local->second.def;
    } else {
      for (const auto& f : functions)
        if (f.name == name) def = &f;
    }
    if (!def) throw Reject{name + "() is not defined in the source", 0};
    return inline_def(*def, method ? self_path + name.substr(4) : name, name, method, args);
  };
  inline_def = [&](const Def& d, const std::string& key, const std::string& name, bool method,
                   const std::vector<Arg>& args) -> Value {
    const Def* def = &d;
    const std::map<std::string, Value>* captured = closure;
    closure = nullptr;
    const auto same = [&](const ActiveCall& a) { return a.key == key; };
    if (std::any_of(active.begin(), active.end(), same)) {
      std::string chain;
      for (auto it = std::find_if(active.begin(), active.end(), same); it != active.end(); ++it) chain += it->name + "() -> ";
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
    if (captured) translator.locals = *captured;
    struct Active {
      std::vector<ActiveCall>& stack;
      Active(std::vector<ActiveCall>& s, ActiveCall c) : stack(s) { stack.push_back(std::move(c)); }
      ~Active() { stack.pop_back(); }
    } guard(active, ActiveCall{key, name});
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

  // Outside the try: a refusal names a line that the module builder holds.
  std::vector<ParamDecl> params;
  translator.declared = &params;
  ModuleBuilder modules(translator, classes, params, result.notes, current);
  try {
    const Def* entry = nullptr;
    const ClassDef* module = nullptr;
    // The op is the last module class with a forward that no other class of the source builds as
    // a submodule (those are inlined into it), and without one the last top-level function that
    // no other one calls (the others are helpers).
    const std::set<std::string> built = built_classes(classes);
    for (const auto& c : classes)
      for (const auto& m : c.methods)
        if (m.name == "forward" && (!built.count(c.name) || !module || built.count(module->name))) {
          module = &c;
          entry = &m;
        }
    for (const auto& f : functions) translator.helpers[f.name] = {};
    for (const auto& c : classes) translator.source_classes.insert(c.name);
    read_imports(lines, translator.aliases);
    // Module-level constants (EPS = 1e-6, SCALE = 1 / math.sqrt(2)): numbers every function sees.
    // Anything else at the top level (imports, configuration objects) is not the op's.
    if (!functions.empty() || !classes.empty())
      for (const auto& l : lines) {
        const auto eq = top_level(l.text, '=');
        if (l.indent != 0 || eq.size() != 1 || eq[0] == 0 || std::string("=!<>+-*/").find(l.text[eq[0] - 1]) != std::string::npos ||
            (eq[0] + 1 < l.text.size() && l.text[eq[0] + 1] == '='))
          continue;
        std::string name = trimmed(l.text.substr(0, eq[0]));
        if (const auto colon = name.find(':'); colon != std::string::npos) name = trimmed(name.substr(0, colon));
        if (!std::regex_match(name, std::regex("[A-Za-z_][A-Za-z0-9_]*"))) continue;
        try {
          const Value v = translator.evaluate(l.text.substr(eq[0] + 1));
          if (v.type == Value::Tensor && is_number(simplify(v.expr))) translator.globals[name] = tensor(simplify(v.expr));
        } catch (const Reject&) {
          // Not a number: not a constant of the op.
        }
      }
    module_class = module;
    if (!entry) {
      const std::set<std::string> called = called_functions(functions);
      for (const auto& f : functions)
        if (!called.count(f.name) || !entry || called.count(entry->name)) entry = &f;
      if (!entry) {
        // A bare snippet: statements and a final expression or assignment.
        if (lines.empty()) throw Reject{"empty source", 0};
        Def snippet;
        snippet.name = "<snippet>";
        snippet.body = lines;
        LogicalLine& last = snippet.body.back();
        if (last.text.rfind("return", 0) != 0) {
          const std::size_t eq = assignment_at(last.text);
          const bool assignment = eq != std::string::npos;
          // Keep error columns on the written text: "return " is added in front of it.
          last.column = start_column(last) + (assignment ? static_cast<int>(eq) - 6 : -7);
          last.text = "return " + (assignment ? last.text.substr(eq + 1) : last.text);
        }
        // Free names of the snippet are its inputs: collect them by a first pass.
        std::set<std::string> assigned;
        for (const auto& l : snippet.body) {
          const std::size_t eq = assignment_at(l.text);
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
    if (module) {
      result.module_class = module->name;
      if (module->bases.find("Module") == std::string::npos)
        result.notes.push_back("class " + module->name + " does not name nn.Module as its base; treated as one");
      translator.self_attributes = modules.instance(modules.build_op_module(*module)).attributes;
      translator.methods = modules.instance(0).methods;
      translator.unreadable_attributes = modules.instance(0).unreadable;
    }
    // A submodule of the source's own class, called in forward (or one of its methods called,
    // self.norm._norm(x)): inlined with `self` its instance (attributes, methods), then the
    // caller's again.
    translator.call_instance = [&](int index, const std::string& method, const std::vector<Arg>& args) -> Value {
      const Instance& inst = modules.instance(index);
      const Def* forward = nullptr;
      for (const auto& m : inst.cls->methods)
        if (m.name == method) forward = &m;
      if (!forward) throw Reject{inst.cls->name + "." + method + "() is not defined in the source", 0};
      struct Swap {
        Translator& t;
        const ClassDef*& cls;
        std::string& path;
        std::map<std::string, Value> attributes;
        std::set<std::string> methods;
        std::map<std::string, std::string> unreadable;
        const ClassDef* saved_cls;
        std::string saved_path;
        ~Swap() {
          t.self_attributes = std::move(attributes);
          t.methods = std::move(methods);
          t.unreadable_attributes = std::move(unreadable);
          cls = saved_cls;
          path = saved_path;
        }
      } swap{translator, module_class, self_path, translator.self_attributes, translator.methods,
             translator.unreadable_attributes, module_class, self_path};
      translator.self_attributes = inst.attributes;
      translator.methods = inst.methods;
      translator.unreadable_attributes = inst.unreadable;
      module_class = inst.cls;
      self_path = inst.path;
      return inline_def(*forward, inst.path + "." + method, method == "forward" ? inst.path : inst.path + "." + method,
                        true, args);
    };
    translator.instance_attribute = [&](int index, const std::string& attribute) -> Value {
      const Instance& inst = modules.instance(index);
      auto it = inst.attributes.find(attribute);
      if (it == inst.attributes.end() && inst.methods.count(attribute)) {
        Value bound_method;
        bound_method.type = Value::Module;
        bound_method.instance = index;
        bound_method.text = attribute;
        return bound_method;
      }
      if (auto unread = inst.unreadable.find(attribute); it == inst.attributes.end() && unread != inst.unreadable.end())
        throw Reject{unread->second, 0};
      if (it == inst.attributes.end())
        throw Reject{inst.path + "." + attribute + " is not set in " + inst.cls->name + ".__init__ (unknown attribute)", 0};
      return it->second;
    };
    // A parameter with a numeric default (def f(x, eps=1e-6)) is a fixed module parameter, not a
    // tensor input.
    for (const auto& p : entry->params) {
      if (p == "self") continue;
      auto d = entry->defaults.find(p);
      // The default as Python reads it (1e-6, 1 / 3, True, math.pi, a module-level EPS).
      std::optional<double> value;
      if (d != entry->defaults.end()) {
        try {
          translator.line = entry->line;
          const Value v = translator.evaluate(d->second);
          if (v.type == Value::Tensor && is_number(simplify(v.expr))) value = simplify(v.expr)->value;
        } catch (const Reject&) {
          // Not a number: the parameter is a tensor input.
        }
      }
      if (value) {
        params.push_back(ParamDecl{p, ParamShape::Scalar, *value, false});
        translator.locals[p] = tensor(sym(p));
      } else {
        translator.inputs.insert(p);
        translator.op_arguments.insert(p);
      }
    }
    current = nullptr;
    active.push_back(module ? ActiveCall{"self.forward", "self.forward"} : ActiveCall{entry->name, entry->name});  // a call back into the entry is recursion too
    Value out = run_body(entry->body);
    Expr expression = translator.as_tensor(out, "a tensor result");
    if (std::string problem = tree_limit_problem(expression); !problem.empty()) throw Reject{problem, 0};
    if (has_infinity(expression))
      throw Reject{"the formula holds an infinite constant (float('-inf'), math.inf) outside a clamp bound; the "
                   "generated kernel and its gradient are written with finite numbers: mask with a large finite value "
                   "(for a softmax, -1e4 in fp16 / -1e30 in fp32) or leave the masking out of the op",
                   0};
    result.elementwise = true;
    result.program.output = "y";
    result.program.expression = expression;
    std::set<std::string> used = free_symbols(expression);
    std::vector<std::string> order = entry->params;
    if (entry->name == "<snippet>") order.assign(translator.inputs.begin(), translator.inputs.end());
    const auto is_part = [&](const std::string& name) {
      return std::any_of(translator.split_parts.begin(), translator.split_parts.end(), [&](const auto& cut) {
        return std::find(cut.second.begin(), cut.second.end(), name) != cut.second.end();
      });
    };
    for (const auto& p : order) {
      if (p == "self" || is_part(p)) continue;
      if (auto cut = translator.split_parts.find(p); cut != translator.split_parts.end()) {
        if (used.count(p))
          throw Reject{p + " is cut into parts at line " + std::to_string(translator.split_line[p]) +
                           " and also used whole; the kernel reads either the parts of an argument or the argument: "
                           "write the whole-argument terms with its parts, or pass it twice (as the argument to cut "
                           "and as another input)",
                       0};
        // Every part is an input, used or not: the Python entry passes them all and gets each
        // part's gradient (zero where the formula does not read it).
        const int parts = static_cast<int>(cut->second.size());
        for (int k = 0; k < parts; ++k) {
          result.program.inputs.push_back(cut->second[static_cast<std::size_t>(k)]);
          result.program.splits[cut->second[static_cast<std::size_t>(k)]] = Program::Split{p, k, parts};
        }
        continue;
      }
      if (used.count(p) && translator.inputs.count(p)) result.program.inputs.push_back(p);
    }
    for (const auto& p : params)
      if (used.count(p.name)) result.program.params.push_back(p);
    for (const auto& [name, kind] : translator.sample_hints)
      if (used.count(name)) result.program.sample_hints[name] = kind;
    for (const auto& [name, init] : translator.column_roles)
      if (used.count(name) && translator.inputs.count(name)) result.program.column_roles[name] = init;
    const bool rows = has_row_reduction(expression);
    if (rows && !translator.split_parts.empty())
      throw Reject{"a cut of an argument into parts (" + translator.split_parts.begin()->first +
                       ".chunk(..., dim=-1)) is translated for element-wise ops; a row reduction reads whole rows of "
                       "its inputs: pass the parts as inputs (def f(a, b): ...)",
                   2};
    result.row_reduction = rows;
    for (const auto& name : used) {
      if (rows && name == "n") continue;  // the row length, of x.shape[-1], var's n - 1
      bool known = std::find(result.program.inputs.begin(), result.program.inputs.end(), name) != result.program.inputs.end() ||
                   std::any_of(params.begin(), params.end(), [&](const ParamDecl& p) { return p.name == name; });
      if (!known && name == kRankSymbol)
        throw Reject{"the tensor's rank (x.ndim, x.dim(), len(x.shape)) is used as a value; the built-in analyser reads "
                     "it only in a dim (dim=x.ndim - 1, the last dimension)",
                     0};
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
    // The cut arguments are Python names of the entry too (their gradients d<argument>).
    std::vector<std::string> named = result.program.inputs;
    for (const auto& [argument, parts] : translator.split_parts) named.push_back(argument);
    result.program.output = unclashing_output_name("y", named, result.program.params);
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
