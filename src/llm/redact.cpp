#include "liger/llm/redact.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <streambuf>

#include <spdlog/details/log_msg.h>

namespace liger::llm {

struct SecretRegistry::State {
  mutable std::mutex mutex;
  std::vector<std::string> secrets;
};

SecretRegistry::SecretRegistry() : state_(std::make_shared<State>()) {}

SecretRegistry& SecretRegistry::global() {
  static SecretRegistry registry;
  return registry;
}

void SecretRegistry::add(std::string secret) {
  // A very short "secret" would shred ordinary text; such values are not real keys anyway.
  if (secret.size() < 6) return;
  std::lock_guard lock(state_->mutex);
  if (std::find(state_->secrets.begin(), state_->secrets.end(), secret) == state_->secrets.end())
    state_->secrets.push_back(std::move(secret));
}

std::vector<std::string> SecretRegistry::secrets() const {
  std::lock_guard lock(state_->mutex);
  return state_->secrets;
}

namespace {

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
         c == '~' || c == '+' || c == '/' || c == '=';
}

void replace_all(std::string& text, const std::string& needle) {
  if (needle.empty()) return;
  for (std::size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + kRedacted.size())) {
    text.replace(pos, needle.size(), kRedacted);
  }
}

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

// Redacts the token that follows each occurrence of `marker` when it is at least `min_length`
// long, so keys we were never told about (pasted into a prompt, echoed by a proxy) still vanish.
// With `word_start`, the marker only counts at the start of a word: "sk-" inside "desk-notes" or
// "task-..." is ordinary text, and redacting it would mangle paths in the files a run writes.
void redact_after_marker(std::string& text, std::string_view marker, std::size_t min_length,
                         bool keep_marker, bool case_insensitive, bool word_start) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t hit;
    if (case_insensitive) {
      auto it = std::search(text.begin() + static_cast<std::ptrdiff_t>(pos), text.end(),
                            marker.begin(), marker.end(), [](char a, char b) {
                              return std::tolower(static_cast<unsigned char>(a)) ==
                                     std::tolower(static_cast<unsigned char>(b));
                            });
      hit = it == text.end() ? std::string::npos : static_cast<std::size_t>(it - text.begin());
    } else {
      hit = text.find(marker, pos);
    }
    if (hit == std::string::npos) return;
    std::size_t start = hit + marker.size();
    if (word_start && hit > 0 && is_word_char(text[hit - 1])) {
      pos = start;
      continue;
    }
    std::size_t end = start;
    while (end < text.size() && is_token_char(text[end])) ++end;
    if (end - start >= min_length) {
      std::size_t from = keep_marker ? start : hit;
      text.replace(from, end - from, kRedacted);
      pos = from + kRedacted.size();
    } else {
      pos = start;
    }
  }
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

namespace {

void replace_secrets(std::string& text, std::vector<std::string> secrets) {
  // Longest first, so a key that contains another registered key is removed whole.
  std::sort(secrets.begin(), secrets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const auto& secret : secrets) replace_all(text, secret);
}

}  // namespace

std::string redact(std::string_view text, const std::vector<std::string>& extra_secrets) {
  std::string out(text);
  auto secrets = SecretRegistry::global().secrets();
  secrets.insert(secrets.end(), extra_secrets.begin(), extra_secrets.end());
  replace_secrets(out, std::move(secrets));
  redact_after_marker(out, "sk-", 16, false, false, true);
  redact_after_marker(out, "Bearer ", 8, true, true, false);
  return out;
}

std::string redact_known_secrets(std::string_view text) {
  std::string out(text);
  replace_secrets(out, SecretRegistry::global().secrets());
  return out;
}

void register_environment_keys(const std::string& key_env) {
  std::vector<std::string> names = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"};
  if (!key_env.empty() && key_env != "none") names.push_back(key_env);
  for (const auto& name : names) {
    if (const char* value = std::getenv(name.c_str()); value != nullptr) SecretRegistry::global().add(value);
  }
}

bool is_sensitive_header(std::string_view name) noexcept {
  static constexpr std::string_view kNames[] = {
      "authorization", "proxy-authorization", "x-api-key", "api-key",  "cookie",
      "set-cookie",    "x-goog-api-key",      "openai-organization",   "openai-project"};
  std::string name_lower = lower(name);
  return std::find(std::begin(kNames), std::end(kNames), name_lower) != std::end(kNames);
}

Headers redact_headers(const Headers& headers, const std::vector<std::string>& extra_secrets) {
  Headers out;
  out.reserve(headers.size());
  for (const auto& [name, value] : headers) {
    out.emplace_back(name, is_sensitive_header(name) ? std::string(kRedacted)
                                                     : redact(value, extra_secrets));
  }
  return out;
}

namespace {

class RedactingSink final : public spdlog::sinks::sink {
 public:
  explicit RedactingSink(std::shared_ptr<spdlog::sinks::sink> inner) : inner_(std::move(inner)) {}

  void log(const spdlog::details::log_msg& msg) override {
    std::string clean = redact(std::string_view(msg.payload.data(), msg.payload.size()));
    spdlog::details::log_msg copy = msg;
    copy.payload = spdlog::string_view_t(clean.data(), clean.size());
    inner_->log(copy);
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    inner_->set_formatter(std::move(formatter));
  }

 private:
  std::shared_ptr<spdlog::sinks::sink> inner_;
};

}  // namespace

std::shared_ptr<spdlog::sinks::sink> make_redacting_sink(std::shared_ptr<spdlog::sinks::sink> inner) {
  return std::make_shared<RedactingSink>(std::move(inner));
}

namespace {

// Holds output back until a line is complete (or the stream is flushed, as before a prompt or
// at exit), so a key printed in several pieces on one line is still seen whole by redact().
class RedactingStreambuf final : public std::streambuf {
 public:
  explicit RedactingStreambuf(std::streambuf* inner) : inner_(inner) {}

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    const char c = traits_type::to_char_type(ch);
    std::lock_guard lock(mutex_);
    pending_.push_back(c);
    if (c == '\n') forward(pending_.size());
    return ch;
  }

  std::streamsize xsputn(const char* data, std::streamsize count) override {
    std::lock_guard lock(mutex_);
    pending_.append(data, static_cast<std::size_t>(count));
    if (std::memchr(data, '\n', static_cast<std::size_t>(count)) != nullptr)
      forward(pending_.rfind('\n') + 1);
    return count;
  }

  int sync() override {
    std::lock_guard lock(mutex_);
    forward(pending_.size());
    return inner_->pubsync();
  }

 private:
  void forward(std::size_t count) {
    if (count == 0) return;
    const std::string clean = redact(std::string_view(pending_).substr(0, count));
    inner_->sputn(clean.data(), static_cast<std::streamsize>(clean.size()));
    pending_.erase(0, count);
  }

  std::streambuf* inner_;
  std::mutex mutex_;
  std::string pending_;
};

}  // namespace

void redact_standard_streams() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Never deleted: std::cout is flushed by the runtime after main() returns and static
    // objects are gone, and that flush must still find this buffer.
    std::cout.rdbuf(new RedactingStreambuf(std::cout.rdbuf()));
    std::cerr.rdbuf(new RedactingStreambuf(std::cerr.rdbuf()));
  });
}

}  // namespace liger::llm
