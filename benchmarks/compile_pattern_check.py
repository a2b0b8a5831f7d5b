#!/usr/bin/env python3
"""Does a kernel-dev op's compile-backend pattern find the PyTorch function the op came from?

    python3 benchmarks/compile_pattern_check.py --op dyt --source-file dyt.py
    python3 benchmarks/compile_pattern_check.py --op relu_squared --source "y = relu(x)^2"

The source is the user's PyTorch (an nn.Module or a function; kernel-dev's Verify passes the
profile's source text when the op came from PyTorch) or, for an op that came from words or an
expression, its forward in kernel-dev's expression language (relu, sigmoid, max, where, `^`...,
evaluated with the PyTorch functions a model would call). The check traces it as the backend sees
a model (torch.fx, every nn.Module inlined, the hyperparameters as constants), records shapes on
CPU tensors (fp32, rows=4, cols=8, learnable parameters per channel or [1] as the entry says),
scans the graph with the op's entry (liger_kernels/compile/generated/<op>.py) and requires:

  - exactly one matched region, and it produces the function's output;
  - no argument bound to another argument's tensor (a model's `weight` passed as `bias`);
  - the pattern, evaluated on the values it bound, gives the function's output (fp32, 1e-5).

Exit 0: the pattern matches; 1: it does not (the entry is inert: models written like the source keep
their PyTorch), or the source cannot be traced; 4: the entry is broken (it does not import, or where
it matches it would pass the wrong values or compute other values: it must not be used); 3: not run
(torch is not importable); 2: usage. Needs only CPU PyTorch (1.13 or newer): the
package is loaded as a bare namespace, so neither the CUDA library nor torch.library.custom_op
(which liger_kernels/__init__.py needs) is imported."""
import argparse
import ast
import importlib
import importlib.util
import inspect
import keyword
import math
import os
import sys
import types

import kernel_dev_input

ROWS, COLS = 4, 8
HERE = os.path.dirname(os.path.abspath(__file__))


BROKEN = 4


def fail(message, code=1):
    """Exit 1: the pattern does not find the source (the entry is inert); BROKEN: the entry cannot load
    or would compute something else than the source where it matches (it must not be used)."""
    print(f"{'BROKEN' if code == BROKEN else 'FAILED'}: {message}")
    sys.exit(code)


def load_entry(op, package_dir, entry_path):
    """The generated entry module, with liger_kernels as a bare namespace over package_dir."""
    pkg = types.ModuleType("liger_kernels")
    pkg.__path__ = [package_dir]
    sys.modules["liger_kernels"] = pkg
    name = f"liger_kernels.compile.generated.{op}"
    try:
        importlib.import_module("liger_kernels.compile.generated")
        if entry_path:
            spec = importlib.util.spec_from_file_location(name, entry_path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - the entry is generated code: say what broke
        where = entry_path or os.path.join(package_dir, "compile", "generated", f"{op}.py")
        fail(f"the compile entry {where} does not import: {type(exc).__name__}: {exc}", BROKEN)
    for attr in ("PATTERN", "ROLES", "PARAMS", "HYPERPARAMETERS"):
        if not hasattr(module, attr):
            fail(f"the compile entry for {op} has no {attr} (not a kernel-dev entry?)", BROKEN)
    return module


def expression_env(torch, F):
    """kernel-dev's expression functions as the PyTorch calls a model makes (the C++ emitter,
    compile_entry.cpp, spells them the same way: that is what the check compares)."""

    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    def maximum(a, b):
        if number(b):
            return torch.clamp(a, min=b)
        if number(a):
            return torch.clamp(b, min=a)
        return torch.maximum(a, b)

    def minimum(a, b):
        if number(b):
            return torch.clamp(a, max=b)
        if number(a):
            return torch.clamp(b, max=a)
        return torch.minimum(a, b)

    env = {name: getattr(torch, name) for name in ("exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sigmoid",
                                                   "erf", "abs", "relu", "sign", "sin", "cos", "square")}
    env.update(softplus=F.softplus, step=lambda v: (v > 0.0).type_as(v), max=maximum, min=minimum,
               clamp=torch.clamp, where=torch.where, pow=lambda a, b: a ** b, pi=math.pi, e=math.e)
    return env


def source_callable(text, entry, torch, nn, F):
    """(callable to trace, whether it is a module): the source's nn.Module (instantiated) or function,
    or a function evaluating the expression."""
    stripped = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    is_code = any(line.startswith(("def ", "class ", "import ", "from ")) for line in stripped.splitlines())
    if not is_code:
        expr = text.strip()
        head = expr.split("=", 1)[0].strip()
        if "=" in expr and head.isidentifier() and not expr.split("=", 1)[1].startswith("="):
            expr = expr.split("=", 1)[1]
        expr = expr.replace("^", "**")
        env = expression_env(torch, F)
        env.update(entry.HYPERPARAMETERS)  # constants, as a model holds them
        tensors = [n for n, role in entry.ROLES.items() if role != "scalar"]
        try:
            code = compile(f"def _source({', '.join(tensors)}):\n    return {expr}\n", "<expression>", "exec")
        except SyntaxError as exc:
            fail(f"the source expression does not parse as Python: {exc}")
        exec(code, env)  # noqa: S102 - the expression comes from the approved profile
        return env["_source"], False

    scope = {"__name__": "kernel_dev_source", "torch": torch, "nn": nn, "F": F, "math": math}
    try:
        exec(compile(text, "<source>", "exec"), scope)  # noqa: S102 - the user's own PyTorch code
    except Exception as exc:  # noqa: BLE001
        fail(f"the PyTorch source does not run: {type(exc).__name__}: {exc}")
    own = [v for v in scope.values() if getattr(v, "__module__", None) == "kernel_dev_source"]
    modules = [v for v in own if isinstance(v, type) and issubclass(v, nn.Module)]
    functions = [v for v in own if inspect.isfunction(v)]
    if modules:
        cls = modules[-1]
        args = {}
        for name, p in list(inspect.signature(cls.__init__).parameters.items())[1:]:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty:
                continue
            args[name] = COLS  # a required constructor argument is a size: num_features, dim, hidden_size
        try:
            module = cls(**args).float()
        except Exception as exc:  # noqa: BLE001
            fail(f"cannot construct {cls.__name__}({', '.join(f'{k}={v}' for k, v in args.items())}): "
                 f"{type(exc).__name__}: {exc}")
        # Distinct positive values: a swapped weight and bias (ones and zeros at init) would show.
        with torch.no_grad():
            for prm in module.parameters():
                prm.copy_(torch.rand_like(prm) + 0.5)
        return module, True
    if not functions:
        fail("the PyTorch source defines no nn.Module and no function")
    fn = functions[-1]  # helpers come first; the op's function is the last one defined
    tensors, constants = [], {}
    for name, p in inspect.signature(fn).parameters.items():
        role = entry.ROLES.get(name)
        if role == "scalar" or (role is None and p.default is not p.empty):
            constants[name] = p.default if p.default is not p.empty else entry.HYPERPARAMETERS[name]
        else:
            tensors.append(name)
    # A wrapper with the tensors as parameters: the constants are baked in, as Dynamo bakes a
    # model's Python numbers into its graph.
    wrapper_scope = {"_fn": fn, "_constants": constants}
    src = f"def _source({', '.join(tensors)}):\n    return _fn({', '.join(f'{t}={t}' for t in tensors)}, **_constants)\n"
    if any(keyword.iskeyword(t) for t in tensors):
        fail(f"the function's parameters {tensors} include a Python keyword")
    exec(src, wrapper_scope)  # noqa: S102
    return wrapper_scope["_source"], False


# Input name -> a PyTorch expression of a standard-normal tensor z (--samples: the profile's
# inputs[].sample), for ops defined on part of the line (log, a loss of probabilities).
SAMPLES = {}


def example_value(torch, name, entry):
    shape_init = entry.PARAMS.get(name)
    if shape_init is not None:
        size = (COLS,) if shape_init[0] == "channel" else (1,)
        # Positive and varied: a parameter inside log/sqrt stays finite; distinct per element.
        return torch.rand(size) + 0.5
    return kernel_dev_input.sample(torch, SAMPLES, name, torch.randn(ROWS, COLS))


def check_signatures(op, package_dir, pattern):
    """The backend calls replacement(*values) with the values bound to pattern's parameters, in pattern's
    order, and replacement calls liger_kernels.functional.<op> with them: the three orders must agree."""
    order = list(pattern.params)
    replacement = [n for n in inspect.signature(pattern.replacement).parameters]
    if replacement != order:
        fail(f"the graph passes the matched values to replacement in pattern's order {order}, but replacement "
             f"takes {replacement}", BROKEN)
    binding = os.path.join(package_dir, "ops", f"{op}.py")
    if not os.path.exists(binding):
        print(f"note: {binding} not found; the library call's argument order is not checked")
        return
    with open(binding) as f:
        tree = ast.parse(f.read())
    # An op whose inputs are parts of one argument (inputs[].split) is called on the parts: <op>_parts.
    defined = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    for name in (f"{op}_parts", op):
        if name in defined:
            functional = [x.arg for x in defined[name].args.args]
            if functional != order:
                fail(f"liger_kernels.ops.{op}.{name} takes {functional}, the entry passes {order}", BROKEN)
            return
    print(f"note: {binding} defines no function {op}; the library call's argument order is not checked")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--op", required=True)
    ap.add_argument("--source", default="", help="the PyTorch code or the forward expression")
    ap.add_argument("--source-file", default="", help="read the source from this file")
    ap.add_argument("--package", default=os.path.join(os.path.dirname(HERE), "kernels", "python", "liger_kernels"),
                    help="the liger_kernels package directory (default: this checkout's)")
    ap.add_argument("--entry", default="", help="the entry file (default: <package>/compile/generated/<op>.py)")
    ap.add_argument("--samples", default="",
                    help="where inputs are drawn from: name=EXPR;... with EXPR a PyTorch expression of a standard-normal "
                         "tensor z (the profile's inputs[].sample); unnamed inputs are z itself")
    a = ap.parse_args()
    SAMPLES.update(kernel_dev_input.parse_samples(a.samples))
    text = a.source
    if a.source_file:
        with open(a.source_file) as f:
            text = f.read()
    if not text.strip():
        print("usage error: give --source or --source-file", file=sys.stderr)
        sys.exit(2)

    try:
        import torch
        import torch.nn.functional as F
        from torch import fx, nn
        from torch.fx.passes.shape_prop import ShapeProp
    except Exception as exc:  # noqa: BLE001
        print(f"not run: torch not importable ({type(exc).__name__})")
        sys.exit(3)

    entry = load_entry(a.op, a.package, a.entry)
    pattern = entry.PATTERN
    check_signatures(a.op, a.package, pattern)
    torch.manual_seed(0)
    root, is_module = source_callable(text, entry, torch, nn, F)

    class InlineAll(fx.Tracer):
        """Traces into nn.Linear, nn.GELU...: Dynamo inlines every module, symbolic_trace would not."""

        def is_leaf_module(self, m, qualname):
            return False

    try:
        graph = InlineAll().trace(root)
        gm = fx.GraphModule(root if is_module else torch.nn.Module(), graph)
    except Exception as exc:  # noqa: BLE001
        fail(f"torch.fx cannot trace the source: {type(exc).__name__}: {exc}")
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    inputs = [example_value(torch, str(n.target), entry) for n in placeholders]

    values = {}

    class Record(ShapeProp):
        def run_node(self, n):
            result = super().run_node(n)
            values[n] = result
            return result

    try:
        Record(gm).propagate(*inputs)
    except Exception as exc:  # noqa: BLE001
        fail(f"the source does not run on fp32 [{ROWS}, {COLS}] CPU tensors: {type(exc).__name__}: {exc}")
    (output,) = [n for n in gm.graph.nodes if n.op == "output"]
    result = output.args[0]
    if not isinstance(result, fx.Node) or not isinstance(values.get(result), torch.Tensor):
        fail("the source must return one tensor")

    matches, misses = pattern.scan(gm.graph)
    shown = f"the source's graph:\n{gm.graph}\nthe pattern ({a.op}'s entry):\n{pattern.traced.graph}"
    if not matches:
        why = "; ".join(f"{m.node.name}: {m.reason}" for m in misses)
        fail(f"the {a.op} pattern does not match the PyTorch function it came from" + (f" ({why})" if why else "")
             + f": a model written like the source would keep its PyTorch code.\n{shown}")
    at_output = [m for m in matches if m.anchor is result]
    if len(matches) != 1 or not at_output:
        where = ", ".join(m.anchor.name for m in matches)
        fail(f"the {a.op} pattern matches {len(matches)} region(s) (ending at {where}); expected exactly one, "
             f"ending at the function's output {result.name}.\n{shown}")

    # Which graph value each argument of the library call takes.
    match = matches[0]
    match.apply(gm.graph)
    (call,) = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is pattern.replacement]
    bound = dict(zip(pattern.params, call.args))
    names = set(pattern.params)
    lines = []
    for param, value in bound.items():
        if isinstance(value, fx.Node):
            model_name = str(value.target) if value.op in ("placeholder", "get_attr") else value.name
            lines.append(f"  {param} <- {model_name} {tuple(values[value].shape)}")
            if model_name in names and model_name != param:
                fail(f"the pattern passes the source's `{model_name}` as the op's `{param}`: the roles of the "
                     f"entry's arguments are wrong.\n" + "\n".join(lines), BROKEN)
        else:
            lines.append(f"  {param} <- {value!r}")
    args = [values[v] if isinstance(v, fx.Node) else v for v in call.args]
    got = pattern.fn(*args)
    want = values[result]
    if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True):
        diff = (got - want).abs().max().item() if got.shape == want.shape else float("nan")
        fail(f"the {a.op} pattern matches the source's operations but computes other values on them "
             f"(max abs difference {diff:.3e}).\n" + "\n".join(lines), BROKEN)
    print(f"matched: the {a.op} pattern finds the PyTorch function it came from (one region, ending at "
          f"{result.name}, {len(match.region)} node(s)); the library call takes:")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
