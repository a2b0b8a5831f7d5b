// Inputs that are equal parts of one argument along its last dimension (`a, b = x.chunk(2, dim=-1)`,
// F.glu): the kernel takes the parts as separate [rows, cols] inputs, and the generated Python
// entry takes the argument whole, passes the parts as row-strided views of it (no copy) and
// writes their gradients into one gradient of the argument's shape (no concatenation).
// The profile records a part as inputs[].split: "x.chunk(2, dim=-1)[0]".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "workflows/kernel_dev/profile.h"

namespace liger::kernel_dev {

struct SplitRef {
  std::string source;  // the argument the part is cut from
  int index = 0;       // which part, 0-based
  int parts = 0;       // how many equal parts the last dimension is cut into
};

constexpr int kMaxSplitParts = 16;

// "x.chunk(2, dim=-1)[0]" (also "chunk(2, -1)"); "" -> nullopt. Throws std::runtime_error naming
// the expected form for anything else.
std::optional<SplitRef> parse_split(const std::string& text);
std::string split_text(const SplitRef& split);

// One argument of the generated Python entry: an input as it is, or an argument whose parts are
// inputs (`parts`: the inputs' indices, part 0 first).
struct SplitArgument {
  std::string name;
  std::vector<std::size_t> parts;
};

// The entry's arguments in the inputs' order (a split argument where its first listed part is).
// Throws std::runtime_error when the splits do not describe whole arguments: a part missing or
// given twice, part counts that differ, an argument named like another input or parameter.
std::vector<SplitArgument> call_arguments(const KernelProfile& profile);

// Whether any input is a part of an argument.
bool has_split_inputs(const KernelProfile& profile);

}  // namespace liger::kernel_dev
