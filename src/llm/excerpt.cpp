#include "liger/llm/excerpt.h"

#include <fmt/format.h>

namespace liger::llm {

namespace {

// Length of the valid UTF-8 sequence starting at `pos`, or 0 when the bytes there are not one.
std::size_t sequence_length(std::string_view text, std::size_t pos) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return 1;
  std::size_t length;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (pos + length > text.size()) return 0;
  if (byte(pos + 1) < low || byte(pos + 1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i)
    if (byte(pos + i) < 0x80 || byte(pos + i) > 0xBF) return 0;
  return length;
}

bool is_continuation(char c) noexcept { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

std::size_t first_invalid_utf8(std::string_view text) noexcept {
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t length = sequence_length(text, pos);
    if (length == 0) return pos;
    pos += length;
  }
  return std::string_view::npos;
}

std::string to_valid_utf8(std::string_view text) {
  if (first_invalid_utf8(text) == std::string_view::npos) return std::string(text);
  std::string out;
  out.reserve(text.size() + 16);
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t length = sequence_length(text, pos);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      ++pos;
    } else {
      out.append(text.substr(pos, length));
      pos += length;
    }
  }
  return out;
}

std::string bounded_excerpt(std::string_view text, std::size_t head, std::size_t tail) {
  if (text.size() <= head + tail) return to_valid_utf8(text);
  // Move the cuts off the middle of a multi-byte character: back for the head's end, forward
  // for the tail's start (at most 3 bytes either way in valid text).
  std::size_t head_end = head;
  for (int i = 0; i < 3 && head_end > 0 && is_continuation(text[head_end]); ++i) --head_end;
  std::size_t tail_start = text.size() - tail;
  for (int i = 0; i < 3 && tail_start < text.size() && is_continuation(text[tail_start]); ++i) ++tail_start;
  const std::size_t omitted = tail_start - head_end;
  std::string out = to_valid_utf8(text.substr(0, head_end));
  out += fmt::format("\n... ({} bytes omitted) ...\n", omitted);
  out += to_valid_utf8(text.substr(tail_start));
  return out;
}

}  // namespace liger::llm
