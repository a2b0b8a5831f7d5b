#include "cli/cli_conventions.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "liger/error.h"
#include "liger/suggest.h"

namespace liger::cli {

namespace {

std::vector<const CLI::App*> children(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

const CLI::App* child_named(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : children(app))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

std::vector<std::string> child_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : children(app)) names.push_back(sub->get_name());
  return names;
}

// The named options of `app` as they are typed ("--goal", "-y").
std::vector<std::string> flag_spellings(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& name : opt->get_lnames()) out.push_back("--" + name);
    for (const auto& name : opt->get_snames()) out.push_back("-" + name);
  }
  return out;
}

// The option `token` names in `app` or, since global flags may follow a subcommand, in one of
// its parents.
const CLI::Option* find_flag(const std::vector<const CLI::App*>& chain, const std::string& token) {
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    for (const CLI::Option* opt : (*it)->get_options()) {
      for (const auto& name : opt->get_lnames())
        if (token == "--" + name) return opt;
      for (const auto& name : opt->get_snames())
        if (token == "-" + name) return opt;
    }
  }
  return nullptr;
}

std::string command_path(const std::vector<const CLI::App*>& chain) {
  std::string path;
  for (std::size_t i = 1; i < chain.size(); ++i) path += (path.empty() ? "" : " ") + chain[i]->get_name();
  return path;
}

// Walks argv as the parser would, descending into subcommands, and calls `on_word` for each
// word that is neither a flag nor a flag's value, with the chain of commands selected so far.
template <typename OnWord, typename OnFlag>
void walk(const CLI::App& app, const std::vector<std::string>& args, OnWord on_word, OnFlag on_flag) {
  std::vector<const CLI::App*> chain{&app};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& token = args[i];
    if (token == "--") return;
    if (token.size() > 1 && token[0] == '-') {
      // "--goal=speed" names --goal; "-vv" and "-yq" are short flags run together
      const std::string name = token[1] == '-' ? token.substr(0, token.find('=')) : token.substr(0, 2);
      const CLI::Option* opt = find_flag(chain, name);
      if (!on_flag(chain, name, opt)) return;
      if (opt && opt->get_expected_min() > 0 && name == token) ++i;  // its value is the next word
      continue;
    }
    if (const CLI::App* sub = child_named(*chain.back(), token)) {
      chain.push_back(sub);
      continue;
    }
    if (!on_word(chain, token)) return;
  }
}

}  // namespace

std::optional<std::string> help_request(const CLI::App& app, const std::vector<std::string>& args) {
  // The words of argv, global flags (and their values) skipped. `help` is looked at here rather
  // than parsed: as a subcommand with a positional, the parser would read `help kernel-dev` as
  // two subcommands.
  std::vector<std::string> words;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& token = args[i];
    if (token.size() > 1 && token[0] == '-') {
      const CLI::Option* opt = find_flag({&app}, token.substr(0, token.find('=')));
      if (opt && opt->get_expected_min() > 0 && token.find('=') == std::string::npos) ++i;
      continue;
    }
    words.push_back(token);
  }
  if (words.empty() || words.front() != "help") return std::nullopt;
  const CLI::App* target = &app;
  std::string prefix = app.get_name();
  for (std::size_t i = 1; i < words.size(); ++i) {
    const CLI::App* sub = child_named(*target, words[i]);
    if (!sub) {
      throw Error(ErrorKind::Usage,
                  "no command '" + words[i] + "'" + (target == &app ? "" : " under '" + target->get_name() + "'") +
                      util::did_you_mean(words[i], child_names(*target)),
                  "commands: " + [&] {
                    std::string list;
                    for (const auto& name : child_names(*target)) list += (list.empty() ? "" : ", ") + name;
                    return list;
                  }());
    }
    if (target != &app) prefix += " " + target->get_name();
    target = sub;
  }
  return target == &app ? app.help() : target->help(prefix);
}

std::string diagnose_unknown_words(const CLI::App& app, const std::vector<std::string>& args) {
  std::string message;
  walk(
      app, args,
      [&](const std::vector<const CLI::App*>& chain, const std::string& word) {
        const CLI::App& current = *chain.back();
        // Only where a subcommand is expected is a stray word a mistyped command; elsewhere it
        // is a positional argument the command itself judges.
        if (current.get_require_subcommand_min() == 0) return true;
        const std::string where = chain.size() > 1 ? " under '" + command_path(chain) + "'" : "";
        message = "unknown command '" + word + "'" + where + util::did_you_mean(word, child_names(current));
        return false;
      },
      [&](const std::vector<const CLI::App*>& chain, const std::string& name, const CLI::Option* opt) {
        if (opt) return true;
        std::vector<std::string> known;
        for (const CLI::App* level : chain) {
          auto flags = flag_spellings(*level);
          known.insert(known.end(), flags.begin(), flags.end());
        }
        const std::string where = chain.size() > 1 ? " for '" + command_path(chain) + "'" : "";
        message = "unknown flag '" + name + "'" + where + util::did_you_mean(name, known);
        return false;
      });
  return message;
}

void document_global_flags_in_examples(CLI::App& app) {
  const auto globals = app.get_options();
  std::function<void(CLI::App&)> visit = [&](CLI::App& cmd) {
    const std::string footer = cmd.get_footer();
    std::string listed;
    for (const CLI::Option* opt : globals) {
      std::vector<std::string> spellings;
      for (const auto& name : opt->get_lnames()) spellings.push_back("--" + name);
      for (const auto& name : opt->get_snames()) spellings.push_back("-" + name);
      bool used = false;
      for (const auto& spelling : spellings) {
        // a whole word: "--yes" but not inside "--yes-please"
        const std::regex word("(^|[\\s\"'])" + std::regex_replace(spelling, std::regex("-"), "\\-") + "([\\s=]|$)");
        if (std::regex_search(footer, word)) used = true;
      }
      if (!used || opt->get_lnames().empty()) continue;
      std::string names;
      for (const auto& s : spellings) names += (names.empty() ? "" : ", ") + s;
      listed += "  " + names + std::string(names.size() < 24 ? 24 - names.size() : 1, ' ') + opt->get_description() + "\n";
    }
    if (!listed.empty())
      cmd.footer(footer + "\nGlobal flags used above (accepted before or after the command):\n" + listed);
    for (CLI::App* sub : cmd.get_subcommands([](CLI::App*) { return true; })) visit(*sub);
  };
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) visit(*sub);
}

namespace {

struct CommandWords {
  std::string path;  // "" for the top level, "llm check" for a nested command
  std::vector<std::pair<std::string, std::string>> words;  // completion word, description
};

void collect(const CLI::App& app, const std::string& path, const std::vector<std::pair<std::string, std::string>>& inherited,
             std::vector<CommandWords>& out) {
  CommandWords entry{path, {}};
  for (const CLI::App* sub : children(app)) entry.words.emplace_back(sub->get_name(), sub->get_description());
  std::vector<std::pair<std::string, std::string>> flags = inherited;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& name : opt->get_lnames()) flags.emplace_back("--" + name, opt->get_description());
    for (const auto& name : opt->get_snames()) flags.emplace_back("-" + name, opt->get_description());
  }
  std::set<std::string> listed;
  for (const auto& word : entry.words) listed.insert(word.first);
  for (const auto& flag : flags)
    if (listed.insert(flag.first).second) entry.words.push_back(flag);  // -h/--help is both inherited and own
  out.push_back(entry);
  // the top level's flags are accepted after any subcommand (fallthrough); a subcommand's own
  // flags are not accepted by its children
  const auto& pass_on = path.empty() ? flags : inherited;
  for (const CLI::App* sub : children(app))
    collect(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), pass_on, out);
}

std::string first_line(std::string text) {
  text = text.substr(0, text.find('\n'));
  if (text.size() > 70) text = text.substr(0, 67) + "...";
  return text;
}

std::string single_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string path_case_labels(const std::vector<CommandWords>& commands) {
  std::string labels;
  for (const auto& c : commands)
    if (!c.path.empty()) labels += (labels.empty() ? "" : "|") + single_quoted(c.path);
  return labels;
}

}  // namespace

std::string completion_script(const CLI::App& app, const std::string& shell) {
  std::vector<CommandWords> commands;
  collect(app, "", {}, commands);
  const std::string name = app.get_name();
  std::string fn = "_" + name;
  std::replace(fn.begin(), fn.end(), '-', '_');
  std::ostringstream s;
  if (shell == "bash") {
    s << "# bash completion for " << name << " (generated by `" << name << " completion bash`)\n"
      << "# Load it with: source <(" << name << " completion bash)\n"
      << fn << "() {\n"
      << "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmdpath=\"\" w i\n"
      << "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      << "    w=\"${COMP_WORDS[i]}\"\n"
      << "    case \"${cmdpath:+$cmdpath }$w\" in\n"
      << "      " << path_case_labels(commands) << ") cmdpath=\"${cmdpath:+$cmdpath }$w\" ;;\n"
      << "    esac\n"
      << "  done\n"
      << "  local words=\"\"\n"
      << "  case \"$cmdpath\" in\n";
    for (const auto& c : commands) {
      std::string words;
      for (const auto& [word, description] : c.words) words += (words.empty() ? "" : " ") + word;
      s << "    " << single_quoted(c.path) << ") words=" << single_quoted(words) << " ;;\n";
    }
    s << "  esac\n"
      << "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
      << "}\n"
      << "complete -o default -F " << fn << " " << name << "\n";
  } else if (shell == "zsh") {
    s << "#compdef " << name << "\n"
      << "# zsh completion for " << name << " (generated by `" << name << " completion zsh`)\n"
      << "# Load it with: source <(" << name << " completion zsh), or save it as _" << name
      << " in a directory of $fpath\n"
      << fn << "() {\n"
      << "  local cmdpath=\"\" w i\n"
      << "  for ((i = 2; i < CURRENT; i++)); do\n"
      << "    w=\"${words[i]}\"\n"
      << "    case \"${cmdpath:+$cmdpath }$w\" in\n"
      << "      (" << path_case_labels(commands) << ") cmdpath=\"${cmdpath:+$cmdpath }$w\" ;;\n"
      << "    esac\n"
      << "  done\n"
      << "  local -a items\n"
      << "  case \"$cmdpath\" in\n";
    for (const auto& c : commands) {
      s << "    (" << single_quoted(c.path) << ") items=(";
      for (const auto& [word, description] : c.words) {
        std::string entry = word;
        entry += ":" + first_line(description);
        std::string escaped;
        for (std::size_t k = 0; k < entry.size(); ++k) {
          // _describe splits at the first unescaped colon: escape colons inside the word
          if (entry[k] == ':' && k < word.size()) escaped += '\\';
          escaped += entry[k];
        }
        s << " " << single_quoted(escaped);
      }
      s << " ) ;;\n";
    }
    s << "  esac\n"
      << "  _describe -t commands '" << name << "' items || _files\n"
      << "}\n"
      << "compdef " << fn << " " << name << "\n";
  } else {
    throw Error(ErrorKind::Usage, "no completion for shell '" + shell + "'" + util::did_you_mean(shell, {"bash", "zsh"}),
                "use `" + name + " completion bash` or `" + name + " completion zsh`");
  }
  return s.str();
}

}  // namespace liger::cli
