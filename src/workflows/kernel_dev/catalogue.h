// The catalogue of named element-wise activations (skills/kernel_dev/activations.yaml) and the
// natural-language resolution of a request ("ReLU squared activation function") to one of them.
#pragma once

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "workflows/kernel_dev/expr.h"

namespace liger::kernel_dev {

struct HyperParameter {
  std::string name;
  double default_value = 0.0;
  std::string description;
};

struct LearnableParameter {
  std::string name;
  ParamShape shape = ParamShape::Scalar;
  double init = 1.0;
  std::string description;
};

struct Activation {
  std::string name;
  std::string display;
  std::string expression_text;
  std::string torch;  // PyTorch eager forward
  std::string reference;
  std::string gradient_note;
  std::vector<std::string> aliases;
  std::vector<std::string> phrases;
  std::vector<HyperParameter> hyperparameters;
  std::vector<LearnableParameter> learnable;
  // Parsed from expression_text.
  std::string output;
  std::vector<std::string> inputs;
  Expr expression;

  // The expression program with hyperparameters as fixed params and learnable ones as params.
  Program program() const;
};

struct Resolution {
  const Activation* activation = nullptr;
  std::string matched;                 // the catalogue key the text matched
  std::string normalised;              // the text after normalisation
  std::string undecided;               // why nothing was chosen ("" when resolved)
  std::vector<std::string> candidates; // the entries in a tie, or near misses
  // Words outside the matched span that name operations (another activation, a primitive
  // function, a reduction): the description asks for more than the entry computes, so the match
  // is refused rather than silently dropping them ("squared ReLU gated linear unit" is not reglu).
  std::vector<std::string> unexplained;
  // A gated form composed from the description ("squared ReLU gated linear unit": c = relu_squared(a) * b)
  // when no entry names it; `activation` points here.
  std::shared_ptr<const Activation> composed;
  bool ok() const { return activation != nullptr; }
};

class Catalogue {
 public:
  // Throws std::runtime_error naming the file and entry on malformed data.
  static Catalogue load_file(const std::filesystem::path& path);
  static Catalogue parse(const std::string& yaml_text, const std::string& origin);

  const std::vector<Activation>& entries() const { return entries_; }
  // Words that name an operation in a description: every entry's name and alias parts, the
  // expression language's primitive functions and the catalogue's `operation_words`.
  const std::set<std::string>& operation_words() const { return operation_words_; }
  // The gated form "act(a) * b" a description names with a gate word and a catalogue activation
  // (an existing entry when one computes exactly that); nullptr when the words are not one.
  // `ambiguous` (optional) receives why not, when the gate's activation is a tie between entries.
  std::shared_ptr<const Activation> compose_gated(const std::vector<std::string>& words,
                                                  std::string* ambiguous = nullptr) const;
  // The entry with the hyperparameters the description asks to learn ("swish with learnable beta")
  // turned into learnable parameters; nullptr when it asks for none, with why_not set when it asks
  // for one without saying which.
  std::shared_ptr<const Activation> with_learnable(const std::vector<std::string>& words, const Activation& a,
                                                   std::string& why_not) const;
  // By canonical name or alias, normalised ("Leaky-ReLU" finds leaky_relu).
  const Activation* find(const std::string& name) const;
  // Natural-language resolution.
  Resolution resolve(const std::string& text) const;
  // Catalogue entries usable as functions in expressions: gelu(a), leaky_relu(x, 0.2),
  // softplus(x, beta=2); missing hyperparameters take their defaults.
  FunctionResolver resolver() const;

 private:
  std::vector<Activation> entries_;
  std::set<std::string> operation_words_;
  std::set<std::string> parameter_words_;  // ask for a parameter: unexplained by an entry without one
};

// Lower case, '²'/'^2'/'**2' -> "squared", punctuation to spaces, filler words ("activation",
// "function", "kernel", "op", "please", "implement", ...) dropped, spaces collapsed.
std::string normalise_description(const std::string& text);

}  // namespace liger::kernel_dev
