// The command line's conventions, against the real binary: --version, help [command], "did you
// mean", errors printed once, completion scripts, and every example in --help and in docs/
// executed in a sandbox (a copy of the tree, the built-in provider, no --yes, so a run stops at
// its first checkpoint instead of reaching a GPU).
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "agent_test_support.h"

namespace liger {
namespace {

using testing::run_cli;
using testing::shell_quote;
using testing::TempDir;
namespace fs = std::filesystem;

const fs::path kSource = LIGER_SOURCE_DIR;

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(CliConventions, VersionFlagAndHelpCommand) {
  TempDir dir;
  auto result = run_cli(dir.path(), {"--version"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.rfind("liger-agent ", 0), 0u) << result.out;

  result = run_cli(dir.path(), {"help"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("kernel-dev"), std::string::npos) << result.out;

  result = run_cli(dir.path(), {"help", "kernel-dev"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("--modify"), std::string::npos) << result.out;
  EXPECT_EQ(result.out, run_cli(dir.path(), {"kernel-dev", "--help"}).out);

  result = run_cli(dir.path(), {"--json", "help", "llm", "check"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("latency"), std::string::npos) << result.out;

  result = run_cli(dir.path(), {"help", "kernl-dev"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("did you mean 'kernel-dev'?"), std::string::npos) << result.err;
}

TEST(CliConventions, TyposGetTheNearestNameAndExit2) {
  TempDir dir;
  liger::testing::make_checkout(dir.path());  // the commands below need a tree to name their ops
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  for (const Case& c : {Case{{"kernl-dev", "mish"}, "unknown command 'kernl-dev' (did you mean 'kernel-dev'?)"},
                        Case{{"--json", "rnus"}, "did you mean 'runs'?"},
                        Case{{"kernel-perf", "rms_norm", "--gaol", "speed"}, "unknown flag '--gaol' for 'kernel-perf' (did you mean '--goal'?)"},
                        Case{{"runs", "--jsno"}, "did you mean '--json'?"},
                        Case{{"llm", "chekc"}, "unknown command 'chekc' under 'llm' (did you mean 'check'?)"},
                        Case{{"kernel-perf", "rms_nrom", "--profile-only"}, "did you mean 'rms_norm'?"}}) {
    auto result = run_cli(dir.path(), c.args);
    EXPECT_EQ(result.exit_code, 2) << c.args[0] << ": " << result.out << result.err;
    EXPECT_NE((result.err + result.out).find(c.expected), std::string::npos) << result.out << result.err;
  }
  // A word that is near nothing gets no guess.
  auto result = run_cli(dir.path(), {"frobnicate"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err.find("did you mean"), std::string::npos) << result.err;
}

TEST(CliConventions, AnErrorIsPrintedOnce) {
  TempDir dir;
  liger::testing::make_checkout(dir.path());  // the commands below need a tree to name their ops
  auto result = run_cli(dir.path(), {"kernel-perf", "rms_nrom", "--profile-only"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_EQ(count(result.err, "no op named 'rms_nrom'"), 1u) << result.err;
}

TEST(CliConventions, EachHelpShowsItsOwnExamplesAndTheGlobalFlagsTheyUse) {
  TempDir dir;
  auto result = run_cli(dir.path(), {"llm", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_NE(result.out.find("liger-agent llm check"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("kernel-dev"), std::string::npos) << "top-level examples leaked:\n" << result.out;

  result = run_cli(dir.path(), {"kernel-dev", "--help"});
  const auto globals = result.out.find("Global flags used above");
  ASSERT_NE(globals, std::string::npos) << result.out;
  for (const char* flag : {"--yes", "--json", "--llm"})
    EXPECT_NE(result.out.find(flag, globals), std::string::npos) << flag << "\n" << result.out;
  EXPECT_EQ(result.out.find("--run-dir", globals), std::string::npos) << "only the flags its examples use";
}

TEST(CliConventions, CompletionScriptsCompleteCommandsAndFlags) {
  TempDir dir;
  auto result = run_cli(dir.path(), {"completion", "bash"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  util::write_file_atomic(dir.path() / "complete.bash", result.out);
  auto complete = [&](const std::string& words, int cword) {
    toolchain::ProcessOptions options;
    options.argv = {"bash", "-c",
                    "source " + shell_quote((dir.path() / "complete.bash").string()) + "; COMP_WORDS=(" + words +
                        "); COMP_CWORD=" + std::to_string(cword) + "; _liger_agent; printf '%s\\n' \"${COMPREPLY[@]}\""};
    return toolchain::run_process(options).output;
  };
  const std::string commands = complete("liger-agent kern", 1);
  for (const char* word : {"kernel-dev", "kernel-perf", "kernels"}) EXPECT_NE(commands.find(word), std::string::npos) << commands;
  EXPECT_EQ(commands.find("autopatch"), std::string::npos) << commands;
  const std::string flags = complete("liger-agent kernel-perf rms_norm --go", 3);
  EXPECT_NE(flags.find("--goal"), std::string::npos) << flags;
  const std::string nested = complete("liger-agent llm ch", 2);
  EXPECT_NE(nested.find("check"), std::string::npos) << nested;
  EXPECT_NE(complete("liger-agent --json ru", 2).find("runs"), std::string::npos);

  result = run_cli(dir.path(), {"completion", "zsh"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.rfind("#compdef liger-agent\n", 0), 0u);
  EXPECT_NE(result.out.find("'--goal:"), std::string::npos) << result.out;
  if (toolchain::find_executable("zsh")) {
    util::write_file_atomic(dir.path() / "complete.zsh", result.out);
    toolchain::ProcessOptions options;
    options.argv = {"zsh", "-n", (dir.path() / "complete.zsh").string()};
    EXPECT_EQ(toolchain::run_process(options).exit_code, 0);
  }
  EXPECT_EQ(run_cli(dir.path(), {"completion", "fish"}).exit_code, 2);
}

// ------------------------------------------------------------------ examples, executed

// The examples of one --help text: the lines of its "Examples:" block that invoke liger-agent,
// without their trailing comment.
std::vector<std::string> help_examples(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream in(help);
  bool in_examples = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "Examples:") {
      in_examples = true;
      continue;
    }
    if (!in_examples) continue;
    if (line.rfind("  ", 0) != 0) {
      in_examples = false;
      continue;
    }
    if (line.find("liger-agent") == std::string::npos || line.find("Exit codes") != std::string::npos) continue;
    out.push_back(line.substr(2));
  }
  return out;
}

// The subcommands a --help text lists.
std::vector<std::string> help_subcommands(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream in(help);
  bool in_list = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "Subcommands:" || line == "SUBCOMMANDS:") {
      in_list = true;
      continue;
    }
    if (!in_list) continue;
    if (line.rfind("  ", 0) != 0) break;
    std::istringstream words(line);
    std::string name;
    words >> name;
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

// Shell lines of docs' fenced code blocks that run liger-agent (a block's "$ " prompt removed).
std::vector<std::pair<std::string, std::string>> doc_examples() {
  std::vector<std::pair<std::string, std::string>> out;
  std::vector<fs::path> pages;
  // The user documentation: docs/*.md and docs/workflows/*.md (docs/examples/ and
  // docs/benchmarks/ record past sessions, with their machines' paths).
  for (const fs::path& dir : {kSource / "docs", kSource / "docs/workflows"})
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.path().extension() == ".md") pages.push_back(entry.path());
  pages.push_back(kSource / "README.md");
  std::sort(pages.begin(), pages.end());
  const std::regex invocation(R"(^\s*(\$ )?([A-Z_]+=\S+ )*liger-agent( |$))");
  for (const auto& page : pages) {
    std::istringstream in(util::read_file(page));
    bool in_code = false;
    int number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      if (line.rfind("```", 0) == 0) {
        in_code = !in_code;
        continue;
      }
      if (!in_code || !std::regex_search(line, invocation)) continue;
      std::string next;  // a command continued on the next lines
      while (!line.empty() && line.back() == '\\' && std::getline(in, next)) {
        ++number;
        line = line.substr(0, line.size() - 1) + next;
      }
      std::string command = std::regex_replace(line, std::regex(R"(^\s*(\$ )?)"), "");
      // a synopsis ("liger-agent [global flags] <command> ...") is not an example
      if (command.find("[global flags]") != std::string::npos) continue;
      out.emplace_back(fs::relative(page, kSource).string() + ":" + std::to_string(number), command);
    }
  }
  return out;
}

// The sandbox every example runs in: a copy of the tree (so nothing reaches the checkout), a
// `liger-agent` on PATH that drops --yes (a run parks at its first checkpoint instead of going
// on to a GPU), forces the built-in provider and a private run directory, the files the
// examples name, and a parked run for the examples that take a <run>.
struct Sandbox {
  TempDir dir;
  fs::path tree = dir.path() / "tree";
  fs::path runs = dir.path() / "runs";
  fs::path bin = dir.path() / "bin";
  std::string run;

  Sandbox() {
    for (const char* part : {"kernels", "skills", "templates", "docs", "benchmarks", "tests/kernels", "CMakeLists.txt"}) {
      if (!fs::exists(kSource / part)) continue;
      fs::create_directories((tree / part).parent_path());
      fs::copy(kSource / part, tree / part, fs::copy_options::recursive);
    }
    fs::create_directories(bin);
    const std::string wrapper = "#!/bin/bash\n"
                                "args=()\n"
                                "while [ $# -gt 0 ]; do\n"
                                "  case \"$1\" in\n"
                                "    --yes|-y|--autonomous) ;;\n"
                                "    --run-dir) shift ;;\n"
                                "    --llm) shift; args+=(--llm builtin) ;;\n"
                                "    --llm=*) args+=(--llm builtin) ;;\n"
                                "    *) args+=(\"$1\") ;;\n"
                                "  esac\n"
                                "  shift\n"
                                "done\n"
                                "exec " + shell_quote(testing::agent_binary().string()) + " \"${args[@]}\" --run-dir " +
                                shell_quote(runs.string()) + " </dev/null\n";
    util::write_file_atomic(bin / "liger-agent", wrapper);
    fs::permissions(bin / "liger-agent", fs::perms::owner_all);
    // Files the examples name.
    util::write_file_atomic(tree / "my_op.py",
                            "import torch\n\ndef forward(x):\n    return x * torch.sigmoid(1.702 * x)\n");
    util::write_file_atomic(tree / "ci.yaml", "max_attempts: 2\n");
    const fs::path fixture = kSource / "tests/workflows/fixtures/autopatch/tinyllama";
    fs::create_directories(tree / "path/to");
    for (const char* model : {"mistral", "mymodel", "x"}) {
      fs::copy_file(fixture / "modeling_tinyllama.py", tree / "path/to" / ("modeling_" + std::string(model) + ".py"));
      fs::copy_file(fixture / "configuration_tinyllama.py", tree / "path/to" / ("configuration_" + std::string(model) + ".py"));
    }
    fs::create_directories(tree / "path/to/repo");
    fs::create_directory_symlink(tree / "kernels", tree / "path/to/repo/kernels");
  }

  testing::CliResult shell(const std::string& command) {
    const fs::path err = dir.path() / "stderr.txt";
    toolchain::ProcessOptions options;
    options.argv = {"bash", "-c", "cd " + shell_quote(tree.string()) + " && " + command + " 2>" + shell_quote(err.string())};
    options.timeout = std::chrono::seconds(120);
    options.env = {{"PATH", bin.string() + ":" + std::getenv("PATH")},
                   {"HOME", dir.path().string()},
                   {"XDG_CONFIG_HOME", (dir.path() / "xdg").string()},
                   {"LIGER_AGENT_LLM_PROVIDER", "builtin"},
                   {"OPENAI_API_KEY", ""},
                   {"ANTHROPIC_API_KEY", ""}};
    auto result = toolchain::run_process(options);
    testing::CliResult cli{result.exit_code, result.output, fs::exists(err) ? util::read_file(err) : ""};
    return cli;
  }

  // <run> becomes a fresh run parked at its profile checkpoint (an earlier example may have
  // rejected or finished the previous one).
  std::string with_run(std::string command) {
    if (command.find("<run>") != std::string::npos) {
      auto parked = shell("liger-agent --json kernel-dev \"ReLU squared activation function\"");
      run = nlohmann::json::parse(parked.out).value("run", "");
    }
    for (std::size_t at; (at = command.find("<run>")) != std::string::npos;) command.replace(at, 5, run);
    return command;
  }
};

// Exit codes a documented example may end with here: 0 (done), 3 (parked at a checkpoint). A
// missing external tool (transformers, nvcc, a GPU) is the machine's limit, not the example's,
// and is reported as a toolchain error (never a usage error, 2).
void expect_example_runs(Sandbox& sandbox, const std::string& where, const std::string& example) {
  std::string command = example;
  if (auto comment = command.find("  #"); comment != std::string::npos) command = command.substr(0, comment);
  command = sandbox.with_run(command);
  auto result = sandbox.shell(command);
  bool toolchain_limit = false;
  if (result.exit_code == 1)
    for (const char* tool : {"transformers", "nvcc", "nvidia-smi", "GPU", "python3"})
      if (result.err.find(tool) != std::string::npos) toolchain_limit = true;
  EXPECT_TRUE(result.exit_code == 0 || result.exit_code == 3 || toolchain_limit)
      << where << ": `" << example << "` exited " << result.exit_code << "\nstdout:\n"
      << result.out.substr(0, 2000) << "\nstderr:\n" << result.err.substr(0, 2000);
}

TEST(CliExamples, EveryHelpExampleRunsInASandbox) {
  Sandbox sandbox;
  std::vector<std::vector<std::string>> commands = {{}};
  std::set<std::string> seen;
  std::size_t examples = 0;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    std::vector<std::string> args = commands[i];
    args.push_back("--help");
    auto help = run_cli(sandbox.dir.path(), args);
    ASSERT_EQ(help.exit_code, 0) << help.err;
    for (const auto& sub : help_subcommands(help.out)) {
      auto child = commands[i];
      child.push_back(sub);
      commands.push_back(child);
    }
    std::string name = "liger-agent";
    for (const auto& word : commands[i]) name += " " + word;
    for (const auto& example : help_examples(help.out)) {
      if (!seen.insert(example).second) continue;
      expect_example_runs(sandbox, name + " --help", example);
      ++examples;
    }
  }
  EXPECT_GE(commands.size(), 15u) << "every command's help was read";
  EXPECT_GE(examples, 30u);
}

TEST(CliExamples, EveryDocsExampleRunsInASandbox) {
  Sandbox sandbox;
  const auto examples = doc_examples();
  ASSERT_GE(examples.size(), 10u);
  for (const auto& [where, example] : examples) expect_example_runs(sandbox, where, example);
}

}  // namespace
}  // namespace liger
