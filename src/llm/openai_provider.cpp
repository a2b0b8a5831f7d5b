// OpenAI-compatible Chat Completions: OpenAI itself, vLLM, llama.cpp server, Ollama, ...
#include <fmt/format.h>

#include "liger/error.h"
#include "llm/http_provider.h"

namespace liger::llm {

namespace {

Headers bearer_key(const std::string& key) { return {{"authorization", "Bearer " + key}}; }

std::int64_t token_count(const nlohmann::json& usage, const char* name) {
  auto it = usage.find(name);
  return it != usage.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
}

void read_usage(const nlohmann::json& usage, Usage& out, bool& seen) {
  if (!usage.is_object()) return;
  out.input_tokens = token_count(usage, "prompt_tokens");
  out.output_tokens = token_count(usage, "completion_tokens");
  seen = true;
}

class OpenAIProvider final : public HttpProvider {
 public:
  explicit OpenAIProvider(const ProviderConfig& config) : HttpProvider(config, "openai", &bearer_key) {}

 protected:
  std::string endpoint_url() const override { return base_url() + "/chat/completions"; }

  Headers api_headers() const override { return {}; }

  nlohmann::json build_body(const Request& request, bool stream) const override {
    nlohmann::json messages = nlohmann::json::array();
    for (const auto& message : merged_turns(request.messages, /*drop_system=*/false))
      messages.push_back({{"role", to_string(message.role)}, {"content", message.content}});
    nlohmann::json body = {{"model", model()}, {"messages", messages}, {"stream", stream}};
    // Without this the stream carries no token counts at all.
    if (stream) body["stream_options"] = {{"include_usage", true}};
    // Newer OpenAI models reject max_tokens in favour of max_completion_tokens while other
    // servers only know max_tokens, so it is sent only when a caller really needs a cap.
    if (request.max_tokens > 0) body["max_tokens"] = request.max_tokens;
    auto temperature = request.temperature ? request.temperature : config().temperature;
    if (temperature) body["temperature"] = *temperature;
    return body;
  }

  void read_body(const nlohmann::json& body, Answer& answer) const override {
    if (body.contains("error")) fail_malformed("the answer is an error: " + server_message(body.dump()), body.dump());
    const auto& choices = body.at("choices");
    if (!choices.is_array() || choices.empty()) fail_malformed("no choices in the answer", body.dump());
    const auto& choice = choices.at(0);
    const auto& content = choice.at("message").value("content", nlohmann::json());
    answer.text = content.is_string() ? content.get<std::string>() : std::string();
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
      answer.stop_reason = choice["finish_reason"].get<std::string>();
    if (body.contains("usage")) read_usage(body["usage"], answer.usage, answer.usage_seen);
  }

  void read_event(const SseEvent& event, Answer& answer, const StreamCallback& on_text) const override {
    if (event.data.empty() || event.data == "[DONE]") return;
    auto chunk = nlohmann::json::parse(event.data, nullptr, false);
    if (chunk.is_discarded() || !chunk.is_object()) fail_malformed("a stream event is not JSON", event.data);
    if (chunk.contains("error")) {
      throw Error(ErrorKind::Llm,
                  fmt::format("openai at {} ended the stream with an error: {}", base_url(),
                              server_message(event.data)),
                  "try again; if it persists check the server logs", /*recoverable=*/true);
    }
    if (chunk.contains("usage")) read_usage(chunk["usage"], answer.usage, answer.usage_seen);
    auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array() || choices->empty()) return;
    const auto& choice = (*choices)[0];
    if (choice.contains("delta") && choice["delta"].is_object()) {
      const auto& content = choice["delta"].value("content", nlohmann::json());
      if (content.is_string() && !content.get_ref<const std::string&>().empty()) {
        answer.text += content.get<std::string>();
        if (on_text) on_text(content.get_ref<const std::string&>());
      }
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
      answer.stop_reason = choice["finish_reason"].get<std::string>();
  }
};

}  // namespace

std::unique_ptr<Provider> make_openai_provider(const ProviderConfig& config) {
  return std::make_unique<OpenAIProvider>(config);
}

}  // namespace liger::llm
