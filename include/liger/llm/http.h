// The HTTP layer under the OpenAI and Anthropic providers: a libcurl transport, retries with
// backoff, manual redirects that never carry a key to another origin, and size/stall limits.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "liger/llm/redact.h"

namespace liger::llm {

struct HttpRequest {
  std::string method = "POST";
  std::string url;
  Headers headers;  // never secrets: those live in KeyBinding
  std::string body;
};

struct HttpResponse {
  long status = 0;
  Headers headers;  // names lower-cased
  std::string body;
  int attempts = 0;
  std::string final_url;

  // Case-insensitive; returns nullopt when absent.
  std::optional<std::string> header(std::string_view name) const;
  bool ok() const noexcept { return status >= 200 && status < 300; }
};

// Receives body bytes of a successful (2xx) response as they arrive, for streaming.
using BodyChunkCallback = std::function<void(std::string_view chunk)>;

struct TransportLimits {
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds total_timeout{600'000};
  // A transfer slower than 1 byte/s for this long is aborted; 0 disables. Only meaningful for
  // streams, where tokens should keep arriving.
  std::chrono::seconds stall_timeout{0};
  std::size_t max_response_bytes = 32u << 20;
};

// One request, one response, no retries or redirects. Throws liger::Error(Network,
// recoverable) for transport failures, liger::Error(Llm) for an over-size response.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual HttpResponse send(const HttpRequest& request, const TransportLimits& limits,
                            const BodyChunkCallback& on_chunk) = 0;
};

std::unique_ptr<Transport> make_curl_transport();

// scheme://host:port, lower-cased, default port filled in; throws liger::Error(Config) on a
// URL that cannot be parsed.
std::string origin_of(const std::string& url);
// Resolves a Location header against the URL it came from.
std::string resolve_url(const std::string& base, const std::string& reference);

// The key (as headers) and the one origin it may be sent to.
struct KeyBinding {
  std::string origin;
  Headers secret_headers;
  std::string key_env;  // for error messages only

  // Secret headers for a request to `url`: empty unless `url` has exactly the bound origin.
  Headers headers_for(const std::string& url) const;
};

struct RetryPolicy {
  int max_retries = 4;
  double backoff_base_s = 1.0;
  double backoff_max_s = 30.0;
  double retry_after_cap_s = 120.0;
  int max_redirects = 5;
};

bool is_retryable_status(long status) noexcept;
// Seconds to wait from a retry-after / retry-after-ms header (delta seconds or HTTP date);
// nullopt when absent or unparsable.
std::optional<double> retry_after_seconds(const HttpResponse& response);

// Retries, backoff and redirects around a Transport. Returns the last response, whatever its
// status, so the provider can turn a final 4xx/5xx into a message that fits its API.
class HttpClient {
 public:
  using Sleeper = std::function<void(double seconds)>;

  HttpClient(std::shared_ptr<Transport> transport, TransportLimits limits, RetryPolicy policy,
             KeyBinding key);

  // Tests replace the sleeper to observe waits; the default really sleeps.
  void set_sleeper(Sleeper sleeper) { sleeper_ = std::move(sleeper); }

  HttpResponse execute(const HttpRequest& request, const BodyChunkCallback& on_chunk = {});

  const KeyBinding& key() const noexcept { return key_; }
  const TransportLimits& limits() const noexcept { return limits_; }
  const RetryPolicy& policy() const noexcept { return policy_; }

 private:
  HttpResponse send_following_redirects(const HttpRequest& request,
                                        const BodyChunkCallback& on_chunk);
  double backoff_delay(int retry_index);

  std::shared_ptr<Transport> transport_;
  TransportLimits limits_;
  RetryPolicy policy_;
  KeyBinding key_;
  Sleeper sleeper_;
};

}  // namespace liger::llm
