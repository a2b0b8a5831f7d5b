// Free text (descriptions, display names, reasons) on its way into generated files: the
// templates' {{value}} passes through the escaper of the file's language, so a profile value
// can never end a comment, a string or a table cell and become code or markup (issue 15).
// Identifiers are constrained by the profile schema instead; {{{value}}} stays raw for the code
// fragments the workflows generate themselves.
#pragma once

#include <functional>
#include <string>

namespace liger::util {

// One line of text for C, C++, CUDA and Python sources, safe inside a comment, a docstring or a
// double-quoted string: control characters become spaces, '"' becomes '\'', '\\' becomes '/',
// and "/*", "*/" are split.
std::string escape_code_text(const std::string& text);

// One line of Markdown table-cell text: control characters become spaces, '|' is escaped.
std::string escape_markdown_text(const std::string& text);

// The escaper for a generated file, by its name (".py", ".h", ".cu", ".md"...); other files
// get escape_code_text.
std::function<std::string(const std::string&)> escaper_for(const std::string& file_name);

}  // namespace liger::util
