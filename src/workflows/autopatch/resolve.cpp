// Input resolution for autopatch: a modeling file path, a directory holding one, or a model type
// looked up in an installed transformers.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <sys/wait.h>

#include "liger/error.h"
#include "workflows/autopatch/model_analysis.h"

namespace liger::autopatch {

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

ModelSource from_file(const fs::path& file, const std::string& how) {
  static const std::regex name(R"(modeling_(\w+)\.py)");
  std::smatch m;
  std::string fname = file.filename().string();
  ModelSource src;
  src.modeling = file;
  src.resolved_from = how;
  if (std::regex_match(fname, m, name)) {
    src.model_type = m[1];
  } else {
    throw Error(ErrorKind::Usage,
                "'" + file.string() + "' is not a modeling file (expected modeling_<model>.py)",
                "pass the path of a HuggingFace modeling_<model>.py, or a model type such as 'llama'");
  }
  fs::path cfg = file.parent_path() / ("configuration_" + src.model_type + ".py");
  if (fs::exists(cfg)) src.configuration = cfg;
  return src;
}

// The modeling file of the folder whose configuration file declares `model_type = "<type>"` on a
// class, or nothing. Folders are visited in name order, so the answer does not depend on the disk.
std::optional<fs::path> folder_declaring(const fs::path& models, const std::string& type) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(models, ec))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  const std::regex decl("^\\s+model_type\\s*=\\s*[\"']" + type + "[\"']\\s*(#.*)?$");
  for (const auto& d : dirs) {
    const std::string folder = d.filename().string();
    const fs::path cfg = d / ("configuration_" + folder + ".py");
    const fs::path modeling = d / ("modeling_" + folder + ".py");
    if (!fs::exists(cfg, ec) || !fs::exists(modeling, ec)) continue;
    std::ifstream in(cfg);
    for (std::string line; std::getline(in, line);)
      if (std::regex_match(line, decl)) return modeling;
  }
  return std::nullopt;
}

}  // namespace

fs::path find_transformers_dir(const ResolveOptions& options) {
  if (options.transformers_dir) return *options.transformers_dir;
  if (const char* env = std::getenv("LIGER_TRANSFORMERS_DIR"); env && *env) return fs::path(env);
  std::string cmd = shell_quote(options.python) +
                    " -c 'import transformers, os; print(os.path.dirname(transformers.__file__))' 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe)
    throw Error(ErrorKind::Toolchain, "cannot start " + options.python,
                "install Python 3 (apt-get install python3) or pass a modeling file path");
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  int status = pclose(pipe);
  int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (rc == 127)
    throw Error(ErrorKind::Toolchain, options.python + " was not found",
                "install Python 3 with transformers (pip install transformers), or pass the path "
                "of a modeling_<model>.py file instead of a model type");
  if (rc != 0) {
    std::string last = out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
    throw Error(ErrorKind::Toolchain,
                "transformers is not importable with " + options.python + ": " + last,
                "pip install transformers (in the Python that " + options.python +
                    " runs), or pass the path of a modeling_<model>.py file");
  }
  std::string dir = out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  if (!fs::is_directory(dir))
    throw Error(ErrorKind::Toolchain, "transformers reported a package directory that does not exist: " + dir);
  return fs::path(dir);
}

std::vector<std::string> close_model_types(const fs::path& models_dir, const std::string& name, size_t max) {
  std::vector<std::pair<size_t, std::string>> scored;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(models_dir, ec)) {
    if (!e.is_directory()) continue;
    std::string t = e.path().filename().string();
    if (t.empty() || t[0] == '_') continue;
    size_t dist = edit_distance(name, t);
    bool related = t.find(name) != std::string::npos || name.find(t) != std::string::npos;
    if (related) dist = std::min<size_t>(dist, 1);
    if (dist <= std::max<size_t>(2, name.size() / 3) || related) scored.push_back({dist, t});
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (auto& [d, t] : scored) {
    if (out.size() >= max) break;
    out.push_back(t);
  }
  return out;
}

ModelSource resolve_model_input(const std::string& spec, const ResolveOptions& options) {
  if (spec.empty())
    throw Error(ErrorKind::Usage, "autopatch needs a model: a modeling_<model>.py path or a model type",
                "e.g. liger-agent autopatch qwen3, or liger-agent autopatch path/to/modeling_qwen3.py");
  fs::path p(spec);
  bool looks_like_path = spec.find('/') != std::string::npos || (spec.size() > 3 && spec.substr(spec.size() - 3) == ".py");
  if (fs::is_regular_file(p)) return from_file(fs::absolute(p), "path");
  if (fs::is_directory(p)) {
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(p)) {
      std::string f = e.path().filename().string();
      if (f.rfind("modeling_", 0) == 0 && f.size() > 3 && f.substr(f.size() - 3) == ".py" &&
          f.find("_tf_") == std::string::npos && f.find("_flax_") == std::string::npos)
        found.push_back(e.path());
    }
    std::sort(found.begin(), found.end());
    fs::path expect = p / ("modeling_" + fs::absolute(p).lexically_normal().filename().string() + ".py");
    if (fs::exists(expect)) return from_file(fs::absolute(expect), "path");
    if (found.size() == 1) return from_file(fs::absolute(found.front()), "path");
    throw Error(ErrorKind::Usage,
                "'" + spec + "' " + (found.empty() ? "holds no modeling_<model>.py" : "holds several modeling files"),
                "pass the path of the modeling_<model>.py file itself");
  }
  if (looks_like_path)
    throw Error(ErrorKind::Usage, "no such file: " + spec,
                "pass an existing modeling_<model>.py path, or a model type such as 'llama'");
  static const std::regex type_re(R"([A-Za-z0-9_\-]+)");
  if (!std::regex_match(spec, type_re))
    throw Error(ErrorKind::Usage, "'" + spec + "' is neither a file nor a model type");
  std::string type = spec;
  std::replace(type.begin(), type.end(), '-', '_');
  fs::path tdir = find_transformers_dir(options);
  fs::path models = tdir / "models";
  fs::path file = models / type / ("modeling_" + type + ".py");
  if (!fs::exists(file)) {
    // A model type declared by a configuration class in another model's folder (gemma3_text is
    // Gemma3TextConfig in models/gemma3/): that folder's modeling file, analysed for this type.
    if (auto declared = folder_declaring(models, type)) {
      ModelSource src = from_file(*declared, "transformers " + tdir.string());
      src.model_type = type;
      return src;
    }
    auto close = close_model_types(models, type);
    std::string hint = close.empty() ? "list the folders of " + models.string() + " for the supported types"
                                     : "did you mean: ";
    for (size_t i = 0; i < close.size(); ++i) hint += (i ? ", " : "") + close[i];
    throw Error(ErrorKind::Usage, "unknown model type '" + spec + "' in " + models.string(), hint);
  }
  return from_file(file, "transformers " + tdir.string());
}

}  // namespace liger::autopatch
