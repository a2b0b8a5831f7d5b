#include "liger/llm/builtin.h"

#include <fmt/format.h>

#include "liger/llm/structured.h"

namespace liger::llm {

std::shared_ptr<AnalyserRegistry> AnalyserRegistry::global() {
  static auto registry = std::make_shared<AnalyserRegistry>();
  return registry;
}

void AnalyserRegistry::add(std::string kind, Analyser analyser) {
  std::lock_guard lock(mutex_);
  analysers_[std::move(kind)] = std::move(analyser);
}

bool AnalyserRegistry::remove(const std::string& kind) {
  std::lock_guard lock(mutex_);
  return analysers_.erase(kind) > 0;
}

std::optional<Analyser> AnalyserRegistry::find(const std::string& kind) const {
  std::lock_guard lock(mutex_);
  auto it = analysers_.find(kind);
  if (it == analysers_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> AnalyserRegistry::kinds() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [kind, analyser] : analysers_) out.push_back(kind);
  return out;
}

AnalyserRegistration::AnalyserRegistration(std::string kind, Analyser analyser) {
  AnalyserRegistry::global()->add(std::move(kind), std::move(analyser));
}

nlohmann::json complete_with_undecided(nlohmann::json document, const nlohmann::json* schema,
                                       const std::string& reason) {
  if (schema == nullptr || !schema->is_object() || !schema->contains("properties")) {
    if (document.is_null()) return undecided(reason);
    return document;
  }
  if (!document.is_object()) {
    if (!document.is_null()) return document;  // not ours to second-guess
    document = nlohmann::json::object();
  }
  const auto& properties = (*schema)["properties"];
  // Required fields are the ones a checkpoint must see; optional ones may stay absent.
  std::vector<std::string> wanted;
  if (schema->contains("required")) {
    for (const auto& name : (*schema)["required"]) wanted.push_back(name.get<std::string>());
  } else {
    for (const auto& [name, ignored] : properties.items()) wanted.push_back(name);
  }
  for (const auto& name : wanted)
    if (!document.contains(name) || document[name].is_null()) document[name] = undecided(reason);
  for (auto& [name, child] : document.items()) {
    if (child.is_object() && !is_undecided(child) && properties.contains(name))
      child = complete_with_undecided(std::move(child), &properties[name], reason);
  }
  return document;
}

BuiltinProvider::BuiltinProvider(std::shared_ptr<AnalyserRegistry> registry)
    : registry_(registry ? std::move(registry) : AnalyserRegistry::global()) {}

Response BuiltinProvider::do_complete(const Request& request, const StreamCallback& on_text) {
  const nlohmann::json* schema = request.schema ? &*request.schema : nullptr;
  nlohmann::json document;
  auto analyser = request.kind.empty() ? std::nullopt : registry_->find(request.kind);
  if (analyser) {
    document = (*analyser)(request);
    document = complete_with_undecided(std::move(document), schema,
                                       fmt::format("the built-in analyser for '{}' could not decide "
                                                   "this field; an LLM or a human must",
                                                   request.kind));
  } else {
    std::string reason =
        request.kind.empty()
            ? std::string("the built-in provider only answers structured requests of a known kind; "
                          "configure an LLM endpoint (llm.provider) for free-form questions")
            : fmt::format("the built-in provider has no analyser for '{}'; configure an LLM "
                          "endpoint or decide this field by hand",
                          request.kind);
    document = complete_with_undecided(nlohmann::json(), schema, reason);
  }

  const char* fence = request.format == DocumentFormat::Json ? "json" : "yaml";
  Response response;
  response.text = fmt::format("```{}\n{}```\n", fence, serialise_document(document, request.format));
  response.provider = "builtin";
  response.model = "builtin";
  response.stop_reason = "end_turn";
  if (on_text) on_text(response.text);
  return response;
}

EndpointCheck BuiltinProvider::check() {
  EndpointCheck result;
  result.needs_endpoint = false;
  result.answered = result.reachable = result.auth_ok = result.model_ok = true;
  result.endpoint = "(none)";
  result.model = "builtin";
  auto kinds = registry_->kinds();
  result.message = fmt::format(
      "the built-in provider runs inside liger-agent: it needs no endpoint, no key and no network "
      "({} analyser{} registered{}{})",
      kinds.size(), kinds.size() == 1 ? "" : "s", kinds.empty() ? "" : ": ", fmt::join(kinds, ", "));
  return result;
}

}  // namespace liger::llm
