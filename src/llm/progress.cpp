#include "liger/llm/progress.h"

#include <unistd.h>

namespace liger::llm {

LiveIndicator::LiveIndicator(std::string label, std::FILE* stream)
    : label_(std::move(label)),
      stream_(stream),
      enabled_(stream != nullptr && isatty(fileno(stream)) != 0),
      start_(std::chrono::steady_clock::now()) {}

LiveIndicator::~LiveIndicator() { finish(); }

StreamCallback LiveIndicator::callback() {
  return [this](std::string_view delta) { on_text(delta); };
}

void LiveIndicator::on_text(std::string_view delta) {
  characters_ += delta.size();
  if (!enabled_ || finished_) return;
  auto now = std::chrono::steady_clock::now();
  // Redrawing on every token floods slow terminals; ten frames a second reads as live.
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  static constexpr const char* kFrames[] = {"|", "/", "-", "\\"};
  double seconds = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stream_, "\r%s %s ~%zu tokens, %.1f s ", kFrames[frame_++ % 4], label_.c_str(),
               characters_ / 4, seconds);
  std::fflush(stream_);
}

void LiveIndicator::finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_ || last_draw_ == std::chrono::steady_clock::time_point{}) return;
  std::fprintf(stream_, "\r\033[K");  // leave the line clean for whatever prints next
  std::fflush(stream_);
}

}  // namespace liger::llm
