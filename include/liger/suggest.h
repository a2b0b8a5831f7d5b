// "Did you mean": the closest known name to a mistyped one (commands, flags, op names).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace liger::util {

// Optimal-string-alignment distance: insertions, deletions, substitutions and swaps of two
// adjacent characters each cost 1, so "gaol" is 1 from "goal" and "nrom" 1 from "norm".
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word`, if it is near enough to be a typo rather than a different
// word: at most a third of the word's length (and at least 1, at most 3) edits away. Ties go to
// the earlier candidate. Case-insensitive.
std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" — ready to append to a message.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace liger::util
