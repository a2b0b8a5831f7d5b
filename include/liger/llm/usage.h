// Per-run accounting of tokens, cost and latency, serialised by the engine into report.json.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "liger/llm/types.h"

namespace liger::llm {

struct Price {
  double input_per_mtok = 0.0;   // USD per million input tokens
  double output_per_mtok = 0.0;  // USD per million output tokens
};

double cost_of(const Usage& usage, const Price& price) noexcept;

// Longest-prefix lookup of model name -> price, loaded from a YAML/JSON file such as
// skills/llm/prices.yaml ({models: {"gpt-4o": {input_per_mtok: 2.5, output_per_mtok: 10}}}).
class PriceTable {
 public:
  static PriceTable load(const std::string& path);  // throws liger::Error(Config)
  // The table shipped in skills/llm/prices.yaml; empty when the file cannot be found.
  static const PriceTable& builtin_defaults();

  void set(std::string model_prefix, Price price);
  std::optional<Price> find(const std::string& model) const;
  bool empty() const noexcept { return entries_.empty(); }

 private:
  std::vector<std::pair<std::string, Price>> entries_;
};

struct UsageEntry {
  std::string provider;
  std::string model;
  int requests = 0;
  int replayed = 0;
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  bool estimated = false;
  double cost_usd = 0.0;
  double latency_s = 0.0;
};

// Thread-safe: workflows may run requests from several threads of one run.
class UsageLedger {
 public:
  void add(const Response& response);
  // Adds the counts of a document written by to_json() (the engine keeps a run's usage in
  // state.json, so a run resumed by another process goes on counting). Ignores anything else.
  void add_json(const nlohmann::json& saved);
  std::vector<UsageEntry> entries() const;
  UsageEntry total() const;
  // {"total": {...}, "by_model": [{...}]}; keys are stable for report.json consumers.
  nlohmann::json to_json() const;

 private:
  mutable std::mutex mutex_;
  std::vector<UsageEntry> entries_;
};

}  // namespace liger::llm
