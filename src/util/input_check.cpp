#include "liger/input_check.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "liger/error.h"

namespace liger::input {

namespace {

// Offset of the first byte that breaks UTF-8, or npos.
std::size_t first_invalid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t length;
    std::uint32_t code;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      length = 2;
      code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3;
      code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4;
      code = c & 0x07;
    } else {
      return i;
    }
    if (i + length > text.size()) return i;
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return i;
      code = (code << 6) | (next & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
    static constexpr std::uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[length] || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return i;
    i += length;
  }
  return std::string_view::npos;
}

std::string shown(const std::string& arg) {
  std::string text = arg.size() > 80 ? arg.substr(0, 77) + "..." : arg;
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return "'" + text + "'";
}

// A binary file (an object file, an image, a model checkpoint, a file in UTF-16) given where
// source text is expected: refused before a run exists, naming the first byte that is not text.
// Only the first few MiB are read: the callers' size limits are far below that.
void check_text_file(const std::string& path, const std::string& what) {
  constexpr std::size_t kScanBytes = 8u << 20;
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) return;  // unreadable files are reported by whoever reads them
  std::string head(kScanBytes, '\0');
  head.resize(std::fread(head.data(), 1, head.size(), file));
  std::fclose(file);
  std::size_t bad = head.find('\0');
  const char* problem = "a NUL byte";
  if (bad == std::string::npos) {
    // A multi-byte character cut by the scan limit is not an error.
    bad = first_invalid_utf8(head);
    if (bad != std::string::npos && head.size() == kScanBytes && head.size() - bad < 4) bad = std::string::npos;
    problem = "a byte that is not UTF-8";
  }
  if (bad == std::string::npos) return;
  char byte[8];
  std::snprintf(byte, sizeof(byte), "0x%02x", static_cast<unsigned char>(head[bad]));
  throw Error(ErrorKind::Usage,
              what + " " + shown(path) + " is not a text file: " + problem + " (" + byte + ") at offset " +
                  std::to_string(bad),
              "pass a UTF-8 text file (Python source, or the request itself as text); convert other encodings "
              "first, e.g. iconv -f UTF-16 -t UTF-8");
}

}  // namespace

bool valid_utf8(std::string_view text) { return first_invalid_utf8(text) == std::string_view::npos; }

Argument classify_argument(const std::string& arg, const std::string& what, std::size_t max_text_bytes,
                           const std::string& hint_long) {
  Argument result;
  std::error_code ec;
  // Looked up with an error code: an argument too long to be a file name (ENAMETOOLONG) or that
  // names nothing is inline text, not a filesystem error.
  const fs::file_status status = arg.empty() ? fs::file_status{} : fs::status(arg, ec);
  if (!ec && fs::exists(status)) {
    if (fs::is_regular_file(status)) {
      if (::access(arg.c_str(), R_OK) != 0) {
        throw Error(ErrorKind::Usage, what + " " + shown(arg) + " is a file that cannot be read (" +
                                          std::strerror(errno) + ")",
                    "check its permissions, or pass a different file");
      }
      check_text_file(arg, what);
      result.is_file = true;
      result.file = arg;
      return result;
    }
    std::string kind = fs::is_directory(status) ? "a directory"
                       : fs::is_fifo(status)    ? "a FIFO (named pipe)"
                       : fs::is_socket(status)  ? "a socket"
                                                : "a device";
    throw Error(ErrorKind::Usage, what + " " + shown(arg) + " is " + kind + ", not a file or text",
                "pass a regular file, or the text itself (quote it so the shell does not split it)");
  }
  if (const std::size_t bad = first_invalid_utf8(arg); bad != std::string::npos) {
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02x", static_cast<unsigned char>(arg[bad]));
    throw Error(ErrorKind::Usage,
                what + " is not valid UTF-8 text (byte " + byte + " at offset " + std::to_string(bad) + ")",
                "pass the text in UTF-8 (check the terminal's or the script's encoding)");
  }
  if (arg.size() > max_text_bytes) {
    throw Error(ErrorKind::Usage,
                what + " is " + std::to_string(arg.size()) + " bytes long; inline text is at most " +
                    std::to_string(max_text_bytes) + " bytes (" + shown(arg) + ")",
                hint_long);
  }
  result.text = arg;
  return result;
}

void require_checkout(const fs::path& tree, const std::vector<std::string>& markers, const std::string& flag) {
  std::error_code ec;
  const fs::file_status status = fs::status(tree, ec);
  if (ec || !fs::exists(status)) {
    throw Error(ErrorKind::Usage, flag + " '" + tree.string() + "' does not exist",
                "pass the root of a liger-agent checkout (the folder holding kernels/ and docs/)");
  }
  if (!fs::is_directory(status)) {
    throw Error(ErrorKind::Usage, flag + " '" + tree.string() + "' is not a directory",
                "pass the root of a liger-agent checkout (the folder holding kernels/ and docs/)");
  }
  std::vector<std::string> missing;
  for (const auto& marker : markers)
    if (!fs::exists(tree / marker, ec)) missing.push_back(marker);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw Error(ErrorKind::Usage,
                flag + " '" + tree.string() + "' is not a checkout of the kernel library (it has no " + list + ")",
                "pass the root of a liger-agent checkout, or leave " + flag + " out to use the checkout holding the current directory");
  }
  if (::access(tree.c_str(), W_OK) != 0) {
    throw Error(ErrorKind::Usage, flag + " '" + tree.string() + "' is not writable (" + std::strerror(errno) + ")",
                "the generated files are applied there: pass a checkout you can write to");
  }
}

}  // namespace liger::input
