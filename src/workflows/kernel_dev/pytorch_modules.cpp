// The PyTorch translator's submodules (pytorch_detail.h): `self.<attr> = nn.<Class>(...)` in
// __init__, with the learnable parameters PyTorch creates implicitly for the norm modules.
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "workflows/kernel_dev/pytorch_detail.h"

namespace liger::kernel_dev::torch_detail {

ParamDecl parameter_decl(const std::string& attr, const std::string& rhs, const std::map<std::string, double>& defaults) {
  ParamDecl p;
  p.name = attr;
  p.learnable = true;
  std::string inner = rhs.substr(rhs.find("Parameter(") + 10);
  // shape: scalar when built from one element
  bool scalar = inner.find("(1)") != std::string::npos || inner.find("((1,))") != std::string::npos ||
                inner.find("(1,)") != std::string::npos || inner.find("tensor(") != std::string::npos ||
                inner.find("([1])") != std::string::npos;
  p.shape = scalar ? ParamShape::Scalar : ParamShape::Channel;
  p.init = inner.find("zeros") != std::string::npos ? 0.0 : 1.0;
  std::size_t tensor_at = inner.find("tensor(");
  if (tensor_at != std::string::npos) {
    std::string value = inner.substr(tensor_at + 7);
    char* end = nullptr;
    double d = std::strtod(value.c_str(), &end);
    if (end != value.c_str()) p.init = d;
    else {
      std::string name = value.substr(0, value.find_first_of(",)"));
      name.erase(std::remove_if(name.begin(), name.end(), ::isspace), name.end());
      if (defaults.count(name)) p.init = defaults.at(name);
    }
  }
  std::size_t times = inner.find('*');
  if (times != std::string::npos) {
    std::string factor = inner.substr(times + 1);
    factor = factor.substr(0, factor.find(')'));
    factor.erase(std::remove_if(factor.begin(), factor.end(), ::isspace), factor.end());
    char* end = nullptr;
    double d = std::strtod(factor.c_str(), &end);
    if (end && *end == 0 && !factor.empty()) p.init *= d;
    else if (defaults.count(factor)) p.init *= defaults.at(factor);
  }
  return p;
}

std::string constructor_callee(const std::string& rhs) {
  const std::size_t open = rhs.find('(');
  if (open == std::string::npos || open == 0 || rhs.back() != ')') return "";
  std::string callee = rhs.substr(0, open);
  while (!callee.empty() && std::isspace(static_cast<unsigned char>(callee.back()))) callee.pop_back();
  for (char c : callee)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return "";
  const std::size_t dot = callee.rfind('.');
  const std::string cls = dot == std::string::npos ? callee : callee.substr(dot + 1);
  if (cls.empty() || !std::isupper(static_cast<unsigned char>(cls[0]))) return "";
  if (callee == "nn.Parameter" || callee == "torch.nn.Parameter" || callee == "Parameter") return "";
  return callee;
}

void adopt_norm_parameters(Value& module, const std::string& attr, const std::string& constructor, bool plain_names,
                           std::vector<ParamDecl>& params, std::vector<std::string>& notes) {
  const bool layer = module.text == "layer_norm";
  auto take = [&](const char* key) -> std::optional<Value> {
    for (auto it = module.module_args.begin(); it != module.module_args.end(); ++it)
      if (it->first == key) {
        Value v = it->second;
        module.module_args.erase(it);
        return v;
      }
    return std::nullopt;
  };
  auto flag = [&](const char* key, bool fallback) {
    const auto v = take(key);
    if (!v) return fallback;
    const Expr e = v->type == Value::Tensor ? simplify(v->expr) : nullptr;
    if (!e || !is_number(e))
      throw Reject{constructor + "(" + key + "=...): the built-in analyser needs True or False written out here", 0};
    return e->value != 0;
  };
  // PyTorch's defaults: nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True),
  // nn.RMSNorm(normalized_shape, eps=None, elementwise_affine=True).
  const bool affine = flag("elementwise_affine", true);
  if (!layer && std::any_of(module.module_args.begin(), module.module_args.end(),
                            [](const NamedValue& a) { return a.first == "bias"; }))
    throw Reject{constructor + "() has no bias argument (nn.RMSNorm learns a weight only): add a bias as its own "
                               "nn.Parameter in __init__ and write `self.norm(x) + self.bias` in forward",
                 0};
  const bool bias = layer && flag("bias", true);
  for (const char* ignored : {"device", "dtype"})
    if (take(ignored)) notes.push_back(constructor + "(" + ignored + "=...) dropped: the op takes the input's dtype");
  const auto shape = std::find_if(module.module_args.begin(), module.module_args.end(),
                                  [](const NamedValue& a) { return a.first == "normalized_shape"; });
  if (shape == module.module_args.end())
    throw Reject{constructor + "() needs normalized_shape (the size of the last dimension)", 0};
  if (shape->second.type == Value::Tuple && shape->second.items.size() != 1)
    throw Reject{constructor + "(): normalized_shape has " + std::to_string(shape->second.items.size()) +
                     " dimensions; the Tier-2 row program normalises over the last dimension only (one size)",
                 2};
  auto declare = [&](const std::string& role, double init) {
    const std::string name = plain_names ? role : attr + "_" + role;
    if (std::none_of(params.begin(), params.end(), [&](const ParamDecl& p) { return p.name == name; }))
      params.push_back(ParamDecl{name, ParamShape::Channel, init, true});
    module.module_args.push_back({role, tensor(sym(name))});
    notes.push_back("self." + attr + " = " + constructor + "(...): its learnable " + role + " is the op's per-column '" +
                    name + "' (init " + (init == 0 ? "0" : "1") + ")");
  };
  if (affine) declare("weight", 1.0);
  if (affine && bias) declare("bias", 0.0);
  // An eps the source does not give a number for becomes a declared module parameter, visible in
  // the profile and settable in the op's options: nn.RMSNorm's eps=None (torch.finfo(x.dtype).eps
  // at run time, which depends on the dtype; the op has one eps for every dtype: fp32's, the
  // precision it computes in), and a value read from outside the source (eps=config.norm_eps:
  // PyTorch's default of the class until set).
  const auto eps = std::find_if(module.module_args.begin(), module.module_args.end(),
                                [](const NamedValue& a) { return a.first == "eps"; });
  const bool missing = eps == module.module_args.end() || eps->second.type == Value::None;
  const bool external = !missing && eps->second.type != Value::Tensor;
  if (layer && !external) return;
  if (!missing && !external) return;
  const std::string written = external ? (eps->second.text.empty() ? std::string("...") : eps->second.text) : "";
  take("eps");
  const bool taken = std::any_of(params.begin(), params.end(), [](const ParamDecl& p) { return p.name == "eps"; });
  const std::string name = taken ? attr + "_eps" : "eps";
  const double value = layer ? 1e-5 : 1.1920928955078125e-07;
  params.push_back(ParamDecl{name, ParamShape::Scalar, value, false});
  module.module_args.push_back({"eps", tensor(sym(name))});
  if (external)
    notes.push_back(constructor + "(eps=" + written + "): the value is not in the source; the op's module parameter '" +
                    name + "' takes PyTorch's default " + (layer ? "1e-05" : "1.1920929e-07") +
                    ": set it to the model's value");
  else
    notes.push_back(constructor + "() without eps: PyTorch uses torch.finfo(x.dtype).eps at run time; the op declares "
                    "the module parameter '" + name + "' = 1.1920929e-07 (fp32's, the precision it computes in) for "
                    "every dtype: pass eps to nn.RMSNorm to fix another value");
}

}  // namespace liger::kernel_dev::torch_detail
