// Reads the `extern "C"` function declarations of a C header: enough of C to document an ABI
// (declarations, parameter lists), not a compiler front end.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace liger::workflows::inspect {

struct CParameter {
  std::string type;  // "const void*"
  std::string name;  // "a"; empty for unnamed parameters
};

struct CFunction {
  std::string name;
  std::string return_type;
  std::vector<CParameter> parameters;
  int line = 0;  // 1-based line of the declaration's name
};

// Every function declared inside an extern "C" block of `source`, in order.
std::vector<CFunction> scan_c_declarations(const std::string& source);
std::vector<CFunction> scan_header_file(const std::filesystem::path& header);

}  // namespace liger::workflows::inspect
