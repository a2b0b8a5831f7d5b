#include "workflows/kernel_dev/catalogue.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

namespace liger::kernel_dev {

namespace {

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  std::string word;
  while (in >> word) words.push_back(word);
  return words;
}

std::string join(const std::vector<std::string>& words, std::size_t begin, std::size_t end, const char* sep) {
  std::string out;
  for (std::size_t i = begin; i < end; ++i) {
    if (i > begin) out += sep;
    out += words[i];
  }
  return out;
}

std::string compact(const std::string& text) {
  std::string out;
  for (char c : normalise_description(text))
    if (c != ' ') out += c;
  return out;
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (std::size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size()))
    text.replace(pos, from.size(), to);
}

std::vector<std::string> string_list(const YAML::Node& node) {
  std::vector<std::string> out;
  if (node && node.IsSequence())
    for (const auto& item : node) out.push_back(item.as<std::string>());
  return out;
}

}  // namespace

std::string normalise_description(const std::string& input) {
  std::string text = input;
  replace_all(text, "\xC2\xB2", " squared ");  // ²
  replace_all(text, "\xCE\xB2", " beta ");     // β
  replace_all(text, "\xCE\xB3", " gamma ");    // γ
  replace_all(text, "\xCE\xB1", " alpha ");    // α
  replace_all(text, "**2", " squared ");
  replace_all(text, "^2", " squared ");
  std::string lowered;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      lowered += static_cast<char>(std::tolower(u));
    } else {
      lowered += ' ';
    }
  }
  static const std::set<std::string> filler = {
      "activation", "activations", "function", "functions", "kernel", "kernels", "op", "ops", "operator",
      "operation", "layer", "please", "implement", "write", "create", "make", "generate", "add", "build", "new",
      "cuda", "triton", "fused", "fast", "a", "an", "the", "for", "with", "in", "me", "i", "we", "want", "need",
      "element", "wise", "elementwise", "pointwise", "nonlinearity", "forward", "backward", "pass", "and", "of",
      "to", "that", "computes", "compute", "called", "module", "torch", "pytorch", "gpu"};
  std::vector<std::string> kept;
  for (const auto& word : split_words(lowered))
    if (!filler.count(word)) kept.push_back(word);
  return join(kept, 0, kept.size(), " ");
}

Program Activation::program() const {
  Program p;
  p.output = output;
  p.expression = expression;
  p.inputs = inputs;
  std::set<std::string> used = free_symbols(expression);
  for (const auto& h : hyperparameters)
    if (used.count(h.name)) p.params.push_back(ParamDecl{h.name, ParamShape::Scalar, h.default_value, false});
  for (const auto& l : learnable)
    if (used.count(l.name)) p.params.push_back(ParamDecl{l.name, l.shape, l.init, true});
  return p;
}

Catalogue Catalogue::load_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the activation catalogue " + path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse(buffer.str(), path.string());
}

Catalogue Catalogue::parse(const std::string& yaml_text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& error) {
    throw std::runtime_error(origin + ": " + error.what());
  }
  if (!root["activations"] || !root["activations"].IsSequence())
    throw std::runtime_error(origin + ": expected a list under 'activations'");
  Catalogue catalogue;
  catalogue.entries_.reserve(root["activations"].size());
  for (const auto& node : root["activations"]) {
    Activation a;
    try {
      a.name = node["name"].as<std::string>();
      a.display = node["display"] ? node["display"].as<std::string>() : a.name;
      a.expression_text = node["expression"].as<std::string>();
      a.torch = node["torch"] ? node["torch"].as<std::string>() : "";
      a.reference = node["reference"] ? node["reference"].as<std::string>() : "";
      a.gradient_note = node["gradient_note"] ? node["gradient_note"].as<std::string>() : "";
      a.aliases = string_list(node["aliases"]);
      a.phrases = string_list(node["phrases"]);
      if (node["hyperparameters"])
        for (const auto& h : node["hyperparameters"])
          a.hyperparameters.push_back({h["name"].as<std::string>(), h["default"].as<double>(),
                                       h["description"] ? h["description"].as<std::string>() : ""});
      if (node["learnable"])
        for (const auto& l : node["learnable"]) {
          LearnableParameter p;
          p.name = l["name"].as<std::string>();
          std::string shape = l["shape"] ? l["shape"].as<std::string>() : "scalar";
          if (shape != "scalar" && shape != "channel")
            throw std::runtime_error("learnable parameter '" + p.name + "': shape must be scalar or channel");
          p.shape = shape == "scalar" ? ParamShape::Scalar : ParamShape::Channel;
          p.init = l["init"] ? l["init"].as<double>() : 1.0;
          p.description = l["description"] ? l["description"].as<std::string>() : "";
          a.learnable.push_back(p);
        }
    } catch (const YAML::Exception& error) {
      throw std::runtime_error(origin + ": entry '" + a.name + "': " + error.what());
    }
    // Entries may call entries defined above them.
    Program program;
    try {
      program = parse_program(a.expression_text, catalogue.resolver());
    } catch (const ParseError& error) {
      throw std::runtime_error(origin + ": entry '" + a.name + "': expression: " + error.what());
    }
    std::set<std::string> parameter_names;
    for (const auto& h : a.hyperparameters) parameter_names.insert(h.name);
    for (const auto& l : a.learnable) parameter_names.insert(l.name);
    a.output = program.output;
    a.expression = program.expression;
    std::vector<std::string> names = program.inputs;
    for (const auto& p : program.params) names.push_back(p.name);
    // Inputs: free names that are not parameters, in order of appearance in the program.
    for (const auto& n : program.inputs)
      if (!parameter_names.count(n)) a.inputs.push_back(n);
    for (const auto& p : program.params)
      if (!parameter_names.count(p.name)) a.inputs.push_back(p.name);
    if (a.inputs.empty()) throw std::runtime_error(origin + ": entry '" + a.name + "' has no input");
    catalogue.entries_.push_back(std::move(a));
  }
  // Entry names (not aliases or phrases, which carry descriptive words such as "linear unit"),
  // primitive functions and the listed English operation words.
  for (const auto& e : catalogue.entries_)
    for (const auto& w : split_words(normalise_description(e.name))) catalogue.operation_words_.insert(w);
  for (const auto& f : primitive_functions())
    for (const auto& w : split_words(normalise_description(f.name))) catalogue.operation_words_.insert(w);
  for (const auto& w : string_list(root["operation_words"]))
    for (const auto& part : split_words(normalise_description(w))) catalogue.operation_words_.insert(part);
  for (const auto& w : string_list(root["parameter_words"]))
    for (const auto& part : split_words(normalise_description(w))) catalogue.parameter_words_.insert(part);
  return catalogue;
}

const Activation* Catalogue::find(const std::string& name) const {
  std::string key = compact(name);
  for (const auto& a : entries_) {
    if (compact(a.name) == key) return &a;
  }
  for (const auto& a : entries_)
    for (const auto& alias : a.aliases)
      if (compact(alias) == key) return &a;
  return nullptr;
}

Resolution Catalogue::resolve(const std::string& text) const {
  Resolution r;
  r.normalised = normalise_description(text);
  std::vector<std::string> words = split_words(r.normalised);
  if (words.empty()) {
    r.undecided = "the description is empty once filler words are removed ('" + text + "')";
    return r;
  }
  std::string whole = join(words, 0, words.size(), "");
  struct Match {
    const Activation* activation;
    std::string key;
    std::size_t score;
    std::size_t begin = 0, end = 0;  // the words the key covers
  };
  std::vector<Match> matches;
  for (const auto& a : entries_) {
    std::vector<std::string> keys = {a.name, a.display};
    keys.insert(keys.end(), a.aliases.begin(), a.aliases.end());
    keys.insert(keys.end(), a.phrases.begin(), a.phrases.end());
    std::size_t best = 0, best_begin = 0, best_end = 0;
    std::string best_key;
    for (const auto& key : keys) {
      std::string k = compact(key);
      if (k.empty()) continue;
      std::size_t score = 0, begin = 0, end = words.size();
      if (k == whole) {
        score = 100000 + k.size();
      } else {
        for (std::size_t i = 0; i < words.size() && score == 0; ++i)
          for (std::size_t j = i + 1; j <= words.size(); ++j)
            if (join(words, i, j, "") == k) {
              score = k.size();
              begin = i;
              end = j;
              break;
            }
      }
      if (score > best) {
        best = score;
        best_key = key;
        best_begin = begin;
        best_end = end;
      }
    }
    if (best > 0) matches.push_back({&a, best_key, best, best_begin, best_end});
  }
  if (matches.empty()) {
    r.undecided = "no catalogue activation matches '" + r.normalised +
                  "' (after normalising the description); known activations: ";
    for (std::size_t i = 0; i < entries_.size(); ++i) r.undecided += (i ? ", " : "") + entries_[i].name;
    return r;
  }
  std::sort(matches.begin(), matches.end(), [](const Match& x, const Match& y) { return x.score > y.score; });
  for (const auto& m : matches) r.candidates.push_back(m.activation->name);
  if (matches.size() > 1 && matches[0].score == matches[1].score) {
    r.undecided = "the description '" + r.normalised + "' matches more than one activation equally well: " +
                  matches[0].activation->name + " ('" + matches[0].key + "') and " + matches[1].activation->name +
                  " ('" + matches[1].key + "')";
    return r;
  }
  // Words outside the match: parameter words ("leaky relu with slope 0.2") and words the tool
  // does not know are fine; a word naming another operation means the entry computes less than
  // was asked, and the match is refused (never a complete-looking profile of the wrong function).
  const Activation& a = *matches[0].activation;
  std::set<std::string> own;
  auto take = [&](const std::string& text) {
    for (const auto& w : split_words(normalise_description(text))) own.insert(w);
  };
  take(a.name);
  take(a.display);
  for (const auto& t : a.aliases) take(t);
  for (const auto& t : a.phrases) take(t);
  for (const auto& h : a.hyperparameters) take(h.name);
  for (const auto& l : a.learnable) take(l.name);
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i >= matches[0].begin && i < matches[0].end) continue;
    const std::string& w = words[i];
    const std::string singular = w.size() > 3 && w.back() == 's' ? w.substr(0, w.size() - 1) : w;
    if (own.count(w) || own.count(singular)) continue;
    if (operation_words_.count(w) || operation_words_.count(singular)) {
      r.unexplained.push_back(w);
    } else if (parameter_words_.count(w) && a.hyperparameters.empty() && a.learnable.empty()) {
      r.unexplained.push_back(w);  // "parametric ReLU with a learnable slope" is not relu
    }
  }
  // "derivative of mish" (normalised "derivative mish") asks for another function than the entry:
  // the word right before the match, where "mish and its derivative" puts it after (a kernel has
  // its backward anyway). The composition rule (embedded_formula.h) differentiates what it can
  // build; what reaches here it could not.
  static const std::set<std::string> derivative_words = {"derivative", "derivatives", "gradient", "gradients",
                                                         "differential"};
  if (matches[0].begin > 0 && derivative_words.count(words[matches[0].begin - 1]) &&
      std::find(r.unexplained.begin(), r.unexplained.end(), words[matches[0].begin - 1]) == r.unexplained.end())
    r.unexplained.push_back(words[matches[0].begin - 1]);
  // An entry that is arithmetic only (square: x^2) is also how a description says what to do to
  // another function ("squared hinge", "cubed foo"): beside a content word the tool does not know,
  // it would drop that word's function and return x^2, so the word is unexplained.
  std::function<bool(const Expr&)> has_call = [&](const Expr& e) {
    if (!e) return false;
    if (e->kind == Kind::Call) return true;
    return std::any_of(e->args.begin(), e->args.end(), has_call);
  };
  if (r.unexplained.empty() && a.hyperparameters.empty() && a.learnable.empty() && !has_call(a.expression)) {
    static const std::set<std::string> incidental = {
        "for", "in", "on", "to", "my", "our", "a", "an", "each", "every", "element", "elementwise", "pointwise",
        "input", "inputs", "tensor", "tensors", "x", "value", "values", "fast", "simple", "custom", "new", "gpu",
        "triton", "model", "training", "transformer", "transformers", "llm", "forward", "backward", "pass", "and",
        "with", "using", "version", "variant", "wise", "entrywise", "per"};
    for (std::size_t i = 0; i < words.size(); ++i) {
      if (i >= matches[0].begin && i < matches[0].end) continue;
      const std::string& w = words[i];
      const bool number = !w.empty() && (std::isdigit(static_cast<unsigned char>(w[0])) || w[0] == '.');
      if (own.count(w) || incidental.count(w) || number || parameter_words_.count(w)) continue;
      r.unexplained.push_back(w);
    }
  }
  std::string ambiguous_gate;
  if (!r.unexplained.empty())
    if (auto gated = compose_gated(words, &ambiguous_gate)) {
      r.unexplained.clear();
      r.composed = gated;
      r.activation = gated.get();
      r.matched = gated->display;
      return r;
    }
  if (!r.unexplained.empty() && !ambiguous_gate.empty()) {
    r.undecided = ambiguous_gate;
    return r;
  }
  if (!r.unexplained.empty()) {
    std::string listed;
    for (const auto& w : r.unexplained) listed += (listed.empty() ? "'" : ", '") + w + "'";
    r.undecided = "the description names more than catalogue entry '" + a.name + "' (matched '" + matches[0].key +
                  "') computes: " + listed + (r.unexplained.size() == 1 ? " is" : " are") +
                  " not part of it; write the formula as an expression (e.g. \"y = relu(a)^2 * b\") or as PyTorch "
                  "code, or describe only the catalogue entry";
    return r;
  }
  r.matched = matches[0].key;
  std::string why_not;
  if (auto learned = with_learnable(words, a, why_not)) {
    r.composed = learned;
    r.activation = learned.get();
    return r;
  }
  if (!why_not.empty()) {
    r.undecided = why_not;
    return r;
  }
  r.activation = &a;
  return r;
}

std::shared_ptr<const Activation> Catalogue::with_learnable(const std::vector<std::string>& words, const Activation& a,
                                                             std::string& why_not) const {
  // "Swish with learnable beta", "leaky ReLU with a trainable slope per channel": the entry's fixed
  // hyperparameter becomes a learnable parameter, so a request for a trained value never silently
  // gets a constant. An entry whose parameters are learnable already (DyT, PReLU) is itself the answer.
  static const std::set<std::string> learn_markers = {"learnable", "trainable", "learned", "learnt", "trained"};
  static const std::set<std::string> channel_markers = {"channel", "channels", "channelwise", "column", "columns",
                                                        "feature", "features", "elementwise"};
  if (a.hyperparameters.empty() ||
      std::none_of(words.begin(), words.end(), [](const std::string& w) { return learn_markers.count(w) > 0; }))
    return nullptr;
  const std::set<std::string> said(words.begin(), words.end());
  std::vector<const HyperParameter*> named;
  for (const auto& h : a.hyperparameters) {
    bool hit = said.count(compact(h.name)) > 0;
    for (const auto& part : split_words(normalise_description(h.name))) hit = hit || (part.size() > 2 && said.count(part));
    if (hit) named.push_back(&h);
  }
  if (named.empty() && a.hyperparameters.size() == 1) named.push_back(&a.hyperparameters[0]);
  if (named.empty()) {
    std::string listed;
    for (const auto& h : a.hyperparameters) listed += (listed.empty() ? "" : ", ") + h.name;
    why_not = "the description asks for a learnable parameter of '" + a.name + "' but does not say which of its " +
              "parameters (" + listed + ") should be learned; name it (e.g. \"" + a.name + " with learnable " +
              a.hyperparameters[0].name + "\")";
    return nullptr;
  }
  const bool per_channel =
      std::any_of(words.begin(), words.end(), [](const std::string& w) { return channel_markers.count(w) > 0; });
  auto learned = std::make_shared<Activation>(a);
  learned->hyperparameters.clear();
  std::string suffix, listed;
  for (const auto& h : a.hyperparameters) {
    if (std::find(named.begin(), named.end(), &h) == named.end()) {
      learned->hyperparameters.push_back(h);
      continue;
    }
    LearnableParameter p;
    p.name = h.name;
    p.shape = per_channel ? ParamShape::Channel : ParamShape::Scalar;
    p.init = h.default_value;
    p.description = std::string(per_channel ? "one per column" : "scalar") + ", learned (" +
                    (h.description.empty() ? "the entry's fixed " + h.name : h.description) + "; initialised to " +
                    "its default)";
    learned->learnable.push_back(p);
    suffix += "_" + h.name;
    listed += (listed.empty() ? "" : ", ") + h.name;
  }
  learned->name = a.name + "_learnable" + (learned->hyperparameters.empty() && named.size() == 1 ? "" : suffix);
  learned->display = a.display + " (learnable " + listed + (per_channel ? " per channel" : "") + ")";
  // The entry's PyTorch baseline passes the parameter as a Python number (F.leaky_relu(x, negative_slope)):
  // Verify compares with the expression instead, which takes it as a tensor.
  learned->torch.clear();
  learned->aliases.clear();
  learned->phrases = {join(words, 0, words.size(), " ")};
  return learned;
}

std::shared_ptr<const Activation> Catalogue::compose_gated(const std::vector<std::string>& words,
                                                            std::string* ambiguous) const {
  // "<activation> gated linear unit", "gated <activation>", "<activation> GLU": the activation of
  // the gate input times the other input, c = act(a) * b. Only for a plain one-input activation
  // (parameters would need their own names in the gated form).
  static const std::set<std::string> gate_markers = {"gated", "gate", "glu"};
  // With the connectives that name the gate's activation ("a gated linear unit with GELU").
  static const std::set<std::string> gate_words = {"gated", "gate", "glu", "linear", "unit", "units", "with",
                                                   "using", "by", "a", "an", "the", "of"};
  if (std::none_of(words.begin(), words.end(), [](const std::string& w) { return gate_markers.count(w) > 0; }))
    return nullptr;
  std::vector<std::string> rest;
  for (const auto& w : words)
    if (!gate_words.count(w)) rest.push_back(w);
  if (rest.empty()) return nullptr;
  const Resolution inner = resolve(join(rest, 0, rest.size(), " "));
  // The gate's activation is a tie ("gated linear unit with GELU": erf or tanh?): say so, as for
  // the activation alone, instead of calling its name a word the entry does not compute.
  if (!inner.ok() && inner.candidates.size() > 1 && inner.unexplained.empty() && ambiguous) *ambiguous = "the gate's activation: " + inner.undecided;
  if (!inner.ok() || inner.composed || inner.activation->inputs.size() != 1 || !inner.activation->learnable.empty())
    return nullptr;
  const Activation& act = *inner.activation;
  auto gated = std::make_shared<Activation>();
  gated->expression_text = "c = " + act.name + "(a) * b";
  if (act.hyperparameters.empty()) {
    try {
      const Program program = parse_program(gated->expression_text, resolver());
      gated->output = program.output;
      gated->expression = program.expression;
    } catch (const ParseError&) {
      return nullptr;
    }
  } else {
    // The activation's fixed hyperparameters stay parameters of the gated form ("softplus gated
    // linear unit with beta 2"): its own expression with the gate input, so their names (and the
    // description's values for them) carry over; a call by name could meet a primitive of the same
    // name (softplus) that has no such parameters.
    gated->hyperparameters = act.hyperparameters;
    gated->output = "c";
    gated->expression = mul(substitute(act.expression, {{act.inputs.front(), sym("a")}}), sym("b"));
    gated->expression_text = "c = " + to_string(gated->expression);
  }
  // An entry that already is this gated form keeps its name, display and baseline (geglu_erf).
  for (const auto& e : entries_)
    if (e.inputs == std::vector<std::string>{"a", "b"} && e.hyperparameters.size() == gated->hyperparameters.size() &&
        e.learnable.empty() && equal(e.expression, gated->expression))
      return std::shared_ptr<const Activation>(std::shared_ptr<const Activation>{}, &e);
  gated->name = act.name + "_glu";
  gated->display = act.display + " GLU";
  gated->inputs = {"a", "b"};
  if (!act.torch.empty())
    gated->torch = "(" + std::regex_replace(act.torch, std::regex("\\bx\\b"), "a") + ") * b";
  gated->gradient_note = act.gradient_note;
  gated->phrases = {join(words, 0, words.size(), " ")};
  return gated;
}

FunctionResolver Catalogue::resolver() const {
  return [this](const std::string& name, const std::vector<CallArgument>& args) -> std::optional<Expr> {
    const Activation* a = find(name);
    if (!a) return std::nullopt;
    std::map<std::string, Expr> bindings;
    std::size_t positional = 0;
    std::vector<std::string> order = a->inputs;
    for (const auto& h : a->hyperparameters) order.push_back(h.name);
    for (const auto& arg : args) {
      std::string target;
      if (!arg.keyword.empty()) {
        if (std::find(order.begin(), order.end(), arg.keyword) == order.end())
          throw std::invalid_argument(name + "() has no parameter '" + arg.keyword + "'");
        target = arg.keyword;
      } else {
        if (positional >= order.size())
          throw std::invalid_argument(name + "() takes at most " + std::to_string(order.size()) + " argument(s)");
        target = order[positional++];
      }
      bindings[target] = arg.value;
    }
    for (const auto& input : a->inputs)
      if (!bindings.count(input))
        throw std::invalid_argument(name + "() is missing input '" + input + "'");
    for (const auto& h : a->hyperparameters)
      if (!bindings.count(h.name)) bindings[h.name] = num(h.default_value);
    return substitute(a->expression, bindings);
  };
}

}  // namespace liger::kernel_dev
