#include "llm/http_provider.h"

#include <chrono>
#include <cstdlib>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "liger/error.h"
#include "liger/llm/excerpt.h"

namespace liger::llm {

namespace {

std::string without_trailing_slash(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// What an error message may quote of a server's body: short, valid UTF-8, no key.
std::string quoted(const std::string& text, std::size_t limit) {
  // Redacted before the cut, so a key straddling the cut cannot leave its first half behind.
  return bounded_excerpt(redact(text), limit);
}

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0));
}

}  // namespace

std::string joined_system_prompt(const std::vector<Message>& messages) {
  std::string out;
  for (const auto& message : messages) {
    if (message.role != Role::System) continue;
    if (!out.empty()) out += "\n\n";
    out += message.content;
  }
  return out;
}

std::vector<Message> merged_turns(const std::vector<Message>& messages, bool drop_system) {
  std::vector<Message> out;
  for (const auto& message : messages) {
    if (drop_system && message.role == Role::System) continue;
    if (!out.empty() && out.back().role == message.role) {
      out.back().content += "\n\n" + message.content;
    } else {
      out.push_back(message);
    }
  }
  return out;
}

HttpProvider::HttpProvider(const ProviderConfig& config, std::string api_name, KeyHeaders key_headers)
    : config_(config), api_name_(std::move(api_name)) {
  base_url_ = without_trailing_slash(config.base_url.empty() ? default_base_url(config.kind) : config.base_url);
  model_ = config.model.empty() ? default_model(config.kind) : config.model;
  std::string origin = origin_of(base_url_);  // rejects a malformed base URL up front

  if (!config.cassette_dir.empty() && config.record_mode != RecordMode::Disabled) {
    cassette_ = std::make_unique<Cassette>(
        std::filesystem::path(config.cassette_dir) / (config.cassette_name + ".json"), config.record_mode);
  }

  key_env_ = api_key_variable(config);
  if (!key_env_.empty()) {
    const char* value = std::getenv(key_env_.c_str());
    if (value != nullptr) key_ = value;
    // A replaying cassette never reaches the network, so it needs no key.
    bool replay_only = cassette_ && cassette_->replaying();
    if (key_.empty() && !replay_only) {
      throw Error(ErrorKind::Config,
                  fmt::format("the {} API key is missing: environment variable {} is not set",
                              api_name_, key_env_),
                  fmt::format("export {}=<your key> (see {}); use llm.api_key_env to read another "
                              "variable, llm.api_key_env: none for a server without auth, or "
                              "--llm builtin to run without an endpoint",
                              key_env_, key_help_url_for(config.kind)));
    }
    if (!key_.empty()) SecretRegistry::global().add(key_);
  }

  TransportLimits limits;
  limits.connect_timeout = to_ms(config.connect_timeout_s);
  limits.total_timeout = to_ms(config.timeout_s);
  limits.stall_timeout = std::chrono::seconds(static_cast<long long>(config.stall_timeout_s));
  limits.max_response_bytes = config.max_response_bytes;
  RetryPolicy policy;
  policy.max_retries = config.max_retries;
  policy.backoff_base_s = config.backoff_base_s;
  policy.backoff_max_s = config.backoff_max_s;
  policy.retry_after_cap_s = config.retry_after_cap_s;
  KeyBinding binding;
  binding.origin = origin;
  binding.key_env = key_env_;
  if (!key_.empty()) binding.secret_headers = key_headers(key_);
  client_ = std::make_shared<HttpClient>(make_curl_transport(), limits, policy, binding);
}

std::string key_help_url_for(ProviderKind kind) {
  return kind == ProviderKind::Anthropic ? "https://console.anthropic.com/settings/keys"
                                         : "https://platform.openai.com/api-keys";
}

HttpResponse HttpProvider::exchange(const HttpRequest& request, const BodyChunkCallback& on_chunk) {
  auto live = [this](const HttpRequest& wire, const BodyChunkCallback& chunk) {
    return client_->execute(wire, chunk);
  };
  std::vector<std::string> secrets;
  if (!key_.empty()) secrets.push_back(key_);
  if (cassette_) return cassette_->execute(request, on_chunk, live, secrets);
  return live(request, on_chunk);
}

Response HttpProvider::do_complete(const Request& request, const StreamCallback& on_text) {
  bool stream = static_cast<bool>(on_text);
  HttpRequest http;
  http.url = endpoint_url();
  http.headers = api_headers();
  http.headers.emplace_back("content-type", "application/json");
  http.headers.emplace_back("accept", stream ? "text/event-stream" : "application/json");
  // Text that is not UTF-8 (a pasted description, a file read from disk) must not abort the
  // request inside the JSON writer; it goes out with U+FFFD in place of the bad bytes.
  http.body = build_body(request, stream).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  spdlog::debug("llm: {} request to {} ({} bytes{})", api_name_, redact(http.url), http.body.size(),
                stream ? ", streamed" : "");

  Answer answer;
  SseParser parser([&](const SseEvent& event) {
    answer.events_seen = true;
    try {
      read_event(event, answer, on_text);
    } catch (const nlohmann::json::exception& error) {
      fail_malformed(error.what(), event.data);  // an event of the wrong shape, not a bug here
    }
  });
  BodyChunkCallback on_chunk;
  if (stream) on_chunk = [&](std::string_view chunk) { parser.feed(chunk); };

  last_status_ = 0;
  HttpResponse response = exchange(http, on_chunk);
  last_status_ = response.status;
  if (!response.ok()) fail(response);
  if (std::size_t bad = first_invalid_utf8(response.body); bad != std::string::npos) fail_not_utf8(response.body, bad);
  if (stream) parser.finish();

  // Some servers ignore "stream": true and answer with one JSON document; accept that too.
  if (!stream || !answer.events_seen) {
    auto body = nlohmann::json::parse(response.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) fail_malformed("response is not a JSON object", response.body);
    try {
      read_body(body, answer);
    } catch (const nlohmann::json::exception& error) {
      fail_malformed(error.what(), response.body);
    }
    if (stream && on_text && !answer.text.empty()) on_text(answer.text);
  }

  Response out;
  out.text = std::move(answer.text);
  out.usage = answer.usage;
  if (!answer.usage_seen) {
    // Servers that report no usage still cost something; about 4 characters per token.
    std::size_t prompt_chars = 0;
    for (const auto& message : request.messages) prompt_chars += message.content.size();
    out.usage.input_tokens = static_cast<std::int64_t>(prompt_chars / 4);
    out.usage.output_tokens = static_cast<std::int64_t>(out.text.size() / 4);
    out.usage.estimated = true;
  }
  out.provider = api_name_;
  out.model = model_;
  out.stop_reason = answer.stop_reason;
  out.http_attempts = response.attempts;
  out.replayed = cassette_ && cassette_->replaying();
  return out;
}

std::string HttpProvider::server_message(const std::string& body) const {
  auto parsed = nlohmann::json::parse(body, nullptr, false);
  if (!parsed.is_discarded() && parsed.is_object()) {
    const auto& error = parsed.contains("error") ? parsed["error"] : parsed;
    if (error.is_object() && error.contains("message") && error["message"].is_string())
      return quoted(error["message"].get<std::string>(), 1000);
    if (error.is_string()) return quoted(error.get<std::string>(), 1000);
  }
  return quoted(body, 300);
}

void HttpProvider::fail(const HttpResponse& response) const {
  std::string detail = server_message(response.body);
  long status = response.status;
  std::string where = fmt::format("{} at {}", api_name_, base_url_);
  if (status == 401 || status == 403) {
    std::string hint =
        key_env_.empty()
            ? "the server wants a key: set llm.api_key_env to the environment variable that holds it"
            : fmt::format("check the key in ${}: it must be a valid {} key for {} (see {}); export "
                          "{}=<key>, or set llm.api_key_env to the variable that holds the right key",
                          key_env_, api_name_, base_url_, key_help_url_for(config_.kind), key_env_);
    throw Error(ErrorKind::Llm,
                fmt::format("{} rejected the API key from ${} (HTTP {}): {}", where,
                            key_env_.empty() ? "<none>" : key_env_, status, detail),
                hint);
  }
  if (status == 404) {
    throw Error(ErrorKind::Llm, fmt::format("{} answered 404 Not Found: {}", where, detail),
                fmt::format("check llm.model ('{}') and llm.base_url (an OpenAI-compatible base URL "
                            "usually ends in /v1)",
                            model_));
  }
  if (status == 400 || status == 422) {
    throw Error(ErrorKind::Llm, fmt::format("{} rejected the request (HTTP {}): {}", where, status, detail),
                fmt::format("the request was not retried; check llm.model ('{}') and that the "
                            "prompt fits the model's context window",
                            model_));
  }
  if (is_retryable_status(status)) {
    std::string what = status == 429   ? "rate limited the requests"
                       : status == 529 ? "is overloaded"
                                       : "kept failing";
    throw Error(ErrorKind::Network,
                fmt::format("{} {} (HTTP {}) after {} attempts: {}", where, what, status,
                            response.attempts, detail),
                "try again later, or raise llm.max_retries", /*recoverable=*/true);
  }
  throw Error(ErrorKind::Llm, fmt::format("{} answered HTTP {}: {}", where, status, detail),
              "check llm.base_url points at the API itself");
}

void HttpProvider::fail_not_utf8(const std::string& body, std::size_t offset) const {
  throw Error(ErrorKind::Llm,
              fmt::format("the answer from {} at {} is not UTF-8 text: byte 0x{:02X} at offset {} of {} "
                          "is not valid UTF-8, so it cannot be read as {} JSON",
                          api_name_, base_url_, static_cast<unsigned char>(body[offset]), offset,
                          body.size(), api_name_),
              "check that llm.base_url points at the API itself (not a proxy page or a file "
              "download) and that llm.provider matches it; `liger-agent llm check` shows what "
              "the endpoint answers");
}

void HttpProvider::fail_malformed(const std::string& what, const std::string& body) const {
  if (std::size_t bad = first_invalid_utf8(body); bad != std::string::npos) fail_not_utf8(body, bad);
  throw Error(ErrorKind::Llm,
              fmt::format("malformed answer from {} at {}: {}; body starts with: {}", api_name_,
                          base_url_, bounded_excerpt(what, 500), quoted(body, 200)),
              "check that llm.base_url points at an OpenAI-compatible (llm.provider: openai) or "
              "Anthropic (llm.provider: anthropic) API matching llm.provider");
}

namespace {

// What a failed probe says about the endpoint, from the HTTP status of its last answer (0: none
// arrived) and the error it raised.
void classify_failure(EndpointCheck& result, const Error& error, long status) {
  const std::string message = error.what();
  result.http_status = status;
  result.reachable = status != 0 || error.kind() != ErrorKind::Network;
  // The key got past the server's authentication whenever the server dealt with the request
  // itself; a 429 or 5xx may come before that check, so they prove nothing about the key.
  result.auth_ok = (status >= 200 && status < 300) || status == 400 || status == 404 || status == 422;
  result.model_ok = false;
  if (!result.reachable) {
    const bool timed_out = message.find("timed out") != std::string::npos ||
                           message.find("stalled") != std::string::npos;
    result.failure = timed_out ? "timeout" : "unreachable";
  } else if (status == 401 || status == 403) {
    result.failure = "auth";
  } else if (status == 404) {
    result.failure = "model";
  } else if (status == 429) {
    result.failure = "rate_limited";
  } else if (status == 408) {
    result.failure = "timeout";
  } else if (status >= 500) {
    result.failure = "server_error";
  } else if (status >= 300) {
    result.failure = "rejected";
  } else {
    result.failure = "malformed";  // a 2xx (or a stream cut short) that is not a usable answer
  }
}

}  // namespace

EndpointCheck HttpProvider::check() {
  EndpointCheck result;
  result.endpoint = base_url_;
  result.model = model_;
  Request probe;
  probe.messages = {user_message("Reply with the single word: ok")};
  probe.max_tokens = 16;
  auto start = std::chrono::steady_clock::now();
  try {
    // Straight to the network: a check answered from a cassette would prove nothing.
    auto saved = std::move(cassette_);
    struct Restore {
      std::unique_ptr<Cassette>& slot;
      std::unique_ptr<Cassette> saved;
      ~Restore() { slot = std::move(saved); }
    } restore{cassette_, std::move(saved)};
    Response response = complete(probe);
    result.latency_s = response.latency_s;
    result.http_status = last_status_;
    result.answered = result.reachable = result.auth_ok = result.model_ok = true;
    result.message = fmt::format("{} answered in {:.2f} s ({} output tokens)", model_,
                                 result.latency_s, response.usage.output_tokens);
  } catch (const Error& error) {
    result.latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.message = error.what();
    result.hint = error.hint();
    classify_failure(result, error, last_status_);
  }
  return result;
}

}  // namespace liger::llm
