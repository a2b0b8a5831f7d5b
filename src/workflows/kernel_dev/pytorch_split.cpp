// The PyTorch translator's cuts of an argument into equal parts along the last dimension:
// `gate, up = x.chunk(2, dim=-1)` (the fused gate/up projection of Phi-3 or GLM MLPs), torch.chunk,
// tensor_split with a number of sections, and F.glu. The parts become the kernel's inputs; the
// generated Python entry takes the argument and passes the parts as row-strided views
// (input_split.h), so the cut costs no copy in either direction.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "workflows/kernel_dev/pytorch_translator.h"

namespace liger::kernel_dev::torch_detail {

namespace {

bool identifier(const std::string& s) {
  if (s.empty() || s == "_" || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace

bool Translator::whole_argument(const Expr& source) const {
  return source && source->kind == Kind::Symbol && (op_arguments.count(source->name) || inputs.count(source->name)) &&
         std::none_of(split_parts.begin(), split_parts.end(), [&](const auto& kv) {
           return std::find(kv.second.begin(), kv.second.end(), source->name) != kv.second.end();
         });
}

std::vector<std::string> Translator::cut_argument(const std::string& fn, const std::string& source, int parts) {
  if (auto done = split_parts.find(source); done != split_parts.end()) {
    if (static_cast<int>(done->second.size()) != parts)
      throw Reject{fn + "(): " + source + " is cut into " + std::to_string(done->second.size()) + " parts at line " +
                       std::to_string(split_line[source]) + " and into " + std::to_string(parts) +
                       " here; the kernel takes one cut of an argument",
                   0};
    pending_part_names.clear();
    return done->second;
  }
  // A part is named as the code names it (gate, up) unless that name is taken by an input, a
  // parameter or another part; else <argument>_<k>.
  // A snippet's free names are its inputs, and a tuple target looks free to that first pass: a
  // name the assignment itself gives is not taken by an input unless it is an argument.
  auto taken = [&](const std::string& name) {
    const bool target = std::find(pending_part_names.begin(), pending_part_names.end(), name) != pending_part_names.end();
    if ((inputs.count(name) && !target) || op_arguments.count(name) || name == source || name == "n" || name == kRankSymbol)
      return true;
    if (declared)
      for (const auto& p : *declared)
        if (p.name == name || "d" + p.name == name) return true;
    for (const auto& [arg, names] : split_parts)
      if (arg == name || std::find(names.begin(), names.end(), name) != names.end()) return true;
    return false;
  };
  std::vector<std::string> names;
  const bool wanted = static_cast<int>(pending_part_names.size()) == parts;
  for (int k = 0; k < parts; ++k) {
    std::string name = wanted ? pending_part_names[static_cast<std::size_t>(k)] : std::string();
    if (!identifier(name) || taken(name) || std::find(names.begin(), names.end(), name) != names.end()) {
      name = source + "_" + std::to_string(k);
      for (int extra = 2; taken(name) || std::find(names.begin(), names.end(), name) != names.end(); ++extra)
        name = source + "_" + std::to_string(k) + "_" + std::to_string(extra);
    }
    names.push_back(name);
  }
  pending_part_names.clear();
  for (const auto& name : names) inputs.insert(name);
  split_parts[source] = names;
  split_line[source] = line;
  notes_.push_back(fn + "(): " + source + " is cut into " + std::to_string(parts) + " parts along the last dimension (" +
                   [&] {
                     std::string list;
                     for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
                     return list;
                   }() +
                   "): the kernel takes the parts, the Python entry takes " + source +
                   " and passes them as views (inputs[].split)");
  return names;
}

std::optional<Value> Translator::split_call(const std::string& fn, const std::string& f, const std::vector<Arg>& all) {
  if (f != "chunk" && f != "tensor_split" && f != "glu") return std::nullopt;
  // PyTorch's signatures: chunk(input, chunks, dim=0), tensor_split(input, indices_or_sections,
  // dim=0), glu(input, dim=-1).
  const std::vector<std::string> names =
      f == "glu" ? std::vector<std::string>{"input", "dim"}
                 : std::vector<std::string>{"input", f == "chunk" ? "chunks" : "indices_or_sections", "dim"};
  std::map<std::string, Value> bound;
  std::size_t positional = 0;
  for (const auto& a : all) {
    std::string key = a.keyword;
    if (key == "sections") key = "indices_or_sections";
    if (key.empty()) {
      if (positional >= names.size()) throw Reject{fn + "(): too many arguments", 0};
      key = names[positional++];
    } else if (std::find(names.begin(), names.end(), key) == names.end()) {
      throw Reject{fn + "(): unsupported argument '" + a.keyword + "'", 0};
    }
    bound[key] = a.value;
  }
  // The dim: glu's default is the last one; chunk's and tensor_split's is dim 0, which would cut
  // the rows (the batch), not the features.
  auto d = bound.find("dim");
  if (d == bound.end()) {
    if (f != "glu")
      throw Reject{fn + "() without dim cuts dim 0 (the batch, not the features); write " + fn +
                       "(..., dim=-1) to cut the last dimension, the form the kernel takes",
                   0};
  } else {
    const auto dim = dim_value(d->second);
    if (!dim || *dim != -1)
      throw Reject{fn + "(): only a cut of the last dimension (dim=-1) is translated: the kernel reads each part as "
                        "[rows, cols] with a row stride; move the cut dimension last",
                   0};
  }
  auto in = bound.find("input");
  if (in == bound.end() || in->second.type != Value::Tensor) throw Reject{fn + "() needs a tensor argument", 0};
  const Expr source = in->second.expr;
  if (!whole_argument(source))
    throw Reject{fn + "() cuts a value computed in the op; the kernel cuts only an argument of the op as it is passed "
                      "(a, b = x.chunk(2, dim=-1) on the input x): cut the argument first and apply the formula to "
                      "the parts",
                 0};
  int parts = 2;
  if (f != "glu") {
    const auto key = f == "chunk" ? "chunks" : "indices_or_sections";
    auto c = bound.find(key);
    const auto count = c == bound.end() ? std::nullopt : constant(c->second);
    if (c != bound.end() && c->second.type == Value::Tuple)
      throw Reject{fn + "() at given indices cuts unequal parts; the kernel takes equal parts: a number of sections", 0};
    if (!count || *count != std::floor(*count) || *count < 1 || *count > kMaxSplitPartsTranslated)
      throw Reject{fn + "(): the number of parts must be a whole number from 1 to " + std::to_string(kMaxSplitPartsTranslated),
                   0};
    parts = static_cast<int>(*count);
    if (parts == 1) {
      Value one;
      one.type = Value::Tuple;
      one.text = "chunk";
      one.items.push_back(in->second);
      pending_part_names.clear();
      return one;
    }
  }
  const std::vector<std::string> part_names = cut_argument(fn, source->name, parts);
  if (f == "glu") {
    // glu(x) = first half * sigmoid(second half)
    return tensor(mul(sym(part_names[0]), call("sigmoid", {sym(part_names[1])})));
  }
  Value tuple;
  tuple.type = Value::Tuple;
  tuple.text = "chunk";
  for (const auto& name : part_names) tuple.items.push_back(tensor(sym(name)));
  return tuple;
}

Value Translator::last_dim_slice(const Value& tensor_value, int column) {
  const std::string what = "slicing a tensor";
  // Leading full dimensions: `...,` or `:,` (each a whole dimension, as x[..., a:b] needs).
  bool leading = false;
  while (true) {
    if (peek().type == PyTok::Op && peek().text == "." && peek(1).text == "." && peek(2).text == ".") {
      pos_ += 3;
      expect(",");
      leading = true;
    } else if (peek().type == PyTok::Op && peek().text == ":" && peek(1).type == PyTok::Op && peek(1).text == ",") {
      pos_ += 2;
      leading = true;
    } else {
      break;
    }
  }
  auto refuse = [&](const std::string& why) {
    return Reject{what + " is read only as an equal part of an argument along the last dimension (x[..., :d] and "
                         "x[..., d:] with d = x.shape[-1] // 2, as x.chunk(2, dim=-1)): " + why +
                         "; pass the slice itself as the op's input",
                  0, column};
  };
  Expr start, end;
  if (!(peek().type == PyTok::Op && peek().text == ":")) {
    const Value s = expression();
    if (s.type != Value::Tensor) throw refuse("its bounds are not numbers");
    start = s.expr;
  }
  if (!accept(":")) throw refuse("an index picks one column, not a part");
  if (!(peek().type == PyTok::Op && peek().text == "]")) {
    const Value e = expression();
    if (e.type != Value::Tensor) throw refuse("its bounds are not numbers");
    end = e.expr;
  }
  if (accept(":")) throw refuse("a step is not a part");
  expect("]");
  if (!leading) throw refuse("x[a:b] slices the first dimension (the batch); write x[..., a:b] for the last");
  // Each bound as a fraction of the row length n (0 and n by default, negative ones from the
  // end), the same at two row lengths that every part count up to 16 divides (so the floor of
  // x.shape[-1] // k is exact there, as on every row the Python entry lets through: it refuses a
  // row its parts do not divide). A bound such as 128 is no fraction.
  auto fraction = [&](const Expr& bound, double by_default) -> std::optional<double> {
    if (!bound) return by_default;
    for (const auto& symbol : free_symbols(bound))
      if (symbol != "n") return std::nullopt;
    double at[2];
    const double lengths[2] = {720720.0, 1441440.0};
    for (int k = 0; k < 2; ++k) {
      try {
        at[k] = eval_f64(bound, {{"n", lengths[k]}}) / lengths[k];
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
    if (!std::isfinite(at[0]) || std::fabs(at[0] - at[1]) > 1e-12) return std::nullopt;
    return at[0] < 0 ? at[0] + 1.0 : at[0];
  };
  const auto from = fraction(start, 0.0), to = fraction(end, 1.0);
  if (!from || !to) throw refuse("its bounds are not fractions of x.shape[-1]");
  const double width = *to - *from;
  const double parts = width > 0 ? 1.0 / width : 0.0;
  const double index = *from * parts;
  auto whole = [](double v) { return std::fabs(v - std::round(v)) < 1e-9; };
  if (!(width > 0) || !whole(parts) || !whole(index) || std::round(parts) < 2 ||
      std::round(parts) > kMaxSplitPartsTranslated || std::round(index) < 0 || std::round(index) >= std::round(parts))
    throw refuse("these bounds do not cut the row into equal parts (from 2 to " +
                 std::to_string(kMaxSplitPartsTranslated) + ")");
  const Expr source = tensor_value.expr;
  if (!whole_argument(source)) throw refuse("it slices a value computed in the op; slice the argument and apply the formula to the parts");
  const auto names = cut_argument("x[..., a:b]", source->name, static_cast<int>(std::round(parts)));
  return tensor(sym(names[static_cast<std::size_t>(std::round(index))]));
}

}  // namespace liger::kernel_dev::torch_detail
