// SHA-256 (FIPS 180-4), for binding an approval to the exact bytes that were approved. Written
// here rather than linked from libcrypto so the agent keeps its dependency list (and the GPU
// machines that build it) unchanged.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

namespace liger::util {

class Sha256 {
 public:
  Sha256();
  void update(std::string_view data);
  std::string hex_digest();  // 64 lowercase hex digits; call once

 private:
  void block(const unsigned char* data);
  std::uint32_t state_[8];
  unsigned char buffer_[64];
  std::size_t buffered_ = 0;
  std::uint64_t length_ = 0;  // bytes
};

std::string sha256_hex(std::string_view data);

// The SHA-256 of every regular file and symlink under `dir` (a link: of its target text), keyed
// by the path relative to `dir`; so adding, removing, renaming or editing any file shows as a
// difference. Throws liger::Error (Io) when a file cannot be read.
std::map<std::string, std::string> sha256_files(const std::filesystem::path& dir);

}  // namespace liger::util
