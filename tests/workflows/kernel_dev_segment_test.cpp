// kernel-dev segment reductions (issue 18 item 3): recognising a segment mean/sum/max/min in words
// and in PyTorch (loops, index_add_ / scatter_add_ / scatter_reduce, torch.split, segment_reduce;
// offsets vs lengths; the pooled dim), requests it must not take (other row ops, GLUs) or must name
// as not pure pooling; the profile's `segment` section (schema, problems, YAML round trip); the
// rendered files (nvcc -c for sm_90, g++ -fsyntax-only of the GPU test and benchmark, py_compile of
// the binding, the fp64 reference built and its tests run); and the workflow through Verify with
// the toolchain faked. A missing compiler skips with the reason.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "liger/config.h"
#include "liger/engine.h"
#include "liger/profile.h"
#include "liger/util.h"
#include "workflows/kernel_dev/render.h"
#include "workflows/kernel_dev/segment.h"
#include "workflows/kernel_dev/workflow.h"

#include "committed_tree.h"
#include "kernel_dev_family.h"
#include "rendered_tree.h"

namespace kd = liger::kernel_dev;
namespace fs = std::filesystem;
using namespace liger::testing::rendered;  // write_tree, find_tool, run and the compile steps
using liger::testing::family::analyse;

namespace {

const fs::path kSource = LIGER_SOURCE_DIR;

struct Expected {
  std::string text;
  std::string reduce, index;
  int dim = 0;
  std::string form;
};

// The spellings and others like them (different names, dims, keyword arguments).
const std::vector<Expected> kRecognised = {
    {"def f(x, offsets):\n"
     "    out = torch.zeros(offsets.numel() - 1, x.shape[1], dtype=x.dtype, device=x.device)\n"
     "    lengths = offsets[1:] - offsets[:-1]\n"
     "    seg = torch.repeat_interleave(torch.arange(lengths.numel(), device=x.device), lengths)\n"
     "    out.index_add_(0, seg, x)\n"
     "    return out / lengths[:, None]\n",
     "mean", "offsets", 0, "index_add"},
    {"def pool(h, bounds):\n    n = bounds.diff()\n    ids = torch.arange(len(bounds) - 1).repeat_interleave(n)\n"
     "    return torch.zeros(len(bounds) - 1, h.size(1)).index_add(0, ids, h)\n",
     "sum", "offsets", 0, "index_add"},
    {"def f(x, lengths):\n    seg = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)\n"
     "    idx = seg[:, None].expand(-1, x.shape[1])\n"
     "    return torch.zeros(lengths.numel(), x.shape[1]).scatter_reduce(0, idx, x, reduce='amax', include_self=False)\n",
     "max", "lengths", 0, "scatter_reduce"},
    {"def f(x, sizes):\n    seg = torch.repeat_interleave(torch.arange(sizes.numel()), sizes)\n"
     "    out = x.new_zeros(sizes.numel(), x.shape[1])\n    out.scatter_add_(0, seg[:, None].expand_as(x), x)\n"
     "    counts = x.new_zeros(sizes.numel()).index_add_(0, seg, torch.ones_like(seg, dtype=x.dtype))\n"
     "    return out / counts.clamp(min=1)[:, None]\n",
     "mean", "lengths", 0, "scatter_add"},
    {"def f(x, offsets):\n    out = torch.empty(len(offsets) - 1, x.shape[1])\n"
     "    for i in range(len(offsets)-1): out[i] = x[offsets[i]:offsets[i+1]].mean(0)\n    return out\n",
     "mean", "offsets", 0, "loop"},
    {"def f(x, lengths):\n    out = []\n    start = 0\n    for l in lengths.tolist():\n"
     "        out.append(x[start:start + l].amax(dim=0))\n        start += l\n    return torch.stack(out)\n",
     "max", "lengths", 0, "loop"},
    {"def f(x, offsets):\n    return torch.stack([x[:, offsets[i]:offsets[i + 1]].sum(1) for i in range(len(offsets) - 1)], 1)\n",
     "sum", "offsets", 1, "loop"},
    {"class BagPool(nn.Module):\n    def forward(self, emb, cu_seqlens):\n        return torch.stack([torch.min(emb[cu_seqlens[b]:cu_seqlens[b + 1]], dim=0).values\n"
     "                            for b in range(cu_seqlens.numel() - 1)])\n",
     "min", "offsets", 0, "loop"},
    {"def f(x, lengths):\n    return torch.segment_reduce(x, \"mean\", lengths=lengths)\n", "mean", "lengths", 0,
     "segment_reduce"},
    {"y = torch.segment_reduce(data, reduce='max', offsets=ptr, axis=1, unsafe=True)", "max", "offsets", 1,
     "segment_reduce"},
    {"def f(x, lengths):\n    return torch.stack([p.sum(0) for p in torch.split(x, lengths.tolist())])\n", "sum",
     "lengths", 0, "split"},
    {"def f(x, lens):\n    return torch.stack([c.mean(dim=0) for c in x.split(lens.tolist())])\n", "mean", "lengths", 0,
     "split"},
    {"class JaggedMax(torch.nn.Module):\n    def forward(self, values, lengths):\n        out = []\n"
     "        for chunk in torch.split(values, lengths.tolist(), dim=0):\n            out.append(chunk.max(dim=0).values)\n"
     "        return torch.stack(out)\n",
     "max", "lengths", 0, "split"},
    {"def f(x, offsets):\n    return torch.stack([x[s:e].sum(dim=0) for s, e in zip(offsets[:-1].tolist(), offsets[1:].tolist())])\n",
     "sum", "offsets", 0, "loop"},
    {"def f(x, ptr):\n    return segment_csr(x, ptr, reduce=\"max\")\n", "max", "offsets", 0, "segment_csr"},
    {"def f(x, lengths):\n    idx = torch.repeat_interleave(torch.arange(len(lengths)), lengths)\n    return scatter_sum(x, idx, dim=0)\n",
     "sum", "lengths", 0, "torch_scatter"},
    {"def f(values, offsets):\n    nt = torch.nested.nested_tensor_from_jagged(values, offsets)\n    return nt.mean(dim=1)\n",
     "mean", "offsets", 0, "nested"},
    {"mean pooling over variable-length segments given offsets", "mean", "offsets", 0, "words"},
    {"max pooling over jagged rows given lengths", "max", "lengths", 0, "words"},
    {"segment sum", "sum", "offsets", 0, "words"},
    {"average each ragged bag of embeddings, bag sizes given as lengths", "mean", "lengths", 0, "words"},
    {"segment min over dim 1 with cu_seqlens", "min", "offsets", 1, "words"},
};

}  // namespace

TEST(KernelDevSegment, RecognisesSpellingsOfSegmentReductions) {
  for (const auto& e : kRecognised) {
    SCOPED_TRACE(e.text);
    const kd::SegmentRecognition r = kd::recognise_segment(e.text);
    ASSERT_TRUE(r.matched);
    EXPECT_EQ(r.rejection, "");
    EXPECT_EQ(r.spec.reduce, e.reduce);
    EXPECT_EQ(r.spec.index, e.index);
    EXPECT_EQ(r.spec.pooled_dim, e.dim);
    EXPECT_EQ(r.spec.source_form, e.form);
  }
  // segment_reduce's max without `initial` gives -inf for an empty segment; the profile says so.
  EXPECT_EQ(kd::recognise_segment("torch.segment_reduce(x, 'max', lengths=l)").spec.empty_segment, "inf");
  EXPECT_EQ(kd::recognise_segment("torch.segment_reduce(x, 'max', lengths=l, initial=0)").spec.empty_segment, "zero");
  EXPECT_EQ(kd::recognise_segment("torch.segment_reduce(x, 'max', lengths=l, initial=float('-inf'))").spec.empty_segment, "inf");
  // The pooled tensor and the index tensor are the ones the code uses, whatever their names.
  EXPECT_NE(kd::recognise_segment(kRecognised[12].text).resolved_from.find("of `values` over dim 0 via split, segments given by lengths (`lengths`)"),
            std::string::npos) << kd::recognise_segment(kRecognised[12].text).resolved_from;
}

TEST(KernelDevSegment, LeavesOtherOpsAlone) {
  for (const char* text : {"softmax", "ReLU squared activation function", "layer norm", "segment softmax given offsets",
                           "sum of squares", "def f(x):\n    return torch.softmax(x, dim=-1)\n",
                           "def f(x):\n    return x.sum(-1)\n", "y = x * sigmoid(x)",
                           "def f(x):\n    a, b = x.split(x.shape[-1] // 2, -1)\n    return a * torch.sigmoid(b)\n",
                           "def f(x):\n    for i in range(3):\n        x = x * 2\n    return x\n",
                           "masked mean pooling over padded sequences given lengths", "max pooling 2d",
                           "def f(x):\n    h = x.shape[-1] // 2\n    return x[..., :h] * torch.sigmoid(x[..., h:])\n",
                           "def f(x):\n    for i in range(0, x.shape[0], 128):\n        x[i:i+128] = x[i:i+128].softmax(-1)\n    return x\n"}) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(kd::recognise_segment(text).matched);
    EXPECT_FALSE(analyse(text).segment.has_value());
  }
}

// A segment reduction with more in it is named, not silently reduced to the pooling.
TEST(KernelDevSegment, NamesWhatIsMoreThanPooling) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"def f(x, offsets):\n    seg = torch.repeat_interleave(torch.arange(len(offsets) - 1), offsets.diff())\n"
       "    return torch.zeros(len(offsets) - 1, x.shape[1]).index_add_(0, seg, torch.relu(x))\n",
       "is computed (torch.relu(x))"},
      {"def f(x, offsets):\n    seg = torch.repeat_interleave(torch.arange(len(offsets) - 1), offsets.diff())\n"
       "    out = torch.zeros(len(offsets) - 1, x.shape[1]).index_add_(0, seg, x)\n    return torch.tanh(out)\n",
       "tanh"},
      {"def f(x, offsets):\n    out = torch.empty(len(offsets) - 1, x.shape[1])\n"
       "    for i in range(len(offsets) - 1): out[i] = (x[offsets[i]:offsets[i+1]] * 2).sum(0)\n    return out\n",
       "arithmetic in"},
      {"def f(x, batch):\n    out = torch.zeros(int(batch.max()) + 1, x.shape[1])\n    return out.index_add_(0, batch, x)\n",
       "per-row segment id tensor (`batch`"},
      {"torch.segment_reduce(x, 'prod', lengths=l)", "reduce='prod'"},
      {"torch.segment_reduce(x, 'max', lengths=l, initial=5)", "initial=5"},
      {"def f(v, o):\n    return torch.nested.nested_tensor_from_jagged(v, o).sum(dim=-1)\n", "not its ragged dim 1"},
      {"def f(x, batch):\n    return torch_scatter.scatter_mean(x, batch, dim=0)\n", "per-row segment id tensor (`batch`"},
  };
  for (const auto& [text, why] : cases) {
    SCOPED_TRACE(text);
    const kd::SegmentRecognition r = kd::recognise_segment(text);
    EXPECT_TRUE(r.matched);
    EXPECT_NE(r.rejection.find(why), std::string::npos) << r.rejection;
    const kd::KernelProfile p = analyse(text);
    ASSERT_TRUE(p.undecided.count("segment"));
    EXPECT_FALSE(p.complete());
  }
}

TEST(KernelDevSegment, ProfileIsCompleteValidatesAndRoundTrips) {
  const auto schema = liger::profile::Schema::load_file(kSource / "skills/kernel_dev/profile.schema.yaml");
  for (const auto& e : kRecognised) {
    SCOPED_TRACE(e.text);
    const kd::KernelProfile p = analyse(e.text);
    ASSERT_TRUE(p.segment.has_value());
    EXPECT_TRUE(p.complete());
    EXPECT_EQ(p.tier, 2);
    EXPECT_TRUE(kd::segment_problems(p).empty());
    const std::string text = kd::profile_to_text(p);
    const auto report = schema.validate(YAML::Load(text));
    EXPECT_TRUE(report.ok()) << report.format_errors("profile.yaml");
    const kd::KernelProfile back = kd::profile_from_yaml(YAML::Load(text));
    EXPECT_EQ(kd::profile_to_text(back), text);
    ASSERT_TRUE(back.segment.has_value());
    EXPECT_EQ(back.segment->reduce, e.reduce);
    EXPECT_EQ(back.segment->index, e.index);
  }
  // Names: generic function names give segment_<reduce>; a descriptive one or --name is kept.
  EXPECT_EQ(analyse(kRecognised[0].text).op_name, "segment_mean");
  EXPECT_EQ(analyse("max pooling over jagged rows given lengths").op_name, "segment_max_lengths");
  EXPECT_EQ(analyse(kRecognised[6].text).op_name, "segment_sum_dim1");
  EXPECT_EQ(analyse(kRecognised[7].text).op_name, "bag_pool");
  EXPECT_EQ(analyse("segment sum", "jagged_sum").op_name, "jagged_sum");
  // The schema rejects a reduction the kernels do not have; segment_problems other mistakes.
  YAML::Node bad = YAML::Load(kd::profile_to_text(analyse("segment sum")));
  bad["segment"]["reduce"] = "median";
  EXPECT_FALSE(schema.validate(bad).ok());
  kd::KernelProfile wrong = analyse("segment sum");
  wrong.segment->empty_segment = "inf";
  ASSERT_EQ(kd::segment_problems(wrong).size(), 1u);
  EXPECT_NE(kd::segment_problems(wrong)[0].find("inf is for max and min"), std::string::npos);
  EXPECT_THROW(kd::render(wrong, kSource / "templates/kernel_dev"), std::invalid_argument);
  // Only a rejection or an edit leaves it undecided; an undecided section reads back as such.
  kd::KernelProfile pending = analyse("segment sum");
  pending.undecided["segment"] = "check the index form";
  const kd::KernelProfile read = kd::profile_from_yaml(YAML::Load(kd::profile_to_text(pending)));
  EXPECT_EQ(read.undecided.at("segment"), "check the index form");
  EXPECT_TRUE(read.segment.has_value());
}

namespace {

// One op per reduction and index form (and a pooled dim other than 0).
const liger::testing::family::Variants kVariants = {
    {"segment_mean", "mean pooling over variable-length segments given offsets"},
    {"segment_sum_lengths", "segment sum given lengths"},
    {"segment_max", "max pooling over jagged rows given offsets"},
    {"segment_min_inf", "min over segments given lengths, -inf style empty segments"},
    {"segment_mean_dim1", "def f(x, offsets):\n    return torch.stack([x[:, offsets[i]:offsets[i + 1]].mean(1) for i in range(len(offsets) - 1)], 1)\n"},
};

}  // namespace

TEST(KernelDevSegment, RendersTheOpsFiles) {
  const auto files = kd::render(analyse(kRecognised[0].text), kSource / "templates/kernel_dev");
  std::vector<std::string> paths;
  for (const auto& f : files)
    if (!f.insert) paths.push_back(f.path);
  const std::vector<std::string> expected = {
      "kernels/include/liger_kernels/segment_mean.h", "kernels/src/segment_mean/segment_mean.cu",
      "kernels/src/segment_mean/tuning.h",            "kernels/reference/segment_mean_ref.h",
      "kernels/reference/segment_mean_ref.cpp",       "tests/kernels/reference/test_segment_mean_ref.cpp",
      "tests/kernels/gpu/test_segment_mean.cpp",      "benchmarks/bench_segment_mean.cpp",
      "kernels/python/liger_kernels/ops/segment_mean.py", "docs/kernels/segment_mean.md"};
  EXPECT_EQ(paths, expected);
  for (const auto& f : files) {
    EXPECT_EQ(f.content.find("{{"), std::string::npos) << f.path;
    if (f.path.find(".cu") != std::string::npos) {
      EXPECT_NE(f.content.find("liger_status liger_segment_mean_forward(const void* x, int64_t x_row_stride, const int64_t* offsets"),
                std::string::npos);
      EXPECT_NE(f.content.find("constexpr bool kMean = true;"), std::string::npos);
    }
  }
  // Another spelling of the same op renders the same files (a second request finds it in place).
  const auto loop = kd::render(analyse(kRecognised[4].text), kSource / "templates/kernel_dev");
  ASSERT_EQ(loop.size(), files.size());
  for (std::size_t i = 0; i < files.size(); ++i) EXPECT_EQ(loop[i].content, files[i].content) << files[i].path;
  // max saves its argmax rows; the forward and backward take them.
  const auto max_files = kd::render(analyse("max pooling over jagged rows given lengths"), kSource / "templates/kernel_dev");
  int headers = 0;
  for (const auto& f : max_files)
    if (f.path == "kernels/include/liger_kernels/segment_max_lengths.h") {
      ++headers;
      EXPECT_NE(f.content.find("int32_t* argmax, int64_t rows"), std::string::npos);
      EXPECT_NE(f.content.find("const int32_t* argmax, void* dx"), std::string::npos);
    }
  EXPECT_EQ(headers, 1);
}

// The generated kernel compiles with nvcc for sm_90; the GPU test and the benchmark with g++ against
// the CUDA headers; the binding with python3.
TEST(KernelDevSegment, HostCodePythonAndCudaCompile) {
  const std::string missing = liger::testing::family::compile_variants(kVariants, "-arch=sm_90");
  if (!missing.empty()) GTEST_SKIP() << "not compiled, tool missing: " << missing;
}

// The rendered fp64 reference builds and passes its own tests (worked example, finite differences,
// rows outside every segment) for every reduction and index form.
TEST(KernelDevSegment, ReferenceBuildsAndPassesItsTests) {
  const std::string gxx = find_tool({"g++", "c++"});
  if (gxx.empty()) GTEST_SKIP() << "no C++ compiler (g++) on PATH: the rendered reference was not compiled";
  liger::testing::family::expect_references_pass(gxx, kVariants, 3);
}

// A wrong gradient rule in the reference is caught by its finite-difference test (the test can fail).
TEST(KernelDevSegment, ReferenceTestCatchesAWrongGradient) {
  const std::string gxx = find_tool({"g++", "c++"});
  if (gxx.empty()) GTEST_SKIP() << "no C++ compiler (g++) on PATH";
  // The sum's gradient for a mean.
  const std::string error = liger::testing::family::run_with_wrong_rule(
      gxx, "segment mean given offsets", "seg_wrong", "dy[i] / static_cast<double>(end - begin)", "dy[i]");
  EXPECT_NE(error.find("gradient check failed (seed 1)"), std::string::npos) << error;
}

// The index_add_ spelling with --yes: Understand decides everything, Act writes the op's
// files and list entries, Verify builds and runs <Camel>Reference.* (toolchain faked).
TEST(KernelDevSegment, IndexAddSpellingReachesVerifyWithYes) {
  auto runner = std::make_shared<liger::testing::family::FakeRunner>(3);
  const auto yes = liger::testing::family::run_with_yes(kRecognised[0].text, "segment", runner);
  liger::testing::family::expect_op_through_verify(yes, *runner, "segment_mean", 2);
  EXPECT_NE(liger::util::read_file(yes.tree / "kernels/python/liger_kernels/functional.py").find("from .ops.segment_mean import segment_mean"),
            std::string::npos);
  std::error_code ec;
  fs::remove_all(yes.root, ec);
}
