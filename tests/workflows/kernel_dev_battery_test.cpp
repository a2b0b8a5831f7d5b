// kernel-dev's Understand on inputs written the ways people write them, none taken from the
// project's own op list: PyTorch in several styles, expressions and descriptions. Each case says
// what a correct profile is: the tier, the input names, and for element-wise ops the forward
// function (compared numerically with an independent spelling), or the reason a refusal must name.
// A silently wrong profile (a dropped gate, a dropped reduction, a collapsed input) fails here.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "workflows/kernel_dev/profile.h"
#include "workflows/kernel_dev/row_program.h"

namespace kd = liger::kernel_dev;

namespace {

const kd::KnowledgeBase& kb() {
  static const kd::KnowledgeBase k = kd::KnowledgeBase::load(LIGER_SOURCE_DIR);
  return k;
}

struct Case {
  const char* label;
  const char* input;
  int tier;                         // 0: the profile must stay undecided
  std::vector<std::string> inputs;  // decided cases: the input tensors, in order
  const char* same_as;              // Tier 1: the forward, spelt independently ("" to skip)
  const char* refusal;              // undecided cases: a fragment the reasons must contain
};

std::vector<std::string> input_names(const kd::KernelProfile& p) {
  std::vector<std::string> names;
  for (const auto& t : p.inputs) names.push_back(t.name);
  return names;
}

std::string all_reasons(const kd::KernelProfile& p) {
  std::string text = p.tier_reason + "\n";
  for (const auto& [field, why] : p.undecided) text += field + ": " + why + "\n";
  for (const auto& n : p.notes) text += n + "\n";
  return text;
}

// The profile's forward and `expected` agree at random points (module parameters at their
// defaults, learnable ones at their initial values).
void expect_same_forward(const kd::KernelProfile& p, const std::string& expected, const std::string& label) {
  ASSERT_TRUE(p.forward.has_value()) << label;
  const kd::Expr got = kd::parse_program("y = " + p.forward->expression, kb().catalogue.resolver()).expression;
  const kd::Expr want = kd::parse_program("y = " + expected, kb().catalogue.resolver()).expression;
  kd::Environment env;
  for (const auto& param : p.module_parameters) env[param.name] = param.value;
  for (const auto& param : p.learnable_parameters) env[param.name] = param.value;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> dist(-3.0, 3.0);
  for (int i = 0; i < 40; ++i) {
    for (const auto& t : p.inputs) env[t.name] = dist(rng);
    EXPECT_NEAR(kd::eval_f64(got, env), kd::eval_f64(want, env), 1e-9)
        << label << ": profile forward '" << p.forward->expression << "' vs '" << expected << "'";
  }
}

const std::vector<Case>& cases() {
  static const std::vector<Case> list = {
      // PyTorch, element-wise.
      {"softplus beta keyword", "def f(x): return F.softplus(x, beta=2.0)", 1, {"x"}, "log(1 + exp(2 * x)) / 2", ""},
      {"lambda with clamp keywords", "lambda x: torch.clamp(x, min=-1.0, max=1.0) * x", 1, {"x"},
       "min(max(x, -1), 1) * x", ""},
      {"multi-line gate", "def gate(a, b):\n    return a * torch.sigmoid(b)", 1, {"a", "b"}, "a / (1 + exp(-b))", ""},
      {"module forward", "class M(nn.Module):\n    def forward(self, x):\n        return x * torch.tanh(F.softplus(x))", 1,
       {"x"}, "x * tanh(log(1 + exp(x)))", ""},
      {"where leaky", "def f(x): return torch.where(x > 0, x, 0.1 * x)", 1, {"x"}, "max(x, 0) + 0.1 * min(x, 0)", ""},
      {"bool mask product", "def f(x): return x * (x > 0)", 1, {"x"}, "max(x, 0)", ""},
      {"erf GELU written out", "def f(x): return torch.erf(x / 1.4142135) * 0.5 * x + 0.5 * x", 1, {"x"},
       "0.5 * x * (1 + erf(x / 1.4142135))", ""},
      {"casts around silu", "def f(x):\n    y = x.float()\n    return (y * torch.sigmoid(y)).to(x.dtype)", 1, {"x"},
       "x / (1 + exp(-x))", ""},
      {"tensor methods", "def f(x): return x.clamp_min(0).square()", 1, {"x"}, "max(x, 0)^2", ""},
      {"two inputs named freely", "def f(x, y): return torch.maximum(x, y) * 0.5", 1, {"x", "y"}, "0.5 * max(x, y)", ""},
      {"default keyword argument", "def f(x, cap=30.0): return cap * torch.tanh(x / cap)", 1, {"x"}, "30 * tanh(x / 30)", ""},
      // Expressions.
      {"softsign", "y = x / (1 + abs(x))", 1, {"x"}, "x / (1 + abs(x))", ""},
      {"stable softplus", "y = log(1 + exp(-abs(x))) + max(x, 0)", 1, {"x"}, "log(1 + exp(x))", ""},
      // Descriptions.
      {"gated by words", "squared ReLU gated linear unit", 1, {"a", "b"}, "max(a, 0)^2 * b", ""},
      {"erf gate by words", "exact GELU (erf) gated linear unit", 1, {"a", "b"}, "0.5 * a * (1 + erf(a / sqrt(2))) * b", ""},
      {"activation GLU", "Mish GLU", 1, {"a", "b"}, "a * tanh(log(1 + exp(a))) * b", ""},
      {"parameter in words", "leaky ReLU with negative slope 0.2", 1, {"x"}, "max(x, 0) + 0.2 * min(x, 0)", ""},
      {"words the tool does not know", "SwiGLU as in the LLaMA MLP", 1, {"a", "b"}, "a / (1 + exp(-a)) * b", ""},
      // Row reductions.
      {"softmax method", "def f(x): return x.softmax(-1)", 2, {"x"}, "", ""},
      {"softmax written out", "def f(x):\n    m = x.max(dim=-1, keepdim=True).values\n    e = torch.exp(x - m)\n    return e / e.sum(dim=-1, keepdim=True)",
       2, {"x"}, "", ""},
      {"log-softmax with temperature", "def f(x): return torch.nn.functional.log_softmax(x / 2.0, dim=-1)", 2, {"x"}, "", ""},
      {"normalize", "def f(x): return F.normalize(x, dim=-1)", 2, {"x"}, "", ""},
      {"L1 normalise", "def f(x): return x / (x.abs().sum(-1, keepdim=True) + 1e-6)", 2, {"x"}, "", ""},
      {"layer norm without affine", "def f(x): return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5)",
       2, {"x"}, "", ""},
      {"per-row logsumexp", "def f(x): return torch.logsumexp(x, dim=-1)", 2, {"x"}, "", ""},
      {"z-loss in code", "def f(logits): return torch.logsumexp(logits, dim=-1).pow(2)", 2, {"logits"}, "", ""},
      // Words that restate the request (skills/kernel_dev/tiers.yaml restating_words) say nothing more.
      {"z-loss in words", "z-loss: the square of the log of the sum of exponentials of each row of logits", 2, {"x"}, "", ""},
      {"cosine similarity in words", "the cosine similarity between two rows", 2, {"a", "b"}, "", ""},
      {"a row's maximum in words", "maximum of each row", 2, {"x"}, "", ""},
      {"layer_norm with a shape slice", "def f(x): return F.layer_norm(x, x.shape[-1:])", 2, {"x"}, "", ""},
      // Refused, with the reason named (never a complete-looking wrong profile).
      {"z-loss with a word its form lacks", "z-loss of the cubed logits", 0, {}, "", "says more than 'z_loss' ('cubed')"},
      {"the square of a logsumexp, no request named", "the square of the log of the sum of exponentials of each row of logits",
       0, {}, "", "names more than catalogue entry 'square'"},
      {"scaled tanh in words", "tanh of x times 2", 1, {"x"}, "2 * tanh(x)", ""},  // arithmetic in words
      {"arithmetic beside a word that is no function", "tanh of x times the frobnication of x", 0, {}, "", "'times'"},
      {"a gated linear unit with its activation after 'with'", "a gated linear unit with silu", 1, {"a", "b"}, "silu(a) * b", ""},
      {"the gate's activation a tie", "gated linear unit with gelu", 0, {}, "", "the gate's activation: the description 'gelu' matches more than one"},
      {"log-cosh by name", "log cosh", 1, {"x"}, "log(cosh(x))", ""},
      {"trigonometric words", "the cosine of x plus the sine of x", 1, {"x"}, "cos(x) + sin(x)", ""},
      {"a row reduction of each row in words", "the sum of the squares of each row", 2, {"x"}, "", ""},
      {"a scan", "def f(x): return torch.cumsum(x, -1)", 0, {}, "", "scan"},
      {"numbers no parameter took", "hard tanh clipped to [-2, 2]", 0, {}, "", "gives -2, 2, which no parameter"},
      {"a number for an entry without parameters", "SwiGLU with beta 1.5", 0, {}, "", "gives 1.5"},
      {"a parameter the entry lacks", "parametric softsign with a learnable slope per channel", 0, {}, "", "'parametric'"},
      {"a parameter the entry has", "parametric ReLU with a learnable slope per channel", 1, {"x"},
       "max(x, 0) + 0.25 * min(x, 0)", ""},
      {"an arithmetic entry beside an unknown word", "squared hinge", 0, {}, "", "'hinge'"},
      {"words composing functions", "the square of the tanh of x", 1, {"x"}, "tanh(x)^2", ""},
      {"the derivative in words", "the derivative of the sigmoid of x", 1, {"x"}, "exp(-x) / (1 + exp(-x))^2", ""},
      {"a number that is part of the name", "Swish-1", 1, {"x"}, "x / (1 + exp(-x))", ""},
      {"a named parameter value", "ELU with alpha 0.5", 1, {"x"}, "max(x, 0) + 0.5 * (exp(min(x, 0)) - 1)", ""},
      {"not the last dimension", "def f(x): return torch.softmax(x, dim=1)", 0, {}, "", "dim must be -1"},
      // Second battery: none of these inputs was seen while the rules above were written.
      // PyTorch spellings.
      {"multi-line tanh GELU with math constants",
       "def gelu_tanh(x):\n    c = math.sqrt(2.0 / math.pi)\n    inner = c * (x + 0.044715 * torch.pow(x, 3))\n"
       "    return 0.5 * x * (1.0 + torch.tanh(inner))",
       1, {"x"}, "0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))", ""},
      {"lambda quick GELU", "lambda x: x * torch.sigmoid(1.702 * x)", 1, {"x"}, "x / (1 + exp(-1.702 * x))", ""},
      {"module with a constructor default",
       "class SquarePlus(nn.Module):\n    def __init__(self, b=4.0):\n        super().__init__()\n        self.b = b\n\n"
       "    def forward(self, x):\n        return 0.5 * (x + torch.sqrt(x * x + self.b))",
       1, {"x"}, "0.5 * (x + sqrt(x^2 + 4))", ""},
      {"clamp(min=) then **", "def f(x): return torch.clamp(x, min=0.0) ** 2", 1, {"x"}, "max(x, 0)^2", ""},
      {".pow(0.5)", "def f(x): return (x * x + 1).pow(0.5)", 1, {"x"}, "sqrt(x^2 + 1)", ""},
      {"gate and up named freely", "def f(gate, up): return F.silu(gate) * up", 1, {"gate", "up"},
       "gate / (1 + exp(-gate)) * up", ""},
      {"hard swish through relu6", "def f(x): return x * F.relu6(x + 3) / 6", 1, {"x"}, "x * min(max(x + 3, 0), 6) / 6", ""},
      {"annotated signature with a scalar default",
       "def f(x: torch.Tensor, alpha: float = 0.5) -> torch.Tensor:\n    return torch.where(x >= 0, x, alpha * (torch.exp(x) - 1))",
       1, {"x"}, "where(x >= 0, x, 0.5 * (exp(x) - 1))", ""},
      {"snake with a default", "def snake(x, a=1.0):\n    return x + (1.0 / a) * torch.sin(a * x) ** 2", 1, {"x"},
       "x + sin(x)^2", ""},
      {"module parameter through a keyword",
       "class Act(nn.Module):\n    def __init__(self, slope=0.2):\n        super().__init__()\n        self.slope = slope\n"
       "    def forward(self, x):\n        return F.leaky_relu(x, negative_slope=self.slope)",
       1, {"x"}, "where(x > 0, x, 0.2 * x)", ""},
      {"in-place method as a statement", "def f(x):\n    x.relu_()\n    return x", 1, {"x"}, "max(x, 0)", ""},
      {"functional in-place", "def f(x):\n    y = x - 1\n    torch.sigmoid_(y)\n    return y * x", 1, {"x"},
       "x / (1 + exp(1 - x))", ""},
      {"several outputs", "def f(x):\n    return x, x * 2", 0, {}, "", "one tensor per op"},
      {"in-place clamp_ on an intermediate", "def f(x):\n    y = x * 2\n    y.clamp_(min=-1.0, max=1.0)\n    return y", 1,
       {"x"}, "min(max(2 * x, -1), 1)", ""},
      {"row max through .values", "def f(x): return x.max(-1).values", 2, {"x"}, "", ""},
      {"torch.max(x, -1).values", "def f(x): return torch.max(x, -1).values", 2, {"x"}, "", ""},
      {"RMS scale with eps in the signature", "def rms(x, eps=1e-6):\n    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)",
       2, {"x"}, "", ""},
      {"centred RMS with an intermediate",
       "def f(x):\n    xc = x - x.mean(-1, keepdim=True)\n    return xc / torch.sqrt((xc ** 2).mean(-1, keepdim=True) + 1e-5)", 2,
       {"x"}, "", ""},
      {"F.softmax with a positional dim", "def f(x): return F.softmax(x, -1)", 2, {"x"}, "", ""},
      {"softmax as exp minus logsumexp", "def f(x): return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))", 2,
       {"x"}, "", ""},
      {"softcapped log-softmax", "def f(logits, cap=50.0):\n    return torch.log_softmax(cap * torch.tanh(logits / cap), dim=-1)",
       2, {"logits"}, "", ""},
      {"entropy per row", "def f(x):\n    p = x.softmax(-1)\n    return -(p * p.log()).sum(-1)", 2, {"x"}, "", ""},
      {"norm with p= keyword", "def f(x): return x.norm(p=2, dim=-1, keepdim=True)", 2, {"x"}, "", ""},
      {"vector_norm with clamp_min", "def f(x): return x / torch.linalg.vector_norm(x, ord=2, dim=-1, keepdim=True).clamp_min(1e-12)",
       2, {"x"}, "", ""},
      {"weighted z-loss", "def z_loss(logits, coef=1e-4):\n    lse = torch.logsumexp(logits.float(), dim=-1)\n    return coef * lse ** 2",
       2, {"logits"}, "", ""},
      {"logit through its identity", "def f(x): return torch.logit(torch.sigmoid(x))", 1, {"x"}, "x", ""},
      {"logit with eps", "def f(p): return torch.logit(p, eps=1e-3)", 1, {"p"},
       "log(min(max(p, 0.001), 0.999) / (1 - min(max(p, 0.001), 0.999)))", ""},
      {"sinh, cosh, tan, exp2, log2 as identities",
       "def f(x): return torch.sinh(x) + torch.cosh(x) * torch.tan(x) + torch.exp2(x) + torch.log2(x * x + 1)", 1, {"x"},
       "(exp(x) - exp(-x)) / 2 + (exp(x) + exp(-x)) / 2 * sin(x) / cos(x) + 2^x + log(x^2 + 1) / log(2)", ""},
      {"inverse hyperbolic and log-sigmoid", "def f(x): return torch.arcsinh(x) + F.logsigmoid(x)", 1, {"x"},
       "log(abs(x) + sqrt(x^2 + 1)) * sign(x) - log(1 + exp(-x))", ""},
      {"hyperbolic method chain", "def f(x): return x.cosh().log()", 1, {"x"}, "log(exp(x) + exp(-x)) - log(2)", ""},
      // Losses torch.nn.functional computes per element: element-wise with reduction='none'.
      {"smooth L1 per element", "def f(x, y): return F.smooth_l1_loss(x, y, reduction='none', beta=0.5)", 1, {"x", "y"},
       "where(abs(x - y) < 0.5, (x - y)^2 / 1, abs(x - y) - 0.25)", ""},
      {"Huber per element", "def f(x, y): return F.huber_loss(x, y, reduction='none', delta=2.0)", 1, {"x", "y"},
       "where(abs(x - y) < 2, 0.5 * (x - y)^2, 2 * abs(x - y) - 2)", ""},
      {"BCE with logits per element", "def f(x, t): return F.binary_cross_entropy_with_logits(x, t, reduction='none')", 1,
       {"x", "t"}, "-(t * log(1 / (1 + exp(-x))) + (1 - t) * log(1 - 1 / (1 + exp(-x))))", ""},
      {"MSE and L1 per element", "def f(x, y): return F.mse_loss(x, y, reduction='none') + F.l1_loss(x, y, reduction='none')",
       1, {"x", "y"}, "(x - y)^2 + abs(x - y)", ""},
      {"soft margin per element", "def f(x, y): return F.soft_margin_loss(x, y, reduction='none')", 1, {"x", "y"},
       "log(1 + exp(-y * x))", ""},
      {"sinc", "def f(x): return torch.sinc(x)", 1, {"x"}, "sin(pi * x) / (pi * x)", ""},
      {"a loss's default mean is over every element", "def f(x, y): return F.mse_loss(x, y)", 0, {}, "",
       "write reduction='none'"},
      {"a loss's class weights", "def f(x, t, w): return F.binary_cross_entropy_with_logits(x, t, weight=w, reduction='none')",
       0, {}, "", "argument 'weight' is not read"},
      // PyTorch the analyser must refuse, naming the construct and the alternative.
      {"dropout", "def f(x): return F.dropout(torch.relu(x), p=0.1)", 0, {}, "", "apply it after"},
      {"a function outside the subset", "def f(x): return torch.lgamma(x)", 0, {}, "", "write it with the functions it reads"},
      {"dim=1 on what may be 2-D", "def f(x): return x - x.amax(dim=1, keepdim=True)", 0, {}, "",
       "dim=1 is the last dimension only of a 2-D input"},
      {"a reduction over dim 0", "def f(x): return x.sum(dim=0)", 0, {}, "", "dim must be -1"},
      // The halves of one argument are the kernel's inputs (inputs[].split; the entry takes x).
      {"GLU halves through chunk", "def f(x):\n    a, b = x.chunk(2, dim=-1)\n    return F.silu(a) * b", 1, {"a", "b"},
       "a * sigmoid(a) * b", ""},
      {"GLU halves through split sizes", "def f(x):\n    a, b = x.split(4096, dim=-1)\n    return F.silu(a) * b", 0, {}, "",
       "for equal parts of an argument write a, b = x.chunk(2, dim=-1)"},
      {"masked assignment", "def f(x):\n    y = x.clone()\n    y[y < 0] = 0\n    return y", 0, {}, "",
       "torch.where(condition, value, y)"},
      {"a branch on data", "def f(x):\n    if x.sum() > 0:\n        return x\n    return -x", 0, {}, "",
       "line 2, column 5"},
      {"a loop", "def f(x):\n    for i in range(3):\n        x = torch.tanh(x)\n    return x", 0, {}, "", "unroll"},
      {"a GEMM", "def f(x, w): return x @ w", 0, {}, "", "column 23"},
      {"unclosed call", "def f(x): return torch.tanh(x", 0, {}, "", "expected ')', found the end of the line"},
      {"RMSNorm with a weight argument", "def f(x, w):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w", 2,
       {"x"}, "", ""},
      {"softmax of a sum of two tensors", "def f(x, y): return torch.softmax(x + y, dim=-1)", 2, {"x", "y"}, "", ""},
      // Expressions.
      {"squareplus expression", "y = 0.5 * (x + sqrt(x^2 + 4))", 1, {"x"}, "0.5 * (x + sqrt(x^2 + 4))", ""},
      {"three inputs", "z = a * sigmoid(b) + c", 1, {"a", "b", "c"}, "a / (1 + exp(-b)) + c", ""},
      {"log-softmax expression", "y = x - logsumexp(x)", 2, {"x"}, "", ""},
      {"centred RMS expression", "y = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + 1e-5)", 2, {"x"}, "", ""},
      {"log-cosh expression", "y = log(cosh(x))", 1, {"x"}, "log(exp(x) + exp(-x)) - log(2)", ""},
      {"atanh and asinh expression", "y = atanh(0.5 * x / (1 + abs(x))) + asinh(x)", 1, {"x"},
       "0.5 * log((1 + 0.5 * x / (1 + abs(x))) / (1 - 0.5 * x / (1 + abs(x)))) + sign(x) * log(abs(x) + sqrt(x^2 + 1))", ""},
      {"pi in an expression", "y = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))", 1, {"x"},
       "0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x^3)))", ""},
      // Descriptions.
      {"squareplus by name", "squareplus", 1, {"x"}, "0.5 * (x + sqrt(x^2 + 4))", ""},
      {"soft-capping with its cap", "soft-capping of logits with cap 30", 1, {"x"}, "30 * tanh(x / 30)", ""},
      {"one number for the one parameter", "leaky relu 0.1", 1, {"x"}, "max(x, 0) + 0.1 * min(x, 0)", ""},
      {"swish with a beta", "swish with beta 1.702", 1, {"x"}, "x / (1 + exp(-1.702 * x))", ""},
      {"softplus with both parameters", "softplus with beta 2 and threshold 10", 1, {"x"},
       "where(2 * x > 10, x, log(1 + exp(2 * x)) / 2)", ""},
      {"gated tanh unit", "gated tanh unit", 1, {"a", "b"}, "tanh(a) * b", ""},
      {"a learnable parameter in words", "Swish with learnable beta", 1, {"x"}, "x / (1 + exp(-x))", ""},
      {"GLU by name, PyTorch's order", "GLU", 1, {"a", "b"}, "a / (1 + exp(-b))", ""},
      {"a gated form keeps the activation's parameters", "softplus gated linear unit with beta 2", 1, {"a", "b"},
       "where(2 * a > 20, a, log(1 + exp(2 * a)) / 2) * b", ""},
      {"a gated leaky ReLU with its slope", "leaky relu gated linear unit with negative slope 0.2", 1, {"a", "b"},
       "(max(a, 0) + 0.2 * min(a, 0)) * b", ""},
      {"learnable, but which?", "learnable softplus", 0, {}, "", "does not say which of its parameters"},
      {"CELU with alpha=", "CELU with alpha=2", 1, {"x"}, "where(x > 0, x, 2 * (exp(x / 2) - 1))", ""},
      {"log-sigmoid by words", "log-sigmoid", 1, {"x"}, "-log(1 + exp(-x))", ""},
      {"GELU with tanh approximation", "GELU with tanh approximation", 1, {"x"},
       "0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x^3)))", ""},
      {"one number, two parameters", "hard tanh 2", 0, {}, "", "gives 2"},
      // Tier-2 requests by name: derived offline from the request's PyTorch form (tiers.yaml)
      // when the description adds nothing; a word or number it does not have keeps them undecided.
      {"z-loss by name", "z-loss", 2, {"x"}, "", ""},
      {"softmax by name", "softmax", 2, {"x"}, "", ""},
      {"row-wise softmax in words", "a fused row-wise softmax over the last dimension", 2, {"x"}, "", ""},
      {"softmax over dim=-1 in words", "softmax over dim=-1", 2, {"x"}, "", ""},
      {"softmax with a temperature", "softmax with temperature 2", 2, {"x"}, "", ""},
      {"a temperature without its value", "softmax with temperature", 0, {}, "", "('temperature')"},
      {"a zero temperature", "softmax with temperature 0", 0, {}, "", "the temperature is 0, which the input is divided by"},
      {"two modifiers in words", "log softmax with temperature 0.5 and softcap 30", 2, {"x"}, "", ""},
      {"a modifier on a reduction to one value", "logsumexp scaled by 0.5", 2, {"x"}, "", ""},
      {"softmax over another dim", "softmax over dim 0", 0, {}, "", "('0')"},
      {"log-softmax by name", "log-softmax", 2, {"x"}, "", ""},
      {"L2-normalise rows in words", "L2-normalize each row", 2, {"x"}, "", ""},
      {"logsumexp in words", "logsumexp of each row", 2, {"x"}, "", ""},
      {"RMSNorm without weight", "RMSNorm without weight", 2, {"x"}, "", ""},
      {"LayerNorm without affine", "LayerNorm without affine parameters", 2, {"x"}, "", ""},
      {"RMSNorm (its weight implied)", "RMSNorm", 0, {}, "", "per-column weight"},
      {"entropy in words", "entropy of the softmax of each row", 2, {"x"}, "", ""},
      {"entropy with a temperature", "softmax entropy with temperature 2", 2, {"x"}, "", ""},
      {"variance in words", "row-wise variance", 2, {"x"}, "", ""},
      {"standard deviation in words", "standard deviation of each row", 2, {"x"}, "", ""},
      {"a coefficient on the output", "z-loss of logits with coefficient 1e-4", 2, {"x"}, "", ""},
      {"an eps in words", "RMSNorm without weight, eps 1e-5", 2, {"x"}, "", ""},
      {"an epsilon in words", "L2 normalization of each row with epsilon 1e-12", 2, {"x"}, "", ""},
      {"an eps the form does not have", "softmax with eps 1e-5", 0, {}, "", "has no eps for the description to set"},
      {"sparsemax (no built-in form)", "sparse softmax", 0, {}, "", "('sparse')"},
      {"a gate of two activations", "tanh gated by sigmoid", 0, {}, "", "'tanh', 'gated'"},
  };
  return list;
}

}  // namespace

TEST(KernelDevBattery, UnderstandsOrRefusesWithTheReason) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.label);
    const kd::KernelProfile p = kd::analyse({c.input, kd::InputKind::Auto, ""}, kb());
    if (c.tier == 0) {
      EXPECT_FALSE(p.complete()) << c.label << ": decided as tier " << p.tier << " from '" << c.input << "'";
      EXPECT_NE(all_reasons(p).find(c.refusal), std::string::npos) << c.label << ":\n" << all_reasons(p);
      continue;
    }
    EXPECT_EQ(p.tier, c.tier) << c.label << ":\n" << all_reasons(p);
    EXPECT_TRUE(p.complete()) << c.label << ":\n" << all_reasons(p);
    EXPECT_EQ(input_names(p), c.inputs) << c.label;
    if (c.tier == 1 && *c.same_as) expect_same_forward(p, c.same_as, c.label);
  }
}

// A request by name computes what its PyTorch form computes, under a name that never takes one of
// the library's kernels.
TEST(KernelDevBattery, RequestsByNameAreTheirPyTorchForms) {
  const auto by_name = kd::analyse({"softmax", kd::InputKind::Auto, ""}, kb());
  const auto by_code = kd::analyse({"def f(x): return torch.softmax(x, dim=-1)", kd::InputKind::Auto, ""}, kb());
  ASSERT_TRUE(by_name.row_program && by_code.row_program);
  EXPECT_EQ(by_name.row_program->output, by_code.row_program->output);
  EXPECT_EQ(by_name.row_program->grad_input, by_code.row_program->grad_input);
  ASSERT_EQ(by_name.row_program->forward_reductions.size(), by_code.row_program->forward_reductions.size());
  for (std::size_t i = 0; i < by_code.row_program->forward_reductions.size(); ++i)
    EXPECT_EQ(by_name.row_program->forward_reductions[i].expression, by_code.row_program->forward_reductions[i].expression);
  EXPECT_EQ(by_name.source_kind, "words");
  EXPECT_NE(by_name.resolved_from.find("PyTorch form"), std::string::npos) << by_name.resolved_from;
  // The library has rms_norm (with a weight): the weightless one gets a name of its own.
  const auto rms = kd::analyse({"RMSNorm without weight", kd::InputKind::Auto, ""}, kb());
  EXPECT_TRUE(rms.complete());
  EXPECT_NE(rms.op_name, "rms_norm");
  // z-loss is one value per row.
  const auto z = kd::analyse({"z-loss", kd::InputKind::Auto, ""}, kb());
  EXPECT_TRUE(kd::per_row_output(z)) << (z.outputs.empty() ? "no output" : z.outputs[0].shape);
}

// A request's PyTorch form with numeric keyword parameters ("def huber_loss(a, b, delta=1.0)")
// takes their values from the description by their own names, one-line form or not; a name the
// form lacks is still refused.
TEST(KernelDevBattery, AFormsOwnKeywordParametersAreSetByName) {
  auto value_of = [](const kd::KernelProfile& p, const std::string& name) {
    for (const auto& m : p.module_parameters)
      if (m.name == name) return m.value;
    return -1.0;
  };
  const auto huber = kd::analyse({"huber loss with delta 2.0 between a and b", kd::InputKind::Auto, ""}, kb());
  ASSERT_TRUE(huber.complete()) << all_reasons(huber);
  EXPECT_EQ(huber.op_name, "huber_loss");
  EXPECT_DOUBLE_EQ(value_of(huber, "delta"), 2.0);
  const auto smooth = kd::analyse({"smooth L1 loss with beta 0.5", kd::InputKind::Auto, ""}, kb());
  ASSERT_TRUE(smooth.complete()) << all_reasons(smooth);
  EXPECT_DOUBLE_EQ(value_of(smooth, "beta"), 0.5);
  EXPECT_DOUBLE_EQ(value_of(kd::analyse({"huber loss", kd::InputKind::Auto, ""}, kb()), "delta"), 1.0);
  const auto other = kd::analyse({"huber loss with gamma 2.0", kd::InputKind::Auto, ""}, kb());
  EXPECT_FALSE(other.complete());
  EXPECT_NE(all_reasons(other).find("'gamma'"), std::string::npos) << all_reasons(other);
}
