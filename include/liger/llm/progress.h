// A live indication on stderr while a model streams: a spinner and a running token estimate.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "liger/llm/types.h"

namespace liger::llm {

class LiveIndicator {
 public:
  // Draws only when `stream` is a terminal, so CI logs stay clean.
  explicit LiveIndicator(std::string label, std::FILE* stream = stderr);
  ~LiveIndicator();
  LiveIndicator(const LiveIndicator&) = delete;
  LiveIndicator& operator=(const LiveIndicator&) = delete;

  StreamCallback callback();
  void on_text(std::string_view delta);
  void finish();
  std::size_t characters() const noexcept { return characters_; }

 private:
  std::string label_;
  std::FILE* stream_;
  bool enabled_;
  bool finished_ = false;
  std::size_t characters_ = 0;
  int frame_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace liger::llm
