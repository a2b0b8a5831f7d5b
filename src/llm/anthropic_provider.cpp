// Anthropic Messages API.
#include <fmt/format.h>

#include "liger/error.h"
#include "llm/http_provider.h"

namespace liger::llm {

namespace {

Headers anthropic_key(const std::string& key) { return {{"x-api-key", key}}; }

std::int64_t token_count(const nlohmann::json& usage, const char* name) {
  auto it = usage.find(name);
  return it != usage.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
}

class AnthropicProvider final : public HttpProvider {
 public:
  explicit AnthropicProvider(const ProviderConfig& config)
      : HttpProvider(config, "anthropic", &anthropic_key) {}

 protected:
  std::string endpoint_url() const override {
    // Accept a base URL given with or without the version segment.
    const std::string& base = base_url();
    if (base.size() >= 3 && base.compare(base.size() - 3, 3, "/v1") == 0) return base + "/messages";
    return base + "/v1/messages";
  }

  Headers api_headers() const override { return {{"anthropic-version", "2023-06-01"}}; }

  nlohmann::json build_body(const Request& request, bool stream) const override {
    nlohmann::json messages = nlohmann::json::array();
    auto turns = merged_turns(request.messages, /*drop_system=*/true);
    // The API insists that the conversation opens with a user turn.
    if (!turns.empty() && turns.front().role != Role::User) turns.insert(turns.begin(), user_message("(continue)"));
    for (const auto& message : turns)
      messages.push_back({{"role", to_string(message.role)}, {"content", message.content}});
    int max_tokens = request.max_tokens > 0 ? request.max_tokens : config().max_tokens;
    nlohmann::json body = {{"model", model()}, {"max_tokens", max_tokens}, {"messages", messages}};
    std::string system = joined_system_prompt(request.messages);
    if (!system.empty()) body["system"] = system;
    if (stream) body["stream"] = true;
    auto temperature = request.temperature ? request.temperature : config().temperature;
    if (temperature) body["temperature"] = *temperature;
    return body;
  }

  void read_body(const nlohmann::json& body, Answer& answer) const override {
    if (body.value("type", "") == "error") fail_malformed("the answer is an error: " + server_message(body.dump()), body.dump());
    const auto& content = body.at("content");
    if (!content.is_array()) fail_malformed("'content' is not a list", body.dump());
    for (const auto& block : content)
      if (block.value("type", "") == "text") answer.text += block.at("text").get<std::string>();
    if (body.contains("stop_reason") && body["stop_reason"].is_string())
      answer.stop_reason = body["stop_reason"].get<std::string>();
    if (body.contains("usage") && body["usage"].is_object()) {
      answer.usage.input_tokens = token_count(body["usage"], "input_tokens");
      answer.usage.output_tokens = token_count(body["usage"], "output_tokens");
      answer.usage_seen = true;
    }
  }

  void read_event(const SseEvent& event, Answer& answer, const StreamCallback& on_text) const override {
    if (event.data.empty()) return;
    auto data = nlohmann::json::parse(event.data, nullptr, false);
    if (data.is_discarded() || !data.is_object()) fail_malformed("a stream event is not JSON", event.data);
    std::string type = event.event.empty() ? data.value("type", "") : event.event;
    if (type == "message_start") {
      const auto& usage = data["message"].value("usage", nlohmann::json::object());
      answer.usage.input_tokens = token_count(usage, "input_tokens");
      answer.usage.output_tokens = token_count(usage, "output_tokens");
      answer.usage_seen = true;
    } else if (type == "content_block_delta") {
      const auto& delta = data["delta"];
      if (delta.value("type", "") == "text_delta") {
        const std::string& text = delta.at("text").get_ref<const std::string&>();
        answer.text += text;
        if (on_text && !text.empty()) on_text(text);
      }
    } else if (type == "message_delta") {
      if (data.contains("usage") && data["usage"].is_object()) {
        // output_tokens here is the running total, not an increment.
        answer.usage.output_tokens = token_count(data["usage"], "output_tokens");
        if (data["usage"].contains("input_tokens"))
          answer.usage.input_tokens = token_count(data["usage"], "input_tokens");
        answer.usage_seen = true;
      }
      if (data.contains("delta") && data["delta"].value("stop_reason", nlohmann::json()).is_string())
        answer.stop_reason = data["delta"]["stop_reason"].get<std::string>();
    } else if (type == "error") {
      throw Error(ErrorKind::Llm,
                  fmt::format("anthropic at {} ended the stream with an error: {}", base_url(),
                              server_message(event.data)),
                  "try again; overloaded_error means Anthropic is busy", /*recoverable=*/true);
    }
  }
};

}  // namespace

std::unique_ptr<Provider> make_anthropic_provider(const ProviderConfig& config) {
  return std::make_unique<AnthropicProvider>(config);
}

}  // namespace liger::llm
