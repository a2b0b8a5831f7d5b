// The bundled kernel library's list of ops, read from kernels/ops.yaml (written by the kernel
// library; the agent only reads it).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace liger::toolchain {

struct KernelOp {
  std::string name;
  std::string tier;                 // "1", "2", "3" or a name
  std::vector<std::string> dtypes;
  std::vector<std::string> options; // option names (a map's keys, or a list's items)
  std::string forward;              // C entry point
  std::string backward;             // C entry point, "" when the op has no backward
  std::string header;
};

// Throws liger::Error (Failure) when the file is missing, and (Failure) listing every schema
// violation with its line when it is malformed.
std::vector<KernelOp> read_kernel_catalog(const std::filesystem::path& ops_yaml);

}  // namespace liger::toolchain
