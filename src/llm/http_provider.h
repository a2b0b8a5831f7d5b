// Internal: what the OpenAI and Anthropic providers share (key handling, cassettes, retries,
// status-to-error mapping). Workflows only see Provider and make_provider().
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "liger/llm/cassette.h"
#include "liger/llm/http.h"
#include "liger/llm/provider.h"
#include "liger/llm/sse.h"

namespace liger::llm {

class HttpProvider : public Provider {
 public:
  using KeyHeaders = Headers (*)(const std::string& key);
  HttpProvider(const ProviderConfig& config, std::string api_name, KeyHeaders key_headers);

  std::string name() const override { return api_name_; }
  std::string model() const override { return model_; }
  EndpointCheck check() override;

  // Tests swap the transport to count or fake requests below the retry logic.
  HttpClient& client() { return *client_; }

 protected:
  struct Answer {
    std::string text;
    Usage usage;
    bool usage_seen = false;
    std::string stop_reason;
    bool events_seen = false;
  };

  virtual std::string endpoint_url() const = 0;
  virtual Headers api_headers() const = 0;
  virtual nlohmann::json build_body(const Request& request, bool stream) const = 0;
  virtual void read_body(const nlohmann::json& body, Answer& answer) const = 0;
  virtual void read_event(const SseEvent& event, Answer& answer, const StreamCallback& on_text) const = 0;

  Response do_complete(const Request& request, const StreamCallback& on_text) override;

  // Turns a final non-2xx response into the error a user can act on.
  [[noreturn]] void fail(const HttpResponse& response) const;
  [[noreturn]] void fail_malformed(const std::string& what, const std::string& body) const;
  [[noreturn]] void fail_not_utf8(const std::string& body, std::size_t offset) const;

  const ProviderConfig& config() const noexcept { return config_; }
  const std::string& base_url() const noexcept { return base_url_; }
  std::string server_message(const std::string& body) const;

 private:
  HttpResponse exchange(const HttpRequest& request, const BodyChunkCallback& on_chunk);

  ProviderConfig config_;
  std::string api_name_;
  std::string base_url_;
  std::string model_;
  std::string key_env_;
  std::string key_;
  long last_status_ = 0;  // HTTP status of the last exchange, 0 when none completed (for check())
  std::unique_ptr<Cassette> cassette_;
  std::shared_ptr<HttpClient> client_;
};

std::string key_help_url_for(ProviderKind kind);

std::unique_ptr<Provider> make_openai_provider(const ProviderConfig& config);
std::unique_ptr<Provider> make_anthropic_provider(const ProviderConfig& config);

// Both APIs expect the system prompt once and user/assistant turns that alternate.
std::string joined_system_prompt(const std::vector<Message>& messages);
std::vector<Message> merged_turns(const std::vector<Message>& messages, bool drop_system);

}  // namespace liger::llm
