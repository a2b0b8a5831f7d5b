#include "liger/llm/provider.h"

#include <chrono>

#include <fmt/format.h>

#include "liger/error.h"
#include "liger/llm/builtin.h"
#include "liger/llm/redact.h"
#include "llm/http_provider.h"

namespace liger::llm {

ProviderKind parse_provider_kind(std::string_view text) {
  if (text == "builtin" || text == "built-in") return ProviderKind::Builtin;
  if (text == "openai" || text == "openai-compatible") return ProviderKind::OpenAI;
  if (text == "anthropic") return ProviderKind::Anthropic;
  throw Error(ErrorKind::Config, fmt::format("unknown LLM provider '{}'", text),
              "llm.provider must be one of builtin, openai (any OpenAI-compatible server), anthropic");
}

const char* to_string(ProviderKind kind) noexcept {
  switch (kind) {
    case ProviderKind::Builtin: return "builtin";
    case ProviderKind::OpenAI: return "openai";
    case ProviderKind::Anthropic: return "anthropic";
  }
  return "builtin";
}

std::string default_base_url(ProviderKind kind) {
  switch (kind) {
    case ProviderKind::OpenAI: return "https://api.openai.com/v1";
    case ProviderKind::Anthropic: return "https://api.anthropic.com";
    case ProviderKind::Builtin: return {};
  }
  return {};
}

std::string default_model(ProviderKind kind) {
  switch (kind) {
    case ProviderKind::OpenAI: return "gpt-4o";
    case ProviderKind::Anthropic: return "claude-sonnet-4-20250514";
    case ProviderKind::Builtin: return "builtin";
  }
  return {};
}

std::string api_key_variable(const ProviderConfig& config) {
  if (config.kind == ProviderKind::Builtin || config.api_key_env == "none") return {};
  if (!config.api_key_env.empty()) return config.api_key_env;
  return config.kind == ProviderKind::Anthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
}

Response Provider::complete(const Request& request, const StreamCallback& on_text) {
  auto start = std::chrono::steady_clock::now();
  Response response = do_complete(request, on_text);
  // An answer that echoes a configured key (a prompt injection, a proxy quoting the request)
  // would carry it into profiles, notes, file names and error messages; it stops here.
  response.text = redact_known_secrets(response.text);
  response.latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::optional<Price> price = price_;
  if (!price) price = PriceTable::builtin_defaults().find(response.model);
  response.cost_usd = price ? cost_of(response.usage, *price) : 0.0;
  if (ledger_) ledger_->add(response);
  return response;
}

std::unique_ptr<Provider> make_provider(const ProviderConfig& config) {
  std::unique_ptr<Provider> provider;
  switch (config.kind) {
    case ProviderKind::Builtin:
      provider = std::make_unique<BuiltinProvider>(config.analysers);
      break;
    case ProviderKind::OpenAI:
      provider = make_openai_provider(config);
      break;
    case ProviderKind::Anthropic:
      provider = make_anthropic_provider(config);
      break;
  }
  provider->set_ledger(config.ledger);
  provider->set_price(config.price);
  return provider;
}

EndpointCheck check_endpoint(const ProviderConfig& config) {
  std::unique_ptr<Provider> provider;
  try {
    provider = make_provider(config);
  } catch (const Error& error) {
    EndpointCheck result;
    result.configured = false;
    result.failure = "config";
    result.endpoint = config.base_url.empty() ? default_base_url(config.kind) : config.base_url;
    result.model = config.model.empty() ? default_model(config.kind) : config.model;
    result.message = error.what();
    result.hint = error.hint();
    return result;
  }
  return provider->check();
}

}  // namespace liger::llm
