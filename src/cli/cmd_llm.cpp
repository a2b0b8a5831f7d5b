// `liger-agent llm check`: tells a user whether the configured LLM endpoint works, and if not,
// which of reachability, the key or the model is wrong and how to fix it.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "cli/run_support.h"
#include "liger/config.h"
#include "liger/llm/provider.h"

namespace liger::cli {

namespace {

const char* yes_no(bool value) { return value ? "ok" : "FAILED"; }

// auth and model are only "ok" once an answer proved them; a 429 or a 500 proves nothing.
std::string verdict(bool ok, bool failed) { return ok ? "ok" : failed ? "FAILED" : "not confirmed (no usable answer)"; }

void print_check_text(const llm::ProviderConfig& config, const llm::EndpointCheck& check) {
  std::cout << fmt::format("provider:  {}\n", llm::to_string(config.kind));
  if (!check.needs_endpoint) {
    std::cout << check.message << "\n";
    return;
  }
  std::string key_env = llm::api_key_variable(config);
  std::cout << fmt::format("endpoint:  {}\n", check.endpoint);
  std::cout << fmt::format("model:     {}\n", check.model);
  std::cout << fmt::format("key:       {}\n", key_env.empty() ? "(none sent)" : "$" + key_env);
  if (!check.configured) {
    std::cout << "config:    FAILED\n";
  } else {
    std::cout << fmt::format("reachable: {}\n", yes_no(check.reachable));
  }
  if (check.reachable) {
    if (check.http_status != 0) std::cout << fmt::format("status:    HTTP {}\n", check.http_status);
    std::cout << fmt::format("auth:      {}\n", verdict(check.auth_ok, check.failure == "auth"));
    std::cout << fmt::format("model:     {}\n", verdict(check.model_ok, check.failure == "model"));
  }
  if (check.configured) std::cout << fmt::format("latency:   {:.2f} s\n", check.latency_s);
  std::cout << (check.ok() ? "" : "error:     ") << check.message << "\n";
  if (!check.hint.empty()) std::cout << "hint:      " << check.hint << "\n";
}

}  // namespace

void register_llm_command(CLI::App& app, GlobalOptions& options) {
  auto* llm_cmd = app.add_subcommand("llm", "Inspect the configured LLM provider.");
  llm_cmd->require_subcommand(1);
  llm_cmd->footer(examples_footer({"liger-agent llm check", "liger-agent --llm anthropic llm check --json"}));
  auto* check_cmd = llm_cmd->add_subcommand(
      "check",
      "Send one tiny request to the configured LLM endpoint and report whether it is reachable, "
      "whether the key is accepted, whether the model exists, and the latency.");
  check_cmd->footer(examples_footer({"liger-agent llm check",
                                     "liger-agent --llm anthropic llm check --json",
                                     "LIGER_AGENT_LLM_BASE_URL=http://localhost:8000/v1 liger-agent --llm openai llm check"}));
  check_cmd->callback([&options] {
    llm::ProviderConfig config = llm::provider_config_from(options.config());
    llm::EndpointCheck check = llm::check_endpoint(config);
    if (options.json) {
      print_json({{"provider", llm::to_string(config.kind)},
                  {"needs_endpoint", check.needs_endpoint},
                  {"endpoint", check.endpoint},
                  {"model", check.model},
                  {"key_env", llm::api_key_variable(config)},
                  {"configured", check.configured},
                  {"reachable", check.reachable},
                  {"auth_ok", check.auth_ok},
                  {"model_ok", check.model_ok},
                  {"answered", check.answered},
                  {"http_status", check.http_status},
                  {"failure", check.failure},
                  {"latency_s", check.latency_s},
                  {"ok", check.ok()},
                  {"message", check.message},
                  {"hint", check.hint}});
    } else {
      print_check_text(config, check);
    }
    options.exit_code = check.ok() ? 0 : 1;
  });
}

}  // namespace liger::cli
