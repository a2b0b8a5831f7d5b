#include "liger/llm/structured.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cmath>
#include <regex>

#include <fmt/format.h>

#include "liger/error.h"
#include "liger/llm/excerpt.h"
#include "liger/llm/redact.h"

namespace liger::llm {

nlohmann::json undecided(std::string reason) { return {{"undecided", std::move(reason)}}; }

bool is_undecided(const nlohmann::json& value) {
  return value.is_object() && value.size() == 1 && value.contains("undecided") &&
         value["undecided"].is_string();
}

namespace {

void collect_undecided(const nlohmann::json& value, const std::string& path,
                       std::vector<UndecidedField>& out) {
  if (is_undecided(value)) {
    out.push_back({path, value["undecided"].get<std::string>()});
    return;
  }
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) collect_undecided(child, path + "." + key, out);
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i)
      collect_undecided(value[i], fmt::format("{}[{}]", path, i), out);
  }
}

std::string trim(std::string_view text) {
  std::size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return std::string(text.substr(begin, end - begin));
}

std::string lower(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

struct FencedBlock {
  std::string language;
  std::string body;
};

std::vector<FencedBlock> fenced_blocks(std::string_view text) {
  std::vector<FencedBlock> blocks;
  std::size_t pos = 0;
  std::optional<FencedBlock> open;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    std::string stripped = trim(line);
    bool fence = stripped.rfind("```", 0) == 0;
    if (open) {
      if (fence && trim(stripped.substr(3)).empty()) {
        blocks.push_back(std::move(*open));
        open.reset();
      } else {
        open->body.append(line);
        open->body.push_back('\n');
      }
    } else if (fence) {
      open = FencedBlock{lower(trim(stripped.substr(3))), {}};
    }
    if (end == text.size()) break;
    pos = end + 1;
  }
  // An answer cut off by the token limit leaves its last fence open; keep what arrived so the
  // parse error, not a missing-document error, tells the model what went wrong.
  if (open) blocks.push_back(std::move(*open));
  return blocks;
}

bool language_matches(const std::string& language, DocumentFormat format) {
  if (format == DocumentFormat::Json) return language == "json";
  return language == "yaml" || language == "yml";
}

// YAML 1.2 core schema resolution for plain scalars; yaml-cpp leaves that to the caller.
nlohmann::json plain_scalar(const std::string& text) {
  static const std::regex integer(R"([-+]?[0-9]+)");
  static const std::regex hex(R"(0x[0-9a-fA-F]+)");
  static const std::regex floating(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") return nullptr;
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  try {
    if (std::regex_match(text, integer)) return std::stoll(text);
    if (std::regex_match(text, hex)) return std::stoll(text, nullptr, 16);
    if (std::regex_match(text, floating)) return std::stod(text);
  } catch (const std::out_of_range&) {
    return text;
  }
  if (text == ".inf" || text == "+.inf" || text == ".Inf") return std::numeric_limits<double>::infinity();
  if (text == "-.inf" || text == "-.Inf") return -std::numeric_limits<double>::infinity();
  return text;
}

nlohmann::json yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null: return nullptr;
    case YAML::NodeType::Scalar:
      // "!" marks a quoted or block scalar: always a string, whatever it looks like.
      if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") return node.Scalar();
      return plain_scalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) out.push_back(yaml_to_json(item));
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& item : node) out[item.first.as<std::string>()] = yaml_to_json(item.second);
      return out;
    }
  }
  return nullptr;
}

void emit_yaml(YAML::Emitter& out, const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [key, child] : value.items()) {
        out << YAML::Key << key << YAML::Value;
        emit_yaml(out, child);
      }
      out << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& child : value) emit_yaml(out, child);
      out << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: {
      const auto& text = value.get_ref<const std::string&>();
      if (text.find('\n') != std::string::npos) {
        out << YAML::Literal << text;
      } else if (!plain_scalar(text).is_string()) {
        out << YAML::DoubleQuoted << text;  // "1.0", "true", "" must stay strings
      } else {
        out << text;
      }
      break;
    }
    case nlohmann::json::value_t::boolean: out << value.get<bool>(); break;
    case nlohmann::json::value_t::null: out << YAML::Null; break;
    default: out << value.dump(); break;  // numbers: JSON's shortest round-trip form
  }
}

std::string type_name(const nlohmann::json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  return value.type_name();
}

bool has_type(const nlohmann::json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "integer") return value.is_number_integer() || (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>());
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  return true;  // unknown type names are not this subset's business
}

void validate_node(const nlohmann::json& value, const nlohmann::json& schema, const std::string& path,
                   std::vector<std::string>& errors) {
  if (!schema.is_object() || is_undecided(value)) return;
  if (auto type = schema.find("type"); type != schema.end()) {
    std::vector<std::string> types;
    if (type->is_string()) types.push_back(type->get<std::string>());
    if (type->is_array())
      for (const auto& t : *type) types.push_back(t.get<std::string>());
    bool matched = types.empty();
    for (const auto& t : types) matched = matched || has_type(value, t);
    if (!matched) {
      errors.push_back(fmt::format("{}: expected {}, got {}", path, fmt::join(types, " or "), type_name(value)));
      return;
    }
  }
  if (auto allowed = schema.find("enum"); allowed != schema.end() && allowed->is_array()) {
    if (std::find(allowed->begin(), allowed->end(), value) == allowed->end())
      errors.push_back(fmt::format("{}: {} is not one of {}", path, value.dump(), allowed->dump()));
  }
  if (value.is_number()) {
    if (schema.contains("minimum") && value.get<double>() < schema["minimum"].get<double>())
      errors.push_back(fmt::format("{}: {} is below the minimum {}", path, value.dump(), schema["minimum"].dump()));
    if (schema.contains("maximum") && value.get<double>() > schema["maximum"].get<double>())
      errors.push_back(fmt::format("{}: {} is above the maximum {}", path, value.dump(), schema["maximum"].dump()));
  }
  if (value.is_string() && schema.contains("minLength") &&
      value.get_ref<const std::string&>().size() < schema["minLength"].get<std::size_t>())
    errors.push_back(fmt::format("{}: shorter than {} characters", path, schema["minLength"].dump()));
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<std::size_t>())
      errors.push_back(fmt::format("{}: needs at least {} items, has {}", path, schema["minItems"].dump(), value.size()));
    if (schema.contains("items"))
      for (std::size_t i = 0; i < value.size(); ++i)
        validate_node(value[i], schema["items"], fmt::format("{}[{}]", path, i), errors);
  }
  if (value.is_object()) {
    const auto properties = schema.value("properties", nlohmann::json::object());
    for (const auto& name : schema.value("required", nlohmann::json::array()))
      if (!value.contains(name.get<std::string>()))
        errors.push_back(fmt::format("{}: missing required field '{}'", path, name.get<std::string>()));
    for (const auto& [key, child] : value.items()) {
      if (properties.contains(key)) {
        validate_node(child, properties[key], path + "." + key, errors);
      } else if (schema.value("additionalProperties", true) == false) {
        errors.push_back(fmt::format("{}: unknown field '{}'", path, key));
      }
    }
  }
}

std::string format_instructions(const StructuredRequest& request) {
  const char* name = request.format == DocumentFormat::Json ? "JSON" : "YAML";
  const char* fence = request.format == DocumentFormat::Json ? "json" : "yaml";
  std::string text = fmt::format(
      "Answer with exactly one {} document inside a ```{} fenced code block, and nothing after it. "
      "If you cannot decide a field from the information given, set it to {{undecided: \"<why>\"}} "
      "instead of guessing.",
      name, fence);
  if (request.schema)
    text += fmt::format("\nThe document must satisfy this JSON Schema:\n```json\n{}\n```", request.schema->dump(2));
  return text;
}

// At most kReaskMaxErrors lines of at most kReaskErrorBytes each: a parser's message can quote
// the token it choked on, and that token can be the whole answer.
std::vector<std::string> bounded_errors(const std::vector<std::string>& errors) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < errors.size() && i < kReaskMaxErrors; ++i)
    out.push_back(bounded_excerpt(errors[i], kReaskErrorBytes));
  if (errors.size() > kReaskMaxErrors)
    out.push_back(fmt::format("... and {} more", errors.size() - kReaskMaxErrors));
  return out;
}

std::string reask_message(const std::vector<std::string>& errors, DocumentFormat format) {
  const char* name = format == DocumentFormat::Json ? "JSON" : "YAML";
  const char* fence = format == DocumentFormat::Json ? "json" : "yaml";
  return fmt::format(
      "Your previous answer could not be used:\n- {}\nReply with the complete corrected {} "
      "document in one ```{} fenced code block.",
      fmt::join(errors, "\n- "), name, fence);
}

}  // namespace

std::vector<UndecidedField> find_undecided(const nlohmann::json& document) {
  std::vector<UndecidedField> out;
  collect_undecided(document, "$", out);
  return out;
}

std::string extract_document(std::string_view answer, DocumentFormat format) {
  auto blocks = fenced_blocks(answer);
  for (const auto& block : blocks)
    if (language_matches(block.language, format)) return block.body;
  if (!blocks.empty()) return blocks.front().body;
  std::string text = trim(answer);
  if (format == DocumentFormat::Json) {
    // Models like to wrap a bare JSON answer in a sentence.
    std::size_t open = text.find_first_of("{[");
    std::size_t close = text.find_last_of("}]");
    if (open != std::string::npos && close != std::string::npos && close > open)
      return text.substr(open, close - open + 1);
  }
  return text;
}

nlohmann::json parse_document(const std::string& text, DocumentFormat format) {
  if (trim(text).empty()) throw Error(ErrorKind::Llm, "the answer contains no document");
  if (format == DocumentFormat::Json) {
    try {
      return nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& error) {
      throw Error(ErrorKind::Llm, fmt::format("invalid JSON: {}", error.what()));
    }
  }
  try {
    return yaml_to_json(YAML::Load(text));
  } catch (const YAML::Exception& error) {
    throw Error(ErrorKind::Llm, fmt::format("invalid YAML: {}", error.what()));
  }
}

std::string serialise_document(const nlohmann::json& document, DocumentFormat format) {
  if (format == DocumentFormat::Json) return document.dump(2) + "\n";
  YAML::Emitter out;
  emit_yaml(out, document);
  return std::string(out.c_str()) + "\n";
}

std::vector<std::string> validate_schema_lite(const nlohmann::json& document, const nlohmann::json& schema) {
  std::vector<std::string> errors;
  validate_node(document, schema, "$", errors);
  return errors;
}

Validator schema_lite_validator(nlohmann::json schema) {
  return [schema = std::move(schema)](const nlohmann::json& document) {
    return validate_schema_lite(document, schema);
  };
}

StructuredResult ask_structured(Provider& provider, const StructuredRequest& request,
                                const StreamCallback& on_text) {
  std::vector<Message> messages = request.messages;
  messages.push_back(user_message(format_instructions(request)));
  StructuredResult result;
  std::vector<std::string> errors;
  int max_attempts = 1 + std::max(0, request.max_reasks);
  for (int attempt = 1; attempt <= max_attempts; ++attempt) {
    Request ask;
    ask.messages = messages;
    ask.kind = request.kind;
    ask.input = request.input;
    ask.schema = request.schema;
    ask.format = request.format;
    ask.max_tokens = request.max_tokens;
    Response response = provider.complete(ask, on_text);
    result.attempts = attempt;
    result.usage.input_tokens += response.usage.input_tokens;
    result.usage.output_tokens += response.usage.output_tokens;
    result.usage.estimated = result.usage.estimated || response.usage.estimated;
    result.cost_usd += response.cost_usd;

    errors.clear();
    nlohmann::json document;
    try {
      document = parse_document(extract_document(response.text, request.format), request.format);
    } catch (const Error& error) {
      errors.push_back(error.what());
    } catch (const nlohmann::json::exception& error) {
      errors.push_back(fmt::format("invalid JSON: {}", error.what()));
    }
    if (errors.empty()) {
      if (request.schema) errors = validate_schema_lite(document, *request.schema);
      if (request.validator) {
        auto more = request.validator(document);
        errors.insert(errors.end(), more.begin(), more.end());
      }
    }
    errors = bounded_errors(errors);
    if (errors.empty()) {
      result.document = std::move(document);
      result.answer = std::move(response.text);
      result.undecided = find_undecided(result.document);
      return result;
    }
    // Asking a deterministic answerer again would only repeat the same mistake.
    if (provider.deterministic()) break;
    // Redacted before the cut, so a key the answer echoed cannot leave its first half behind.
    messages.push_back(assistant_message(bounded_excerpt(redact(response.text), kReaskQuoteHead, kReaskQuoteTail)));
    messages.push_back(user_message(reask_message(errors, request.format)));
  }
  throw Error(ErrorKind::Llm,
              fmt::format("{} gave no valid {} document{} after {} attempt(s); last errors:\n  - {}",
                          provider.name(), to_string(request.format),
                          request.kind.empty() ? "" : fmt::format(" for '{}'", request.kind),
                          result.attempts, fmt::join(errors, "\n  - ")),
              "use a stronger model (llm.model), or write the document by hand and resume the run "
              "from its checkpoint");
}

}  // namespace liger::llm
