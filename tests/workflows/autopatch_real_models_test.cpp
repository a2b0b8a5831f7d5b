// autopatch against the REAL modeling files of an installed transformers. Skips (visibly) when
// `python3 -c 'import transformers'` fails; LIGER_TRANSFORMERS_DIR may point at a transformers
// package (or a source checkout's src/transformers) instead.
#include <gtest/gtest.h>

#include <iostream>

#include "autopatch_expect.h"
#include "liger/error.h"
#include "workflows/autopatch/model_analysis.h"

namespace fs = std::filesystem;
using namespace liger::autopatch;

namespace {

std::optional<fs::path> transformers_or_skip_reason(std::string& reason) {
  try {
    return find_transformers_dir();
  } catch (const liger::Error& e) {
    reason = std::string(e.what()) + " (" + e.hint() + ")";
    return std::nullopt;
  }
}

}  // namespace

TEST(AutopatchRealModels, ExpectedDecisionsOnInstalledTransformers) {
  std::string why;
  auto dir = transformers_or_skip_reason(why);
  if (!dir) GTEST_SKIP() << "transformers not available: " << why;
  // expected_decisions_heldout.yaml holds models checked against the rules after they were
  // written (the rules were not fitted to them); both tables use the same format.
  YAML::Node table;
  for (const char* name : {"expected_decisions.yaml", "expected_decisions_heldout.yaml"}) {
    YAML::Node part = YAML::LoadFile(
        (fs::path(LIGER_SOURCE_DIR) / "tests/workflows/fixtures/autopatch" / name).string());
    for (auto it = part.begin(); it != part.end(); ++it) {
      const std::string type = it->first.as<std::string>();
      EXPECT_FALSE(table[type]) << type << " is listed twice (" << name << ")";
      table[type] = it->second;
    }
  }
  ResolveOptions opt;
  opt.transformers_dir = *dir;
  int checked = 0;
  std::vector<std::string> missing;
  for (auto it = table.begin(); it != table.end(); ++it) {
    const std::string type = it->first.as<std::string>();
    if (!fs::exists(*dir / "models" / type / ("modeling_" + type + ".py"))) {
      missing.push_back(type);
      continue;
    }
    SCOPED_TRACE(type);
    ModelProfile p;
    try {
      p = analyse_model(type, opt);
    } catch (const std::exception& e) {
      ADD_FAILURE() << type << ": analysis threw: " << e.what();
      continue;
    }
    ++checked;
    auto problems = autopatch_test::check(p, it->second);
    EXPECT_TRUE(problems.empty()) << type << ":\n" << autopatch_test::join(problems)
                                  << "(run liger-agent autopatch " << type << " to see the profile)";
  }
  std::cout << "[ autopatch ] checked " << checked << " real models in " << dir->string();
  if (!missing.empty()) {
    std::cout << "; not in this transformers:";
    for (auto& m : missing) std::cout << " " << m;
  }
  std::cout << "\n";
  EXPECT_GT(checked, 10) << "too few of the expected model types were found";
}

// Every modeling file of the installed transformers must parse and analyse without throwing;
// prints how many decisions stay undecided per model, as a coverage report.
TEST(AutopatchRealModels, EveryModelingFileAnalysesWithoutError) {
  std::string why;
  auto dir = transformers_or_skip_reason(why);
  if (!dir) GTEST_SKIP() << "transformers not available: " << why;
  int total = 0, failed = 0, fully_decided = 0;
  std::map<std::string, int> undecided_by_key;
  for (const auto& e : fs::directory_iterator(*dir / "models")) {
    if (!e.is_directory()) continue;
    std::string type = e.path().filename().string();
    fs::path f = e.path() / ("modeling_" + type + ".py");
    if (!fs::exists(f)) continue;
    ++total;
    try {
      ModelProfile p = analyse_model(f.string());
      auto u = p.undecided();
      if (u.empty()) ++fully_decided;
      for (auto& k : u) ++undecided_by_key[k];
    } catch (const std::exception& ex) {
      ++failed;
      ADD_FAILURE() << type << ": " << ex.what();
    }
  }
  std::cout << "[ autopatch ] " << total << " modeling files, " << fully_decided
            << " with all 12 decisions made, " << failed << " failed; undecided counts:";
  for (auto& [k, n] : undecided_by_key) std::cout << " " << k << "=" << n;
  std::cout << "\n";
  EXPECT_GT(total, 0);
}

// The image-and-text convergence test runs the vision tower, so a mini configuration must build one
// whose features fit the mini text model: the output width is the text hidden size (an inner width
// beside hidden_size, a wrapper's projection_dim), the vision config's per-layer index lists lie in
// its mini depth, and its key/value heads divide its query heads. Checked on the real models that
// exercise each rule (the rules read the config classes, not these names).
TEST(AutopatchRealModels, VisionMiniConfigsFeedTheTextModel) {
  std::string why;
  auto dir = transformers_or_skip_reason(why);
  if (!dir) GTEST_SKIP() << "transformers not available: " << why;
  ResolveOptions opt;
  opt.transformers_dir = *dir;
  auto attributes = [&](const std::string& type) -> YAML::Node {
    if (!fs::exists(*dir / "models" / type / ("modeling_" + type + ".py"))) return YAML::Node();
    return YAML::Clone(analyse_model(type, opt).mini_config["attributes"]);
  };
  auto text_hidden = [](const YAML::Node& a) { return (a["text_config"] ? a["text_config"] : a)["hidden_size"].as<int>(); };
  int checked = 0;
  if (auto a = attributes("qwen2_vl")) {  // embed_dim (inner) beside hidden_size (the merger's output)
    EXPECT_EQ(a["vision_config"]["hidden_size"].as<int>(), text_hidden(a));
    EXPECT_LT(a["vision_config"]["embed_dim"].as<int>(), 1280);
    ++checked;
  }
  if (auto a = attributes("paligemma")) {  // the wrapper's projection_dim is the projector's output
    EXPECT_EQ(a["projection_dim"].as<int>(), text_hidden(a));
    ++checked;
  }
  if (auto a = attributes("mllama")) {  // intermediate_layers_indices index the vision layers' states
    const int layers = a["vision_config"]["num_hidden_layers"].as<int>();
    ASSERT_TRUE(a["vision_config"]["intermediate_layers_indices"].IsSequence());
    for (const auto& i : a["vision_config"]["intermediate_layers_indices"]) EXPECT_LT(i.as<int>(), layers);
    // Its heads are `attention_heads` and its 8 global layers `num_global_layers`: both shrink (the
    // image test's attention over 4 tiles of 1025 patches held 70 GiB at the defaults).
    EXPECT_LE(a["vision_config"]["attention_heads"].as<int>(), 2);
    EXPECT_LE(a["vision_config"]["num_global_layers"].as<int>(), 2);
    ++checked;
  }
  if (auto a = attributes("gemma4")) {  // a vision attention with its own key/value head count
    const auto v = a["vision_config"];
    EXPECT_EQ(v["num_attention_heads"].as<int>() % v["num_key_value_heads"].as<int>(), 0);
    ++checked;
  }
  if (auto a = attributes("gemma3")) {  // image tokens avg-pooled from the mini tower's 14x14 patch grid
    EXPECT_EQ(a["mm_tokens_per_image"].as<int>(), 16);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "none of qwen2_vl, paligemma, mllama, gemma4, gemma3 in " << dir->string();
}
