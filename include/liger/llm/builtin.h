// The embedded default provider: no network, no key. It answers structured requests by
// dispatching to analysers that the workflows register, and marks what nobody can decide.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "liger/llm/provider.h"

namespace liger::llm {

// An analyser returns the document it could build; a field it cannot decide it sets to
// undecided("why") (see structured.h) rather than guessing. Fields of the request's schema it
// leaves out are marked undecided by the provider.
using Analyser = std::function<nlohmann::json(const Request& request)>;

class AnalyserRegistry {
 public:
  static std::shared_ptr<AnalyserRegistry> global();

  // Replaces an analyser already registered for `kind`.
  void add(std::string kind, Analyser analyser);
  bool remove(const std::string& kind);
  std::optional<Analyser> find(const std::string& kind) const;
  std::vector<std::string> kinds() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Analyser> analysers_;
};

// Registers at static-initialisation time: `static liger::llm::AnalyserRegistration r{"kind", fn};`
struct AnalyserRegistration {
  AnalyserRegistration(std::string kind, Analyser analyser);
};

class BuiltinProvider final : public Provider {
 public:
  explicit BuiltinProvider(std::shared_ptr<AnalyserRegistry> registry = nullptr);

  std::string name() const override { return "builtin"; }
  std::string model() const override { return "builtin"; }
  bool deterministic() const override { return true; }
  EndpointCheck check() override;

 protected:
  Response do_complete(const Request& request, const StreamCallback& on_text) override;

 private:
  std::shared_ptr<AnalyserRegistry> registry_;
};

// The analyser's document with every top-level schema property it did not fill marked
// undecided; a document of undecided fields when there is no analyser at all.
nlohmann::json complete_with_undecided(nlohmann::json document, const nlohmann::json* schema,
                                       const std::string& reason);

}  // namespace liger::llm
