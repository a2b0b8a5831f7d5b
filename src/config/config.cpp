#include "liger/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>

#include "liger/error.h"

namespace liger {

namespace fs = std::filesystem;

const char* to_string(ConfigLayer layer) noexcept {
  switch (layer) {
    case ConfigLayer::Default: return "default";
    case ConfigLayer::UserFile: return "user-config";
    case ConfigLayer::ProjectFile: return "project-config";
    case ConfigLayer::Environment: return "env";
    case ConfigLayer::Flag: return "flag";
  }
  return "unknown";
}

const std::vector<ConfigKeySpec>& config_key_specs() {
  using T = ConfigValueType;
  static const std::vector<ConfigKeySpec> specs = {
      {"run_dir", T::String, ".liger-agent/runs", "root directory of run directories"},
      {"max_attempts", T::Int, "3", "Act/Verify attempts before a run stops with exit 4"},
      {"editor", T::String, "", "editor for checkpoint edits (empty: $VISUAL, $EDITOR, vi)"},
      {"llm.provider", T::String, "builtin", "builtin | openai | anthropic"},
      {"llm.base_url", T::String, "", "endpoint base URL (empty: the provider's public API)"},
      {"llm.model", T::String, "", "model name sent to the provider"},
      {"llm.api_key_env", T::String, "",
       "NAME of the environment variable holding the API key (empty: the provider's usual one)"},
      {"llm.timeout_s", T::Int, "120", "total timeout of one LLM request, seconds"},
      {"llm.connect_timeout_s", T::Int, "10", "connect timeout of one LLM request, seconds"},
      {"llm.max_retries", T::Int, "4", "retries on transient LLM transport errors"},
      {"llm.max_response_bytes", T::Int, "33554432",
       "largest LLM answer accepted, bytes; a bigger one is aborted while it arrives"},
      {"llm.stall_timeout_s", T::Number, "120",
       "abort a streamed LLM answer that sends nothing for this long, seconds"},
      {"llm.record", T::String, "off",
       "cassette mode: off | none (replay only) | once | all; runs record every exchange into "
       "<run>/llm/ in mode all unless this or llm.cassette_dir is set (env also LIGER_AGENT_RECORD)"},
      {"llm.cassette_dir", T::String, "",
       "directory of the LLM cassette (empty: <run>/llm/ for runs; env also LIGER_AGENT_CASSETTE_DIR)"},
      {"llm.price.input_per_mtok", T::Number, "0", "USD per million input tokens (cost report)"},
      {"llm.price.output_per_mtok", T::Number, "0", "USD per million output tokens (cost report)"},
      {"cuda.arch", T::String, "", "CUDA architecture, e.g. 90 (empty: detect from the GPU)"},
  };
  return specs;
}

std::string config_env_name(const std::string& key) {
  std::string name = "LIGER_AGENT_";
  for (char c : key) name += (c == '.') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

namespace {

// Environment names that predate the config key and keep working; the canonical
// config_env_name() wins when both are set. An empty legacy variable counts as unset.
const char* legacy_env_name(const std::string& key) {
  if (key == "llm.record") return "LIGER_AGENT_RECORD";
  if (key == "llm.cassette_dir") return "LIGER_AGENT_CASSETTE_DIR";
  return nullptr;
}

const ConfigKeySpec* find_spec(const std::string& key) {
  for (const auto& spec : config_key_specs())
    if (spec.key == key) return &spec;
  return nullptr;
}

std::string known_keys_list() {
  std::string list;
  for (const auto& spec : config_key_specs()) {
    if (!list.empty()) list += ", ";
    list += spec.key;
  }
  return list;
}

std::optional<bool> parse_bool(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), ::tolower);
  if (text == "true" || text == "yes" || text == "on" || text == "1") return true;
  if (text == "false" || text == "no" || text == "off" || text == "0") return false;
  return std::nullopt;
}

// Returns an empty string when `value` fits `type`, else what was expected.
std::string type_mismatch(const std::string& value, ConfigValueType type) {
  try {
    std::size_t used = 0;
    switch (type) {
      case ConfigValueType::String: return {};
      case ConfigValueType::Int:
        std::stoll(value, &used);
        return used == value.size() ? std::string{} : "an integer";
      case ConfigValueType::Number:
        std::stod(value, &used);
        return used == value.size() ? std::string{} : "a number";
      case ConfigValueType::Bool: return parse_bool(value) ? std::string{} : "true or false";
    }
  } catch (const std::exception&) {
  }
  return type == ConfigValueType::Int ? "an integer" : "a number";
}

void set_checked(std::map<std::string, ConfigValue>& values, const std::string& key,
                 const std::string& value, ConfigLayer layer, const std::string& source,
                 const std::string& where) {
  const ConfigKeySpec* spec = find_spec(key);
  if (!spec) {
    throw Error(ErrorKind::Config, where + ": unknown configuration key '" + key + "'",
                "known keys: " + known_keys_list());
  }
  if (std::string expected = type_mismatch(value, spec->type); !expected.empty()) {
    throw Error(ErrorKind::Config,
                where + ": '" + key + "' must be " + expected + ", found '" + value + "'",
                "fix the value in " + source);
  }
  values[key] = ConfigValue{key, value, layer, source};
}

void flatten_file_node(const YAML::Node& node, const std::string& prefix, const fs::path& file,
                       ConfigLayer layer, std::map<std::string, ConfigValue>& values) {
  for (const auto& entry : node) {
    const std::string name = entry.first.as<std::string>();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    const YAML::Mark mark = entry.first.Mark();
    const std::string where =
        file.string() + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
    if (name == "api_key" || name.ends_with(".api_key")) {
      throw Error(ErrorKind::Config, where + ": '" + key + "' would store an API key in a file",
                  "keys live only in the environment: set llm.api_key_env to the variable's name "
                  "(e.g. OPENAI_API_KEY) and export the key there");
    }
    if (entry.second.IsMap()) {
      bool is_prefix = std::any_of(config_key_specs().begin(), config_key_specs().end(),
                                   [&](const ConfigKeySpec& s) { return s.key.starts_with(key + "."); });
      if (!is_prefix) {
        throw Error(ErrorKind::Config, where + ": unknown configuration section '" + key + "'",
                    "known keys: " + known_keys_list());
      }
      flatten_file_node(entry.second, key, file, layer, values);
    } else if (entry.second.IsScalar()) {
      set_checked(values, key, entry.second.Scalar(), layer, file.string(), where);
    } else if (entry.second.IsNull()) {
      continue;  // "key:" with nothing after it leaves the lower layer's value
    } else {
      throw Error(ErrorKind::Config, where + ": '" + key + "' must be a single value, not a list",
                  "known keys: " + known_keys_list());
    }
  }
}

void apply_file(const fs::path& file, bool must_exist, ConfigLayer layer,
                std::map<std::string, ConfigValue>& values) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    if (must_exist) {
      throw Error(ErrorKind::Config, "configuration file '" + file.string() + "' does not exist",
                  "pass an existing file to --config or drop the flag");
    }
    return;
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::Exception& e) {
    throw Error(ErrorKind::Config,
                file.string() + ":" + std::to_string(e.mark.line + 1) + ":" +
                    std::to_string(e.mark.column + 1) + ": invalid YAML: " + e.msg,
                "fix the syntax of the configuration file");
  }
  if (root.IsNull()) return;  // an empty file is a valid "no settings"
  if (!root.IsMap()) {
    throw Error(ErrorKind::Config, file.string() + ": configuration must be a YAML mapping",
                "write it as `key: value` lines, e.g. `llm:\\n  provider: openai`");
  }
  flatten_file_node(root, "", file, layer, values);
}

}  // namespace

ConfigInputs ConfigInputs::from_process(const std::optional<fs::path>& explicit_config) {
  ConfigInputs inputs;
  inputs.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  };
  if (explicit_config) {
    inputs.project_file = *explicit_config;
    inputs.project_file_explicit = true;
  } else {
    inputs.project_file = fs::path(".liger-agent.yaml");
  }
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) {
    inputs.user_file = fs::path(xdg) / "liger-agent" / "config.yaml";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    inputs.user_file = fs::path(home) / ".config" / "liger-agent" / "config.yaml";
  }
  return inputs;
}

Config Config::defaults() {
  Config config;
  for (const auto& spec : config_key_specs())
    config.values_[spec.key] = ConfigValue{spec.key, spec.default_value, ConfigLayer::Default, "default"};
  return config;
}

Config Config::load(const ConfigInputs& inputs) {
  Config config = defaults();
  if (inputs.user_file) apply_file(*inputs.user_file, false, ConfigLayer::UserFile, config.values_);
  if (inputs.project_file)
    apply_file(*inputs.project_file, inputs.project_file_explicit, ConfigLayer::ProjectFile, config.values_);
  if (inputs.getenv) {
    for (const auto& spec : config_key_specs()) {
      const std::string name = config_env_name(spec.key);
      if (auto value = inputs.getenv(name)) {
        set_checked(config.values_, spec.key, *value, ConfigLayer::Environment, name,
                    "environment variable " + name);
      } else if (const char* legacy = legacy_env_name(spec.key)) {
        if (auto old = inputs.getenv(legacy); old && !old->empty()) {
          set_checked(config.values_, spec.key, *old, ConfigLayer::Environment, legacy,
                      std::string("environment variable ") + legacy);
        }
      }
    }
  }
  for (const auto& [key, value] : inputs.flags) {
    auto name = inputs.flag_names.find(key);
    const std::string flag = name != inputs.flag_names.end() ? name->second : "--" + key;
    set_checked(config.values_, key, value, ConfigLayer::Flag, flag, "flag " + flag);
  }
  return config;
}

const ConfigValue& Config::get(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) {
    throw Error(ErrorKind::Internal, "configuration key '" + key + "' is not defined",
                "add it to config_key_specs() in src/config/config.cpp");
  }
  return it->second;
}

std::string Config::get_string(const std::string& key) const { return get(key).value; }

long long Config::get_int(const std::string& key) const { return std::stoll(get(key).value); }

double Config::get_number(const std::string& key) const { return std::stod(get(key).value); }

bool Config::get_bool(const std::string& key) const { return parse_bool(get(key).value).value_or(false); }

std::vector<ConfigValue> Config::entries() const {
  std::vector<ConfigValue> list;
  for (const auto& spec : config_key_specs()) list.push_back(get(spec.key));
  return list;
}

}  // namespace liger
