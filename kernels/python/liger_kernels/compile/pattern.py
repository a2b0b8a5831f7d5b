"""Rules from PyTorch functions: an op registered with the function it computes is found wherever a
graph computes the same thing.

The function is traced once with torch.fx.symbolic_trace; a graph region matches when it has the
same operations (by graph.kind, so `a * b`, `torch.mul(a, b)` and `a.mul(b)` are one thing, and
add/mul operands in either order) with the function's parameters bound consistently: a tensor
parameter ("input" or "param") to one graph value, a "scalar" parameter to one Python number."""
from __future__ import annotations

from typing import Any, Callable, Dict, List

from torch import fx

from . import graph as G
from .rules import Match, Miss

ROLES = ("input", "param", "scalar")


class Pattern:
    def __init__(self, op: str, fn: Callable, roles: Dict[str, str], replacement: Callable):
        bad = {k: v for k, v in roles.items() if v not in ROLES}
        if bad:
            raise ValueError(f"pattern {op}: roles must be one of {ROLES}, got {bad}")
        self.op, self.fn, self.roles, self.replacement = op, fn, dict(roles), replacement
        self.traced = fx.symbolic_trace(fn)
        self.params = [n.target for n in self.traced.graph.nodes if n.op == "placeholder"]
        missing = [p for p in self.params if p not in self.roles]
        if missing:
            raise ValueError(f"pattern {op}: no role for parameter(s) {missing}")
        outputs = [n for n in self.traced.graph.nodes if n.op == "output"]
        result = outputs[0].args[0]
        if not isinstance(result, fx.Node) or result.op == "placeholder":
            raise ValueError(f"pattern {op}: the function must compute one tensor from its parameters")
        self.result = result
        used = set()
        for n in self.traced.graph.nodes:
            used.update(a for a in n.all_input_nodes if a.op == "placeholder")
        unused = [p for p in self.params if not any(u.target == p for u in used)]
        if unused:
            raise ValueError(f"pattern {op}: parameter(s) {unused} are not used by the function, "
                             "so a match could not bind them")

    # ------------------------------------------------------------ matching
    def _bind(self, p: fx.Node, t: Any, env: Dict[Any, Any], anchor) -> bool:
        name = p.target
        if name in env:
            bound = env[name]
            return bound is t if isinstance(t, fx.Node) else (not isinstance(bound, fx.Node) and bound == t)
        role = self.roles[name]
        # Roles are checked while binding, not after: with operands of add/mul tried in both orders,
        # a shape-blind bind could take x * alpha as alpha * x and bind alpha to the activations.
        out_shape, out_dtype = anchor
        if role == "scalar":
            if not G.literal(t):
                return False
        elif not G.is_tensor(t):
            return False
        elif role == "input" and (G.shape(t) != out_shape or G.dtype(t) != out_dtype):
            return False
        elif role == "param" and G.shape(t) not in ((out_shape[-1],), (1,), ()):
            return False
        env[name] = t
        return True

    def _match(self, p: Any, t: Any, env: Dict[Any, Any], region: List[fx.Node], anchor) -> bool:
        if isinstance(p, fx.Node) and p.op == "placeholder":
            return self._bind(p, t, env, anchor)
        if not isinstance(p, fx.Node):
            if isinstance(p, (list, tuple)):
                return isinstance(t, (list, tuple)) and len(p) == len(t) and all(
                    self._match(a, b, env, region, anchor) for a, b in zip(p, t))
            return not isinstance(t, fx.Node) and p == t
        # A pattern value used twice (s * s) must be one graph value, not two equal computations.
        if p in env:
            return env[p] is t
        if not isinstance(t, fx.Node) or G.kind(p) is None or G.kind(p) != G.kind(t):
            return False
        if len(p.args) != len(t.args) or set(p.kwargs) != set(t.kwargs):
            return False
        orders = [list(t.args)]
        if G.kind(p) in G.COMMUTATIVE and len(t.args) == 2:
            orders.append([t.args[1], t.args[0]])
        for order in orders:
            saved_env, saved_region = dict(env), list(region)
            if all(self._match(a, b, env, region, anchor) for a, b in zip(p.args, order)) and all(
                    self._match(p.kwargs[k], t.kwargs[k], env, region, anchor) for k in p.kwargs):
                env[p] = t
                region.append(t)
                return True
            env.clear()
            env.update(saved_env)
            region[:] = saved_region
        return False

    def scan(self, graph: fx.Graph):
        matches: List[Match] = []
        misses: List[Miss] = []
        want = G.kind(self.result)
        for n in list(graph.nodes):
            if G.kind(n) != want:
                continue
            env: Dict[Any, Any] = {}
            region: List[fx.Node] = []
            out_shape = G.shape(n)
            if not out_shape:
                continue
            if not self._match(self.result, n, env, region, (out_shape, G.dtype(n))):
                continue
            inside = set(region)
            escaping = [r for r in region if r is not n and not G.users_within(r, inside)]
            if escaping:
                misses.append(Miss(self.op, n, f"intermediate {escaping[0].name} is used outside the pattern"))
                continue
            rows, cols = G.rows_cols(n)
            call_args = tuple(env[name] for name in self.params)

            def apply(g, n=n, call_args=call_args):
                G.replace(g, n, self.replacement, call_args)

            matches.append(Match(self.op, n, region, {"rows": rows, "cols": cols}, apply, "traced pattern"))
        return matches, misses
