// Inputs that are equal parts of one argument (inputs[].split, input_split.h): from PyTorch that
// cuts an argument (x.chunk(2, dim=-1), F.glu) to the profile, its checks when a reviewer edits
// it, and what Act renders (the Python entry on the argument, the kernel on the parts).
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include <map>
#include <stdexcept>
#include <string>

#include "workflows/kernel_dev/compile_entry.h"
#include "workflows/kernel_dev/input_split.h"
#include "workflows/kernel_dev/profile.h"
#include "workflows/kernel_dev/render.h"
#include "workflows/kernel_dev/workflow.h"

#include "kernel_dev_family.h"

namespace kd = liger::kernel_dev;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = LIGER_SOURCE_DIR;

kd::KernelProfile analysed(const std::string& code) { return liger::testing::family::analyse(code); }

std::map<std::string, std::string> rendered(const kd::KernelProfile& p) {
  std::map<std::string, std::string> out;
  for (const auto& f : kd::render(p, kSource / "templates/kernel_dev")) out[f.path] = f.content;
  return out;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The profile after a reviewer's edit, read back as Act reads it.
kd::KernelProfile reloaded(const YAML::Node& edited) { return kd::profile_from_yaml(edited); }

const char* kFusedGateUp = "def act(gate_up):\n    gate, up = gate_up.chunk(2, dim=-1)\n    return F.silu(gate) * up\n";

TEST(KernelDevInputSplit, ParseAndPrintTheProfileForm) {
  const auto ref = kd::parse_split("x.chunk(3, dim=-1)[2]");
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->source, "x");
  EXPECT_EQ(ref->index, 2);
  EXPECT_EQ(ref->parts, 3);
  EXPECT_EQ(kd::split_text(*ref), "x.chunk(3, dim=-1)[2]");
  EXPECT_TRUE(kd::parse_split("x.chunk(2, -1)[0]"));
  EXPECT_FALSE(kd::parse_split(""));
  EXPECT_THROW(kd::parse_split("x.chunk(2, dim=0)[0]"), std::runtime_error);
  EXPECT_THROW(kd::parse_split("x.chunk(2, dim=-1)[2]"), std::runtime_error);
  EXPECT_THROW(kd::parse_split("x.chunk(1, dim=-1)[0]"), std::runtime_error);
  EXPECT_THROW(kd::parse_split("x.chunk(99, dim=-1)[0]"), std::runtime_error);
  EXPECT_THROW(kd::parse_split("x[..., :4]"), std::runtime_error);
}

TEST(KernelDevInputSplit, UnderstandRecordsThePartsAndTheArgument) {
  const kd::KernelProfile p = analysed(kFusedGateUp);
  ASSERT_TRUE(p.complete());
  ASSERT_EQ(p.tier, 1);
  ASSERT_EQ(p.inputs.size(), 2u);
  EXPECT_EQ(p.inputs[0].name, "gate");
  EXPECT_EQ(p.inputs[0].split, "gate_up.chunk(2, dim=-1)[0]");
  EXPECT_EQ(p.inputs[1].name, "up");
  EXPECT_EQ(p.inputs[1].split, "gate_up.chunk(2, dim=-1)[1]");
  const auto args = kd::call_arguments(p);
  ASSERT_EQ(args.size(), 1u);
  EXPECT_EQ(args[0].name, "gate_up");
  EXPECT_EQ(args[0].parts, (std::vector<std::size_t>{0, 1}));
  // The YAML round trip keeps the field (the reviewer sees and edits it).
  const kd::KernelProfile back = reloaded(kd::profile_to_yaml(p));
  EXPECT_EQ(back.inputs[1].split, "gate_up.chunk(2, dim=-1)[1]");
}

// Slices of the last dimension at whole fractions of x.shape[-1] are the same cut: halves with
// d = x.shape[-1] // 2 (named or unpacked), thirds, [:, ...] on a 2-D argument. Anything else is
// refused with the reason: a fixed width, one column, the first dimension, a computed value.
TEST(KernelDevInputSplit, LastDimensionSlicesAreEqualParts) {
  for (const char* code : {"def f(x):\n    d = x.shape[-1] // 2\n    return F.gelu(x[..., :d]) * x[..., d:]\n",
                           "def f(x):\n    a, b = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]\n    return F.silu(a) * b\n",
                           "def f(x):\n    return x[:, x.shape[-1] // 2:] * torch.sigmoid(x[:, :x.shape[-1] // 2])\n",
                           "def f(x):\n    return x[..., -(x.shape[-1] // 2):] * x[..., :x.shape[-1] // 2]\n"}) {
    const kd::KernelProfile p = analysed(code);
    ASSERT_TRUE(p.complete()) << code;
    ASSERT_EQ(p.inputs.size(), 2u) << code;
    const auto args = kd::call_arguments(p);
    ASSERT_EQ(args.size(), 1u) << code;
    EXPECT_EQ(args[0].name, "x");
    for (const auto& in : p.inputs) EXPECT_NE(in.split.find("x.chunk(2, dim=-1)["), std::string::npos) << in.split;
  }
  const kd::KernelProfile thirds = analysed("def f(x):\n    n = x.shape[-1] // 3\n    return x[..., :n] * x[..., n:2*n] + x[..., 2*n:]\n");
  ASSERT_TRUE(thirds.complete());
  ASSERT_EQ(thirds.inputs.size(), 3u);
  EXPECT_EQ(thirds.inputs[2].split, "x.chunk(3, dim=-1)[2]");
  const std::pair<const char*, const char*> refused[] = {
      {"def f(x):\n    return x[..., :128] * 2\n", "not fractions of x.shape[-1]"},
      {"def f(x):\n    return x[..., 0] * 2\n", "an index picks one column"},
      {"def f(x):\n    return x[:x.shape[-1] // 2] * 2\n", "slices the first dimension"},
      {"def f(x):\n    y = x * 2\n    return y[..., : y.shape[-1] // 2]\n", "a value computed in the op"},
      {"def f(x):\n    return x[..., : x.shape[-1] // 3 * 2] * 2\n", "equal parts"},
      {"def f(x):\n    return x[..., : x.shape[-1] // 3] * x[..., x.shape[-1] // 2 :]\n", "the kernel takes one cut"},
      {"def f(x, y):\n    return x // y\n", "only x.shape[-1] // k"}};
  for (const auto& [code, reason] : refused) {
    const kd::KernelProfile p = analysed(code);
    EXPECT_FALSE(p.complete()) << code;
    std::string all;
    for (const auto& [field, why] : p.undecided) all += why + "\n";
    EXPECT_NE(all.find(reason), std::string::npos) << code << "\n" << all;
  }
}

TEST(KernelDevInputSplit, ThePythonEntryTakesTheArgumentAndTheKernelTheParts) {
  const kd::KernelProfile p = analysed(kFusedGateUp);
  const auto files = rendered(p);
  const std::string op = p.op_name;
  const std::string& py = files.at("kernels/python/liger_kernels/ops/" + op + ".py");
  EXPECT_TRUE(contains(py, "def " + op + "(gate_up: Tensor, ) -> Tensor:")) << py;
  EXPECT_TRUE(contains(py, "def " + op + "_parts(gate: Tensor, up: Tensor, ) -> Tensor:")) << py;
  // Views of the argument in, one gradient of the argument's shape out.
  EXPECT_TRUE(contains(py, "_c_gate_up = _cut(gate_up, 2)")) << py;
  EXPECT_TRUE(contains(py, "_dc_gate_up = _cut(dgate_up, 2)")) << py;
  EXPECT_TRUE(contains(py, "[_dc_gate_up[0], _dc_gate_up[1], ]")) << py;
  EXPECT_TRUE(contains(py, "torch.library.custom_op(\"liger::" + op + "_packed_bwd\"")) << py;
  EXPECT_TRUE(contains(py, "def forward(self, gate_up: Tensor, ) -> Tensor:")) << py;
  // The C ABI and the kernel keep one pointer and row stride per part.
  const std::string& header = files.at("kernels/include/liger_kernels/" + op + ".h");
  EXPECT_TRUE(contains(header, "gate")) << header;
  EXPECT_TRUE(contains(header, "up")) << header;
  // torch.compile's entry replaces a region whose values are the parts.
  const std::string& entry = files.at("kernels/python/liger_kernels/compile/generated/" + op + ".py");
  EXPECT_TRUE(contains(entry, "import " + op + "_parts")) << entry;
}

TEST(KernelDevInputSplit, TheCompilePatternKeepsTheSourcesSpellingAfterTheCut) {
  // The graph region the backend looks for starts at the parts: F.silu(gate) * up as the source
  // writes it, not the translation's gate * sigmoid(gate) * up (which a model graph never has).
  EXPECT_EQ(kd::plan_compile_entry(analysed(kFusedGateUp)).expression, "F.silu(gate) * up");
  // A cut into names the op renamed (up_states is also the argument) keeps the translation.
  const kd::KernelProfile renamed =
      analysed("def act(up_states):\n    gate, up_states = up_states.chunk(2, dim=-1)\n    return up_states * F.silu(gate)\n");
  EXPECT_NE(kd::plan_compile_entry(renamed).expression, "up_states * F.silu(gate)");
}

TEST(KernelDevInputSplit, RemovingTheFieldMakesThePartsTheArguments) {
  YAML::Node y = kd::profile_to_yaml(analysed(kFusedGateUp));
  for (auto in : y["inputs"]) in.remove("split");
  const kd::KernelProfile p = reloaded(y);
  const std::string& py = rendered(p).at("kernels/python/liger_kernels/ops/" + p.op_name + ".py");
  EXPECT_TRUE(contains(py, "def " + p.op_name + "(gate: Tensor, up: Tensor, ) -> Tensor:")) << py;
  EXPECT_FALSE(contains(py, "_packed_bwd")) << py;
  EXPECT_FALSE(contains(py, "_cut(")) << py;
}

TEST(KernelDevInputSplit, EditsThatDoNotMakeWholeArgumentsAreRefused) {
  const YAML::Node base = kd::profile_to_yaml(analysed(kFusedGateUp));
  auto refused = [&](const std::function<void(YAML::Node&)>& edit, const std::string& says) {
    YAML::Node y = YAML::Clone(base);
    edit(y);
    try {
      reloaded(y);
      ADD_FAILURE() << "accepted; expected a refusal saying: " << says;
    } catch (const std::exception& e) {
      EXPECT_TRUE(contains(e.what(), says)) << e.what();
    }
  };
  refused([](YAML::Node& y) { y["inputs"][1].remove("split"); }, "no input is gate_up.chunk(2, dim=-1)[1]");
  refused([](YAML::Node& y) { y["inputs"][1]["split"] = "gate_up.chunk(2, dim=-1)[0]"; }, "are both gate_up.chunk(2, dim=-1)[0]");
  refused([](YAML::Node& y) { y["inputs"][1]["split"] = "gate_up.chunk(3, dim=-1)[1]"; }, "every part of one argument");
  refused([](YAML::Node& y) {
    y["inputs"][0]["split"] = "up.chunk(2, dim=-1)[0]";
    y["inputs"][1]["split"] = "up.chunk(2, dim=-1)[1]";
  }, "also an input's name");
  refused([](YAML::Node& y) { y["inputs"][0]["split"] = "gate_up[..., :4]"; }, "is not of the form");
}

TEST(KernelDevInputSplit, OnlyTierOneTakesParts) {
  // A row reduction reads whole rows: a cut there is refused by the translator, and a Tier-2
  // profile edited to carry one is refused on load.
  const kd::KernelProfile rows = analysed("def f(x):\n    a, b = x.chunk(2, dim=-1)\n    return torch.softmax(a, dim=-1) * b\n");
  EXPECT_FALSE(rows.complete());
  EXPECT_TRUE(contains(rows.tier_reason, "is translated for element-wise ops")) << rows.tier_reason;
  YAML::Node softmax = kd::profile_to_yaml(analysed("def f(x, t): return torch.softmax(x, dim=-1) * t"));
  ASSERT_TRUE(softmax["row_program"]);
  softmax["inputs"][0]["split"] = "z.chunk(2, dim=-1)[0]";
  softmax["inputs"][1]["split"] = "z.chunk(2, dim=-1)[1]";
  try {
    reloaded(softmax);
    ADD_FAILURE() << "a Tier-2 profile with inputs[].split was accepted";
  } catch (const std::exception& e) {
    EXPECT_TRUE(contains(e.what(), "only a Tier-1 (element-wise) op")) << e.what();
  }
}

}  // namespace
