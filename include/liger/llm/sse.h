// Server-sent events as both the OpenAI and Anthropic streaming APIs send them.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace liger::llm {

struct SseEvent {
  std::string event;  // "" when the server sent no event: line
  std::string data;   // data: lines joined with '\n'
};

// Fed arbitrary slices of the byte stream; calls back once per complete event.
class SseParser {
 public:
  explicit SseParser(std::function<void(const SseEvent&)> on_event);
  void feed(std::string_view bytes);
  // Dispatches an event left without its terminating blank line (a server that closed early).
  void finish();

 private:
  void take_line(std::string_view line);
  std::function<void(const SseEvent&)> on_event_;
  std::string pending_;
  SseEvent current_;
  bool has_data_ = false;
};

}  // namespace liger::llm
