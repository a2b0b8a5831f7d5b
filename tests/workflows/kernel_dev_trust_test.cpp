// Free text in a kernel-dev profile cannot become code or markup in the generated files (issue
// 15): a display name or a tolerance reason that tries to close a docstring, a comment, a string
// or a Markdown cell is rendered as one harmless line.
#include <gtest/gtest.h>

#include <sstream>

#include "workflows/kernel_dev/profile.h"
#include "workflows/kernel_dev/render.h"

namespace kd = liger::kernel_dev;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = LIGER_SOURCE_DIR;

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(KernelDevTrust, FreeTextIsRenderedAsHarmlessText) {
  const kd::KnowledgeBase kb = kd::KnowledgeBase::load(kSource);
  kd::KernelProfile benign = kd::analyse({"ReLU squared activation function", kd::InputKind::Auto, ""}, kb);
  benign.display_name = "Benign";
  kd::KernelProfile evil = benign;
  const std::string payload = "os.system('pwned')";
  evil.display_name = "Evil\"\"\" */ \\\n" + payload + "\n| x | `y`";
  for (auto& t : *evil.tolerances) t.reason = "r\"); " + payload + "; (\"\n" + payload;

  const auto good = kd::render(benign, kSource / "templates/kernel_dev");
  const auto bad = kd::render(evil, kSource / "templates/kernel_dev");
  ASSERT_EQ(good.size(), bad.size());
  for (std::size_t i = 0; i < bad.size(); ++i) {
    const std::string& text = bad[i].content;
    // The payload never starts a line (where it would run), and the structure of each file is
    // the benign one: as many lines, docstring quotes, comment ends and table cells.
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      const std::size_t start = line.find_first_not_of(" \t");
      EXPECT_FALSE(start != std::string::npos && line.compare(start, payload.size(), payload) == 0)
          << bad[i].path << ":\n" << line;
    }
    EXPECT_EQ(count_of(text, "\n"), count_of(good[i].content, "\n")) << bad[i].path;
    EXPECT_EQ(count_of(text, "\"\"\""), count_of(good[i].content, "\"\"\"")) << bad[i].path;
    EXPECT_EQ(count_of(text, "*/"), count_of(good[i].content, "*/")) << bad[i].path;
    EXPECT_EQ(count_of(text, "|"), count_of(good[i].content, "|")) << bad[i].path;
    EXPECT_EQ(count_of(text, "\""), count_of(good[i].content, "\"")) << bad[i].path;
  }
}

}  // namespace
