// Asking a provider for a YAML/JSON document against a schema: extract, parse, validate, and
// re-ask with the errors until the answer is usable or the attempts run out.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "liger/llm/provider.h"
#include "liger/llm/types.h"

namespace liger::llm {

// Returns one message per problem, empty when the document is valid. The profile layer's
// schema validator plugs in here.
using Validator = std::function<std::vector<std::string>(const nlohmann::json& document)>;

// A field the answerer could not decide: {undecided: "<reason>"} in the document.
struct UndecidedField {
  std::string path;  // "$.formulas.backward"
  std::string reason;
};

nlohmann::json undecided(std::string reason);
bool is_undecided(const nlohmann::json& value);
std::vector<UndecidedField> find_undecided(const nlohmann::json& document);

// The document inside an answer: the fenced block in the wanted format (```yaml / ```json),
// else the first fenced block, else the whole answer trimmed.
std::string extract_document(std::string_view answer, DocumentFormat format);
// Throws liger::Error(Llm) with the parser's message on malformed input.
nlohmann::json parse_document(const std::string& text, DocumentFormat format);
std::string serialise_document(const nlohmann::json& document, DocumentFormat format);

// A small JSON-Schema subset: type (string or list), properties, required,
// additionalProperties (bool), items, enum, minimum, maximum, minLength, minItems.
// An {undecided: reason} value is accepted wherever a value is expected.
std::vector<std::string> validate_schema_lite(const nlohmann::json& document,
                                              const nlohmann::json& schema);
Validator schema_lite_validator(nlohmann::json schema);

// A re-ask quotes the rejected answer back, but at most its first kReaskQuoteHead and last
// kReaskQuoteTail bytes: the model needs to see what it wrote, not to be sent a runaway answer of
// megabytes again (and again, growing, with every further re-ask). The error lines that go with
// it (and into the final error) are bounded the same way.
inline constexpr std::size_t kReaskQuoteHead = 6 * 1024;
inline constexpr std::size_t kReaskQuoteTail = 2 * 1024;
inline constexpr std::size_t kReaskMaxErrors = 20;
inline constexpr std::size_t kReaskErrorBytes = 500;

struct StructuredRequest {
  std::vector<Message> messages;  // the question; the format instructions are appended
  std::string kind;               // for the built-in provider's analyser lookup
  nlohmann::json input;           // for the built-in provider's analysers
  DocumentFormat format = DocumentFormat::Yaml;
  std::optional<nlohmann::json> schema;  // validated with validate_schema_lite, shown to the model
  Validator validator;                   // extra checks (the profile schema), may be empty
  int max_reasks = 3;                    // so at most 1 + max_reasks requests
  int max_tokens = 0;
};

struct StructuredResult {
  nlohmann::json document;
  std::string answer;  // the raw text of the accepted answer
  int attempts = 0;
  std::vector<UndecidedField> undecided;
  Usage usage;  // summed over all attempts
  double cost_usd = 0.0;
};

// Throws liger::Error(Llm) naming the last errors when no attempt produced a valid document.
StructuredResult ask_structured(Provider& provider, const StructuredRequest& request,
                                const StreamCallback& on_text = {});

}  // namespace liger::llm
