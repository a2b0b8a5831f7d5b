// Building blocks of the review summaries workflows show first at a checkpoint and in `show`
// (Workflow::summarize): one-line renderings of profile values and plain-text tables.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace liger::review {

// A profile value on one line: scalars as they are, lists and maps in YAML flow style,
// `{undecided: why}` as "UNDECIDED (why)", absent as "-"; cut to `max_chars` with "...".
std::string inline_text(const YAML::Node& node, std::size_t max_chars = 60);

// Columns padded to their widest cell, " | " between them, a rule under the header.
std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

// "label:" padded to a column, then the value; continuation lines of `value` are indented.
std::string field_line(const std::string& label, const std::string& value, std::size_t label_width = 12);

}  // namespace liger::review
