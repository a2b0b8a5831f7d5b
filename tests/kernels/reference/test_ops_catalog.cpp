// kernels/ops.yaml is what the agent tells users the library has; this keeps it honest: every
// entry point it names is declared in the header it names, and every op header is listed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

const fs::path kRepo = LIGER_TEST_REPO_ROOT;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Minimal reader for the flat `key: value` entries of ops.yaml (the agent's full YAML reader
// lives in src/, which kernels/ must not depend on).
struct CatalogEntry {
  std::string name, forward, backward, header;
};

std::vector<CatalogEntry> read_catalog() {
  std::vector<CatalogEntry> entries;
  std::istringstream in(read_text(kRepo / "kernels/ops.yaml"));
  std::string line;
  std::regex field(R"(^\s*-?\s*(name|forward|backward|header):\s*(\S+)\s*$)");
  while (std::getline(in, line)) {
    std::smatch match;
    if (!std::regex_match(line, match, field)) continue;
    if (match[1] == "name") entries.push_back({match[2], "", "", ""});
    else if (entries.empty()) continue;
    else if (match[1] == "forward") entries.back().forward = match[2];
    else if (match[1] == "backward") entries.back().backward = match[2];
    else entries.back().header = match[2];
  }
  return entries;
}

TEST(OpsCatalog, EveryEntryPointIsDeclaredInItsHeader) {
  auto entries = read_catalog();
  ASSERT_GE(entries.size(), 8u) << "kernels/ops.yaml lists too few ops";
  for (const auto& entry : entries) {
    SCOPED_TRACE(entry.name);
    ASSERT_FALSE(entry.header.empty());
    ASSERT_TRUE(fs::exists(kRepo / entry.header)) << entry.header;
    std::string header = read_text(kRepo / entry.header);
    for (const auto& symbol : {entry.forward, entry.backward}) {
      if (symbol.empty()) continue;
      EXPECT_TRUE(std::regex_search(header, std::regex("LIGER_API\\s+liger_status\\s+" + symbol + "\\s*\\(")))
          << symbol << " is not declared in " << entry.header;
    }
  }
}

TEST(OpsCatalog, EveryOpHeaderIsListed) {
  std::set<std::string> listed;
  for (const auto& entry : read_catalog()) listed.insert(fs::path(entry.header).filename().string());
  for (const auto& file : fs::directory_iterator(kRepo / "kernels/include/liger_kernels")) {
    std::string name = file.path().filename().string();
    if (name == "common.h" || name == "liger_kernels.h") continue;
    EXPECT_TRUE(listed.count(name)) << name << " has no entry in kernels/ops.yaml";
  }
}

}  // namespace
