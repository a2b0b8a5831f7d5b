// kernel-dev's segment reductions (jagged rows): recognising one in a description or in PyTorch
// code (a loop over segments, index_add_ / scatter_add_ / scatter_reduce / index_reduce, torch.split,
// torch.segment_reduce), the complete profile it gives, the profile's `segment` section in YAML,
// and Act's rendering from templates/kernel_dev/segment/.
//
// The generated op pools x [rows, features] (the pooled dim first, the features flattened and
// contiguous) over S segments into y [S, features]: forward one launch, one block per segment,
// 16-byte vector loads along the features, fp32 accumulation; backward one launch (sum: dy
// broadcast to the segment's rows; mean: dy / length; max/min: dy to the argmax/argmin row the
// forward saved, zero elsewhere).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "workflows/kernel_dev/profile.h"
#include "workflows/kernel_dev/render.h"
#include "workflows/kernel_dev/segment_spec.h"

namespace liger::kernel_dev {

struct SegmentRecognition {
  bool matched = false;   // the text is a segment reduction (spec valid unless `rejection`)
  SegmentSpec spec;
  std::string entry;      // the function / class the code defines ("" for words)
  std::string resolved_from;
  std::vector<std::string> notes;  // defaults taken, spellings read
  // A segment reduction the generator cannot take as it stands (extra computation, an unsupported
  // reduction or index form): why, with the fix. The profile then stops at the checkpoint.
  std::string rejection;
};

// Never throws. Words: a reduction kind (mean/average, sum, max, min, or "pooling") with a
// segment context (segments, jagged, ragged, variable-length, offsets, lengths...). Code: one of
// the spellings above, reducing one of the function's tensors over runs of rows.
SegmentRecognition recognise_segment(const std::string& text);

// The profile of a recognised segment reduction (complete unless the recognition was rejected),
// or nullopt when `request` is not one.
std::optional<KernelProfile> analyse_segment(const AnalysisRequest& request, const KnowledgeBase& knowledge);

// Every problem of a profile's segment section (empty: none or no section).
std::vector<std::string> segment_problems(const KernelProfile& profile);

// The `segment` section in the profile document, and back. read_segment sets profile.segment, or
// profile.undecided["segment"] for {undecided: "..."}; throws std::runtime_error naming the field.
YAML::Node segment_to_yaml(const KernelProfile& profile);
void read_segment(const YAML::Node& root, KernelProfile& profile);

// Act: every file of a segment op. Throws std::invalid_argument for a profile it cannot render.
std::vector<RenderedFile> render_segment(const KernelProfile& profile, const std::filesystem::path& templates_dir);

}  // namespace liger::kernel_dev
