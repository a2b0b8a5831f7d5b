// Effective configuration: every key has one value and remembers which layer supplied it.
//
// Precedence, highest first: command-line flags > LIGER_AGENT_* environment variables >
// project file (./.liger-agent.yaml, or the file given with --config) > user file
// ($XDG_CONFIG_HOME/liger-agent/config.yaml, fallback ~/.config/...) > built-in defaults.
//
// API keys are never configuration values: only the *name* of the variable holding one
// (llm.api_key_env) is, so no config file or `liger-agent config` output can leak a key.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace liger {

enum class ConfigValueType { String, Int, Number, Bool };

enum class ConfigLayer { Default, UserFile, ProjectFile, Environment, Flag };
const char* to_string(ConfigLayer layer) noexcept;

struct ConfigKeySpec {
  std::string key;  // dotted, e.g. "llm.base_url"
  ConfigValueType type;
  std::string default_value;
  std::string description;
};

// The keys liger-agent understands, in display order.
const std::vector<ConfigKeySpec>& config_key_specs();
// "LIGER_AGENT_" + key upper-cased with '.' -> '_' (llm.base_url -> LIGER_AGENT_LLM_BASE_URL).
std::string config_env_name(const std::string& key);

struct ConfigValue {
  std::string key;
  std::string value;   // canonical text; typed accessors parse it
  ConfigLayer layer;
  std::string source;  // "default", a file path, an env var name, or "--flag"
};

// Where the layers come from. Tests fill this in by hand; the CLI uses from_process().
struct ConfigInputs {
  std::map<std::string, std::string> flags;               // key -> value, already chosen by CLI
  std::map<std::string, std::string> flag_names;          // key -> "--run-dir" for reporting
  std::function<std::optional<std::string>(const std::string&)> getenv;
  std::optional<std::filesystem::path> project_file;      // may not exist
  bool project_file_explicit = false;                     // --config: missing file is an error
  std::optional<std::filesystem::path> user_file;         // may not exist

  // Environment from the process, ./.liger-agent.yaml (or `explicit_config`), XDG user file.
  static ConfigInputs from_process(const std::optional<std::filesystem::path>& explicit_config);
};

class Config {
 public:
  // Throws liger::Error (Config) on unknown keys, wrong types or unreadable explicit files;
  // the message names the file, line and the known keys.
  static Config load(const ConfigInputs& inputs);
  // Built-in defaults only; for code paths (and tests) that run without the user's files.
  static Config defaults();

  const ConfigValue& get(const std::string& key) const;  // throws Internal for unknown keys
  std::string get_string(const std::string& key) const;
  long long get_int(const std::string& key) const;
  double get_number(const std::string& key) const;
  bool get_bool(const std::string& key) const;

  // All keys in config_key_specs() order.
  std::vector<ConfigValue> entries() const;

 private:
  std::map<std::string, ConfigValue> values_;
};

}  // namespace liger
