// Bounded, always-valid-UTF-8 quotes of text that came from an LLM or a server, for the places
// that repeat such text: a re-ask, an error message, a cassette. An answer can be megabytes of
// anything; what is quoted back must stay small and must survive being stored as JSON.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace liger::llm {

// Offset of the first byte that does not start or continue a valid UTF-8 sequence (overlong
// forms, surrogates and code points past U+10FFFF count as invalid); npos when all is valid.
std::size_t first_invalid_utf8(std::string_view text) noexcept;

// `text` with every invalid UTF-8 sequence replaced by U+FFFD.
std::string to_valid_utf8(std::string_view text);

// `text` itself when it is at most head + tail bytes; else its first `head` and last `tail`
// bytes (cut on character boundaries) around a marker "... (N bytes omitted) ...". Either way
// made valid UTF-8.
std::string bounded_excerpt(std::string_view text, std::size_t head, std::size_t tail = 0);

}  // namespace liger::llm
