"""The kernel-dev input's own PyTorch code as a callable baseline (kernel_dev_compare.py
--eager-source / --eager-entry): Verify compares the kernel with what the user wrote, not with the
translation the kernel was built from.

`entry` is what the translator took as the op: a function name ("f"), "Class.forward" (an nn.Module:
built with its constructor's defaults, sizes it requires set to the row width, the profile's module
parameters passed by name, and its parameters and buffers replaced by the op's tensors through
torch.func.functional_call, so gradients reach the same leaves as ours), or "<snippet>" (statements
whose last line is the result). `load()` returns fn(*inputs, *learnable) or raises InputCodeError
saying why; the caller then falls back to the translated expression and reports that."""
import ast
import inspect
import re
import math
import sys
import types

# Constructor arguments that are the normalised width when a module requires them.
_WIDTH_NAMES = {"hidden_size", "dim", "d_model", "normalized_shape", "num_features", "features", "size", "n",
                "channels", "hidden", "embed_dim", "hidden_dim", "width", "cols", "in_features"}


class InputCodeError(RuntimeError):
    pass


def parse_samples(text):
    """--samples "name=EXPR;...": input name -> a PyTorch expression of a standard-normal tensor z (the
    profile's inputs[].sample, input_sampling.cpp), for ops defined on part of the line (log, a loss
    of probabilities). A name given twice keeps its last expression."""
    out = {}
    for spec in [s for s in text.split(";") if s.strip()]:
        name, _, expr = spec.partition("=")
        out[name.strip()] = expr
    return out


def sample(torch, samples, name, z):
    """The standard-normal draw z mapped onto the input's domain; z itself for an input without one."""
    return eval(samples[name], {"torch": torch}, {"z": z}) if name in samples else z


def _scope(torch):
    """The globals the input's code runs in: a real module registered in sys.modules, so
    torch.compile (which resolves a function's globals through its module) finds torch, F and the
    input's own names there."""
    import torch.nn.functional as F

    module = types.ModuleType("kernel_dev_input_code")
    module.__dict__.update({"torch": torch, "F": F, "nn": torch.nn, "math": math})
    sys.modules[module.__name__] = module
    return module.__dict__


def _snippet_function(source, names, scope):
    tree = ast.parse(source)
    if not tree.body:
        raise InputCodeError("the snippet is empty")
    last = tree.body[-1]
    if isinstance(last, ast.Expr):
        tree.body[-1] = ast.Return(value=last.value)
    elif isinstance(last, (ast.Assign, ast.AnnAssign)) and last.value is not None:
        tree.body[-1] = ast.Return(value=last.value)
    elif not isinstance(last, ast.Return):
        raise InputCodeError("the snippet's last line is not an expression or an assignment")
    args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in names], vararg=None, kwonlyargs=[],
                         kw_defaults=[], kwarg=None, defaults=[])
    extra = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}  # Python >= 3.12
    func = ast.FunctionDef(name="_kernel_dev_snippet", args=args, body=tree.body, decorator_list=[], returns=None,
                           **extra)
    module = ast.fix_missing_locations(ast.Module(body=[func], type_ignores=[]))
    exec(compile(module, "<kernel-dev input>", "exec"), scope)  # noqa: S102 - the approved profile's own input
    return scope["_kernel_dev_snippet"]


def _bind(fn, names, params):
    """fn's arguments from the op's inputs and learnable parameters: by name where the signature uses
    the profile's names, else in order (inputs, then parameters). Arguments with defaults keep them
    (the profile's module parameters are those defaults)."""
    signature = inspect.signature(fn)
    wanted = [p for p in signature.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    ours = list(names) + [n for n in params if n not in names]
    required = [p.name for p in wanted if p.default is inspect.Parameter.empty]
    if set(required) <= set(ours):
        order = [p.name for p in wanted if p.name in ours]
        return lambda values: fn(**{n: values[n] for n in order})
    if len(required) == len(ours):
        return lambda values: fn(*[values[n] for n in ours])
    raise InputCodeError(f"{fn.__name__}{signature} cannot be called with the op's inputs {ours}")


# A parameter whose name the generated code reserves (a temperature T beside the kernel's
# template parameter T) is <name>_param there (generated_names.cpp); the code still says <name>.
_RENAMED = re.compile(r"(.+)_param[0-9]*")


def _generated_name(name, op_names):
    """The op's name for the code's parameter `name`: the same, or its <name>_param rename."""
    if name in op_names:
        return name
    renamed = [n for n in op_names if _RENAMED.fullmatch(n) and _RENAMED.fullmatch(n).group(1) == name]
    return renamed[0] if len(renamed) == 1 else None


def _module_function(torch, cls, names, params, module_params, cols):
    kwargs = {}
    for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        op_name = _generated_name(p.name, module_params)
        if op_name is not None:
            kwargs[p.name] = module_params[op_name]
        elif p.default is inspect.Parameter.empty:
            if p.name not in _WIDTH_NAMES:
                raise InputCodeError(f"{cls.__name__}.__init__ needs '{p.name}', which the profile does not give")
            kwargs[p.name] = cols
    try:
        module = cls(**kwargs)
    except Exception as exc:  # noqa: BLE001 - reported as the reason for the fallback
        raise InputCodeError(f"{cls.__name__}(**{kwargs}) failed: {exc.__class__.__name__}: {exc}") from None
    tensors = dict(module.named_buffers())
    tensors.update(dict(module.named_parameters()))
    state_names = list(tensors)

    def owner(n):
        hits = [k for k in state_names if k == n or k.split(".")[-1] == n or k.replace(".", "_") == n]
        if not hits and _RENAMED.fullmatch(n):  # T_param: the generated code's name for a parameter T
            return owner(_RENAMED.fullmatch(n).group(1))
        return hits[0] if len(hits) == 1 else None

    # The op's parameter -> (state key, element index or None). An element of a parameter the code
    # indexes (PolyNorm's self.weight[0]) is a scalar of the op named <parameter>_<index>.
    mapping = {}
    for n in params:
        key = owner(n)
        if key is not None:
            mapping[n] = (key, None)
            continue
        base, _, index = n.rpartition("_")
        key = owner(base) if index.isdigit() else None
        if key is None:
            raise InputCodeError(f"the op's parameter '{n}' matches nothing (or several) in {cls.__name__}")
        mapping[n] = (key, int(index))
    for key in {k for k, i in mapping.values() if i is not None}:
        given = sorted(i for k, i in mapping.values() if k == key)
        if given != list(range(tensors[key].numel())):
            raise InputCodeError(f"{cls.__name__}.{key} has {tensors[key].numel()} elements; the op gives elements {given}")
    unmatched = [k for k, _ in module.named_parameters() if k not in {key for key, _ in mapping.values()}]
    if unmatched:
        raise InputCodeError(f"{cls.__name__} has parameters the op does not take: {unmatched}")
    forward = _bind(module.forward, names, {})

    def call(values):
        first = values[names[0]]
        module.to(first.device)
        state = {k: v.to(first.dtype) if v.is_floating_point() else v
                 for k, v in list(module.named_buffers())}
        elements = {}
        for n, (key, index) in mapping.items():
            if index is None:
                state[key] = values[n].reshape(tensors[key].shape)
            else:
                elements.setdefault(key, {})[index] = values[n].reshape(())
        for key, parts in elements.items():
            # stacked from the op's scalars, so the gradients reach them
            state[key] = torch.stack([parts[i] for i in range(len(parts))]).reshape(tensors[key].shape)
        return torch.func.functional_call(module, state, tuple(values[k] for k in names))

    return call


def load(torch, path, entry, names, params, module_params, cols):
    """fn(*input tensors, *parameter tensors) running the input's own code; InputCodeError if it
    cannot be called with the op's inputs."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    scope = _scope(torch)
    param_names = [n for n in params if n not in names]
    if entry == "<snippet>":
        fn = _snippet_function(source, list(names) + param_names, scope)
        bound = _bind(fn, names, param_names)
    else:
        try:
            exec(compile(source, path, "exec"), scope)  # noqa: S102 - the approved profile's own input
        except Exception as exc:  # noqa: BLE001
            raise InputCodeError(f"the input does not run as Python: {exc.__class__.__name__}: {exc}") from None
        if entry.endswith(".forward"):
            cls = scope.get(entry[: -len(".forward")])
            if not isinstance(cls, type):
                raise InputCodeError(f"class {entry[: -len('.forward')]} is not defined by the input")
            bound = _module_function(torch, cls, list(names), param_names, module_params, cols)
        else:
            fn = scope.get(entry)
            if not callable(fn):
                raise InputCodeError(f"function {entry} is not defined by the input")
            bound = _bind(fn, names, param_names)
    order = list(names) + param_names
    return lambda *values: bound(dict(zip(order, values)))
