// Input names in the generated code. They are the user's (a function's parameters, an
// expression's symbols), and every generated file (kernel, reference, tests, benchmark, Python
// binding) also declares names of its own and names each gradient d<input>: an input called `i`
// met the reference test's loop index, `rows` the launch's row count, `o` gave the gradient `do`,
// `new` or `char` are C++ itself. Such an input gets a name of its own in the generated code
// (<name>_in); the profile's notes say which.
#pragma once

#include <functional>

#include <string>
#include <vector>

#include "workflows/kernel_dev/expr.h"

namespace liger::kernel_dev {

// Whether `name` may not name an input (or d<name> its gradient) in the generated code.
bool reserved_in_generated_code(const std::string& name);

// `program` with every input whose name (or gradient's name) is reserved, or whose gradient's
// name is another input's, renamed in the inputs and the expression (<name>_in), every parameter
// with a reserved name likewise (<name>_param); the output renamed to stay clear of them. One note
// per rename.
// `also_reserved`: more names the caller's templates reserve (the Tier-2 row program's n, p, ...).
Program with_generated_code_names(const Program& program, std::vector<std::string>& notes,
                                  const std::function<bool(const std::string&)>& also_reserved = nullptr);

}  // namespace liger::kernel_dev
