#include "liger/llm/usage.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "liger/error.h"
#include "liger/llm/structured.h"
#include "liger/workflows.h"

namespace liger::llm {

const char* to_string(Role role) noexcept {
  switch (role) {
    case Role::System: return "system";
    case Role::User: return "user";
    case Role::Assistant: return "assistant";
  }
  return "user";
}

const char* to_string(DocumentFormat format) noexcept {
  return format == DocumentFormat::Json ? "json" : "yaml";
}

double cost_of(const Usage& usage, const Price& price) noexcept {
  return (static_cast<double>(usage.input_tokens) * price.input_per_mtok +
          static_cast<double>(usage.output_tokens) * price.output_per_mtok) /
         1e6;
}

PriceTable PriceTable::load(const std::string& path) {
  PriceTable table;
  nlohmann::json document;
  try {
    std::string text;
    {
      std::FILE* file = std::fopen(path.c_str(), "rb");
      if (file == nullptr) throw Error(ErrorKind::Config, fmt::format("cannot read price table {}", path));
      char buffer[4096];
      std::size_t n;
      while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
      std::fclose(file);
    }
    document = parse_document(text, DocumentFormat::Yaml);
  } catch (const Error& error) {
    throw Error(ErrorKind::Config, fmt::format("price table {}: {}", path, error.what()),
                "the file must look like skills/llm/prices.yaml");
  }
  const auto& models = document.contains("models") ? document["models"] : document;
  if (!models.is_object())
    throw Error(ErrorKind::Config, fmt::format("price table {}: expected a 'models' mapping", path));
  for (const auto& [name, entry] : models.items()) {
    if (!entry.is_object() || !entry.value("input_per_mtok", nlohmann::json()).is_number() ||
        !entry.value("output_per_mtok", nlohmann::json()).is_number()) {
      throw Error(ErrorKind::Config,
                  fmt::format("price table {}: model '{}' needs numeric input_per_mtok and "
                              "output_per_mtok",
                              path, name));
    }
    table.set(name, Price{entry["input_per_mtok"].get<double>(), entry["output_per_mtok"].get<double>()});
  }
  return table;
}

const PriceTable& PriceTable::builtin_defaults() {
  static const PriceTable table = [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("LIGER_AGENT_PRICE_TABLE"); env && *env) candidates.emplace_back(env);
    candidates.emplace_back((workflows::data_dir() / "skills/llm/prices.yaml").string());  // installed or source
    candidates.emplace_back("skills/llm/prices.yaml");
    for (const auto& path : candidates) {
      std::error_code ignored;
      if (std::filesystem::is_regular_file(path, ignored)) {
        try {
          return load(path);
        } catch (const Error&) {
          // A broken default table must not stop a run; costs are reported as 0 instead.
        }
      }
    }
    return PriceTable{};
  }();
  return table;
}

void PriceTable::set(std::string model_prefix, Price price) {
  for (auto& entry : entries_) {
    if (entry.first == model_prefix) {
      entry.second = price;
      return;
    }
  }
  entries_.emplace_back(std::move(model_prefix), price);
}

std::optional<Price> PriceTable::find(const std::string& model) const {
  const std::pair<std::string, Price>* best = nullptr;
  for (const auto& entry : entries_) {
    if (model.rfind(entry.first, 0) == 0 && (best == nullptr || entry.first.size() > best->first.size()))
      best = &entry;
  }
  if (best == nullptr) return std::nullopt;
  return best->second;
}

void UsageLedger::add(const Response& response) {
  std::lock_guard lock(mutex_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const UsageEntry& entry) {
    return entry.provider == response.provider && entry.model == response.model;
  });
  if (it == entries_.end()) {
    entries_.push_back(UsageEntry{response.provider, response.model});
    it = entries_.end() - 1;
  }
  it->requests += 1;
  it->replayed += response.replayed ? 1 : 0;
  it->input_tokens += response.usage.input_tokens;
  it->output_tokens += response.usage.output_tokens;
  it->estimated = it->estimated || response.usage.estimated;
  it->cost_usd += response.cost_usd;
  it->latency_s += response.latency_s;
}

void UsageLedger::add_json(const nlohmann::json& saved) {
  if (!saved.is_object() || !saved.contains("by_model") || !saved["by_model"].is_array()) return;
  std::lock_guard lock(mutex_);
  for (const auto& item : saved["by_model"]) {
    if (!item.is_object()) continue;
    UsageEntry add{item.value("provider", std::string()), item.value("model", std::string())};
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const UsageEntry& entry) {
      return entry.provider == add.provider && entry.model == add.model;
    });
    if (it == entries_.end()) {
      entries_.push_back(add);
      it = entries_.end() - 1;
    }
    it->requests += item.value("requests", 0);
    it->replayed += item.value("replayed", 0);
    it->input_tokens += item.value("input_tokens", std::int64_t{0});
    it->output_tokens += item.value("output_tokens", std::int64_t{0});
    it->estimated = it->estimated || item.value("estimated", false);
    it->cost_usd += item.value("cost_usd", 0.0);
    it->latency_s += item.value("latency_s", 0.0);
  }
}

std::vector<UsageEntry> UsageLedger::entries() const {
  std::lock_guard lock(mutex_);
  return entries_;
}

UsageEntry UsageLedger::total() const {
  std::lock_guard lock(mutex_);
  UsageEntry total{"all", "all"};
  for (const auto& entry : entries_) {
    total.requests += entry.requests;
    total.replayed += entry.replayed;
    total.input_tokens += entry.input_tokens;
    total.output_tokens += entry.output_tokens;
    total.estimated = total.estimated || entry.estimated;
    total.cost_usd += entry.cost_usd;
    total.latency_s += entry.latency_s;
  }
  return total;
}

namespace {
nlohmann::json entry_json(const UsageEntry& entry) {
  return {{"provider", entry.provider},         {"model", entry.model},
          {"requests", entry.requests},         {"replayed", entry.replayed},
          {"input_tokens", entry.input_tokens}, {"output_tokens", entry.output_tokens},
          {"estimated", entry.estimated},       {"cost_usd", entry.cost_usd},
          {"latency_s", entry.latency_s}};
}
}  // namespace

nlohmann::json UsageLedger::to_json() const {
  nlohmann::json by_model = nlohmann::json::array();
  for (const auto& entry : entries()) by_model.push_back(entry_json(entry));
  nlohmann::json total = entry_json(this->total());
  total.erase("provider");
  total.erase("model");
  return {{"total", total}, {"by_model", by_model}};
}

}  // namespace liger::llm
