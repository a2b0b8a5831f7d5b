// Tuned-defaults tables of the kernel library (kernels/src/<op>/tuning.h): parse the
// `constexpr <Row> <name>[] = { {...}, {...} };` arrays, edit rows, re-emit the file with every
// byte outside the edited fields unchanged (comments, alignment, wrapping).
//
//   TuningFile f = TuningFile::parse(text);
//   f.emit() == text                                  // round trip
//   f.array("kSm90")->rows[1].values()                // {"4096", "4", "512", "1"}
//   f.set_field("kSm90", 1, 2, "256");                // only that token changes
//   f.insert_row_after("kSm90", 0, {"2048", "4", "256", "1"});
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace liger::kernel_perf {

struct TableRow {
  // The row's text is `pieces[0] value[0] pieces[1] value[1] ... pieces[n]`: the values are the
  // leaf fields (nested aggregates flattened), the pieces everything between them.
  std::vector<std::string> pieces;
  std::vector<std::string> fields;
  std::string text() const;
  const std::vector<std::string>& values() const { return fields; }
};

struct TableArray {
  std::string type;  // "TuningRow"
  std::string name;  // "kSm90"
  std::vector<TableRow> rows;
  std::vector<std::string> separators;  // text before row 0, between rows, after the last row
};

class TuningFile {
 public:
  // Throws liger::Error (Failure) on unbalanced braces inside a table.
  static TuningFile parse(const std::string& text);
  std::string emit() const;

  const std::vector<TableArray>& arrays() const { return arrays_; }
  const TableArray* array(const std::string& name) const;
  // Throws liger::Error (Internal) for an unknown array, row or field index.
  void set_field(const std::string& array, std::size_t row, std::size_t field, const std::string& value);
  void set_row(const std::string& array, std::size_t row, const std::vector<std::string>& values);
  // A copy of row `row`'s text with `values`, inserted after it with the separator the table uses.
  void insert_row_after(const std::string& array, std::size_t row, const std::vector<std::string>& values);

 private:
  TableArray* find(const std::string& name);
  // The file is segments[0] array[0] segments[1] array[1] ... segments[n].
  std::vector<std::string> segments_;
  std::vector<TableArray> arrays_;
};

// Integer value of a table field: literals, INT64_MAX / INT32_MAX, `1 << 30`,
// `int64_t{1} << 20`, with optional casts; nullopt when not understood.
std::optional<long long> eval_field(const std::string& text);

}  // namespace liger::kernel_perf
