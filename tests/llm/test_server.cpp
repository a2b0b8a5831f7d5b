#include "llm/test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace liger::llm::testing {

namespace {

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 307: return "Temporary Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 418: return "No Scripted Answer";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 529: return "Overloaded";
    default: return "Status";
  }
}

bool send_all(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

std::string lower(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string trim(const std::string& text) {
  auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return {};
  auto end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

}  // namespace

ScriptedAnswer json_answer(int status, std::string body,
                           std::vector<std::pair<std::string, std::string>> headers) {
  ScriptedAnswer answer;
  answer.status = status;
  answer.body = std::move(body);
  answer.headers = std::move(headers);
  answer.headers.emplace_back("Content-Type", "application/json");
  return answer;
}

ScriptedAnswer sse_answer(std::vector<std::string> events, std::chrono::milliseconds delay) {
  ScriptedAnswer answer;
  answer.headers = {{"Content-Type", "text/event-stream"}};
  answer.chunks = std::move(events);
  answer.chunk_delay = delay;
  return answer;
}

TestServer::TestServer(std::vector<ScriptedAnswer> script, std::chrono::seconds lifetime)
    : script_(std::move(script)), deadline_(std::chrono::steady_clock::now() + lifetime) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener_ < 0) throw std::runtime_error("test server: socket() failed");
  int yes = 1;
  ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;  // ephemeral: parallel test runs never collide
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener_, 16) != 0) {
    ::close(listener_);
    throw std::runtime_error("test server: bind/listen failed");
  }
  socklen_t length = sizeof address;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { serve(); });
}

TestServer::~TestServer() { stop(); }

void TestServer::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (listener_ >= 0) {
    ::close(listener_);
    listener_ = -1;
  }
}

std::string TestServer::base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::vector<ReceivedRequest> TestServer::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

std::size_t TestServer::request_count() const {
  std::lock_guard lock(mutex_);
  return requests_.size();
}

void TestServer::serve() {
  while (!stopping_ && std::chrono::steady_clock::now() < deadline_) {
    pollfd waiting{listener_, POLLIN, 0};
    if (::poll(&waiting, 1, 20) <= 0) continue;
    int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) continue;
    handle(client);
    ::close(client);
  }
  // Refuse further connections once stopped, like a server that went away.
  ::shutdown(listener_, SHUT_RDWR);
}

bool TestServer::hold_until_client_leaves(int client) {
  while (!stopping_ && std::chrono::steady_clock::now() < deadline_) {
    pollfd peer{client, POLLIN, 0};
    if (::poll(&peer, 1, 20) > 0) {
      char byte;
      if (::recv(client, &byte, 1, 0) <= 0) return true;
    }
  }
  return false;
}

void TestServer::handle(int client) {
  std::string raw;
  std::size_t header_end = std::string::npos;
  char buffer[8192];
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (header_end == std::string::npos) {
    if (std::chrono::steady_clock::now() > give_up) return;
    pollfd peer{client, POLLIN, 0};
    if (::poll(&peer, 1, 50) <= 0) continue;
    ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
    if (n <= 0) return;
    raw.append(buffer, static_cast<std::size_t>(n));
    header_end = raw.find("\r\n\r\n");
  }

  ReceivedRequest request;
  std::size_t line_end = raw.find("\r\n");
  std::string request_line = raw.substr(0, line_end);
  auto first_space = request_line.find(' ');
  auto second_space = request_line.find(' ', first_space + 1);
  request.method = request_line.substr(0, first_space);
  request.path = request_line.substr(first_space + 1, second_space - first_space - 1);
  std::size_t pos = line_end + 2;
  while (pos < header_end) {
    std::size_t end = raw.find("\r\n", pos);
    std::string line = raw.substr(pos, end - pos);
    auto colon = line.find(':');
    if (colon != std::string::npos) request.headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
    pos = end + 2;
  }
  std::size_t content_length = 0;
  if (request.has_header("content-length")) content_length = std::stoul(request.header("content-length"));
  request.body = raw.substr(header_end + 4);
  while (request.body.size() < content_length && std::chrono::steady_clock::now() < give_up) {
    pollfd peer{client, POLLIN, 0};
    if (::poll(&peer, 1, 50) <= 0) continue;
    ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    request.body.append(buffer, static_cast<std::size_t>(n));
  }

  ScriptedAnswer answer;
  {
    std::lock_guard lock(mutex_);
    requests_.push_back(request);
    if (next_ < script_.size()) {
      answer = script_[next_];
      if (!answer.forever) ++next_;
    } else {
      answer = json_answer(418, R"({"error":{"message":"the test script has no more answers"}})");
    }
  }

  using Behaviour = ScriptedAnswer::Behaviour;
  if (answer.behaviour == Behaviour::StallBeforeResponse) {
    hold_until_client_leaves(client);
    return;
  }
  std::string head = "HTTP/1.1 " + std::to_string(answer.status) + " " + reason_phrase(answer.status) + "\r\n";
  for (const auto& [name, value] : answer.headers) head += name + ": " + value + "\r\n";
  head += "Connection: close\r\n";
  if (answer.behaviour == Behaviour::Huge) {
    head += "Content-Length: " + std::to_string(answer.huge_bytes) + "\r\n\r\n";
    if (!send_all(client, head)) return;
    std::string block(64 * 1024, 'x');
    for (std::size_t sent = 0; sent < answer.huge_bytes && !stopping_; sent += block.size())
      if (!send_all(client, block)) return;  // the client hung up once over its cap
    return;
  }
  bool streamed = !answer.chunks.empty() || answer.behaviour == Behaviour::StallAfterChunks;
  if (!streamed) {
    head += "Content-Length: " + std::to_string(answer.body.size()) + "\r\n\r\n";
    send_all(client, head + answer.body);
    return;
  }
  head += "Cache-Control: no-cache\r\n\r\n";
  if (!send_all(client, head)) return;
  for (const auto& chunk : answer.chunks) {
    if (answer.chunk_delay.count() > 0) std::this_thread::sleep_for(answer.chunk_delay);
    if (!send_all(client, chunk)) return;
  }
  if (answer.behaviour == Behaviour::StallAfterChunks) hold_until_client_leaves(client);
}

}  // namespace liger::llm::testing
