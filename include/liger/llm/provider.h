// The one interface workflows use to talk to an LLM, and the factory that builds a provider
// from plain configuration (filled by the config layer from flags/env/files).
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "liger/llm/cassette.h"
#include "liger/llm/types.h"
#include "liger/llm/usage.h"

namespace liger {
class Config;
}

namespace liger::llm {

class AnalyserRegistry;

enum class ProviderKind { Builtin, OpenAI, Anthropic };

// Accepts builtin|openai|openai-compatible|anthropic; throws liger::Error(Config) otherwise.
ProviderKind parse_provider_kind(std::string_view text);
const char* to_string(ProviderKind kind) noexcept;

struct ProviderConfig {
  ProviderKind kind = ProviderKind::Builtin;
  std::string base_url;     // empty: the provider's public endpoint
  std::string model;        // empty: the provider's default model
  // Environment variable holding the key. Empty: OPENAI_API_KEY / ANTHROPIC_API_KEY.
  // "none": send no key (local servers such as llama.cpp or Ollama).
  std::string api_key_env;
  double timeout_s = 600.0;
  double connect_timeout_s = 10.0;
  double stall_timeout_s = 120.0;  // streams only
  int max_retries = 4;
  double backoff_base_s = 1.0;
  double backoff_max_s = 30.0;
  double retry_after_cap_s = 120.0;
  std::size_t max_response_bytes = 32u << 20;
  int max_tokens = 8192;
  std::optional<double> temperature;
  // Overrides the shipped price table (skills/llm/prices.yaml).
  std::optional<Price> price;
  // Cassettes: enabled when cassette_dir is set and record_mode is not Disabled.
  std::string cassette_dir;
  std::string cassette_name = "llm";
  RecordMode record_mode = RecordMode::Disabled;
  // Built-in provider: where analysers are looked up; null means the process-wide registry.
  std::shared_ptr<AnalyserRegistry> analysers;
  // When set, every response is added to it (usage and cost for report.json).
  std::shared_ptr<UsageLedger> ledger;
};

// What `liger-agent llm check` reports.
struct EndpointCheck {
  bool needs_endpoint = true;
  bool configured = true;  // false: the provider could not even be built (missing key, bad URL)
  bool reachable = false;
  bool auth_ok = false;
  bool model_ok = false;
  // The probe came back as a usable answer. Only this proves the endpoint works: a server that
  // answers 500 or 429 is reachable, but says nothing about the key or the model.
  bool answered = false;
  long http_status = 0;  // of the last answer; 0 when none arrived
  // Empty when ok; else one of: config, unreachable, timeout, auth, model, rate_limited,
  // server_error, rejected, malformed.
  std::string failure;
  double latency_s = 0.0;
  std::string endpoint;  // base URL actually used
  std::string model;
  std::string message;   // what happened, one line
  std::string hint;      // how to fix it, empty when all is well
  bool ok() const noexcept { return !needs_endpoint || (answered && reachable && auth_ok && model_ok); }
};

class Provider {
 public:
  virtual ~Provider() = default;

  // Sends the conversation and returns the answer. Streams when `on_text` is set. Fills cost
  // and latency and adds the response to the ledger. Throws liger::Error (Llm, Network, Config).
  Response complete(const Request& request, const StreamCallback& on_text = {});

  virtual std::string name() const = 0;
  virtual std::string model() const = 0;
  // True when asking the same question again gives the same answer, so re-asking is useless.
  virtual bool deterministic() const { return false; }
  virtual EndpointCheck check() = 0;

  void set_ledger(std::shared_ptr<UsageLedger> ledger) { ledger_ = std::move(ledger); }
  void set_price(std::optional<Price> price) { price_ = price; }
  const std::shared_ptr<UsageLedger>& ledger() const noexcept { return ledger_; }

 protected:
  virtual Response do_complete(const Request& request, const StreamCallback& on_text) = 0;

 private:
  std::shared_ptr<UsageLedger> ledger_;
  std::optional<Price> price_;
};

// Throws liger::Error(Config) for a missing key (naming the variable) or a bad base URL.
std::unique_ptr<Provider> make_provider(const ProviderConfig& config);

// Builds the provider and sends it one tiny request; never throws for endpoint problems, it
// reports them (a missing key included) with a hint.
EndpointCheck check_endpoint(const ProviderConfig& config);

// Maps the layered configuration (the llm.* keys of liger::Config) onto a ProviderConfig; the
// one place that does, so workflows and the CLI build providers the same way
// (src/llm/config_bridge.cpp). llm.record / llm.cassette_dir (also LIGER_AGENT_RECORD /
// LIGER_AGENT_CASSETTE_DIR) select the cassette: a directory without a mode means `once`.
// Throws liger::Error(Config) for an unknown provider or record mode.
ProviderConfig provider_config_from(const Config& config);

// The configuration of a run's provider: provider_config_from(config), and unless the user set
// llm.record or llm.cassette_dir, every exchange is recorded (mode all, keys redacted) into
// <run_dir>/llm/cassette.json. A record mode without a directory also uses <run_dir>/llm/;
// llm.record=off explicitly turns recording off.
ProviderConfig run_provider_config(const Config& config, const std::filesystem::path& run_dir);

// The variable the key is read from for this config ("" when no key is used).
std::string api_key_variable(const ProviderConfig& config);
std::string default_base_url(ProviderKind kind);
std::string default_model(ProviderKind kind);

}  // namespace liger::llm
