#include "workflows/kernel_dev/compile_entry.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <algorithm>
#include <sstream>
#include <set>
#include <stdexcept>

#include "liger/workflows.h"
#include "workflows/kernel_dev/catalogue.h"
#include "workflows/kernel_dev/profile.h"
#include "workflows/kernel_dev/input_split.h"
#include "workflows/kernel_dev/pytorch.h"

namespace liger::kernel_dev {

namespace {

// Shortest text that reads back as the same double, as a Python float literal. The pattern
// compares constants by value (2 == 2.0), so the spelling only has to be exact.
std::string python_number(double value) {
  if (std::isinf(value)) return value > 0 ? "float(\"inf\")" : "(-float(\"inf\"))";
  if (std::isnan(value)) return "float(\"nan\")";
  char buffer[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  std::string text = buffer;
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return value < 0 ? "(" + text + ")" : text;
}

// Functions that are one torch.<name> call of one tensor in every PyTorch version the backend
// supports; their graph kind (graph.py) is the name itself.
const std::set<std::string>& unary_torch() {
  static const std::set<std::string> names = {"exp",  "log", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sigmoid",
                                              "erf",  "abs", "relu",  "sign",  "sin",  "cos",   "square", "atan",
                                              "floor", "ceil",  "round", "trunc", "detach"};
  return names;
}

// The PyTorch input's own return expression, when the op came from a one-statement function whose
// parameters are exactly the entry's arguments: the backend finds the op in models written like the
// source, and the translation may have expanded a call the source makes once (torch.asinh into a
// where of logs, F.silu into x * sigmoid(x)), which the traced pattern would then look for instead.
// "" when the source is not such a function (a module, a snippet, several statements, a name that
// is neither an argument nor torch / F).
std::string source_return_expression(const KernelProfile& p, const std::set<std::string>& arguments) {
  if (p.source_kind != "pytorch" || p.source_entry.empty() || p.source_entry.find_first_of(".<") != std::string::npos)
    return "";
  const std::string& src = p.source_text;
  const std::string head = "def " + p.source_entry + "(";
  size_t at = src.find(head);
  if (at == std::string::npos || (at > 0 && src[at - 1] != '\n' && src[at - 1] != ' ')) return "";
  // Parameters up to the closing parenthesis: names only (annotations and defaults dropped).
  size_t open = at + head.size(), close = open;
  for (int depth = 1; close < src.size() && depth > 0; ++close) {
    if (src[close] == '(' || src[close] == '[') ++depth;
    if (src[close] == ')' || src[close] == ']') --depth;
  }
  if (close >= src.size()) return "";
  std::set<std::string> params;
  {
    std::string list = src.substr(open, close - 1 - open), item;
    int depth = 0;
    auto take = [&](std::string x) {
      x = x.substr(0, x.find_first_of(":="));
      x.erase(0, x.find_first_not_of(" \t\n"));
      x.erase(x.find_last_not_of(" \t\n") + 1);
      if (!x.empty()) params.insert(x);
    };
    for (char c : list) {
      if (c == '(' || c == '[') ++depth;
      if (c == ')' || c == ']') --depth;
      if (c == ',' && depth == 0) { take(item); item.clear(); } else item += c;
    }
    take(item);
  }
  // A function that cuts an argument into the op's inputs first (gate, up = x.chunk(2, dim=-1);
  // inputs[].split) takes the argument; the cut line is skipped below, and the return expression
  // is over the parts, as the graph region the pattern looks for is.
  std::set<std::string> cut_sources, parts;
  for (const auto& in : p.inputs)
    if (const auto ref = parse_split(in.split)) {
      cut_sources.insert(ref->source);
      parts.insert(in.name);
    }
  std::set<std::string> expected = arguments;
  for (const auto& part : parts) expected.erase(part);
  expected.insert(cut_sources.begin(), cut_sources.end());
  if (params != (cut_sources.empty() ? arguments : expected)) return "";
  static const std::regex cut_line(R"(^([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)+)\s*=\s*(?:torch\.chunk\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,|([A-Za-z_][A-Za-z0-9_]*)\.chunk\().*\)$)");
  // The body: one `return` line after the signature, blank lines, comments and a docstring.
  const size_t colon = src.find(':', close);
  if (colon == std::string::npos) return "";
  std::string body = src.substr(colon + 1), ret;
  size_t pos = 0;
  bool in_doc = false;
  while (pos <= body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    std::string line = body.substr(pos, end - pos);
    pos = end + 1;
    line.erase(0, line.find_first_not_of(" \t"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (line.rfind("\"\"\"", 0) == 0 || line.rfind("'''", 0) == 0) {
      const bool closes_here = line.size() >= 6 && line.compare(line.size() - 3, 3, line.substr(0, 3)) == 0;
      if (!closes_here) in_doc = !in_doc;
      continue;
    }
    if (in_doc || line.empty() || line[0] == '#') continue;
    if (std::smatch m; ret.empty() && !cut_sources.empty() && std::regex_match(line, m, cut_line)) {
      // Only a cut of an argument into names that are all the op's inputs is skipped.
      const std::string source = m[2].matched ? m[2].str() : m[3].str();
      if (!cut_sources.count(source)) return "";
      std::string names = m[1].str();
      std::replace(names.begin(), names.end(), ',', ' ');
      std::istringstream list(names);
      for (std::string name; list >> name;)
        if (!parts.count(name)) return "";
      continue;
    }
    if (!ret.empty()) return "";  // a second statement
    if (line.rfind("return ", 0) != 0) return "";
    ret = line.substr(7);
  }
  if (ret.empty()) return "";
  // Every name is an argument, a keyword argument's name, or under torch / F / torch.nn.functional.
  static const std::regex functional(R"(\b(?:torch\.nn\.functional|nn\.functional)\.)");
  ret = std::regex_replace(ret, functional, "F.");
  int depth = 0;
  for (size_t i = 0; i < ret.size();) {
    const char c = ret[i];
    if (c == '"' || c == '\'') {
      const size_t q = ret.find(c, i + 1);
      if (q == std::string::npos) return "";
      i = q + 1;
      continue;
    }
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == '#' || c == ';' || c == ':' || depth < 0) return "";
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < ret.size() && (std::isalnum(static_cast<unsigned char>(ret[j])) || ret[j] == '_')) ++j;
      const std::string name = ret.substr(i, j - i);
      const bool attribute = i > 0 && ret[i - 1] == '.';
      const bool keyword = j < ret.size() && ret[j] == '=' && (j + 1 >= ret.size() || ret[j + 1] != '=');
      const bool digit_suffix = i > 0 && std::isdigit(static_cast<unsigned char>(ret[i - 1]));  // 1e-6
      if (!attribute && !keyword && !digit_suffix && !arguments.count(name) && name != "torch" && name != "F")
        return "";
      i = j;
      continue;
    }
    ++i;
  }
  return depth == 0 ? ret : "";
}

// Whether the source still computes the profile's forward: the reviewer may have edited the
// forward, and the pattern follows the profile, not the input. The source is translated again
// (the PyTorch translator, with the activation catalogue: keyword arguments, F.* losses and
// activations read as in Understand) and compared with Understand's own test for one function.
bool computes_the_forward(const std::string& source, const Expr& forward) {
  static const Catalogue* catalogue = []() -> const Catalogue* {
    try {
      static const Catalogue c = Catalogue::load_file(workflows::data_dir() / "skills/kernel_dev/activations.yaml");
      return &c;
    } catch (const std::exception&) {
      return nullptr;
    }
  }();
  if (!catalogue) return false;
  const TorchTranslation t = translate_pytorch(source, *catalogue);
  if (!t.elementwise || !t.program.expression) return false;
  Program edited = t.program;
  edited.expression = forward;
  return same_function(t.program, edited);
}

}  // namespace

std::string torch_expression(const Expr& e) {
  const auto& a = e->args;
  // Every compound operand is parenthesised: the text never depends on Python's precedence
  // agreeing with the expression language's (-x^2 is -(x^2) in both, but nothing relies on it).
  switch (e->kind) {
    case Kind::Number: return python_number(e->value);
    case Kind::Symbol: return e->name;
    case Kind::Add: return "(" + torch_expression(a[0]) + " + " + torch_expression(a[1]) + ")";
    case Kind::Sub: return "(" + torch_expression(a[0]) + " - " + torch_expression(a[1]) + ")";
    case Kind::Mul: return "(" + torch_expression(a[0]) + " * " + torch_expression(a[1]) + ")";
    case Kind::Div: return "(" + torch_expression(a[0]) + " / " + torch_expression(a[1]) + ")";
    case Kind::Pow: return "(" + torch_expression(a[0]) + " ** " + torch_expression(a[1]) + ")";
    case Kind::Neg: return "(-" + torch_expression(a[0]) + ")";
    case Kind::Compare: return "(" + torch_expression(a[0]) + " " + e->name + " " + torch_expression(a[1]) + ")";
    case Kind::Call: break;
  }
  const std::string& f = e->name;
  if (unary_torch().count(f) && a.size() == 1) return "torch." + f + "(" + torch_expression(a[0]) + ")";
  if (f == "softplus" && a.size() == 1) return "F.softplus(" + torch_expression(a[0]) + ")";
  // The step as a comparison cast back to the operand's type; type_as keeps the cast a call on
  // graph values (.to(x.dtype) would trace a getattr the matcher cannot compare).
  if (f == "step" && a.size() == 1) {
    const std::string v = torch_expression(a[0]);
    return "(" + v + " > 0.0).type_as(" + v + ")";
  }
  if ((f == "max" || f == "min") && a.size() == 2) {
    // A bound by a constant is a clamp, as models write max(x, 0) (torch.maximum needs a tensor).
    const char* bound = f == "max" ? "min" : "max";
    if (is_number(a[1])) return "torch.clamp(" + torch_expression(a[0]) + ", " + bound + "=" + torch_expression(a[1]) + ")";
    if (is_number(a[0])) return "torch.clamp(" + torch_expression(a[1]) + ", " + bound + "=" + torch_expression(a[0]) + ")";
    return std::string("torch.") + (f == "max" ? "maximum" : "minimum") + "(" + torch_expression(a[0]) + ", " +
           torch_expression(a[1]) + ")";
  }
  if (f == "clamp" && a.size() == 3)
    return "torch.clamp(" + torch_expression(a[0]) + ", " + torch_expression(a[1]) + ", " + torch_expression(a[2]) + ")";
  if (f == "where" && a.size() == 3)
    return "torch.where(" + torch_expression(a[0]) + ", " + torch_expression(a[1]) + ", " + torch_expression(a[2]) + ")";
  if (f == "pow" && a.size() == 2) return "(" + torch_expression(a[0]) + " ** " + torch_expression(a[1]) + ")";
  throw std::invalid_argument("no PyTorch spelling for the function '" + f + "' with " + std::to_string(a.size()) +
                              " argument(s)");
}

CompileEntryPlan plan_compile_entry(const KernelProfile& p) {
  CompileEntryPlan plan;
  if (p.tier != 1) {
    plan.skipped = "Tier " + std::to_string(p.tier) +
                   ": only element-wise (Tier 1) ops get a compile-backend entry; a row reduction is written in too "
                   "many ways (dim=-1 or dim=1, keepdim, x.max(-1)[0] or amax, the row length from x.shape) for one "
                   "traced pattern to find it";
    return plan;
  }
  if (!p.forward || p.forward->expression.empty()) {
    plan.skipped = "the profile has no forward expression";
    return plan;
  }
  Expr forward;
  try {
    forward = parse_expression(p.forward->expression);
    plan.expression = torch_expression(forward);
  } catch (const std::exception& error) {
    plan.expression.clear();
    plan.skipped = std::string("the forward has no PyTorch pattern: ") + error.what();
    return plan;
  }
  // The pattern binds each argument of the library call to a graph value it matched; an argument
  // the forward does not use has nothing to bind to.
  const std::set<std::string> used = free_symbols(forward);
  std::string unused;
  auto need = [&](const std::string& name) {
    if (!used.count(name)) unused += (unused.empty() ? "" : ", ") + name;
  };
  for (const auto& t : p.inputs) need(t.name);
  for (const auto& l : p.learnable_parameters) need(l.name);
  for (const auto& m : p.module_parameters) need(m.name);
  if (!unused.empty()) {
    plan.expression.clear();
    plan.skipped = "the forward does not use " + unused + ", so a matched graph region has no value to pass for it";
    return plan;
  }
  // The entry's functions take the op's names as parameters next to the modules they call.
  static const std::set<std::string> taken = {
      "torch", "F", "LF", "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
      "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in",
      "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield"};
  for (const auto& name : used)
    if (taken.count(name)) {
      plan.expression.clear();
      plan.skipped = "the name '" + name + "' is a Python keyword or a module the entry uses (torch, F, LF)";
      return plan;
    }
  std::set<std::string> arguments;
  for (const auto& t : p.inputs) arguments.insert(t.name);
  for (const auto& l : p.learnable_parameters) arguments.insert(l.name);
  for (const auto& m : p.module_parameters) arguments.insert(m.name);
  if (std::string own = source_return_expression(p, arguments); !own.empty() && computes_the_forward(p.source_text, forward)) {
    plan.expression = own;
    return plan;
  }
  // Else the catalogue's PyTorch spelling of the function the op matched (F.gelu(x,
  // approximate='tanh') rather than its expansion), in the op's names: models call the function,
  // and a module that reaches it through an attribute (self.act = partial(F.gelu, ...)) leaves no
  // one-line return to copy. Used only where it computes the profile's forward.
  // Only for PyTorch that calls those functions itself: a source that writes x * torch.sigmoid(x)
  // out keeps the derived spelling, which is what its graph holds.
  const std::string baseline = "PyTorch eager baseline: ";
  for (const auto& note : p.notes) {
    if (p.source_kind != "pytorch" || note.rfind(baseline, 0) != 0) continue;
    const std::string spelled = note.substr(baseline.size());
    if (spelled.find("__import__") != std::string::npos) break;
    static const std::regex called(R"((?:F|torch)\.([A-Za-z_][A-Za-z0-9_]*)\s*\()");
    bool source_calls_them = true;
    for (auto it = std::sregex_iterator(spelled.begin(), spelled.end(), called); it != std::sregex_iterator(); ++it)
      if (!std::regex_search(p.source_text, std::regex("\\b" + (*it)[1].str() + "\\b"))) source_calls_them = false;
    if (!source_calls_them) break;
    std::string params;
    for (const auto& name : arguments) params += (params.empty() ? "" : ", ") + name;
    if (computes_the_forward("def f(" + params + "):\n    return " + spelled + "\n", forward)) plan.expression = spelled;
    break;
  }
  return plan;
}

}  // namespace liger::kernel_dev
