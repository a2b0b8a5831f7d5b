#include "llm/http_provider.h"

#include <chrono>
#include <cstdlib>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "liger/error.h"

namespace liger::llm {

namespace {

std::string without_trailing_slash(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

std::string first_chars(const std::string& text, std::size_t limit) {
  if (text.size() <= limit) return text;
  return text.substr(0, limit) + "...";
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
  http.body = build_body(request, stream).dump();
  spdlog::debug("llm: {} request to {} ({} bytes{})", api_name_, redact(http.url), http.body.size(),
                stream ? ", streamed" : "");

  Answer answer;
  SseParser parser([&](const SseEvent& event) {
    answer.events_seen = true;
    read_event(event, answer, on_text);
  });
  BodyChunkCallback on_chunk;
  if (stream) on_chunk = [&](std::string_view chunk) { parser.feed(chunk); };

  HttpResponse response = exchange(http, on_chunk);
  if (!response.ok()) fail(response);
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
      return redact(error["message"].get<std::string>());
    if (error.is_string()) return redact(error.get<std::string>());
  }
  return redact(first_chars(body, 300));
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

void HttpProvider::fail_malformed(const std::string& what, const std::string& body) const {
  throw Error(ErrorKind::Llm,
              fmt::format("malformed answer from {} at {}: {}; body starts with: {}", api_name_,
                          base_url_, what, redact(first_chars(body, 200))),
              "check that llm.base_url points at an OpenAI-compatible (llm.provider: openai) or "
              "Anthropic (llm.provider: anthropic) API matching llm.provider");
}

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
    result.reachable = result.auth_ok = result.model_ok = true;
    result.message = fmt::format("{} answered in {:.2f} s ({} output tokens)", model_,
                                 result.latency_s, response.usage.output_tokens);
  } catch (const Error& error) {
    result.latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string message = error.what();
    result.message = message;
    result.hint = error.hint();
    if (error.kind() == ErrorKind::Network && message.find("(HTTP ") == std::string::npos) {
      result.reachable = false;  // never got an HTTP answer
    } else {
      result.reachable = true;
      bool auth_failed = message.find("rejected the API key") != std::string::npos;
      result.auth_ok = !auth_failed;
      bool model_problem = message.find("404") != std::string::npos ||
                           message.find("model") != std::string::npos;
      result.model_ok = !auth_failed && !model_problem && error.kind() != ErrorKind::Llm;
    }
  }
  return result;
}

}  // namespace liger::llm
