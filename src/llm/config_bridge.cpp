// The bridge from the layered configuration (liger::Config, llm.* keys) to the LLM layer's
// plain ProviderConfig, shared by the CLI (`llm check`) and the engine (a run's provider).
#include <fmt/format.h>

#include "liger/config.h"
#include "liger/error.h"
#include "liger/llm/provider.h"

namespace liger::llm {

namespace {

// A key counts as set by the user when a layer above the defaults gave it a non-empty value.
bool user_set(const Config& config, const std::string& key) {
  const ConfigValue& value = config.get(key);
  return value.layer != ConfigLayer::Default && !value.value.empty();
}

RecordMode record_mode_of(const Config& config) {
  const ConfigValue& value = config.get("llm.record");
  if (value.value.empty()) return RecordMode::Disabled;
  try {
    return parse_record_mode(value.value);
  } catch (const Error&) {
    throw Error(ErrorKind::Config,
                fmt::format("llm.record (from {}) must be one of off, none, once, all; found '{}'",
                            value.source, value.value),
                "none: replay only; once: replay if the cassette exists, else record; all: always "
                "record; off: no cassette");
  }
}

}  // namespace

ProviderConfig provider_config_from(const Config& config) {
  ProviderConfig out;
  out.kind = parse_provider_kind(config.get_string("llm.provider"));
  out.base_url = config.get_string("llm.base_url");
  out.model = config.get_string("llm.model");
  out.api_key_env = config.get_string("llm.api_key_env");
  out.timeout_s = config.get_number("llm.timeout_s");
  out.connect_timeout_s = config.get_number("llm.connect_timeout_s");
  out.stall_timeout_s = config.get_number("llm.stall_timeout_s");
  out.max_retries = static_cast<int>(config.get_int("llm.max_retries"));
  const ConfigValue& max_bytes = config.get("llm.max_response_bytes");
  const long long response_cap = config.get_int("llm.max_response_bytes");
  if (response_cap <= 0) {
    throw Error(ErrorKind::Config,
                fmt::format("llm.max_response_bytes (from {}) must be a positive number of bytes; found '{}'",
                            max_bytes.source, max_bytes.value),
                "the default is 33554432 (32 MiB); remove the setting to use it");
  }
  out.max_response_bytes = static_cast<std::size_t>(response_cap);
  Price price{config.get_number("llm.price.input_per_mtok"), config.get_number("llm.price.output_per_mtok")};
  // 0/0 is the default of both keys: it means "not configured", so the shipped price table
  // (skills/llm/prices.yaml) applies rather than reporting every run as free.
  if (price.input_per_mtok > 0 || price.output_per_mtok > 0) out.price = price;
  out.record_mode = record_mode_of(config);
  out.cassette_dir = config.get_string("llm.cassette_dir");
  if (!out.cassette_dir.empty() && !user_set(config, "llm.record")) out.record_mode = RecordMode::Once;
  return out;
}

ProviderConfig run_provider_config(const Config& config, const std::filesystem::path& run_dir) {
  ProviderConfig out = provider_config_from(config);
  if (!out.cassette_dir.empty()) return out;  // the user's own cassette, in the user's mode
  if (!user_set(config, "llm.record")) out.record_mode = RecordMode::All;
  if (out.record_mode != RecordMode::Disabled) {
    out.cassette_dir = (run_dir / "llm").string();
    out.cassette_name = "cassette";
  }
  return out;
}

}  // namespace liger::llm
