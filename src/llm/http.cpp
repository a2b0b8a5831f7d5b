#include "liger/llm/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "liger/error.h"

namespace liger::llm {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string trim(std::string_view text) {
  std::size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return std::string(text.substr(begin, end - begin));
}

void ensure_curl_initialised() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct UrlHandle {
  CURLU* handle = curl_url();
  ~UrlHandle() { curl_url_cleanup(handle); }
  std::string get(CURLUPart part, unsigned flags = 0) const {
    char* value = nullptr;
    if (curl_url_get(handle, part, &value, flags) != CURLUE_OK || value == nullptr) return {};
    std::string out(value);
    curl_free(value);
    return out;
  }
};

[[noreturn]] void throw_bad_url(const std::string& url) {
  throw Error(ErrorKind::Config, fmt::format("'{}' is not a valid http(s) URL", redact(url)),
              "set llm.base_url to something like https://api.openai.com/v1");
}

}  // namespace

std::optional<std::string> HttpResponse::header(std::string_view name) const {
  std::string wanted = lower(name);
  for (const auto& [key, value] : headers)
    if (lower(key) == wanted) return value;
  return std::nullopt;
}

std::string origin_of(const std::string& url) {
  UrlHandle parsed;
  if (curl_url_set(parsed.handle, CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) throw_bad_url(url);
  std::string scheme = lower(parsed.get(CURLUPART_SCHEME));
  std::string host = lower(parsed.get(CURLUPART_HOST));
  std::string port = parsed.get(CURLUPART_PORT, CURLU_DEFAULT_PORT);
  if ((scheme != "http" && scheme != "https") || host.empty()) throw_bad_url(url);
  return fmt::format("{}://{}:{}", scheme, host, port);
}

std::string resolve_url(const std::string& base, const std::string& reference) {
  UrlHandle parsed;
  if (curl_url_set(parsed.handle, CURLUPART_URL, base.c_str(), 0) != CURLUE_OK) throw_bad_url(base);
  if (curl_url_set(parsed.handle, CURLUPART_URL, reference.c_str(), 0) != CURLUE_OK)
    throw_bad_url(reference);
  return parsed.get(CURLUPART_URL);
}

Headers KeyBinding::headers_for(const std::string& url) const {
  if (secret_headers.empty() || origin.empty()) return {};
  try {
    if (origin_of(url) == origin) return secret_headers;
  } catch (const Error&) {
  }
  return {};
}

bool is_retryable_status(long status) noexcept {
  return status == 408 || status == 409 || status == 429 || (status >= 500 && status <= 599);
}

std::optional<double> retry_after_seconds(const HttpResponse& response) {
  // OpenAI sends a millisecond variant that is more precise than the standard header.
  if (auto ms = response.header("retry-after-ms")) {
    try {
      double value = std::stod(*ms);
      if (value >= 0) return value / 1000.0;
    } catch (const std::exception&) {
    }
  }
  auto value = response.header("retry-after");
  if (!value) return std::nullopt;
  std::string text = trim(*value);
  if (text.empty()) return std::nullopt;
  if (std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; })) {
    try {
      return std::stod(text);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  std::time_t when = curl_getdate(text.c_str(), nullptr);
  if (when < 0) return std::nullopt;
  return std::max(0.0, std::difftime(when, std::time(nullptr)));
}

namespace {

class CurlTransport final : public Transport {
 public:
  CurlTransport() { ensure_curl_initialised(); }

  HttpResponse send(const HttpRequest& request, const TransportLimits& limits,
                    const BodyChunkCallback& on_chunk) override {
    CURL* curl = curl_easy_init();
    if (curl == nullptr) throw Error(ErrorKind::Internal, "curl_easy_init failed");
    struct Cleanup {
      CURL* curl;
      curl_slist* headers = nullptr;
      ~Cleanup() {
        curl_slist_free_all(headers);
        curl_easy_cleanup(curl);
      }
    } cleanup{curl};

    Transfer transfer{curl, limits.max_response_bytes, on_chunk};
    transfer.stall_limit = limits.stall_timeout;
    for (const auto& [name, value] : request.headers)
      cleanup.headers = curl_slist_append(cleanup.headers, (name + ": " + value).c_str());
    // Waiting for "100 Continue" only adds a round trip for the small bodies we send.
    cleanup.headers = curl_slist_append(cleanup.headers, "Expect:");

    char error_buffer[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, cleanup.headers);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    // Redirects are followed by HttpClient, which decides per hop whether the key may go along.
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(limits.connect_timeout.count()));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(limits.total_timeout.count()));
    if (limits.stall_timeout.count() > 0) {
      curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
      curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(limits.stall_timeout.count()));
      // curl judges speed over a window of several seconds, so after a burst of tokens its
      // low-speed abort fires late; tracking the last byte ourselves keeps the limit exact.
      curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &Transfer::on_progress);
      curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
    }
    if (request.method == "GET") {
      curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    } else {
      if (request.method != "POST") curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    }
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &Transfer::on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Transfer::on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);

    CURLcode code = curl_easy_perform(curl);
    if (transfer.callback_error) std::rethrow_exception(transfer.callback_error);
    if (transfer.too_large) {
      throw Error(ErrorKind::Llm,
                  fmt::format("the response from {} exceeded the {} byte limit", redact(request.url),
                              limits.max_response_bytes),
                  "lower the request's max_tokens, or raise llm.max_response_bytes if the answer is "
                  "legitimately this large");
    }
    if (transfer.stalled || code == CURLE_OPERATION_TIMEDOUT) {
      if (transfer.stalled || std::string_view(error_buffer).find("too slow") != std::string_view::npos) {
        throw Error(ErrorKind::Network,
                    fmt::format("{} sent nothing for {} s after {} bytes: the stream stalled",
                                redact(request.url), limits.stall_timeout.count(), transfer.body.size()),
                    "the server stopped sending; try again, or raise llm.stall_timeout_s if the "
                    "model legitimately pauses that long",
                    /*recoverable=*/true);
      }
    }
    if (code != CURLE_OK) throw transport_error(code, error_buffer, request.url, limits);

    HttpResponse response;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
    response.headers = std::move(transfer.headers);
    response.body = std::move(transfer.body);
    response.final_url = request.url;
    return response;
  }

 private:
  struct Transfer {
    CURL* curl;
    std::size_t max_bytes;
    const BodyChunkCallback& on_chunk;
    Headers headers{};
    std::string body{};
    bool too_large = false;
    bool stalled = false;
    std::exception_ptr callback_error{};
    std::chrono::seconds stall_limit{0};
    std::chrono::steady_clock::time_point last_activity = std::chrono::steady_clock::now();

    static int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
      auto* self = static_cast<Transfer*>(user);
      if (self->stall_limit.count() > 0 &&
          std::chrono::steady_clock::now() - self->last_activity > self->stall_limit) {
        self->stalled = true;
        return 1;
      }
      return 0;
    }

    static size_t on_header(char* data, size_t size, size_t count, void* user) {
      auto* self = static_cast<Transfer*>(user);
      self->last_activity = std::chrono::steady_clock::now();
      std::string_view line(data, size * count);
      // A new status line starts a new response (after 100 Continue or a proxy's answer).
      if (line.rfind("HTTP/", 0) == 0) {
        self->headers.clear();
      } else if (auto colon = line.find(':'); colon != std::string_view::npos) {
        self->headers.emplace_back(lower(trim(line.substr(0, colon))), trim(line.substr(colon + 1)));
      }
      return size * count;
    }

    static size_t on_body(char* data, size_t size, size_t count, void* user) {
      auto* self = static_cast<Transfer*>(user);
      std::size_t bytes = size * count;
      self->last_activity = std::chrono::steady_clock::now();
      if (self->body.size() + bytes > self->max_bytes) {
        self->too_large = true;
        return 0;  // makes curl abort the transfer before memory runs away
      }
      self->body.append(data, bytes);
      long status = 0;
      curl_easy_getinfo(self->curl, CURLINFO_RESPONSE_CODE, &status);
      if (self->on_chunk && status >= 200 && status < 300) {
        try {
          self->on_chunk(std::string_view(data, bytes));
        } catch (...) {
          // Exceptions must not unwind through libcurl's C frames.
          self->callback_error = std::current_exception();
          return 0;
        }
      }
      return bytes;
    }
  };

  static Error transport_error(CURLcode code, const char* buffer, const std::string& url,
                               const TransportLimits& limits) {
    std::string detail = buffer[0] != '\0' ? buffer : curl_easy_strerror(code);
    std::string hint;
    switch (code) {
      case CURLE_OPERATION_TIMEDOUT:
        hint = fmt::format(
            "the endpoint did not answer in time (connect {} ms, total {} ms, stall {} s); raise "
            "llm.timeout_s / llm.connect_timeout_s or check that the server is not overloaded",
            limits.connect_timeout.count(), limits.total_timeout.count(),
            limits.stall_timeout.count());
        break;
      case CURLE_COULDNT_CONNECT:
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_COULDNT_RESOLVE_PROXY:
        hint = "check llm.base_url and that the server is running and reachable from here";
        break;
      case CURLE_SSL_CONNECT_ERROR:
      case CURLE_PEER_FAILED_VERIFICATION:
        hint = "TLS failed: check the https URL, the server certificate and the system CA bundle";
        break;
      default:
        hint = "check the network and llm.base_url";
    }
    return Error(ErrorKind::Network,
                 fmt::format("request to {} failed: {}", redact(url), redact(detail)), hint,
                 /*recoverable=*/true);
  }
};

}  // namespace

std::unique_ptr<Transport> make_curl_transport() { return std::make_unique<CurlTransport>(); }

HttpClient::HttpClient(std::shared_ptr<Transport> transport, TransportLimits limits,
                       RetryPolicy policy, KeyBinding key)
    : transport_(std::move(transport)),
      limits_(limits),
      policy_(policy),
      key_(std::move(key)),
      sleeper_([](double seconds) {
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      }) {}

double HttpClient::backoff_delay(int retry_index) {
  thread_local std::mt19937 random{std::random_device{}()};
  double ceiling = std::min(policy_.backoff_max_s,
                            policy_.backoff_base_s * std::pow(2.0, static_cast<double>(retry_index)));
  // Half fixed, half random: clients that failed together do not retry together.
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  return ceiling * jitter(random);
}

HttpResponse HttpClient::send_following_redirects(const HttpRequest& request,
                                                  const BodyChunkCallback& on_chunk) {
  HttpRequest current = request;
  for (int hop = 0; hop <= policy_.max_redirects; ++hop) {
    HttpRequest wire = current;
    for (auto& header : key_.headers_for(current.url)) wire.headers.push_back(header);
    HttpResponse response = transport_->send(wire, limits_, on_chunk);
    bool redirect = response.status == 301 || response.status == 302 || response.status == 303 ||
                    response.status == 307 || response.status == 308;
    auto location = response.header("location");
    if (!redirect || !location) {
      response.final_url = current.url;
      return response;
    }
    std::string next = resolve_url(current.url, *location);
    if (key_.headers_for(next).empty() && !key_.secret_headers.empty())
      spdlog::warn("llm: {} redirects to another origin ({}); following without the API key",
                   redact(current.url), redact(origin_of(next)));
    current.url = next;
    if (response.status == 303) {
      current.method = "GET";
      current.body.clear();
    }
  }
  throw Error(ErrorKind::Llm,
              fmt::format("{} redirected more than {} times", redact(request.url), policy_.max_redirects),
              "point llm.base_url at the final API address");
}

HttpResponse HttpClient::execute(const HttpRequest& request, const BodyChunkCallback& on_chunk) {
  bool delivered = false;
  BodyChunkCallback forward;
  if (on_chunk) {
    forward = [&](std::string_view chunk) {
      delivered = true;
      on_chunk(chunk);
    };
  }
  for (int attempt = 0;; ++attempt) {
    bool last = attempt >= policy_.max_retries;
    HttpResponse response;
    try {
      response = send_following_redirects(request, forward);
    } catch (const Error& error) {
      // Once part of a stream reached the caller a retry would repeat it, so stop there.
      if (error.kind() != ErrorKind::Network || !error.recoverable() || delivered || last) {
        if (error.kind() == ErrorKind::Network && attempt > 0)
          throw Error(error.kind(), fmt::format("{} (after {} attempts)", error.what(), attempt + 1),
                      error.hint(), error.recoverable());
        throw;
      }
      double delay = backoff_delay(attempt);
      spdlog::warn("llm: {}; retrying in {:.1f} s (attempt {}/{})", error.what(), delay,
                   attempt + 2, policy_.max_retries + 1);
      sleeper_(delay);
      continue;
    }
    response.attempts = attempt + 1;
    if (response.ok() || !is_retryable_status(response.status) || last) return response;
    double delay = backoff_delay(attempt);
    if (auto server_wait = retry_after_seconds(response))
      delay = std::min(*server_wait, policy_.retry_after_cap_s);
    spdlog::warn("llm: {} answered HTTP {}; retrying in {:.1f} s (attempt {}/{})",
                 redact(request.url), response.status, delay, attempt + 2,
                 policy_.max_retries + 1);
    sleeper_(delay);
  }
}

}  // namespace liger::llm
