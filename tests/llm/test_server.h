// A small scripted HTTP/1.1 server on 127.0.0.1 for exercising the real libcurl client: one
// connection per request, answers taken from a script in order, bounded lifetime.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace liger::llm::testing {

struct ScriptedAnswer {
  enum class Behaviour {
    Respond,               // status + headers + body (or chunks)
    StallBeforeResponse,   // read the request, then send nothing until the client gives up
    StallAfterChunks,      // send headers and chunks, then go silent without closing
    Huge,                  // announce and send `huge_bytes` of body
  };
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // When non-empty the body is streamed as these pieces (no Content-Length, close at end).
  std::vector<std::string> chunks;
  std::chrono::milliseconds chunk_delay{0};
  Behaviour behaviour = Behaviour::Respond;
  std::size_t huge_bytes = 0;
  // Answers every request from here on (a server stuck on 500 or 429) instead of being used once.
  bool forever = false;
};

ScriptedAnswer json_answer(int status, std::string body,
                           std::vector<std::pair<std::string, std::string>> headers = {});
ScriptedAnswer sse_answer(std::vector<std::string> events, std::chrono::milliseconds delay = std::chrono::milliseconds(20));

struct ReceivedRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  bool has_header(const std::string& name) const { return headers.count(name) > 0; }
};

class TestServer {
 public:
  explicit TestServer(std::vector<ScriptedAnswer> script,
                      std::chrono::seconds lifetime = std::chrono::seconds(20));
  ~TestServer();
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  int port() const noexcept { return port_; }
  std::string base_url() const;  // http://127.0.0.1:<port>
  std::vector<ReceivedRequest> requests() const;
  std::size_t request_count() const;
  void stop();

 private:
  void serve();
  void handle(int client);
  bool hold_until_client_leaves(int client);

  std::vector<ScriptedAnswer> script_;
  std::size_t next_ = 0;
  int listener_ = -1;
  int port_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::vector<ReceivedRequest> requests_;
  std::thread thread_;
};

}  // namespace liger::llm::testing
