// Plain data exchanged between workflows and LLM providers. Kept free of transport details so
// the built-in provider and the HTTP providers are interchangeable behind one interface.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace liger::llm {

enum class Role { System, User, Assistant };

const char* to_string(Role role) noexcept;

struct Message {
  Role role = Role::User;
  std::string content;
};

inline Message system_message(std::string text) { return {Role::System, std::move(text)}; }
inline Message user_message(std::string text) { return {Role::User, std::move(text)}; }
inline Message assistant_message(std::string text) { return {Role::Assistant, std::move(text)}; }

enum class DocumentFormat { Yaml, Json };

const char* to_string(DocumentFormat format) noexcept;

struct Request {
  std::vector<Message> messages;
  // Names the question for the built-in provider ("kernel-dev/understand"); HTTP providers
  // ignore it because the question is already spelled out in the messages.
  std::string kind;
  // Structured input for built-in analysers (the user's description, a file path...). HTTP
  // providers ignore it for the same reason as `kind`.
  nlohmann::json input;
  // When set, the caller expects a document of this shape; the built-in provider uses it to
  // mark every field it cannot decide instead of leaving it out.
  std::optional<nlohmann::json> schema;
  DocumentFormat format = DocumentFormat::Yaml;
  // 0 means "the provider's configured default".
  int max_tokens = 0;
  std::optional<double> temperature;
};

struct Usage {
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  // True when the endpoint reported no usage and the counts were estimated from text length.
  bool estimated = false;
};

struct Response {
  std::string text;
  Usage usage;
  double cost_usd = 0.0;
  double latency_s = 0.0;
  std::string provider;  // "openai", "anthropic", "builtin"
  std::string model;
  std::string stop_reason;
  int http_attempts = 0;   // 0 for the built-in provider and cassette replays
  bool replayed = false;   // served from a cassette
};

// Receives each piece of generated text as it arrives. Only called for streamed requests.
using StreamCallback = std::function<void(std::string_view text_delta)>;

}  // namespace liger::llm
