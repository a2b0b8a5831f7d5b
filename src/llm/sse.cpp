#include "liger/llm/sse.h"

namespace liger::llm {

SseParser::SseParser(std::function<void(const SseEvent&)> on_event)
    : on_event_(std::move(on_event)) {}

void SseParser::feed(std::string_view bytes) {
  pending_.append(bytes);
  std::size_t start = 0;
  for (;;) {
    std::size_t newline = pending_.find('\n', start);
    if (newline == std::string::npos) break;
    std::string_view line(pending_.data() + start, newline - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    take_line(line);
    start = newline + 1;
  }
  pending_.erase(0, start);
}

void SseParser::finish() {
  if (!pending_.empty()) {
    std::string rest;
    rest.swap(pending_);
    take_line(rest);
  }
  take_line("");
}

void SseParser::take_line(std::string_view line) {
  if (line.empty()) {
    if (has_data_ || !current_.event.empty()) on_event_(current_);
    current_ = {};
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // comment / keep-alive
  std::size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "event") {
    current_.event.assign(value);
  } else if (field == "data") {
    if (has_data_) current_.data.push_back('\n');
    current_.data.append(value);
    has_data_ = true;
  }
}

}  // namespace liger::llm
