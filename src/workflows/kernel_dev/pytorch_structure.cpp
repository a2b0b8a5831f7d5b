// The PyTorch translator's view of a source file (pytorch_detail.h): its top-level functions and
// classes with their methods, each with its parameters, defaults and body.
#include <algorithm>

#include "workflows/kernel_dev/pytorch_detail.h"

namespace liger::kernel_dev::torch_detail {

// "def name(a, b=1.0, *, c: float = 2) -> T:" -> Def (without body).
bool parse_def(const LogicalLine& l, Def& d) {
  if (l.text.rfind("def ", 0) != 0) return false;
  std::size_t open = l.text.find('('), close = l.text.rfind(')');
  if (open == std::string::npos || close == std::string::npos) return false;
  d.name = l.text.substr(4, open - 4);
  d.name.erase(std::remove_if(d.name.begin(), d.name.end(), ::isspace), d.name.end());
  d.line = l.number;
  d.indent = l.indent;
  std::string params = l.text.substr(open + 1, close - open - 1);
  int depth = 0;
  std::string current;
  auto flush = [&] {
    std::string p = current;
    current.clear();
    std::size_t b = p.find_first_not_of(" \t");
    if (b == std::string::npos) return;
    p = p.substr(b);
    if (p == "*" || p[0] == '*') {
      d.variadic = d.variadic || p != "*";
      return;
    }
    std::string name = p, def;
    std::size_t eq = p.find('=');
    if (eq != std::string::npos) {
      name = p.substr(0, eq);
      def = p.substr(eq + 1);
    }
    std::size_t colon = name.find(':');
    if (colon != std::string::npos) name = name.substr(0, colon);
    name.erase(std::remove_if(name.begin(), name.end(), ::isspace), name.end());
    def.erase(std::remove_if(def.begin(), def.end(), ::isspace), def.end());
    d.params.push_back(name);
    if (!def.empty()) d.defaults[name] = def;
  };
  for (char c : params) {
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) flush();
    else current += c;
  }
  flush();
  return true;
}

SourceStructure source_structure(const std::vector<LogicalLine>& lines) {
  SourceStructure out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const LogicalLine& l = lines[i];
    auto body_of = [&](int indent, std::size_t& k) {
      std::vector<LogicalLine> body;
      while (k + 1 < lines.size() && lines[k + 1].indent > indent) body.push_back(lines[++k]);
      return body;
    };
    if (l.indent == 0 && l.text.rfind("class ", 0) == 0) {
      ClassDef c;
      c.line = l.number;
      std::size_t open = l.text.find('(');
      std::size_t end = l.text.find_first_of("(:");
      c.name = l.text.substr(6, end - 6);
      if (open != std::string::npos) c.bases = l.text.substr(open + 1, l.text.rfind(')') - open - 1);
      std::size_t k = i;
      std::vector<LogicalLine> body = body_of(0, k);
      for (std::size_t j = 0; j < body.size(); ++j) {
        Def d;
        if (parse_def(body[j], d)) {
          while (j + 1 < body.size() && body[j + 1].indent > d.indent) d.body.push_back(body[++j]);
          c.methods.push_back(d);
        } else if (body[j].indent == body.front().indent && body[j].text.front() != '@') {
          c.statements.push_back(body[j]);
        }
      }
      out.classes.push_back(c);
      i = k;
    } else if (l.indent == 0) {
      Def d;
      if (parse_def(l, d)) {
        std::size_t k = i;
        d.body = body_of(0, k);
        out.functions.push_back(d);
        i = k;
      }
    }
  }

  return out;
}

}  // namespace liger::kernel_dev::torch_detail
