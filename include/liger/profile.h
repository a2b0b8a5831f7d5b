// YAML profiles and the schemas they are checked against.
//
// A schema is data (skills/<workflow>/profile.schema.yaml), so the decisions a workflow records
// can change without recompiling. Schema node keys:
//   type: string | int | number | bool | list | map | any   (or a list of these)
//   required: true|false          enum: [allowed, values]        min / max: numeric bounds
//   fields: {name: <node>, ...}   (map)     open: true  (map: accept fields not listed)
//   items: <node>                 (list)    values: <node>  (map with free-form keys)
//   description: "shown at checkpoints and in docs"
//   readonly: true, reason: "why"   a record of the input, not a decision: nothing is generated
//                                   from it, so an edit is refused (Schema::readonly_changes)
//   pattern: "^[a-z][a-z0-9_]{0,63}$"   (string: the whole value must match; ECMAScript)
//   max_length: 200               (string: bytes)    key_pattern: "<regex>"  (map: every key)
//   path: relative                (string: a normalised repository-relative path, no '..')
//   under: [kernels, tests]       (with path: relative: inside one of these folders)
// Fields whose values become names, file paths or code carry pattern/path rules, so a hand
// edit or an LLM answer cannot smuggle a path or a statement into what Act writes.
// Any field of a profile may instead hold `{undecided: "<why>"}`: validation reports it as a
// pending decision (not an error) so a checkpoint can ask a human (or an LLM) to decide it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace liger::profile {

struct ValidationIssue {
  std::string path;      // "ops[2].dtype"; "" for the document itself
  int line = 0;          // 1-based; 0 when unknown
  int column = 0;        // 1-based; 0 when unknown
  std::string found;     // what the profile holds ("\"fp8\"", "a list", "nothing")
  std::string expected;  // what is allowed ("one of: fp32, fp16, bf16")
  std::string message;   // short statement of the problem

  // "profile.yaml:12:7: ops[2].dtype: value not allowed; found "fp8"; allowed: one of: ..."
  std::string format(const std::string& file) const;
};

struct ValidationReport {
  std::vector<ValidationIssue> errors;
  std::vector<ValidationIssue> undecided;  // message = the reason recorded in the profile
  bool ok() const { return errors.empty(); }
  // Every error on its own line, for error messages and checkpoint displays.
  std::string format_errors(const std::string& file) const;
  std::string format_undecided(const std::string& file) const;
};

struct SchemaNode;

class Schema {
 public:
  // Throws liger::Error (Internal) when the schema itself is malformed, naming file and line:
  // a broken schema is a defect of liger-agent's data, not of the user's profile.
  static Schema load_file(const std::filesystem::path& path);
  static Schema parse(const std::string& yaml_text, const std::string& origin);

  // Checks the whole document and reports every problem, not just the first.
  ValidationReport validate(const YAML::Node& document) const;

  // The read-only fields whose value differs between `before` (the profile as Understand wrote
  // it) and `after` (as edited); message = "read-only field was edited: <reason>". A field that
  // was undecided may be decided.
  std::vector<ValidationIssue> readonly_changes(const YAML::Node& before, const YAML::Node& after) const;

  const std::string& origin() const { return origin_; }

 private:
  std::shared_ptr<const SchemaNode> root_;
  std::string origin_;
};

// Parses a profile file; a YAML syntax error becomes liger::Error (Usage) with file:line:col.
YAML::Node load_yaml_file(const std::filesystem::path& path);
YAML::Node parse_yaml(const std::string& text, const std::string& origin);

// Block-style YAML text of `node`, with `header_comment` lines prefixed by "# ". Floats are
// written in their shortest round-trip form (0.95, not 0.94999999999999996).
std::string to_yaml(const YAML::Node& node, const std::string& header_comment = {});

// True when `node` is the `{undecided: reason}` marker.
bool is_undecided(const YAML::Node& node);

}  // namespace liger::profile
