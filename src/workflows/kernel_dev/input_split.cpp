#include "workflows/kernel_dev/input_split.h"

#include <map>
#include <regex>
#include <stdexcept>

namespace liger::kernel_dev {

std::optional<SplitRef> parse_split(const std::string& text) {
  if (text.empty()) return std::nullopt;
  static const std::regex form(R"(^\s*([A-Za-z_][A-Za-z0-9_]{0,63})\.chunk\(\s*([0-9]+)\s*,\s*(?:dim\s*=\s*)?-1\s*\)\[\s*([0-9]+)\s*\]\s*$)");
  std::smatch m;
  if (!std::regex_match(text, m, form))
    throw std::runtime_error("inputs[].split '" + text + "' is not of the form <argument>.chunk(<parts>, dim=-1)[<index>], "
                             "e.g. x.chunk(2, dim=-1)[0] (remove the field for an input passed on its own)");
  SplitRef ref;
  ref.source = m[1].str();
  const std::string parts = m[2].str(), index = m[3].str();
  ref.parts = parts.size() > 3 ? kMaxSplitParts + 1 : std::stoi(parts);
  ref.index = index.size() > 3 ? kMaxSplitParts + 1 : std::stoi(index);
  if (ref.parts < 2 || ref.parts > kMaxSplitParts)
    throw std::runtime_error("inputs[].split '" + text + "': an argument is cut into 2 to " + std::to_string(kMaxSplitParts) +
                             " parts");
  if (ref.index >= ref.parts)
    throw std::runtime_error("inputs[].split '" + text + "': part " + std::to_string(ref.index) + " of " +
                             std::to_string(ref.parts) + " does not exist (parts are numbered from 0)");
  return ref;
}

std::string split_text(const SplitRef& split) {
  return split.source + ".chunk(" + std::to_string(split.parts) + ", dim=-1)[" + std::to_string(split.index) + "]";
}

bool has_split_inputs(const KernelProfile& profile) {
  for (const auto& in : profile.inputs)
    if (!in.split.empty()) return true;
  return false;
}

std::vector<SplitArgument> call_arguments(const KernelProfile& profile) {
  std::vector<SplitArgument> args;
  std::map<std::string, std::size_t> by_source;  // split argument -> its index in args
  std::map<std::string, int> part_count;
  for (std::size_t k = 0; k < profile.inputs.size(); ++k) {
    const auto& in = profile.inputs[k];
    const auto ref = parse_split(in.split);
    if (!ref) {
      args.push_back({in.name, {}});
      continue;
    }
    auto [it, fresh] = by_source.emplace(ref->source, args.size());
    if (fresh) {
      args.push_back({ref->source, std::vector<std::size_t>(static_cast<std::size_t>(ref->parts), profile.inputs.size())});
      part_count[ref->source] = ref->parts;
    } else if (part_count[ref->source] != ref->parts) {
      throw std::runtime_error("inputs[].split of '" + in.name + "' cuts " + ref->source + " into " + std::to_string(ref->parts) +
                               " parts, another input's into " + std::to_string(part_count[ref->source]) +
                               ": every part of one argument names the same count");
    }
    auto& slot = args[it->second].parts[static_cast<std::size_t>(ref->index)];
    if (slot != profile.inputs.size())
      throw std::runtime_error("inputs '" + profile.inputs[slot].name + "' and '" + in.name + "' are both " + split_text(*ref) +
                               ": each part of an argument is one input");
    slot = k;
  }
  for (const auto& arg : args) {
    for (std::size_t i = 0; i < arg.parts.size(); ++i)
      if (arg.parts[i] == profile.inputs.size())
        throw std::runtime_error("no input is " + arg.name + ".chunk(" + std::to_string(arg.parts.size()) + ", dim=-1)[" +
                                 std::to_string(i) + "]: the parts of a split argument are all inputs (a part the "
                                 "formula does not use is still passed, and its gradient is zero)");
    if (arg.parts.empty()) continue;
    for (const auto& in : profile.inputs)
      if (in.name == arg.name)
        throw std::runtime_error("inputs[].split names the argument '" + arg.name + "', which is also an input's name: "
                                 "rename the input or the argument");
    for (const auto* list : {&profile.learnable_parameters, &profile.module_parameters})
      for (const auto& p : *list)
        if (p.name == arg.name || p.name == "d" + arg.name)
          throw std::runtime_error("inputs[].split names the argument '" + arg.name + "', and a parameter is named '" + p.name +
                                   "': the generated code names the argument's gradient d" + arg.name + "; rename one");
    for (const auto& out : profile.outputs)
      if (out.name == arg.name || out.name == "d" + arg.name || "d" + out.name == arg.name)
        throw std::runtime_error("inputs[].split names the argument '" + arg.name + "', and the output is '" + out.name +
                                 "': the generated code names gradients d<name>; rename the output");
    for (const auto& in : profile.inputs)
      if (in.name == "d" + arg.name)
        throw std::runtime_error("inputs[].split names the argument '" + arg.name + "', and an input is named '" + in.name +
                                 "': the generated code names the argument's gradient d" + arg.name + "; rename the input");
  }
  return args;
}

}  // namespace liger::kernel_dev
