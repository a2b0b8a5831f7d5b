#include "workflows/kernel_dev/profile.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "workflows/kernel_dev/embedded_formula.h"
#include "workflows/kernel_dev/generated_names.h"
#include "workflows/kernel_dev/row_program.h"
#include "workflows/kernel_dev/pytorch.h"
#include "workflows/kernel_dev/segment.h"
#include "workflows/kernel_dev/tier3.h"
#include "workflows/kernel_dev/tier2_derive.h"

namespace liger::kernel_dev {

// ============================================================================================
// Names

std::string camel_case(const std::string& snake) {
  std::string out;
  bool upper = true;
  for (char c : snake) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

namespace {

std::string snake_case(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isupper(c) && i > 0 && std::islower(static_cast<unsigned char>(text[i - 1]))) out += '_';
    if (std::isalnum(c)) out += static_cast<char>(std::tolower(c));
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "op_" + out;
  return out;
}

std::string fnv_hex(const std::string& text) {
  uint32_t h = 2166136261u;
  for (unsigned char c : text) {
    h ^= c;
    h *= 16777619u;
  }
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%08x", h);
  return buffer;
}

void set_identity(KernelProfile& p, const std::string& op, const std::string& display) {
  p.op_name = op;
  p.display_name = display.empty() ? op : display;
  p.c_prefix = "liger_" + op;
  p.cpp_namespace = "liger::kernels::" + op;
  p.python_functional = op;
  p.python_module = "Liger" + camel_case(op);
  p.python_function = "Liger" + camel_case(op) + "Function";
}

}  // namespace

// Same function (same inputs in order, same values at random points, parameters at their
// defaults)? Used to recognise "y = x * sigmoid(x)" as the catalogue's silu.
namespace {

// `e` with every detach(v) replaced by v: the same values (memoised: the IR shares subtrees).
Expr substitute_detach(const Expr& e, std::map<const Node*, Expr>& done) {
  if (e->args.empty()) return e;
  if (auto it = done.find(e.get()); it != done.end()) return it->second;
  std::vector<Expr> args;
  for (const auto& a : e->args) args.push_back(substitute_detach(a, done));
  Expr out;
  switch (e->kind) {
    case Kind::Add: out = add(args[0], args[1]); break;
    case Kind::Sub: out = sub(args[0], args[1]); break;
    case Kind::Mul: out = mul(args[0], args[1]); break;
    case Kind::Div: out = div(args[0], args[1]); break;
    case Kind::Pow: out = pow(args[0], args[1]); break;
    case Kind::Neg: out = neg(args[0]); break;
    case Kind::Compare: out = compare(e->name, args[0], args[1]); break;
    case Kind::Call: out = e->name == "detach" ? args[0] : call(e->name, args); break;
    default: out = e;
  }
  done.emplace(e.get(), out);
  return out;
}
Expr substitute_detach(const Expr& e) {
  std::map<const Node*, Expr> done;
  return substitute_detach(e, done);
}

}  // namespace

bool same_function(const Program& a, const Program& b) {
  if (a.inputs.size() != b.inputs.size() || a.params.size() != b.params.size()) return false;
  // detach() keeps values and changes gradients: equal values then say nothing about the
  // backward, so the derivatives must agree too (x * sigmoid(x).detach() is not silu).
  if (contains_function(a.expression, "detach") || contains_function(b.expression, "detach")) {
    for (std::size_t k = 0; k < a.inputs.size(); ++k) {
      Program da = a, db = b;
      da.expression = derivative(a.expression, a.inputs[k]);
      db.expression = derivative(b.expression, b.inputs[k]);
      // A derivative may hold detach() in turn (of a product's other factor): as values it is the
      // same, and comparing values is what is left to do (no further recursion).
      da.expression = substitute_detach(da.expression);
      db.expression = substitute_detach(db.expression);
      if (!same_function(da, db)) return false;
    }
  }
  for (const auto& p : a.params) {
    auto it = std::find_if(b.params.begin(), b.params.end(), [&](const ParamDecl& q) { return q.name == p.name; });
    if (it == b.params.end() || it->learnable != p.learnable || it->shape != p.shape) return false;
  }
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> dist(-8.0, 8.0);
  for (int i = 0; i < 48; ++i) {
    Environment ea, eb;
    // Parameters at their defaults for half the points, perturbed (the same in both) for the
    // other half, so elu and celu (equal at alpha = 1) are told apart.
    for (const auto& p : a.params) {
      double v = i % 2 ? p.init : p.init + 0.37 + 0.01 * i;
      ea[p.name] = v;
      eb[p.name] = v;
    }
    for (std::size_t k = 0; k < a.inputs.size(); ++k) {
      double v = dist(rng);
      ea[a.inputs[k]] = v;
      eb[b.inputs[k]] = v;
    }
    double va, vb;
    try {
      va = eval_f64(a.expression, ea);
      vb = eval_f64(b.expression, eb);
    } catch (const std::exception&) {
      return false;
    }
    if (std::isnan(va) != std::isnan(vb)) return false;
    if (!std::isnan(va) && std::fabs(va - vb) > 1e-9 * (1 + std::fabs(va))) return false;
  }
  return true;
}

namespace {

// `text` (Python) with each free name in `renamed` replaced at once (a -> b and b -> a swap):
// attribute names (after '.'), keyword arguments (before '=') and string contents stay.
std::string rename_identifiers(const std::string& text, const std::map<std::string, std::string>& renamed) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '"' || c == '\'') {
      const std::size_t close = text.find(c, i + 1);
      const std::size_t end = close == std::string::npos ? text.size() : close + 1;
      out += text.substr(i, end - i);
      i = end;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      const std::string name = text.substr(i, j - i);
      std::size_t after = j;
      while (after < text.size() && text[after] == ' ') ++after;
      const bool attribute = i > 0 && text[i - 1] == '.';
      const bool keyword = after < text.size() && text[after] == '=' && (after + 1 >= text.size() || text[after + 1] != '=');
      const auto it = renamed.find(name);
      out += (it != renamed.end() && !attribute && !keyword) ? it->second : name;
      i = j;
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

const Activation* catalogue_match(const Program& program, const Catalogue& catalogue) {
  for (const auto& entry : catalogue.entries())
    if (same_function(program, entry.program())) return &entry;
  return nullptr;
}

// Lower case, every run of non-alphanumerics one space; no words dropped ("linear layer" must not
// shrink to "linear", which every "gated linear unit" contains).
std::string keyword_text(const std::string& text) {
  std::string out(1, ' ');
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      out += static_cast<char>(std::tolower(u));
    } else if (out.back() != ' ') {
      out += ' ';
    }
  }
  if (out.back() != ' ') out += ' ';
  return out;
}

// The numbers in a description outside `taken` (start, length) spans. A number glued to a word is
// part of a name ("relu6", "l2", "swish-1", "2x"), not a value.
std::vector<std::string> unbound_numbers(const std::string& text, const std::vector<std::pair<std::size_t, std::size_t>>& taken) {
  std::vector<std::string> out;
  const auto alpha = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  for (std::size_t i = 0; i < text.size();) {
    if (!digit(text[i]) && !(text[i] == '.' && i + 1 < text.size() && digit(text[i + 1]))) {
      ++i;
      continue;
    }
    std::size_t start = i, end = i;
    while (end < text.size() && (digit(text[end]) || text[end] == '.')) ++end;
    if (end + 1 < text.size() && text[end] == 'e' && (digit(text[end + 1]) || text[end + 1] == '-')) {
      ++end;
      if (text[end] == '-') ++end;
      while (end < text.size() && digit(text[end])) ++end;
    }
    i = end;
    const char before = start > 0 ? text[start - 1] : ' ';
    const bool signed_value = (before == '-' || before == '+') && !(start > 1 && alpha(text[start - 2]));
    if (signed_value) --start;
    const bool glued = alpha(before) || (before == '-' && start > 0 && !signed_value) || before == '^' ||
                       before == '*' || (end < text.size() && alpha(text[end]) && text[end] != 'e');
    if (glued) continue;
    bool is_taken = false;
    for (const auto& [at, length] : taken)
      if (start < at + length && at < end) is_taken = true;
    if (!is_taken) out.push_back(text.substr(start, end - start));
  }
  return out;
}

bool contains_words(const std::string& text, const std::string& phrase) {
  return keyword_text(text).find(keyword_text(phrase)) != std::string::npos;
}

std::vector<std::string> words_beyond_request(const std::string& text, const TierRequest& req, const TierKnowledge& tiers);

const TierRequest* match_request(const std::string& text, const TierKnowledge& tiers) {
  // Of the requests a keyword names, the one that leaves the fewest of the description's words
  // unexplained ("z-loss, the squared logsumexp of each row" is z_loss, though it names logsumexp
  // too), then the longest keyword; generic ones ("reduction", "matmul") only when nothing
  // specific matches.
  for (bool generic : {false, true}) {
    const TierRequest* best = nullptr;
    std::size_t best_beyond = 0, best_length = 0;
    for (const auto& r : tiers.requests) {
      if (r.generic != generic) continue;
      std::size_t length = 0;
      for (const auto& k : r.keywords)
        if (contains_words(text, k)) length = std::max(length, k.size());
      if (length == 0) continue;
      const std::size_t beyond = words_beyond_request(text, r, tiers).size();
      if (!best || beyond < best_beyond || (beyond == best_beyond && length > best_length)) {
        best = &r;
        best_beyond = beyond;
        best_length = length;
      }
    }
    if (best) return best;
  }
  return nullptr;
}

// The input modifiers a description names, each with its number, in the order written; their
// phrases and numbers are blanked out of `text` so they do not count as words beyond the request.
struct AppliedModifier {
  const InputModifier* modifier;
  std::string value;
  std::size_t at;
};

// The numeric keyword parameters of a request's PyTorch form ("def huber_loss(a, b, delta=1.0)")
// that no tiers.yaml modifier sets: the description names them as they are ("huber loss with
// delta 2"), so each is a modifier setting itself.
std::vector<InputModifier> keyword_modifiers(const std::string& form, const TierKnowledge& tiers) {
  std::vector<InputModifier> out;
  std::smatch signature;
  if (!std::regex_search(form, signature, std::regex(R"(def\s+\w+\s*\(([^)]*)\))"))) return out;
  const std::string arguments = signature[1].str();
  static const std::regex keyword(R"(\b([A-Za-z_]\w*)\s*=\s*-?[0-9.]+(?:e[-+]?[0-9]+)?)");
  for (auto it = std::sregex_iterator(arguments.begin(), arguments.end(), keyword); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1].str();
    const bool covered = std::any_of(tiers.input_modifiers.begin(), tiers.input_modifiers.end(),
                                     [&](const InputModifier& m) { return m.parameter == name; });
    if (!covered) out.push_back(InputModifier{name, {name}, "", name});
  }
  return out;
}

std::vector<AppliedModifier> take_input_modifiers(std::string& text, const TierKnowledge& tiers,
                                                  const std::vector<InputModifier>& form_keywords) {
  std::vector<AppliedModifier> found;
  std::vector<const InputModifier*> all;
  for (const auto& m : tiers.input_modifiers) all.push_back(&m);
  for (const auto& m : form_keywords) all.push_back(&m);
  for (const InputModifier* mp : all) {
    const InputModifier& m = *mp;
    std::vector<std::string> phrases = m.phrases;
    std::sort(phrases.begin(), phrases.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    for (const auto& phrase : phrases) {
      const std::string words = std::regex_replace(phrase, std::regex("[ _-]+"), "[ _-]*");
      const std::regex pattern("\\b" + words + "\\s*(?:=|:|of|is|at|to)?\\s*([0-9]+\\.?[0-9]*(?:e[-+]?[0-9]+)?|\\.[0-9]+)\\b",
                               std::regex::icase);
      std::smatch match;
      if (!std::regex_search(text, match, pattern)) continue;
      found.push_back({&m, match[1].str(), static_cast<std::size_t>(match.position(0))});
      text.replace(static_cast<std::size_t>(match.position(0)), static_cast<std::size_t>(match.length(0)),
                   std::string(static_cast<std::size_t>(match.length(0)), ' '));
      break;
    }
  }
  std::sort(found.begin(), found.end(), [](const AppliedModifier& a, const AppliedModifier& b) { return a.at < b.at; });
  return found;
}

// The modifier's rewrite of `arg` (the input, or the output's expression): "{x} / {value}" with
// temperature 2 is "x / 2".
std::string rewritten_input(const AppliedModifier& a, const std::string& arg) {
  const std::string with_arg = std::regex_replace(a.modifier->rewrite, std::regex(R"(\{[xy]\})"), arg);
  return std::regex_replace(with_arg, std::regex(R"(\{value\})"), a.value);
}

// What the description's modifier does, for the profile: "the input becomes x / 2".
std::string modifier_effect(const AppliedModifier& a) {
  if (!a.modifier->parameter.empty()) return a.modifier->parameter + " = " + a.value;
  return a.modifier->on_output() ? "the output becomes " + rewritten_input(a, "y")
                                 : "the input becomes " + rewritten_input(a, "x");
}

// Sets the default of the keyword parameter `a` names in `keywords` (a signature or its keyword
// part) to `a`'s value; false (and `missing` set) when there is no such keyword.
bool set_keyword_default(std::string& keywords, const AppliedModifier& a, std::string* missing) {
  const std::regex keyword("(,\\s*" + a.modifier->parameter + "\\s*=\\s*)([^,()]+)");
  std::smatch at;
  if (!std::regex_search(keywords, at, keyword)) {
    if (missing) *missing = a.modifier->parameter;
    return false;
  }
  // Spliced, not regex_replace'd: "$1" followed by the value's digits would read as group 11.
  keywords.replace(static_cast<std::size_t>(at.position(2)), static_cast<std::size_t>(at.length(2)), a.value);
  return true;
}

// The request's one-line PyTorch form rewritten by each modifier, in order: the input ones
// assign the argument, the output ones wrap the returned expression, the parameter ones set a
// keyword parameter's default. "def softmax(x): return torch.softmax(x, dim=-1)" with temperature
// 2 becomes "def softmax(x):\n    x = x / 2\n    return torch.softmax(x, dim=-1)". Empty when the
// form is not one `def name(arg, [other, ...] [kw=default, ...]): return ...` line. An input
// modifier rewrites every positional argument but a `weight` or `bias` (the forms' convention for
// their learnable parameters): "KL divergence with temperature 2" divides both rows of logits.
// `missing` names a parameter a modifier sets that the form does not have.
std::string apply_input_modifiers(const std::string& form, const std::vector<AppliedModifier>& modifiers,
                                  std::string* missing = nullptr) {
  // Only keyword parameters to set: any form, one line or many (the signature's defaults change).
  if (!modifiers.empty() && std::all_of(modifiers.begin(), modifiers.end(),
                                        [](const AppliedModifier& a) { return !a.modifier->parameter.empty(); })) {
    const std::size_t open = form.find('('), close = form.find(')');
    if (form.compare(0, 4, "def ") != 0 || open == std::string::npos || close == std::string::npos || close < open) return "";
    std::string signature = form.substr(0, close);
    for (const auto& a : modifiers)
      if (!set_keyword_default(signature, a, missing)) return "";
    return signature + form.substr(close);
  }
  std::smatch m;
  if (!std::regex_match(form, m,
                        std::regex(R"(\s*def\s+(\w+)\s*\(\s*(\w+)((?:\s*,\s*\w+\b(?!\s*=))*)((?:\s*,\s*\w+\s*=\s*[^,()]+)*)\s*\)\s*:\s*return\s+(.+?)\s*)")))
    return "";
  const std::string arg = m[2].str();
  const std::string others = m[3].str();
  std::string keywords = m[4].str(), returned = m[5].str();
  std::vector<std::string> row_inputs = {arg};
  const std::regex name(R"(\w+)");
  for (auto it = std::sregex_iterator(others.begin(), others.end(), name); it != std::sregex_iterator(); ++it)
    if (it->str() != "weight" && it->str() != "bias") row_inputs.push_back(it->str());
  std::string body;
  for (const auto& a : modifiers) {
    if (!a.modifier->parameter.empty()) {
      if (!set_keyword_default(keywords, a, missing)) return "";
    } else if (a.modifier->on_output()) {
      returned = rewritten_input(a, returned);
    } else {
      for (const auto& input : row_inputs) body += "    " + input + " = " + rewritten_input(a, input) + "\n";
    }
  }
  return "def " + m[1].str() + "(" + arg + others + keywords + "):\n" + body + "    return " + returned + "\n";
}

// What a description says beyond a Tier-2 request: its words (and numbers) outside the
// request's keywords, the request's required phrases and the filler words. "row-wise softmax
// over the last dimension" says nothing more than softmax; "softmax with temperature 2" says
// "temperature" and "2", which the request's PyTorch form does not have.
std::vector<std::string> words_beyond_request(const std::string& text, const TierRequest& req, const TierKnowledge& tiers) {
  // "dim=-1" / "axis -1" is the last dimension the PyTorch forms reduce over (keyword_text
  // would leave "dim 1", which could as well be dim=1).
  std::string described = std::regex_replace(text, std::regex(R"(\b(dim|axis)\s*=?\s*-\s*1\b)", std::regex::icase), " ");
  std::string words = keyword_text(described);
  auto erase_phrase = [&](const std::string& phrase) {
    const std::string key = keyword_text(phrase);
    for (std::size_t at = words.find(key); at != std::string::npos; at = words.find(key)) words.replace(at, key.size(), " ");
  };
  std::vector<std::string> phrases = req.keywords;
  phrases.insert(phrases.end(), req.requires_any.begin(), req.requires_any.end());
  std::sort(phrases.begin(), phrases.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const auto& phrase : phrases) erase_phrase(phrase);
  std::vector<std::string> beyond;
  std::istringstream in(words);
  const std::set<std::string> restating(req.restating_words.begin(), req.restating_words.end());
  for (std::string word; in >> word;)
    if (!tiers.filler_words.count(word) && !restating.count(word)) beyond.push_back(word);
  return beyond;
}

void mark_undecided_formulas(KernelProfile& p, const std::string& reason) {
  for (const char* field : {"forward", "precision", "saved_for_backward", "gradients", "backward", "tiling", "benchmark",
                            "tolerances"})
    p.undecided[field] = reason;
}

void fill_non_tier1(KernelProfile& p, int tier, const std::string& closest, const std::string& why,
                    const TierKnowledge& tiers) {
  p.tier = tier;
  auto name = tiers.tier_names.find(tier);
  p.tier_reason = "Tier " + std::to_string(tier) + " (" + (name != tiers.tier_names.end() ? name->second : "?") + "): " + why;
  p.closest_kernel = closest;
  if (closest.empty()) p.undecided["closest_kernel"] = "no library kernel of this tier is close enough to follow";
  p.inputs = {{"x", "[rows, cols]", "fp32 | fp16 | bf16", "input"}};
  p.outputs = {{"y", "[rows, cols]", "same as x", "output (shape depends on the op)"}};
  mark_undecided_formulas(p, tier == 2 ? "the built-in analyser derives a Tier-2 op's formulas from an expression or "
                                          "PyTorch code with reductions over the last dimension only; this one needs them "
                                          "from an LLM provider (--llm) or a human at the checkpoint"
                                        : "the built-in analyser derives Tier-1 and Tier-2 (row reduction) ops only; a "
                                          "Tier-" + std::to_string(tier) +
                                              " op needs its formulas from an LLM provider (--llm) or a human at the "
                                              "checkpoint");
  p.undecided["inputs"] = "the built-in analyser does not know this op's tensors";
  p.undecided["outputs"] = "the built-in analyser does not know this op's tensors";
  p.undecided["learnable_parameters"] = "the built-in analyser does not know this op's parameters";
  if (tier == 2)
    p.undecided["row_program"] =
        "the built-in analyser derives a Tier-2 row program from an expression or PyTorch code (e.g. \"y = x - "
        "logsumexp(x)\" or \"def f(x): return torch.softmax(x, dim=-1)\"), not from a description: write the op "
        "that way, or use an LLM provider (--llm openai|anthropic) or fill it in at the checkpoint";
  auto tiling = tiers.tier_tiling.find(tier);
  if (tiling != tiers.tier_tiling.end()) p.notes.push_back("tiling hint for this tier: " + tiling->second);
}

}  // namespace

// ============================================================================================
// Knowledge

TierKnowledge TierKnowledge::load_file(const std::filesystem::path& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path.string());
  } catch (const YAML::Exception& error) {
    throw std::runtime_error(path.string() + ": " + error.what());
  }
  TierKnowledge k;
  for (const auto& t : root["tiers"]) {
    int tier = t["tier"].as<int>();
    k.tier_names[tier] = t["name"].as<std::string>();
    k.tier_tiling[tier] = t["tiling"] ? t["tiling"].as<std::string>() : "";
  }
  for (const auto& r : root["requests"]) {
    TierRequest req;
    req.name = r["name"].as<std::string>();
    req.tier = r["tier"].as<int>();
    req.closest = r["closest"] ? r["closest"].as<std::string>() : "";
    for (const auto& kw : r["keywords"]) req.keywords.push_back(kw.as<std::string>());
    req.reason = r["reason"] ? r["reason"].as<std::string>() : "";
    req.generic = r["generic"] && r["generic"].as<bool>();
    req.pytorch = r["pytorch"] ? r["pytorch"].as<std::string>() : "";
    for (const auto& phrase : r["requires_any"]) req.requires_any.push_back(phrase.as<std::string>());
    for (const auto& word : r["restating_words"]) req.restating_words.push_back(word.as<std::string>());
    req.requires_reason = r["requires_reason"] ? r["requires_reason"].as<std::string>() : "";
    if (!req.pytorch.empty() && req.tier != 2)
      throw std::runtime_error(path.string() + ": request '" + req.name + "' has a pytorch form but is not Tier 2");
    k.requests.push_back(req);
  }
  for (const auto& kernel : root["kernels"]) k.kernels.push_back(kernel["name"].as<std::string>());
  for (const auto& word : root["description_filler_words"]) k.filler_words.insert(word.as<std::string>());
  for (const auto& m : root["input_modifiers"]) {
    InputModifier modifier;
    modifier.name = m["name"].as<std::string>();
    for (const auto& phrase : m["phrases"]) modifier.phrases.push_back(phrase.as<std::string>());
    if (m["rewrite"]) modifier.rewrite = m["rewrite"].as<std::string>();
    if (m["parameter"]) modifier.parameter = m["parameter"].as<std::string>();
    const bool rewrites = (modifier.rewrite.find("{x}") != std::string::npos || modifier.on_output()) &&
                          modifier.rewrite.find("{value}") != std::string::npos;
    if (modifier.phrases.empty() || rewrites == !modifier.parameter.empty())
      throw std::runtime_error(path.string() + ": input modifier '" + modifier.name +
                               "' needs phrases and either a rewrite with {value} and {x} (the input) or {y} (the "
                               "output), or a parameter of the form to set");
    k.input_modifiers.push_back(modifier);
  }
  for (const auto& r : root["tier1_closest"]) {
    Tier1Rule rule;
    for (const auto& f : r["uses_any"]) rule.uses_any.push_back(f.as<std::string>());
    rule.kernel = r["kernel"].as<std::string>();
    rule.reason = r["reason"].as<std::string>();
    k.tier1_closest.push_back(rule);
  }
  if (k.tier_names.empty() || k.tier1_closest.empty())
    throw std::runtime_error(path.string() + ": expected 'tiers' and 'tier1_closest'");
  return k;
}

KnowledgeBase KnowledgeBase::load(const std::filesystem::path& data_dir) {
  KnowledgeBase kb{Catalogue::load_file(data_dir / "skills/kernel_dev/activations.yaml"),
                   TierKnowledge::load_file(data_dir / "skills/kernel_dev/tiers.yaml")};
  return kb;
}

// ============================================================================================
// Analysis

InputKind detect_input_kind(const std::string& text, const Catalogue& catalogue) {
  if (looks_like_pytorch(text)) return InputKind::PyTorch;
  if (text.find('(') == std::string::npos && text.find('=') == std::string::npos) return InputKind::Words;
  try {
    // "ELU(0.5)" parses, but with no input it names an op and its parameter: words.
    if (parse_program(text, row_reduction_resolver(catalogue.resolver())).inputs.empty()) return InputKind::Words;
    return InputKind::Expression;
  } catch (const ParseError&) {
    // "y = relu(x)^2 please" is not an expression; a typo in a real expression is reported by
    // the expression path when the text is clearly one (has an assignment).
    std::size_t eq = text.find('=');
    if (eq != std::string::npos && eq > 0 && text.find(' ') > eq - 2) return InputKind::Expression;
    return InputKind::Words;
  }
}

namespace {

// A description with its own formula is analysed as that expression (embedded_formula.h), named
// from the words before it unless --name names it.
struct FormulaRequest {
  AnalysisRequest request;
  std::string note;
};

std::optional<FormulaRequest> formula_in_description(const AnalysisRequest& request, const KnowledgeBase& knowledge) {
  if (request.kind != InputKind::Words &&
      !(request.kind == InputKind::Auto && detect_input_kind(request.text, knowledge.catalogue) == InputKind::Words))
    return std::nullopt;
  const FunctionResolver resolver = row_reduction_resolver(knowledge.catalogue.resolver());
  auto found = find_embedded_formula(request.text, resolver);
  // A Tier-2 request that explains every word ("mean of squares of each row") keeps its own form
  // (its name, its PyTorch reference, one value per row); spoken arithmetic is for the rest.
  const TierRequest* tier_request = match_request(request.text, knowledge.tiers);
  const bool request_explains_all =
      tier_request && words_beyond_request(request.text, *tier_request, knowledge.tiers).empty();
  if (!found && !request_explains_all) found = find_composition_in_words(request.text, resolver);
  if (!found) return std::nullopt;
  FormulaRequest out;
  out.request.text = found->formula;
  out.request.kind = InputKind::Expression;
  out.request.name = request.name;
  const std::string named = found->name_words.empty() ? "" : snake_case(found->name_words);
  // Words that name one of the library's ops ("rms norm: ...") describe what the formula is like;
  // the new op gets a name of its own (the analyser's, which avoids the library's).
  const bool library_has =
      std::find(knowledge.tiers.kernels.begin(), knowledge.tiers.kernels.end(), named) != knowledge.tiers.kernels.end();
  const bool words_name_it = request.name.empty() && !named.empty() && !library_has && reserved_op_name_problem(named).empty();
  if (words_name_it) out.request.name = found->name_words;
  out.note = (found->composed ? "the description composes functions and arithmetic in words: '" + found->as_written + "' is read as '" +
                                    found->formula + "'"
                              : "the description's formula '" + found->as_written + "' defines the op" +
                                    (found->formula != found->as_written ? " (read as '" + found->formula + "')" : "")) +
             (words_name_it ? "; the words before it name it"
              : request.name.empty() && library_has ? "; the words before it name the library's op '" + named +
                                                          "', so the new op is named from its formula"
                                                    : "");
  return out;
}

}  // namespace

KernelProfile analyse(const AnalysisRequest& request, const KnowledgeBase& knowledge) {
  if (auto fused = analyse_fused_linear(request, knowledge)) return *fused;  // tier3_profile.cpp: fused linear + loss
  if (auto segment = analyse_segment(request, knowledge)) return *segment;  // segment.cpp: jagged-row pooling
  if (auto embedded = formula_in_description(request, knowledge)) {
    KernelProfile p = analyse(embedded->request, knowledge);
    p.source_text = request.text;
    p.source_kind = "words";
    p.notes.insert(p.notes.begin(), embedded->note);
    return p;
  }
  KernelProfile p;
  p.source_text = request.text;
  InputKind kind = request.kind == InputKind::Auto ? detect_input_kind(request.text, knowledge.catalogue) : request.kind;
  p.source_kind = kind == InputKind::PyTorch ? "pytorch" : kind == InputKind::Expression ? "expression" : "words";
  auto finish_tier1 = [&](const Program& program, std::string op, const std::string& display) {
    if (!request.name.empty()) op = snake_case(request.name);
    set_identity(p, op, display);
    // The generated kernel keeps one bit per input in its read masks (kernel.cu.mustache).
    constexpr std::size_t kMaxTier1Inputs = 64;
    if (program.inputs.size() > kMaxTier1Inputs) {
      p.tier = 1;
      p.tier_reason = "Tier 1 (element-wise)";
      mark_undecided_formulas(p, "the op has " + std::to_string(program.inputs.size()) +
                                     " input tensors; a generated element-wise kernel reads at most " +
                                     std::to_string(kMaxTier1Inputs) +
                                     " (split the op, or stack inputs that play the same part into one tensor)");
      p.undecided["inputs"] = p.undecided["forward"];
      return p;
    }
    derive_tier1(p, with_generated_code_names(program, p.notes), knowledge);
    for (const auto& k : knowledge.tiers.kernels)
      if (k == p.op_name)
        p.notes.push_back("the library already has a kernel named '" + p.op_name +
                          "': Act must not overwrite it; use --modify to change it or --name for a new op");
    return p;
  };
  auto name_from_program = [&](const Program& program, const std::string& fallback, std::string& display) {
    if (const Activation* match = catalogue_match(program, knowledge.catalogue)) {
      display = match->display;
      p.resolved_from += "; computes the same function as catalogue entry '" + match->name + "'";
      // The catalogue writes its PyTorch form in its own names (x; a, b): the op's inputs, by
      // position as same_function matched them, take their places.
      if (!match->torch.empty()) {
        const Program entry = match->program();
        std::map<std::string, std::string> renamed;
        for (std::size_t k = 0; k < entry.inputs.size() && k < program.inputs.size(); ++k)
          renamed[entry.inputs[k]] = program.inputs[k];
        p.notes.push_back("PyTorch eager baseline: " + rename_identifiers(match->torch, renamed));
      }
      return match->name;
    }
    display.clear();
    return fallback;
  };

  auto finish_tier2 = [&](const Program& given, const std::string& source_name, const std::string& callees = "") {
    const Program program =
        with_generated_code_names(named_weights_as_parameters(given, p.notes), p.notes, reserved_in_row_program);
    set_identity(p,
                 request.name.empty() ? tier2_op_name(program, source_name, knowledge, p.notes, callees)
                                      : snake_case(request.name),
                 "");
    derive_tier2(p, program, knowledge);
    return p;
  };

  if (kind == InputKind::Words) {
    Resolution r = knowledge.catalogue.resolve(request.text);
    if (r.ok()) {
      p.resolved_from = "catalogue entry '" + r.activation->name + "' matched '" + r.matched + "' in '" + r.normalised + "'";
      if (!r.activation->torch.empty()) p.notes.push_back("PyTorch eager baseline: " + r.activation->torch);
      if (!r.activation->gradient_note.empty()) p.notes.push_back("gradient: " + r.activation->gradient_note);
      Program program = r.activation->program();
      // "leaky relu with negative slope 0.2", "softplus beta=2": module-parameter values in words.
      std::string lowered = request.text;
      for (auto& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::vector<std::pair<std::size_t, std::size_t>> bound;  // the numbers parameters took
      std::string parameter_names;
      for (auto& param : program.params) {
        if (param.learnable) continue;
        parameter_names += (parameter_names.empty() ? "" : ", ") + param.name;
        std::string words = std::regex_replace(param.name, std::regex("_"), "[ _-]?");
        std::regex pattern("\\b" + words + "\\s*(?:=|:|of|is)?\\s*([-+]?(?:[0-9]+\\.?[0-9]*|\\.[0-9]+)(?:e[-+]?[0-9]+)?)");
        std::smatch match;
        if (std::regex_search(lowered, match, pattern)) {
          param.init = std::strtod(match[1].str().c_str(), nullptr);
          bound.emplace_back(static_cast<std::size_t>(match.position(1)), static_cast<std::size_t>(match.length(1)));
          p.notes.push_back("module parameter " + param.name + " = " + match[1].str() + " (from the description)");
        }
      }
      // A number no parameter took would be silently ignored ("hard tanh clipped to [-2, 2]",
      // "SwiGLU with beta 1.5"): the match is refused instead.
      auto unbound = unbound_numbers(lowered, bound);
      // "leaky relu 0.1", "ELU(0.5)": one number and one module parameter that no name took can
      // only mean that parameter. Two of either stay ambiguous and are refused below.
      std::vector<ParamDecl*> module_params;
      for (auto& param : program.params)
        if (!param.learnable) module_params.push_back(&param);
      if (unbound.size() == 1 && bound.empty() && module_params.size() == 1) {
        module_params.front()->init = std::strtod(unbound.front().c_str(), nullptr);
        p.notes.push_back("module parameter " + module_params.front()->name + " = " + unbound.front() +
                          " (the description's one number, for the entry's one parameter)");
        unbound.clear();
      }
      if (unbound.empty()) return finish_tier1(program, r.activation->name, r.activation->display);
      std::string listed;
      for (const auto& n : unbound) listed += (listed.empty() ? "" : ", ") + n;
      r.undecided = "the description gives " + listed + ", which no parameter of catalogue entry '" + r.activation->name +
                    "' took" +
                    (parameter_names.empty() ? " (it has none): write the formula as an expression"
                                             : ": name the parameter (" + parameter_names + ", e.g. '" +
                                                   r.activation->name + " with " + program.params.front().name + " " +
                                                   unbound.front() + "'), or write the formula as an expression");
      r.unexplained = unbound;
      r.activation = nullptr;
      p.notes.clear();
      p.resolved_from.clear();
    }
    if (!r.unexplained.empty()) p.notes.push_back("description: " + r.undecided);
    if (const TierRequest* req = match_request(request.text, knowledge.tiers)) {
      // A Tier-2 request with a PyTorch form ("softmax", "L2-normalise each row", "RMSNorm
      // without weight") is derived offline from that form, as if the code had been given,
      // when the description adds nothing the form lacks.
      std::string form_not_used;
      std::string described = request.text;
      const std::vector<InputModifier> form_keywords = keyword_modifiers(req->pytorch, knowledge.tiers);
      const auto modifiers = take_input_modifiers(described, knowledge.tiers, form_keywords);
      // A modifier's phrase may itself name a catalogue entry ("softcap"): the words the catalogue
      // could not explain are judged without the modifiers.
      // A catalogue entry the request's own words name ("squared" in "z-loss, the squared logsumexp
      // of each row") is no other op when the request explains every word.
      const bool explained = r.unexplained.empty() ||
                             (!modifiers.empty() && knowledge.catalogue.resolve(described).unexplained.empty()) ||
                             words_beyond_request(described, *req, knowledge.tiers).empty();
      if (!req->pytorch.empty() && explained) {
        std::string form = req->pytorch, variant = req->name;
        std::string missing_parameter;
        if (!modifiers.empty()) {
          form = apply_input_modifiers(req->pytorch, modifiers, &missing_parameter);
          // A parameter's value does not make another op (rms_norm with eps 1e-5 is rms_norm).
          for (const auto& a : modifiers)
            if (a.modifier->parameter.empty()) variant += "_" + a.modifier->name;
        }
        const auto beyond = words_beyond_request(described, *req, knowledge.tiers);
        bool required = req->requires_any.empty();
        for (const auto& phrase : req->requires_any) required = required || contains_words(request.text, phrase);
        if (!beyond.empty()) {
          std::string listed;
          for (const auto& w : beyond) listed += (listed.empty() ? "'" : ", '") + w + "'";
          form_not_used = "the description says more than '" + req->name + "' (" + listed + "), which its built-in PyTorch form `" +
                          req->pytorch + "` does not have: write the op as PyTorch code or an expression";
        } else if (!required) {
          form_not_used = req->requires_reason;
        } else if (auto zero = std::find_if(modifiers.begin(), modifiers.end(), [](const AppliedModifier& a) {
                     return std::strtod(a.value.c_str(), nullptr) == 0.0 &&
                            a.modifier->rewrite.find("/ {value}") != std::string::npos;
                   });
                   zero != modifiers.end()) {
          form_not_used = "the " + zero->modifier->name + " is 0, which the input is divided by (" + rewritten_input(*zero, "x") +
                          "): give a positive " + zero->modifier->name;
        } else if (form.empty() && !missing_parameter.empty()) {
          form_not_used = "its PyTorch form `" + req->pytorch + "` has no " + missing_parameter + " for the description to set: " +
                          "write the op as PyTorch code or an expression";
        } else if (form.empty()) {
          form_not_used = "its PyTorch form `" + req->pytorch + "` is not one `def f(x): return ...` line the description's " +
                          "modifiers can rewrite";
        } else {
          TorchTranslation t = translate_pytorch(form, knowledge.catalogue);
          if (!t.row_reduction) {
            if (modifiers.empty())
              throw std::runtime_error("skills/kernel_dev/tiers.yaml: the pytorch form of request '" + req->name +
                                       "' is not a row reduction the built-in analyser derives: " + t.rejection);
            form_not_used = "its PyTorch form with the description's modifiers does not translate: " + t.rejection;
          } else {
            p.resolved_from = "tier knowledge '" + req->name + "' (skills/kernel_dev/tiers.yaml), derived from its PyTorch form `" +
                              req->pytorch + "`";
            for (const auto& a : modifiers)
              p.resolved_from += "; " + a.modifier->name + " " + a.value + " from the description (" + modifier_effect(a) + ")";
            for (const auto& n : t.notes) p.notes.push_back("translation: " + n);
            // The catalogue's partial match is not what was derived.
            p.notes.erase(std::remove(p.notes.begin(), p.notes.end(), "description: " + r.undecided), p.notes.end());
            return finish_tier2(t.program, variant);
          }
        }
      }
      set_identity(p, request.name.empty() ? req->name : snake_case(request.name), req->name);
      p.resolved_from = "tier knowledge '" + req->name + "' (skills/kernel_dev/tiers.yaml)";
      if (req->tier == 1) {
        fill_non_tier1(p, 1, req->closest, req->reason + " (not a catalogue activation; formulas are not derived)", knowledge.tiers);
      } else {
        fill_non_tier1(p, req->tier, req->closest, req->reason, knowledge.tiers);
      }
      if (!form_not_used.empty()) {
        p.undecided["row_program"] = "not derived from the description: " + form_not_used +
                                     ", or use an LLM provider (--llm openai|anthropic) or fill it in at the checkpoint";
        p.notes.push_back("description: " + form_not_used);
      }
      p.closest_reason = req->reason;
      return p;
    }
    set_identity(p, request.name.empty() ? "undecided_" + fnv_hex(request.text) : snake_case(request.name), "");
    p.undecided["tier"] = r.undecided;
    p.undecided["closest_kernel"] = "the tier is undecided";
    mark_undecided_formulas(p, "the request was not understood: " + r.undecided);
    p.undecided["inputs"] = p.undecided["outputs"] = p.undecided["learnable_parameters"] = "the request was not understood";
    return p;
  }

  if (kind == InputKind::Expression) {
    Program program;
    try {
      program = parse_program(request.text, row_reduction_resolver(knowledge.catalogue.resolver()));
    } catch (const ParseError& error) {
      if (const TierRequest* req = match_request(request.text, knowledge.tiers); req && req->tier > 1) {
        set_identity(p, request.name.empty() ? req->name : snake_case(request.name), req->name);
        p.resolved_from = "expression with a non-element-wise function (" + std::string(error.what()) + ")";
        fill_non_tier1(p, req->tier, req->closest, req->reason, knowledge.tiers);
        p.closest_reason = req->reason;
        return p;
      }
      set_identity(p, request.name.empty() ? "undecided_" + fnv_hex(request.text) : snake_case(request.name), "");
      p.undecided["tier"] = std::string("the expression does not parse: ") + error.what();
      p.undecided["closest_kernel"] = "the tier is undecided";
      mark_undecided_formulas(p, std::string("the expression does not parse: ") + error.what());
      return p;
    }
    p.resolved_from = "expression '" + to_string(program.expression) + "'";
    if (has_row_reduction(program.expression)) return finish_tier2(program, "");
    std::string display;
    std::string op = name_from_program(program, "custom_" + fnv_hex(to_string(program.expression)), display);
    return finish_tier1(program, op, display);
  }

  TorchTranslation t = translate_pytorch(request.text, knowledge.catalogue);
  if (t.row_reduction) {
    p.source_entry = t.entry;
    p.resolved_from = "PyTorch " + t.entry + " translated to '" + to_string(t.program.expression) + "'";
    for (const auto& n : t.notes) p.notes.push_back("translation: " + n);
    return finish_tier2(t.program, t.module_class.empty() ? t.entry : t.module_class, t.row_callees);
  }
  if (!t.elementwise) {
    std::string where = t.line > 0 ? " (line " + std::to_string(t.line) +
                                         (t.column > 0 ? ", column " + std::to_string(t.column) : std::string()) + ": '" +
                                         t.offending_line + "')"
                                   : "";
    std::string op = request.name.empty() ? (t.module_class.empty() ? (t.entry.empty() ? "undecided_" + fnv_hex(request.text) : snake_case(t.entry))
                                                                    : snake_case(t.module_class))
                                          : snake_case(request.name);
    set_identity(p, op, "");
    p.resolved_from = "PyTorch " + (t.entry.empty() ? std::string("code") : t.entry) + ": not element-wise: " + t.rejection + where;
    if (t.tier_guess > 1) {
      const TierRequest* req = match_request(t.rejection + " " + t.offending_line, knowledge.tiers);
      std::string closest = req ? req->closest : (t.tier_guess == 2 ? "rms_norm" : "fused_linear_cross_entropy");
      fill_non_tier1(p, t.tier_guess, closest, t.rejection + where, knowledge.tiers);
      p.closest_reason = req ? req->reason : "the simplest library kernel of that tier";
      if (t.tier_guess == 2)
        p.undecided["row_program"] = "the built-in analyser cannot derive this Tier-2 op: " + t.rejection + where +
                                     "; rewrite it as reductions over dim=-1 (sum, mean, max, logsumexp, norms), or use an LLM provider "
                                     "(--llm openai|anthropic) or fill it in at the checkpoint";
    } else {
      p.undecided["tier"] = "not Tier 1: " + t.rejection + where + "; the built-in analyser cannot tell the tier";
      p.undecided["closest_kernel"] = "the tier is undecided";
      mark_undecided_formulas(p, "the PyTorch code is outside the element-wise subset: " + t.rejection + where);
    }
    return p;
  }
  p.source_entry = t.entry;
  p.resolved_from = "PyTorch " + t.entry + " translated to '" + to_string(t.program.expression) + "'";
  for (const auto& n : t.notes) p.notes.push_back("translation: " + n);
  std::string fallback = snake_case(t.module_class.empty() ? t.entry : t.module_class);
  if (fallback == "op_snippet" || fallback.empty()) fallback = "custom_" + fnv_hex(to_string(t.program.expression));
  std::string display;
  std::string op = name_from_program(t.program, fallback, display);
  if (display.empty()) display = t.module_class.empty() ? t.entry : t.module_class;
  return finish_tier1(t.program, op, display);
}

Program KernelProfile::program() const {
  if (tier != 1 || !forward) throw std::runtime_error("profile '" + op_name + "' has no Tier-1 forward expression");
  Program p;
  p.output = outputs.empty() ? "y" : outputs.front().name;
  p.expression = parse_expression(forward->expression);
  for (const auto& in : inputs) p.inputs.push_back(in.name);
  for (const auto& l : learnable_parameters)
    p.params.push_back({l.name, l.shape == "channel" ? ParamShape::Channel : ParamShape::Scalar, l.value, true});
  for (const auto& m : module_parameters) p.params.push_back({m.name, ParamShape::Scalar, m.value, false});
  return p;
}

// ============================================================================================
// Input checks (before a run exists)

std::string op_name_for(const std::string& name) { return snake_case(name); }

std::string reserved_op_name_problem(const std::string& op_name) {
  // Lower-case words only: op names are snake_case, so True/None/False cannot occur.
  static const std::set<std::string> reserved = {
      "alignas", "alignof", "and", "and_eq", "as", "asm", "assert", "async", "auto", "await", "bitand", "bitor",
      "bool", "break", "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
      "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await", "co_return",
      "co_yield", "decltype", "def", "default", "del", "delete", "do", "double", "dynamic_cast", "elif", "else",
      "enum", "except", "explicit", "export", "extern", "false", "finally", "float", "for", "friend", "from",
      "global", "goto", "if", "import", "in", "inline", "int", "is", "lambda", "long", "mutable", "namespace",
      "new", "noexcept", "nonlocal", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "pass", "private",
      "protected", "public", "raise", "register", "reinterpret_cast", "requires", "return", "short", "signed",
      "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void",
      "volatile", "wchar_t", "while", "with", "xor", "xor_eq", "yield",
      // what liger_kernels' generated Python imports or is made of
      "torch", "annotations", "functional", "modules", "ops", "compile", "transformers"};
  if (!reserved.count(op_name)) return "";
  return "is a reserved word: the op name becomes a C++ namespace and a Python module and function, so it cannot "
         "be a C++ or Python keyword or a module name the generated Python imports";
}

std::optional<InputProblem> input_problem(const AnalysisRequest& request, const KnowledgeBase& knowledge,
                                          bool llm_available) {
  if (auto embedded = formula_in_description(request, knowledge))
    return input_problem(embedded->request, knowledge, llm_available);
  if (request.kind != InputKind::Expression && recognise_segment(request.text).matched) return std::nullopt;
  if (request.kind != InputKind::Expression && recognise_fused_linear(request.text).matched) return std::nullopt;
  const InputKind kind =
      request.kind == InputKind::Auto ? detect_input_kind(request.text, knowledge.catalogue) : request.kind;
  if (kind == InputKind::Expression) {
    try {
      parse_program(request.text, row_reduction_resolver(knowledge.catalogue.resolver()));
    } catch (const ParseError& error) {
      // "y = softmax(x)" does not parse as element-wise but names a known op of a higher tier.
      if (const TierRequest* req = match_request(request.text, knowledge.tiers); req && req->tier > 1)
        return std::nullopt;
      return InputProblem{std::string("the expression '") + request.text + "' does not parse: " + error.what(),
                          "fix the expression (e.g. \"y = x * sigmoid(1.702 * x)\"; functions: the catalogue's "
                          "activations and exp, log, tanh, sigmoid, where...), or describe the op in words"};
    }
  }
  if (kind == InputKind::Words && request.text.size() > kMaxDescriptionBytes) {
    return InputProblem{"the description is " + std::to_string(request.text.size()) + " bytes long; a description is at most " +
                            std::to_string(kMaxDescriptionBytes) + " bytes",
                        "name the op in a few words (e.g. \"ReLU squared activation function\"), or give it as an "
                        "expression (y = ...) or as PyTorch code in a file"};
  }
  if (kind == InputKind::Words && !llm_available) {
    const Resolution r = knowledge.catalogue.resolve(request.text);
    if (!r.ok() && r.candidates.empty() && !match_request(request.text, knowledge.tiers)) {
      return InputProblem{"the built-in analyser does not know the op '" + request.text + "': " + r.undecided,
                          "name a known activation, write the op as an expression (y = ...), give PyTorch code, "
                          "or use an LLM provider (--llm openai|anthropic) for ops outside the catalogue"};
    }
  }
  return std::nullopt;
}

}  // namespace liger::kernel_dev
