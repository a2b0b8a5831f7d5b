// Record/replay of HTTP exchanges, so tests and reruns exercise the real providers without a
// network. A cassette is one JSON file; secrets are scrubbed before anything is written.
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "liger/llm/http.h"

namespace liger::llm {

enum class RecordMode {
  Disabled,    // no cassette: every request goes to the network
  ReplayOnly,  // LIGER_AGENT_RECORD=none: a request missing from the cassette is an error
  Once,        // replay if the cassette exists, record it otherwise
  All,         // always go to the network and record
};

// Accepts none|once|all (and off|disabled); throws liger::Error(Config) otherwise.
RecordMode parse_record_mode(std::string_view text);
// Reads LIGER_AGENT_RECORD; `fallback` when unset or empty.
RecordMode record_mode_from_env(RecordMode fallback);
const char* to_string(RecordMode mode) noexcept;

// The same request must match however its JSON keys were ordered or spaced.
std::string normalise_body(const std::string& body);

// A recorded answer body larger than this, or one that is not UTF-8, is kept only as a bounded
// excerpt marked incomplete: a cassette must not grow by the size of every runaway answer, and
// JSON cannot hold arbitrary bytes. Replaying such an exchange is an error that says so. Real
// answers are far smaller (an 8k-token answer is about 32 KiB).
inline constexpr std::size_t kCassetteBodyLimit = 2u << 20;

class Cassette {
 public:
  // A Once cassette decides between replay and record when it is opened, so a recording that
  // is still in progress never starts replaying itself.
  Cassette(std::filesystem::path path, RecordMode mode);

  using LiveSend = std::function<HttpResponse(const HttpRequest&, const BodyChunkCallback&)>;

  // Replays a matching interaction (feeding its raw body to on_chunk) or calls `live` and
  // records the result, according to the mode. `secrets` are scrubbed from what is written.
  HttpResponse execute(const HttpRequest& request, const BodyChunkCallback& on_chunk,
                       const LiveSend& live, const std::vector<std::string>& secrets);

  const std::filesystem::path& path() const noexcept { return path_; }
  bool replaying() const noexcept { return replaying_; }
  std::size_t size() const;

 private:
  std::optional<HttpResponse> find(const HttpRequest& request);
  void append_and_save(const HttpRequest& request, const HttpResponse& response,
                       const std::vector<std::string>& secrets);

  std::filesystem::path path_;
  RecordMode mode_;
  bool replaying_ = false;
  mutable std::mutex mutex_;
  nlohmann::json interactions_ = nlohmann::json::array();
  std::vector<bool> used_;
};

}  // namespace liger::llm
