"""A spelling-independent view of a Dynamo FX graph.

Dynamo records PyTorch code as the user wrote it: `x * y`, `torch.mul(x, y)` and `x.mul(y)` are
three different nodes (operator.mul, torch.mul, call_method "mul"), and a cast is `.to(dtype)`,
`.float()`, `.type(dtype)` or `.type_as(t)`. The rules match on `kind(node)`, which names the
operation the same way for every spelling, so a model written in any of them is recognised."""
from __future__ import annotations

import operator
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import torch
from torch import fx

# operator.* and torch.* spellings that differ from the method name.
_ALIASES = {
    "truediv": "div",
    "true_divide": "div",
    "floordiv": "floor_divide",
    "multiply": "mul",
    "subtract": "sub",
    "negative": "neg",
    "concat": "cat",
    "concatenate": "cat",
}
CASTS = frozenset({"to", "float", "half", "bfloat16", "type", "type_as", "double"})
# Ops that only reshape or relabel memory: a chain through them changes no value.
VIEWS = frozenset({"view", "reshape", "contiguous", "flatten"})
COMMUTATIVE = frozenset({"add", "mul"})


def kind(node: Any) -> Optional[str]:
    """The operation a node performs ("mul", "rsqrt", "to", ...), None for non-computing nodes."""
    if not isinstance(node, fx.Node):
        return None
    if node.op == "call_method":
        return _ALIASES.get(node.target, node.target)
    if node.op != "call_function":
        return None
    target = node.target
    if target is operator.getitem:
        return "getitem"
    name = getattr(target, "__name__", None)
    if name is None:
        return None
    module = getattr(target, "__module__", None) or ""
    if module == "_operator" or module == "operator":
        return _ALIASES.get(name, name)
    if module.startswith("torch") or module == "" or module.startswith("torch._C"):
        return _ALIASES.get(name, name)
    return None


def is_cast(node: Any) -> bool:
    return kind(node) in CASTS


def meta(node: Any):
    """The fake tensor (Dynamo's example_value) or the ShapeProp metadata of a node, if any."""
    if not isinstance(node, fx.Node):
        return None
    value = node.meta.get("example_value")
    if value is None:
        value = node.meta.get("val")
    if value is None:
        value = node.meta.get("tensor_meta")
    return value


def shape(node: Any) -> Optional[Sequence[int]]:
    m = meta(node)
    s = getattr(m, "shape", None)
    return tuple(s) if s is not None else None


def dtype(node: Any) -> Optional[torch.dtype]:
    return getattr(meta(node), "dtype", None)


def is_tensor(node: Any) -> bool:
    return isinstance(node, fx.Node) and shape(node) is not None


def rows_cols(node: Any) -> Optional[Tuple[int, int]]:
    """(rows, last dim) of a tensor node viewed as a [rows, cols] matrix, as the library's ops see it."""
    s = shape(node)
    if not s:
        return None
    rows = 1
    for d in s[:-1]:
        rows *= int(d)
    return rows, int(s[-1])


def arg(node: fx.Node, index: int, name: str, default: Any = None) -> Any:
    """Argument `index` (positional, self counted for methods) or keyword `name` of a call node."""
    if index < len(node.args):
        return node.args[index]
    return node.kwargs.get(name, default)


def operands(node: fx.Node) -> List[Any]:
    """The two operands of a binary op (x.mul(y), x * y, torch.mul(x, y) alike)."""
    return [arg(node, 0, "input"), arg(node, 1, "other")]


def users_within(node: fx.Node, allowed: Iterable[fx.Node]) -> bool:
    """True when every user of `node` is in `allowed`: the value does not escape a replaced region."""
    allowed = set(allowed)
    return all(u in allowed for u in node.users)


def literal(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def last_dim(node: fx.Node, dim: Any) -> bool:
    """Whether a reduction's `dim` argument names the node's last dimension."""
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            return False
        dim = dim[0]
    if not isinstance(dim, int):
        return False
    s = shape(node)
    if dim == -1:
        return True
    return s is not None and dim == len(s) - 1


def position(graph: fx.Graph) -> dict:
    return {n: i for i, n in enumerate(graph.nodes)}


def replace(graph: fx.Graph, old: fx.Node, fn, args: tuple, kwargs: Optional[dict] = None) -> fx.Node:
    """Inserts `fn(*args, **kwargs)` before `old`, takes over old's uses and metadata."""
    with graph.inserting_before(old):
        new = graph.call_function(fn, args, kwargs or {})
    new.meta.update(old.meta)
    old.replace_all_uses_with(new)
    return new
