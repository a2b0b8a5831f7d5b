// Keeps API keys out of everything the agent writes: logs, cassettes, run directories, reports.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <spdlog/sinks/sink.h>

namespace liger::llm {

using Header = std::pair<std::string, std::string>;
using Headers = std::vector<Header>;

inline constexpr std::string_view kRedacted = "[REDACTED]";

// Every key a provider loads is registered here so text from any source can be scrubbed of it,
// including text that echoes the key back (some APIs quote it in their error messages).
class SecretRegistry {
 public:
  static SecretRegistry& global();
  void add(std::string secret);
  std::vector<std::string> secrets() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
  SecretRegistry();
};

// Replaces registered secrets, the given extra secrets, and anything shaped like a bearer token
// or a well-known key format (sk-..., sk-ant-...) with [REDACTED].
std::string redact(std::string_view text, const std::vector<std::string>& extra_secrets = {});

// Replaces only the registered secrets' exact values. This is what every file write applies
// (util::write_file_atomic): it cannot mangle ordinary content the way the shape-based patterns
// of redact() might (a generated source file that happens to contain "Bearer <word>").
std::string redact_known_secrets(std::string_view text);

// Registers the values of the environment variables that hold API keys: OPENAI_API_KEY,
// ANTHROPIC_API_KEY and `key_env` (the variable llm.api_key_env names; empty or "none": none),
// so text that echoes a key is scrubbed even before (or without) a provider being built.
void register_environment_keys(const std::string& key_env);

// Puts std::cout and std::cerr behind a filter that applies redact() to everything printed,
// whatever code path printed it (errors, hints, JSON documents, summaries). Idempotent.
void redact_standard_streams();

bool is_sensitive_header(std::string_view name) noexcept;

// Values of authentication headers become [REDACTED]; other values go through redact().
Headers redact_headers(const Headers& headers, const std::vector<std::string>& extra_secrets = {});

// Wraps a spdlog sink so that every message passes through redact() before it is written.
std::shared_ptr<spdlog::sinks::sink> make_redacting_sink(std::shared_ptr<spdlog::sinks::sink> inner);

}  // namespace liger::llm
