// Shared helpers for the LLM tests: provider configs pointing at a TestServer and a scoped key.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "liger/llm/provider.h"
#include "llm/test_server.h"

namespace liger::llm::testing {

// Sets an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_.c_str()); }

 private:
  std::string name_;
};

inline constexpr const char* kTestKeyVar = "LIGER_LLM_TEST_KEY";
inline constexpr const char* kTestKey = "sk-test-0123456789abcdefSECRET";

inline ProviderConfig config_for(const TestServer& server, ProviderKind kind) {
  ProviderConfig config;
  config.kind = kind;
  config.base_url = server.base_url() + (kind == ProviderKind::OpenAI ? "/v1" : "");
  config.model = kind == ProviderKind::OpenAI ? "gpt-4o-mini" : "claude-3-5-haiku-latest";
  config.api_key_env = kTestKeyVar;
  config.timeout_s = 10;
  config.connect_timeout_s = 2;
  config.stall_timeout_s = 5;
  config.max_retries = 3;
  config.backoff_base_s = 0.01;
  config.backoff_max_s = 0.05;
  return config;
}

// A fresh, empty directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("liger-llm-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  static int& counter() {
    static int value = 0;
    return value;
  }
  std::filesystem::path path_;
};

inline std::string openai_body(const std::string& text, int prompt_tokens = 12, int completion_tokens = 5) {
  return nlohmann::json{{"id", "chatcmpl-1"},
                        {"object", "chat.completion"},
                        {"choices", {{{"index", 0},
                                      {"message", {{"role", "assistant"}, {"content", text}}},
                                      {"finish_reason", "stop"}}}},
                        {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens}}}}
      .dump();
}

inline std::string anthropic_body(const std::string& text, int input_tokens = 20, int output_tokens = 7) {
  return nlohmann::json{{"id", "msg_1"},
                        {"type", "message"},
                        {"role", "assistant"},
                        {"content", {{{"type", "text"}, {"text", text}}}},
                        {"stop_reason", "end_turn"},
                        {"usage", {{"input_tokens", input_tokens}, {"output_tokens", output_tokens}}}}
      .dump();
}

}  // namespace liger::llm::testing
