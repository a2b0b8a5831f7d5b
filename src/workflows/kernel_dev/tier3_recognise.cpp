// Recognising a fused linear + loss (Tier 3) in words or in PyTorch code. The rule is two parts,
// each general: a linear layer producing logits (x @ w.T, x @ w.t(), F.linear, torch.matmul /
// mm with a transposed weight, "linear" / "LM head" / "projection" in words) and a loss over
// them (cross-entropy in any spelling, KL divergence, JSD). Options are read where the text
// states them (keyword arguments, "z-loss 1e-4", tanh softcapping written out, a temperature the
// logits are divided by); everything else keeps PyTorch's default and is noted.
#include <algorithm>
#include <cctype>
#include <regex>
#include <set>

#include "workflows/kernel_dev/tier3.h"
#include "workflows/kernel_dev/tier3_code.h"

namespace liger::kernel_dev {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

bool has_any(const std::string& text, std::initializer_list<const char*> needles) {
  for (const char* n : needles)
    if (has(text, n)) return true;
  return false;
}

const char* kNumber = R"(([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))";

// The number after a phrase ("z-loss 1e-4", "z_loss=1e-4", "softcap of 30"), if any.
std::optional<double> number_after(const std::string& text, const std::string& phrase_regex) {
  const std::regex re(phrase_regex + R"([\s:=]*(?:of|=|:|coefficient|weight|factor|to|at|by|with)?\s*)" + kNumber);
  std::smatch m;
  if (std::regex_search(text, m, re)) {
    try {
      return std::stod(m[1].str());
    } catch (...) {
    }
  }
  return std::nullopt;
}

// A keyword argument's value text (`name = value`), up to the next comma or closing parenthesis.
std::optional<std::string> keyword(const std::string& code, const std::string& name) {
  const std::regex re("\\b(?:" + name + R"()\s*=\s*([^,\)\n]+))");
  std::smatch m;
  if (!std::regex_search(code, m, re)) return std::nullopt;
  std::string v = m[1].str();
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
  return v;
}

std::optional<double> keyword_number(const std::string& code, const std::string& name) {
  if (auto v = keyword(code, name)) {
    std::smatch m;
    if (std::regex_match(*v, m, std::regex(std::string(R"(\s*)") + kNumber + R"(\s*)"))) return std::stod(m[1].str());
  }
  return std::nullopt;
}

std::string unquote(std::string v) {
  v.erase(std::remove(v.begin(), v.end(), '"'), v.end());
  v.erase(std::remove(v.begin(), v.end(), '\''), v.end());
  return v;
}

bool looks_like_code(const std::string& text) {
  return has_any(text, {"def ", "lambda", "return ", "F.", "torch.", "nn.", "@"}) ||
         std::regex_search(text, std::regex(R"(\w\s*=\s*\w+\s*\()"));
}

// The logits' linear layer in code: x @ w.T, x @ w.t(), x @ w.transpose(...), F.linear(x, w),
// torch.matmul(x, w.T), x.mm(w.t()), torch.einsum("...h,vh->...v", x, w).
struct LinearUse {
  bool found = false;
  bool bias = false;
  int count = 0;  // linear layers in the code (a teacher adds one)
};

LinearUse find_linears(const std::string& code) {
  LinearUse u;
  const std::regex transposed(R"(@\s*[A-Za-z_][\w\.]*\s*\.\s*(T\b|t\s*\(\s*\)|transpose\s*\(|mT\b))");
  const std::regex matmul(R"((torch\.matmul|\.matmul|torch\.mm|\.mm)\s*\([^\n]*(\.T\b|\.t\s*\(|transpose))");
  const std::regex linear(R"((F|functional|torch\.nn\.functional)\.linear\s*\(([^()]*(\([^()]*\))?[^()]*)\))");
  const std::regex einsum(R"(einsum\s*\(\s*['"][^'"]*,\s*[a-z]*[a-z][a-z]->)");
  for (const std::regex* re : {&transposed, &matmul, &einsum})
    for (auto it = std::sregex_iterator(code.begin(), code.end(), *re); it != std::sregex_iterator(); ++it) ++u.count;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), linear); it != std::sregex_iterator(); ++it) {
    ++u.count;
    // F.linear(x, w, b) / bias=b: a third argument that is not None.
    const std::string args = (*it)[2].str();
    int depth = 0, commas = 0;
    for (char c : args) {
      if (c == '(' || c == '[') ++depth;
      else if (c == ')' || c == ']') --depth;
      else if (c == ',' && depth == 0) ++commas;
    }
    if (commas >= 2 && !has(args, "None")) u.bias = true;
  }
  if (std::regex_search(code, std::regex(R"(\bnn\.Linear\s*\([^)]*\))")) &&
      !std::regex_search(code, std::regex(R"(bias\s*=\s*False)")))
    u.bias = true, ++u.count;
  else if (has(code, "nn.Linear(")) ++u.count;
  u.found = u.count > 0;
  return u;
}

// An option's value wherever the code sets it: every `name=value` (the call's keyword and a
// default in the def line). A value that is a parameter is read from that parameter's numeric
// default; one the analyser cannot read as a number sets `rejection` (the option would otherwise
// silently keep PyTorch's default), as do two different numbers.
std::optional<double> option_number(const std::string& code, const std::string& name, std::string& rejection) {
  std::optional<double> found;
  const std::regex re("\\b" + name + R"(\s*(?::\s*\w+\s*)?=(?!=)\s*([^,\)\n]+))");
  for (auto it = std::sregex_iterator(code.begin(), code.end(), re); it != std::sregex_iterator(); ++it) {
    std::string v = (*it)[1].str();
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
    std::smatch m;
    std::optional<double> value;
    if (std::regex_match(v, m, std::regex(std::string(R"(\s*)") + kNumber + R"(\s*)"))) {
      value = std::stod(m[1].str());
    } else if (v == name) {
      continue;  // f(..., ignore_index=ignore_index): the default is the other match
    } else if (std::regex_match(v, std::regex(R"([A-Za-z_]\w*)")) &&
               std::regex_search(code, m, std::regex("[(,]\\s*" + v + R"(\s*(?::\s*\w+\s*)?=\s*)" + kNumber))) {
      value = std::stod(m[1].str());
    } else {
      const auto at = static_cast<std::size_t>(it->position(0));
      const auto line = 1 + std::count(code.begin(), code.begin() + static_cast<std::ptrdiff_t>(at), '\n');
      const std::size_t nl = at == 0 ? std::string::npos : code.rfind('\n', at - 1);
      if (rejection.empty())
        rejection = name + "=" + v + " (line " + std::to_string(line) + ", column " +
                    std::to_string(nl == std::string::npos ? at + 1 : at - nl) +
                    ") is not a number the analyser can read: write the value, give the parameter a numeric default, "
                    "or edit fused_linear." + name + " (it would otherwise keep PyTorch's default)";
      return std::nullopt;
    }
    if (found && *found != *value && rejection.empty())
      rejection = name + " is set to both " + std::to_string(*found) + " and " + std::to_string(*value) +
                  " in the code: keep one";
    found = value;
  }
  return found;
}

// " (line L, column C)" of the first nn.Linear / F.linear in the code ("" when there is none).
std::string linear_where(const std::string& code) {
  std::smatch m;
  if (!std::regex_search(code, m, std::regex(R"(\bnn\.Linear\s*\(|\blinear\s*\()"))) return "";
  const auto at = static_cast<std::size_t>(m.position(0));
  const auto line = 1 + std::count(code.begin(), code.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  const std::size_t nl = at == 0 ? std::string::npos : code.rfind('\n', at - 1);
  return " (line " + std::to_string(line) + ", column " + std::to_string(nl == std::string::npos ? at + 1 : at - nl) + ")";
}

// The temperature a code divides the logits by inside a (log-)softmax: a literal, or a parameter
// with a numeric default in the def line.
std::optional<double> code_temperature(const std::string& code) {
  std::smatch m;
  if (std::regex_search(code, m, std::regex(std::string(R"(softmax\s*\([^\n]*?\)\s*/\s*)") + kNumber)) ||
      std::regex_search(code, m, std::regex(std::string(R"(\.T\s*/\s*)") + kNumber)) ||
      std::regex_search(code, m, std::regex(std::string(R"(\)\s*/\s*)") + kNumber + R"(\s*,\s*(dim\s*=\s*)?-?1)")))
    return std::stod(m[1].str());
  for (const char* name : {"temperature", "temp", "tau", "T"}) {
    if (!std::regex_search(code, std::regex(std::string(R"(/\s*)") + name + R"(\b)"))) continue;
    if (auto v = keyword_number(code, name)) return v;
  }
  return std::nullopt;
}

}  // namespace

FusedLinearRecognition recognise_fused_linear(const std::string& text) {
  FusedLinearRecognition r;
  if (text.size() > 20000) return r;
  const std::string low = lower(text);
  FusedLinearSpec& s = r.spec;
  bool code = looks_like_code(text);
  const LinearUse linear = code ? find_linears(text) : LinearUse{};

  // --- the loss
  const bool ce_code = code && (std::regex_search(text, std::regex(R"(\bcross_entropy\s*\()")) ||
                                has(text, "CrossEntropyLoss") ||
                                (has(text, "nll_loss") && has(text, "log_softmax")));
  const bool kl_code = code && (std::regex_search(text, std::regex(R"(\bkl_div\s*\()")) || has(text, "KLDivLoss"));
  // A JSD by name (generalized_jsd_loss, JSD) or by what it computes: KL divergences against one
  // mixture (F.kl_div(m, p) and F.kl_div(m, q) with the same first argument).
  const bool jsd_code = code && (std::regex_search(low, std::regex(R"(jsd|jensen)")) || kl_terms_share_input(text));
  const bool linear_words = has_any(low, {"linear", "lm head", "lm_head", "lm-head", "projection", "matmul", "unembed",
                                          "output layer", "vocab head", "logits = x @", "logits from"});
  const bool ce_words = std::regex_search(low, std::regex(R"(cross[\s_-]?entropy|\bce\b|\bnll\b|negative log[\s-]likelihood)"));
  const bool kl_words = std::regex_search(low, std::regex(R"(\bkl\b|kl[\s_-]?div|kullback)"));
  const bool jsd_words = std::regex_search(low, std::regex(R"(\bjsd\b|jensen|js[\s-]divergence)"));
  const bool distill_words = has(low, "distill");

  if (code && linear.found && (ce_code || kl_code || jsd_code)) {
    r.matched = true;
    // What the code computes, not what it is called: the code's call decides; a JSD function
    // name with kl_div calls inside is a JSD.
    s.loss = jsd_code ? "jsd" : kl_code ? "kl_div" : "cross_entropy";
    s.source_form = s.loss == "cross_entropy"
                        ? (has(text, "CrossEntropyLoss") ? "nn.CrossEntropyLoss" : has(text, "nll_loss") ? "F.nll_loss(log_softmax)" : "F.cross_entropy")
                        : s.loss == "kl_div" ? (has(text, "KLDivLoss") ? "nn.KLDivLoss" : "F.kl_div") : "jsd (code)";
  } else if (code && (ce_code || kl_code) && std::regex_search(text, std::regex(R"(@|matmul|\bmm\s*\()"))) {
    // A product that is not x @ w.T: the weight is stored [hidden, vocab], or the product is not a
    // linear layer at all. The generated op takes the LM head's layout.
    r.matched = true;
    r.rejection = "the logits are a product the analyser does not read as a linear layer: write them as x @ w.T, "
                  "F.linear(x, w) or torch.matmul(x, w.t()) with w [vocab, hidden] (a weight stored [hidden, vocab] is "
                  "passed as w.t())";
    return r;
  } else if (code && linear.found) {
    // A linear layer with some other loss is Tier 3 too, but nothing here generates it: say so.
    if (std::regex_search(text, std::regex(R"(\b(mse_loss|l1_loss|smooth_l1_loss|huber_loss|binary_cross_entropy\w*|cosine_embedding_loss|margin_ranking_loss|hinge_embedding_loss|poisson_nll_loss|triplet_margin_loss|MSELoss|BCEWithLogitsLoss|BCELoss|L1Loss|HuberLoss)\b)"))) {
      r.matched = true;
      r.rejection = "the loss over the linear layer's logits is not one the fused-linear generator has; supported: "
                    "cross-entropy (ignore_index, label_smoothing, z-loss, logit softcapping, reduction mean/sum), "
                    "KL divergence and generalised JSD (beta) against teacher logits, with a temperature";
    }
    return r;  // code with a linear layer and no supported loss
  } else {
    // Words (or text that only looks like code: no linear layer and no loss call in it).
    if (has_any(text, {"def ", "return ", "lambda"})) return r;  // real code whose logits are no linear layer
    code = false;
    const bool loss_words = ce_words || kl_words || jsd_words || distill_words;
    if (!(linear_words && loss_words) && !(has(low, "fused") && loss_words && has(low, "logits"))) {
      if (linear_words && has(low, "fused") && has(low, "loss")) {
        r.matched = true;
        r.rejection = "a fused linear + loss was asked for, but the loss is not one the generator has; supported: "
                      "cross-entropy (with ignore index, label smoothing, z-loss, softcap, mean/sum), KL divergence and "
                      "generalised JSD (beta) for distillation, with a temperature";
      }
      return r;
    }
    r.matched = true;
    s.loss = jsd_words ? "jsd" : kl_words ? "kl_div" : ce_words ? "cross_entropy" : "kl_div";
    if (s.loss == "kl_div" && std::regex_search(low, std::regex(R"(reverse[\s_-]?kl|kl\s*\(\s*student|mode[\s-]seeking)"))) {
      // KL(student || teacher) is the generalised JSD's beta = 0 end.
      s.loss = "jsd";
      s.beta = 0.0;
      r.notes.push_back("reverse KL, KL(student || teacher), generated as the generalised JSD with beta = 0");
    }
    if (!jsd_words && !kl_words && !ce_words && distill_words)
      r.notes.push_back("'distillation' without a named divergence: KL(teacher || student) taken (say JSD for the Jensen-Shannon form)");
    s.source_form = code ? "code (loss named in words)" : "words";
  }

  // --- options
  if (s.loss == "cross_entropy") {
    if (code) {
      if (auto v = option_number(text, "ignore_index", r.rejection)) s.ignore_index = static_cast<long long>(*v);
      if (auto v = option_number(text, "label_smoothing", r.rejection)) s.label_smoothing = *v;
      if (auto v = keyword(text, "reduction")) s.reduction = unquote(*v);
      // z-loss written out: coeff * logsumexp(logits, -1) ** 2 (or .pow(2) / square).
      if (has(text, "logsumexp") && std::regex_search(text, std::regex(R"(\*\*\s*2|pow\s*\(\s*2|square)"))) {
        std::smatch m;
        const LossCodeReading read = read_loss_code(text, s.loss, s.reduction, s.beta);
        if (!read.rejection.empty())  // e.g. a z-loss reduced unlike the cross-entropy
          r.rejection = read.rejection;
        else if (read.z_loss)  // read through the names the code binds (lse = torch.logsumexp(..))
          s.z_loss = *read.z_loss;
        else if (std::regex_search(text, m, std::regex(std::string(kNumber) + R"(\s*\*(?!\*)\s*[^\n]*logsumexp)")) ||
                 std::regex_search(text, m, std::regex(std::string(R"(logsumexp[^\n]*[^*]\*(?!\*)\s*)") + kNumber)))
          s.z_loss = std::stod(m[1].str());
        else if (auto v = keyword_number(text, "z_loss|z_loss_weight|lse_square_scale|zloss"))
          s.z_loss = *v;
        else
          r.rejection = "a z-loss (logsumexp squared) is added with a coefficient the analyser cannot read as a number: "
                        "write it as a literal (e.g. 1e-4 * torch.logsumexp(logits, -1).pow(2).mean()) or edit fused_linear.z_loss";
        if (s.z_loss != 0.0) r.notes.push_back("z-loss read from the code: " + std::to_string(s.z_loss) + " * lse^2 per counted row");
      }
      // softcapping written out: cap * torch.tanh(logits / cap).
      std::smatch m;
      if (std::regex_search(text, m, std::regex(std::string(R"(tanh\s*\([^\n]*?/\s*)") + kNumber)))
        s.softcap = std::stod(m[1].str());
      else if (has(text, "tanh") && (s.softcap = keyword_number(text, "softcap|logit_softcap|final_logit_softcapping|soft_cap").value_or(0.0)) == 0.0)
        r.rejection = "the logits go through tanh (softcapping?) with a cap the analyser cannot read as a number: "
                      "write it as a literal (30.0 * torch.tanh(logits / 30.0)) or edit fused_linear.softcap";
    } else {
      std::smatch im;
      if (auto v = number_after(low, R"(ignore[\s_-]?index)")) s.ignore_index = static_cast<long long>(*v);
      else if (std::regex_search(low, im, std::regex(R"(ignor\w*\b[^.;]{0,40}?\b(?:id|index|label|value)\s*(?:=|:|of|is)?\s*(-?\d+)\b)")))
        s.ignore_index = std::stoll(im[1].str());  // "ignoring padding tokens (id 0)"
      if (std::regex_search(low, std::regex(R"(\btemperature\b|\btemp\b|\btau\b)")))
        r.rejection = "a temperature on the cross-entropy's logits is not in the generated op (its cross-entropy reads "
                      "x @ weight.T, optionally softcapped): scale x or the weight by 1 / T instead";
      if (auto v = number_after(low, R"(label[\s_-]?smoothing)")) s.label_smoothing = *v;
      if (auto v = number_after(low, R"(z[\s_-]?loss)")) s.z_loss = *v;
      else if (has(low, "z-loss") || has(low, "z loss") || has(low, "z_loss")) {
        s.z_loss = 1e-4;
        r.notes.push_back("z-loss without a coefficient: 1e-4 taken (PaLM's); edit fused_linear.z_loss");
      }
      if (auto v = number_after(low, R"((?:logit[\s_-]?)?soft[\s_-]?capp?(?:ed|ing)?)")) s.softcap = *v;
      else if (has(low, "softcap") || has(low, "soft-cap") || has(low, "soft cap")) {
        s.softcap = 30.0;
        r.notes.push_back("softcapping without a cap: 30 taken (Gemma 2's final logits); edit fused_linear.softcap");
      }
      if (std::regex_search(low, std::regex(R"(\bsum(?:med|ming)?\b|\btotal\b)"))) s.reduction = "sum";
      if (std::regex_search(low, std::regex(R"(label[\s_-]?smoothing)")) && s.label_smoothing == 0.0) {
        s.label_smoothing = 0.1;
        r.notes.push_back("label smoothing without a value: 0.1 taken; edit fused_linear.label_smoothing");
      }
    }
    if (!code) {
      std::smatch wm;
      if (std::regex_search(low, wm, std::regex(R"(\bfocal\b|\bpoly[\s-]?loss|\bsampled softmax|\bhinge|\bsquared error)")))
        r.rejection = "the description names \"" + wm[0].str() + "\", a loss the fused-linear generator does not have; supported: "
                      "cross-entropy (ignore index, label smoothing, z-loss, softcapping, mean/sum), KL divergence and "
                      "generalised JSD (beta) against teacher logits, with a temperature";
      if (std::regex_search(low, std::regex(R"(\bbias\b)")) &&
          !std::regex_search(low, std::regex(R"((?:\bno|without|bias[\s-]?free|bias\s*=\s*false|\bnot?\b[^.]{0,20}\bbias))")))
        r.rejection = "a linear layer with a bias: the generated fused-linear op computes x @ weight.T without one (LM "
                      "heads have none; fold a bias into an extra input column)";
      if (std::regex_search(low, std::regex(R"(reduction\s*(?:=|:|of)?\s*['"]?none|per[\s-](?:token|row|sample) loss(?:es)?|unreduced)")))
        s.reduction = "none";
      if (std::regex_search(low, std::regex(R"(class[\s_-]?weight|per[\s-]class weight|weighted cross[\s-]?entropy|pos[\s_]weight)")))
        r.rejection = "per-class weights are not in the generated fused-linear op; it takes ignore index, label "
                      "smoothing, z-loss, softcapping and a mean or sum reduction";
    }
    if (s.reduction != "mean" && s.reduction != "sum")
      r.rejection = "reduction '" + s.reduction + "': the fused op returns one scalar (mean over the rows not ignored, or "
                    "sum); per-row losses (reduction='none') cannot scale grad_weight after the fact";
  } else {
    s.reduction = "batchmean";
    if (code) {
      if (auto v = keyword(text, "reduction")) s.reduction = unquote(*v);
      else if (s.loss == "kl_div" || kl_terms_share_input(text)) {  // F.kl_div's default, for a JSD's KL terms too
        s.reduction = "mean";
        r.notes.push_back("F.kl_div without reduction= averages over every element (rows * vocab), PyTorch's default; "
                          "edit fused_linear.reduction to batchmean for the per-row average");
      }
      if (auto t = code_temperature(text)) s.temperature = *t;
      if (auto b = keyword_number(text, "beta")) s.beta = *b;
      if (s.loss == "kl_div" && !has(text, "log_target=True") && std::regex_search(text, std::regex(R"(kl_div\s*\([^\n]*[^_]softmax)")) == false &&
          !has(text, "log_softmax"))
        r.rejection = "F.kl_div over the logits needs log-probabilities: the student as log_softmax(x @ w.T) and the "
                      "teacher as softmax (or log_softmax with log_target=True)";
    } else {
      if (auto v = number_after(low, R"(\bbeta)")) s.beta = *v;
      if (auto v = number_after(low, R"((?:temperature|\btemp\b|\btau\b|\bt\b))")) s.temperature = *v;
      // Hinton's T^2 factor on the divergence is not in the generated op (which returns it unscaled).
      if (std::regex_search(low, std::regex(R"(\bt\s*(?:\^|\*\*)\s*2\b|\bt\s*\*\s*t\b|\b(?:temperature|tau)[\s-]?(?:squared|\^\s*2|\*\*\s*2)|squared temperature)")))
        r.rejection = "the divergence is scaled by the squared temperature (T^2): the generated op returns it unscaled; "
                      "multiply its result by T^2 instead (the gradients follow through the upstream gradient)";
      if (std::regex_search(low, std::regex(R"(\bsum(?:med|ming)?\b|\btotal\b)"))) s.reduction = "sum";
    }
    if (s.reduction != "batchmean" && s.reduction != "sum" && s.reduction != "mean")
      r.rejection = "reduction '" + s.reduction + "': the fused op returns one scalar (batchmean, mean or sum)";
  }
  if (code && r.rejection.empty()) {
    // Terms, factors, added logits and arguments the keyword reading above cannot see.
    const LossCodeReading read =
        read_loss_code(text, s.loss, s.reduction, s.beta, s.loss != "cross_entropy" ? code_temperature(text) : std::nullopt);
    if (!read.rejection.empty()) r.rejection = read.rejection;
    if (read.loss_scale) s.loss_scale = *read.loss_scale;
    if (read.beta) s.beta = *read.beta;
    if (read.counted_ignore_index) {
      if (*read.counted_ignore_index == s.ignore_index) {
        s.reduction = "mean";
        r.notes.push_back("a summed cross-entropy divided by the number of targets != ignore_index is its mean over "
                          "the counted rows: reduction mean");
      } else {
        r.rejection = "the summed cross-entropy is divided by the number of targets != " +
                      std::to_string(*read.counted_ignore_index) + " while ignore_index is " +
                      std::to_string(s.ignore_index) + ": count the rows the loss ignores, or use reduction='mean'";
      }
    }
    if (read.reverse_kl && s.loss == "kl_div") {  // KL(student || teacher) is the JSD's beta = 0 end
      s.loss = "jsd";
      s.beta = 0.0;
    }
    for (const auto& n : read.notes) r.notes.push_back(n);
  }
  if (code && linear.bias && r.rejection.empty())
    r.rejection = "the linear layer has a bias" + linear_where(text) + ": the generated fused-linear op computes x @ weight.T without one; "
                  "drop the bias (LM heads have none) or fold it into an extra input column";
  if (code) {
    std::smatch m;
    if (std::regex_search(text, m, std::regex(R"(def\s+([A-Za-z_]\w*)\s*\()"))) r.entry = m[1].str();
    if (std::regex_search(text, m, std::regex(R"(class\s+([A-Za-z_]\w*))"))) r.entry = m[1].str();
  }
  if (auto v = number_after(low, R"(chunk(?:_rows|\s+rows|\s+size)?)")) s.chunk_rows = static_cast<long long>(*v);
  if (s.loss != "cross_entropy" && code && linear.count < 2 && r.rejection.empty())
    r.rejection = "a distillation loss needs the teacher's logits from its own linear layer (teacher_x @ teacher_w.T): "
                  "the code has one linear layer";

  std::string what = s.loss == "cross_entropy" ? "cross-entropy" : s.loss == "kl_div" ? "KL(teacher || student)" : "generalised JSD";
  r.resolved_from = "fused linear + " + what + " (" + s.source_form + ") over logits = x @ weight.T";
  return r;
}

}  // namespace liger::kernel_dev
