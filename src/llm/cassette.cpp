#include "liger/llm/cassette.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "liger/error.h"
#include "liger/llm/excerpt.h"
#include "liger/util.h"

namespace liger::llm {

RecordMode parse_record_mode(std::string_view text) {
  if (text == "none") return RecordMode::ReplayOnly;
  if (text == "once") return RecordMode::Once;
  if (text == "all") return RecordMode::All;
  if (text == "off" || text == "disabled") return RecordMode::Disabled;
  throw Error(ErrorKind::Config, fmt::format("unknown record mode '{}'", text),
              "LIGER_AGENT_RECORD must be one of none, once, all");
}

RecordMode record_mode_from_env(RecordMode fallback) {
  const char* value = std::getenv("LIGER_AGENT_RECORD");
  if (value == nullptr || *value == '\0') return fallback;
  return parse_record_mode(value);
}

const char* to_string(RecordMode mode) noexcept {
  switch (mode) {
    case RecordMode::Disabled: return "off";
    case RecordMode::ReplayOnly: return "none";
    case RecordMode::Once: return "once";
    case RecordMode::All: return "all";
  }
  return "off";
}

std::string normalise_body(const std::string& body) {
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  // nlohmann's object keys are ordered, so dump() is canonical for equal documents.
  if (parsed.is_discarded()) return body;
  return parsed.dump();
}

namespace {

nlohmann::json headers_json(const Headers& headers) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, value] : headers) out.push_back({name, value});
  return out;
}

Headers headers_from_json(const nlohmann::json& value) {
  Headers out;
  if (!value.is_array()) return out;
  for (const auto& pair : value)
    if (pair.is_array() && pair.size() == 2) out.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
  return out;
}

// The stored request keeps its JSON structure so a cassette diff stays readable.
nlohmann::json body_json(const std::string& body) {
  auto parsed = nlohmann::json::parse(body, nullptr, false);
  return parsed.is_discarded() ? nlohmann::json(body) : parsed;
}

std::string body_text(const nlohmann::json& stored) {
  return stored.is_string() ? stored.get<std::string>() : stored.dump();
}

}  // namespace

Cassette::Cassette(std::filesystem::path path, RecordMode mode)
    : path_(std::move(path)), mode_(mode) {
  std::error_code ignored;
  bool exists = std::filesystem::is_regular_file(path_, ignored);
  replaying_ = mode_ == RecordMode::ReplayOnly || (mode_ == RecordMode::Once && exists);
  // In "all" mode the existing exchanges are kept and new ones appended, so one cassette can
  // be re-recorded request by request.
  if (exists) {
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = nlohmann::json::parse(text.str(), nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("interactions") ||
        !parsed["interactions"].is_array()) {
      throw Error(ErrorKind::Config, fmt::format("cassette {} is not valid", path_.string()),
                  "delete it and record again (LIGER_AGENT_RECORD=all)");
    }
    interactions_ = parsed["interactions"];
    used_.assign(interactions_.size(), false);
  }
}

std::size_t Cassette::size() const {
  std::lock_guard lock(mutex_);
  return interactions_.size();
}

std::optional<HttpResponse> Cassette::find(const HttpRequest& request) {
  std::lock_guard lock(mutex_);
  std::string wanted = normalise_body(request.body);
  std::optional<std::size_t> fallback;
  for (std::size_t i = 0; i < interactions_.size(); ++i) {
    const auto& stored = interactions_[i]["request"];
    if (stored.value("method", "") != request.method || stored.value("url", "") != request.url) continue;
    if (normalise_body(body_text(stored["body"])) != wanted) continue;
    // Identical requests asked twice replay their recordings in order; past the last one the
    // last recording answers again.
    fallback = i;
    if (!used_[i]) break;
  }
  if (!fallback) return std::nullopt;
  used_[*fallback] = true;
  const auto& stored = interactions_[*fallback]["response"];
  if (!stored.value("body_complete", true)) {
    throw Error(ErrorKind::Llm,
                fmt::format("cassette {} keeps only an excerpt of the recorded answer to {} {} (it was {} "
                            "bytes{}), so that exchange cannot be replayed",
                            path_.string(), request.method, redact(request.url), stored.value("body_bytes", 0),
                            stored.value("body_utf8", true) ? "" : " and not UTF-8"),
                "record it again: llm.record: all (or LIGER_AGENT_RECORD=all)");
  }
  HttpResponse response;
  response.status = stored.value("status", 0L);
  response.headers = headers_from_json(stored.value("headers", nlohmann::json::array()));
  response.body = stored.value("body", "");
  response.final_url = request.url;
  return response;
}

void Cassette::append_and_save(const HttpRequest& request, const HttpResponse& response,
                               const std::vector<std::string>& secrets) {
  std::lock_guard lock(mutex_);
  const bool utf8 = first_invalid_utf8(response.body) == std::string::npos;
  const bool complete = utf8 && response.body.size() <= kCassetteBodyLimit;
  nlohmann::json entry = {
      {"request",
       {{"method", request.method},
        {"url", redact(request.url, secrets)},
        {"headers", headers_json(redact_headers(request.headers, secrets))},
        {"body", body_json(redact(request.body, secrets))}}},
      {"response",
       {{"status", response.status},
        {"headers", headers_json(redact_headers(response.headers, secrets))},
        {"body", complete ? redact(response.body, secrets)
                          : bounded_excerpt(redact(response.body, secrets), 4096, 1024)}}}};
  if (!complete) {
    entry["response"]["body_complete"] = false;
    entry["response"]["body_bytes"] = response.body.size();
    entry["response"]["body_utf8"] = utf8;
  }
  interactions_.push_back(std::move(entry));
  used_.push_back(true);

  // Atomic: a run killed mid-write leaves the previous cassette intact, and a failed write
  // leaves no temporary file. `replace` keeps stray invalid bytes (a header) from aborting it.
  util::write_file_atomic(path_, nlohmann::json{{"version", 1}, {"interactions", interactions_}}.dump(
                                     2, ' ', false, nlohmann::json::error_handler_t::replace) +
                                     "\n");
}

HttpResponse Cassette::execute(const HttpRequest& request, const BodyChunkCallback& on_chunk,
                               const LiveSend& live, const std::vector<std::string>& secrets) {
  if (replaying_) {
    auto recorded = find(request);
    if (!recorded) {
      throw Error(ErrorKind::Llm,
                  fmt::format("no recorded exchange in cassette {} matches {} {}", path_.string(),
                              request.method, redact(request.url, secrets)),
                  "record it: LIGER_AGENT_RECORD=once (records when the cassette is missing) or "
                  "LIGER_AGENT_RECORD=all (records every exchange again)");
    }
    if (on_chunk && recorded->ok()) on_chunk(recorded->body);
    recorded->attempts = 0;
    return *recorded;
  }
  HttpResponse response = live(request, on_chunk);
  append_and_save(request, response, secrets);
  return response;
}

}  // namespace liger::llm
