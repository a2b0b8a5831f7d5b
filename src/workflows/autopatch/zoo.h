// `autopatch --all`: the model zoo of a transformers tree and its coverage table. This part has no
// processes in it: which model types a tree holds (and which of them have a causal-LM head), one
// table row from a model's profile, and the table as Markdown and JSON. The CLI
// (src/cli/cmd_autopatch_all.cpp) runs one autopatch run per model and hands the results here.
#pragma once

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <string>
#include <vector>

namespace liger::autopatch::zoo {

namespace fs = std::filesystem;

struct ZooModel {
  std::string type;                // folder name under models/
  fs::path modeling;               // models/<type>/modeling_<type>.py
  std::vector<std::string> heads;  // *ForCausalLM / *ForConditionalGeneration classes it defines
};

struct NotCausal {
  std::string type;
  std::string reason;  // what the file defines instead
};

struct Inventory {
  fs::path package_dir;  // the transformers package (models/ is below it)
  fs::path models_dir;
  std::string transformers_version;     // __version__ of package_dir/__init__.py, "" when unreadable
  std::vector<ZooModel> causal;         // sorted by type
  std::vector<NotCausal> not_causal;    // a modeling file without a decoder head
  std::vector<std::string> no_modeling; // folders without models/<type>/modeling_<type>.py (auto, tokenizer-only)
};

// `path` is a transformers package directory (holding models/) or its models/ folder. Throws
// liger::Error(Usage) naming the path when it is neither.
Inventory enumerate(const fs::path& path);
// The head classes a modeling file defines (class statements at the top level only).
std::vector<std::string> head_classes(const std::string& modeling_text);

struct PlanItem {
  std::string kernel, target, reason;
};

struct Row {
  std::string model;
  std::vector<std::string> heads;
  int decided = 0, total = 0;
  std::vector<std::string> undecided;  // decision keys
  std::vector<PlanItem> patched, declined;
  std::string error;     // the analysis failed: the rest of the row is empty
  std::string verified = "not run";
  std::string run_dir;   // where the model's run lives ("" when none was created)
  std::string log;       // the run's captured output

  nlohmann::json to_json() const;
};

// Counts and items of a profile as Understand writes it (profile.yaml).
Row row_from_profile(const std::string& model, const YAML::Node& profile);

struct TableMeta {
  std::string date;                  // ISO-8601
  std::string transformers_version;
  std::string transformers_dir;
  std::string agent_version, agent_commit;
  bool verify = false;
};

// Rows are expected sorted by model; the output depends on nothing else (no timing, no job order).
std::string render_markdown(const std::vector<Row>& rows, const Inventory& inventory, const TableMeta& meta);
nlohmann::json render_json(const std::vector<Row>& rows, const Inventory& inventory, const TableMeta& meta);
// One line: "412 model folders: 380 causal LMs (301 fully decided, 70 with undecided decisions, 9
// analysis errors), 20 not a causal LM, 12 without a modeling file".
std::string summary_line(const std::vector<Row>& rows, const Inventory& inventory, bool verify);

}  // namespace liger::autopatch::zoo
