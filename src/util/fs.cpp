#include "liger/util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>

#include "liger/error.h"
#include "liger/llm/redact.h"

namespace liger::util {

namespace {

Error io_error(const std::string& what, const fs::path& path, int err) {
  return Error(ErrorKind::Io, what + " '" + path.string() + "': " + std::strerror(err),
               "check that the path exists and is writable by this user");
}

}  // namespace

void write_all(int fd, std::string_view content, const fs::path& path) {
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t written = ::write(fd, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      throw io_error("cannot write", path, errno);
    }
    data += written;
    left -= static_cast<std::size_t>(written);
  }
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io_error("cannot read", path, errno ? errno : ENOENT);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_file_atomic(const fs::path& path, std::string_view content) {
  write_file_atomic_verbatim(path, llm::redact_known_secrets(content));
}

void write_file_atomic_verbatim(const fs::path& path, std::string_view content) {
  fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw io_error("cannot create directory", dir, ec.value());

  static thread_local std::mt19937_64 rng{std::random_device{}()};
  fs::path temp = dir / (".tmp-" + path.filename().string() + "-" + std::to_string(::getpid()) +
                         "-" + std::to_string(rng() % 1000000));
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw io_error("cannot create", temp, errno);
  try {
    write_all(fd, content, temp);
    if (::fsync(fd) != 0) throw io_error("cannot fsync", temp, errno);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    throw io_error("cannot rename into place", path, err);
  }
  // The rename itself must reach the disk, otherwise a power loss can resurrect the old file.
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

std::string now_iso8601() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

std::string now_run_stamp() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y%m%d-%H%M%S", &local);
  return buffer;
}

long long parse_iso8601(const std::string& text) {
  std::tm utc{};
  std::istringstream in(text);
  in >> std::get_time(&utc, "%Y-%m-%dT%H:%M:%SZ");
  if (in.fail()) return -1;
  return static_cast<long long>(timegm(&utc));
}

std::string format_age(long long seconds) {
  if (seconds < 0) return "?";
  if (seconds < 120) return std::to_string(seconds) + "s";
  if (seconds < 2 * 3600) return std::to_string(seconds / 60) + "m";
  if (seconds < 2 * 86400) return std::to_string(seconds / 3600) + "h";
  return std::to_string(seconds / 86400) + "d";
}

std::string slugify(std::string_view text, std::size_t max_len) {
  std::string slug;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      slug += static_cast<char>(std::tolower(u));
    } else if (!slug.empty() && slug.back() != '-') {
      slug += '-';
    }
    if (slug.size() >= max_len) break;
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return slug.empty() ? "run" : slug;
}

bool interactive_terminal() { return ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO); }

std::string trim(std::string_view text) {
  std::size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return std::string(text.substr(begin, end - begin));
}

}  // namespace liger::util
