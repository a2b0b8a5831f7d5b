// configuration_<type>.py: config classes, their __init__ defaults and sub-configs.
#include "workflows/autopatch/analysis_internal.h"

#include <algorithm>
#include <regex>

namespace liger::autopatch {

using namespace detail;

const ConfigParam* ConfigClass::param(std::string_view n) const {
  for (const auto& p : params)
    if (p.name == n) return &p;
  return nullptr;
}

const ConfigClass* ConfigInfo::find(std::string_view n) const {
  for (const auto& c : classes)
    if (c.name == n) return &c;
  return nullptr;
}

const ConfigClass* ConfigInfo::main(std::string_view type) const {
  const ConfigClass* fallback = nullptr;
  const ConfigClass* sub_match = nullptr;
  for (const auto& c : classes) {
    bool sub = false;
    for (const auto& o : classes)
      for (const auto& [k, v] : o.sub_configs) sub |= v == c.name;
    if (c.model_type == type && !sub) return &c;
    // A model type of its own that is also another config's sub-config (gemma3_text is
    // Gemma3TextConfig, Gemma3Config's text_config): asked for by that type, it is the main one.
    if (c.model_type == type && !sub_match) sub_match = &c;
    if (!sub && !fallback && !c.params.empty()) fallback = &c;
  }
  if (sub_match) return sub_match;
  return fallback ? fallback : (classes.empty() ? nullptr : &classes.front());
}

const ConfigClass* ConfigInfo::text(std::string_view type) const {
  const ConfigClass* m = main(type);
  if (!m) return nullptr;
  auto it = m->sub_configs.find("text_config");
  if (it != m->sub_configs.end())
    if (const ConfigClass* t = find(it->second)) return t;
  return m;
}

std::optional<ConfigParam> ConfigInfo::default_of(std::string_view type, std::string_view n) const {
  for (const ConfigClass* c : {text(type), main(type)})
    if (c)
      if (const ConfigParam* p = c->param(n)) return *p;
  for (const auto& c : classes)
    if (const ConfigParam* p = c.param(n)) return *p;
  return std::nullopt;
}

ConfigInfo parse_config_module(const PythonModule& module) {
  ConfigInfo info;
  info.file = module.origin;
  for (const auto& c : module.classes) {
    bool is_config = contains(c.name, "Config");
    for (const auto& b : c.bases) is_config |= contains(b, "Config");
    if (!is_config) continue;
    ConfigClass cc;
    cc.name = c.name;
    cc.line = c.line;
    for (const auto& st : c.class_body) {
      auto a = as_assignment(st);
      if (!a || a->targets.empty()) continue;
      const std::string& t = a->targets.front();
      if (t == "model_type") cc.model_type = unquote(a->value);
      else if (t == "sub_configs") {
        static const std::regex kv(R"(["'](\w+)["']:(\w+))");
        for (auto it = std::sregex_iterator(a->value.begin(), a->value.end(), kv); it != std::sregex_iterator(); ++it)
          cc.sub_configs[(*it)[1]] = (*it)[2];
      } else if (st.tokens.size() > 2 && st.tokens[1].text == ":") {
        cc.params.push_back(ConfigParam{t, a->value, st.line});  // dataclass-style field
      }
    }
    if (const FunctionDef* init = c.method("__init__")) {
      // Re-tokenise the header to read parameter defaults.
      std::string header;
      for (int l = init->line; l <= init->end_line && l <= static_cast<int>(module.lines.size()); ++l) {
        header += module.lines[static_cast<size_t>(l - 1)] + "\n";
        if (contains(module.lines[static_cast<size_t>(l - 1)], "):") ||
            std::regex_search(module.lines[static_cast<size_t>(l - 1)], std::regex(R"(\)\s*(->.*)?:\s*$)")))
          break;
      }
      std::vector<Token> t;
      try {
        t = tokenize(header + "    pass\n").tokens;
      } catch (const Error&) {
      }
      size_t open = 0;
      while (open < t.size() && t[open].text != "(") ++open;
      int depth = 0;
      size_t start = open + 1;
      for (size_t k = open; k < t.size(); ++k) {
        const Token& tk = t[k];
        if (tk.kind != TokKind::Op) continue;
        if (tk.text == "(" || tk.text == "[" || tk.text == "{") { ++depth; continue; }
        bool end = false;
        if (tk.text == ")" || tk.text == "]" || tk.text == "}") {
          --depth;
          end = depth == 0;
          if (!end) continue;
        }
        if ((depth == 1 && tk.text == ",") || end) {
          if (k > start && t[start].kind == TokKind::Name) {
            ConfigParam prm;
            prm.name = t[start].text;
            prm.line = init->line + t[start].line - 1;
            for (size_t q = start + 1; q < k; ++q)
              if (t[q].kind == TokKind::Op && t[q].text == "=") {
                prm.default_value = join_tokens(t, q + 1, k);
                break;
              }
            if (prm.name != "self" && prm.name != "kwargs") cc.params.push_back(prm);
          }
          start = k + 1;
          if (end) break;
        }
      }
      // sub-config classes assigned in __init__ (self.vision_config = XVisionConfig(**vision_config))
      for (const auto& st : init->body) {
        auto a = as_assignment(st);
        if (!a) continue;
        for (const auto& call : find_calls(a->value_tokens, a->line))
          if (ends_with(call.callee, "Config") && starts_with(a->targets.front(), "self.") &&
              ends_with(a->targets.front(), "_config") && module.find_class(call.callee))
            cc.sub_configs.emplace(a->targets.front().substr(5), call.callee);
      }
    }
    // A field declared `= None` and filled in __post_init__ / __init__ (`if self.cross_attention_layers
    // is None: self.cross_attention_layers = [3, 8, ...]`, Mllama) has that value as its default.
    for (const char* method : {"__post_init__", "__init__"}) {
      const FunctionDef* f = c.method(method);
      if (!f) continue;
      for (size_t i = 0; i + 1 < f->body.size(); ++i) {
        static const std::regex is_none(R"(^if (?:self\.)?(\w+) is None:$)");
        std::smatch mm;
        if (!std::regex_match(f->body[i].text, mm, is_none)) continue;
        const std::string name = mm[1];
        auto prm = std::find_if(cc.params.begin(), cc.params.end(), [&](const ConfigParam& x) { return x.name == name; });
        if (prm == cc.params.end() || prm->default_value != "None") continue;
        const Statement& next = f->body[i + 1];
        auto a = as_assignment(next);
        // Only a literal (numbers, strings, True/False, lists and tuples of them): a comprehension
        // over other fields (layer_types) is no default a mini config can take over.
        bool literal = a && !a->value_tokens.empty();
        if (a)
          for (const auto& tk : a->value_tokens)
            literal &= tk.kind == TokKind::Number || tk.kind == TokKind::String ||
                       (tk.kind == TokKind::Op && (tk.text == "[" || tk.text == "]" || tk.text == "(" || tk.text == ")" ||
                                                   tk.text == "," || tk.text == "-")) ||
                       (tk.kind == TokKind::Name && (tk.text == "True" || tk.text == "False"));
        if (next.depth > f->body[i].depth && literal && a->targets.size() == 1 && a->targets.front() == "self." + name) {
          prm->default_value = a->value;
          prm->line = next.line;
        }
      }
    }
    info.classes.push_back(std::move(cc));
  }
  return info;
}

}  // namespace liger::autopatch
