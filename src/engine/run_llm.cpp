// A run's LLM provider and usage ledger (see RunLlm in liger/workflow.h and docs/engine.md).
#include <spdlog/logger.h>

#include "liger/llm/provider.h"
#include "liger/llm/redact.h"
#include "liger/llm/usage.h"
#include "liger/workflow.h"

namespace liger::engine {

RunLlm::RunLlm(const Config& config, fs::path run_dir, std::shared_ptr<spdlog::logger> log)
    : config_(config),
      run_dir_(std::move(run_dir)),
      log_(std::move(log)),
      ledger_(std::make_shared<llm::UsageLedger>()) {
  // Before any stage asks anything: text echoing a configured key is scrubbed from the files a
  // run writes even when it arrives by a path that never builds a provider.
  llm::register_environment_keys(config_.get_string("llm.api_key_env"));
}

RunLlm::~RunLlm() = default;

llm::Provider& RunLlm::provider() {
  std::lock_guard lock(mutex_);
  if (!provider_) {
    llm::ProviderConfig config = llm::run_provider_config(config_, run_dir_);
    config.ledger = ledger_;
    provider_ = llm::make_provider(config);
    if (log_) {
      const std::string cassette =
          config.kind == llm::ProviderKind::Builtin ? std::string("none (built-in provider, no network)")
          : config.cassette_dir.empty() || config.record_mode == llm::RecordMode::Disabled
              ? std::string("off (llm.record=off)")
              : (fs::path(config.cassette_dir) / (config.cassette_name + ".json")).string() + " (mode " +
                    llm::to_string(config.record_mode) + ")";
      log_->info("llm: provider {} model {}; cassette {}", provider_->name(), provider_->model(), cassette);
    }
  }
  return *provider_;
}

bool RunLlm::started() const {
  std::lock_guard lock(mutex_);
  return provider_ != nullptr;
}

llm::Provider& StageContext::llm() {
  if (!run_llm) {
    static const Config defaults = Config::defaults();
    run_llm = std::make_shared<RunLlm>(config ? *config : defaults, run_dir, log);
  }
  return run_llm->provider();
}

}  // namespace liger::engine
