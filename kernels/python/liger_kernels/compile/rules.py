"""The built-in rules: where each of the library's ops appears in a Dynamo graph, however a model spells it.

A rule scans a graph and returns Matches; it changes nothing. Each rule states the math it
recognises, not a model's source: RMSNorm is "x * rsqrt(mean(x^2, last dim, keepdim) + eps) times a
weight (or 1 + weight)", with the casts deciding the casting mode, wherever the model defines it.
Every match is checked against the fake tensors Dynamo recorded (shapes, dtypes), so a replacement
never changes what the graph computes: a region whose output dtype or shape the library op would
not reproduce is reported as a miss with the reason, not replaced."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import fx

from . import graph as G
from . import replacements as R


@dataclass
class Match:
    op: str                                  # registry op name
    anchor: fx.Node                          # the node whose value the replacement takes over
    region: List[fx.Node]                    # nodes the match covers (overlap between rules is refused)
    dims: Dict[str, int]                     # sizes the registry's shape class is computed from
    apply: Callable[[fx.Graph], None]        # performs the rewrite
    detail: str = ""                         # e.g. "casting=gemma offset=1 eps=1e-06"


@dataclass
class Miss:
    op: str
    node: fx.Node
    reason: str


Scan = Tuple[List[Match], List[Miss]]


def _single_user(node: fx.Node) -> Optional[fx.Node]:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


# ---------------------------------------------------------------- RMSNorm
def _weight_expr(node, cols: int):
    """(weight, offset, nodes) for w, w.float(), 1 + w, 1.0 + w.float(), ... with w of shape [cols]."""
    offset = 0.0
    if G.kind(node) == "add":
        a, b = G.operands(node)
        if G.literal(a) and isinstance(b, fx.Node):
            offset, node = float(a), b
        elif G.literal(b) and isinstance(a, fx.Node):
            offset, node = float(b), a
        else:
            return None
    while G.is_cast(node):
        node = node.args[0]
    s = G.shape(node)
    if s is None or tuple(s) != (cols,):
        return None
    return node, offset


def _square_of(node) -> Optional[fx.Node]:
    k = G.kind(node)
    if k == "pow":
        base, exponent = G.operands(node)
        return base if exponent == 2 else None
    if k == "square":
        return node.args[0]
    if k == "mul":
        a, b = G.operands(node)
        return a if a is b else None
    return None


def rms_norm(graph: fx.Graph) -> Scan:
    matches, misses = [], []
    for r in list(graph.nodes):
        if G.kind(r) != "rsqrt":
            continue
        add = r.args[0]
        if G.kind(add) != "add":
            continue
        a, b = G.operands(add)
        mean, eps = (a, b) if G.literal(b) else (b, a)
        if not G.literal(eps) or G.kind(mean) != "mean":
            continue
        if not G.arg(mean, 2, "keepdim", False):
            continue
        h = _square_of(mean.args[0])
        if h is None or not G.last_dim(h, G.arg(mean, 1, "dim")):
            continue
        norm = _single_user(r)
        if G.kind(norm) != "mul" or h not in G.operands(norm):
            continue
        x = h.args[0] if G.is_cast(h) else h
        rc = G.rows_cols(x)
        if rc is None:
            continue
        rows, cols = rc
        region = [h, mean.args[0], mean, add, r, norm]
        # What follows the normalisation decides the casting mode:
        #   llama: w * norm.to(x.dtype)          gemma: (norm * (1 + w.float())).to(x.dtype)
        #   olmo2 and the like: (w * norm).to(x.dtype), i.e. gemma casting with offset 0.
        nxt = _single_user(norm)
        if nxt is None:
            misses.append(Miss("rms_norm", norm, "the normalised value is used more than once"))
            continue
        weighted = None
        if G.is_cast(nxt) and G.dtype(nxt) == G.dtype(x):
            mul = _single_user(nxt)
            if G.kind(mul) == "mul":
                other = [o for o in G.operands(mul) if o is not nxt]
                w = _weight_expr(other[0], cols) if other else None
                if w is not None:
                    weighted, casting, out = w, "llama", mul
                    region += [nxt, mul]
        elif G.kind(nxt) == "mul":
            other = [o for o in G.operands(nxt) if o is not norm]
            w = _weight_expr(other[0], cols) if other else None
            if w is not None:
                weighted, casting, out = w, "gemma", nxt
                region.append(nxt)
                cast = _single_user(nxt)
                if G.is_cast(cast):
                    out = cast
                    region.append(cast)
        if weighted is None:
            misses.append(Miss("rms_norm", norm, "no weight multiply of shape [hidden] after the normalisation"))
            continue
        weight, offset = weighted
        if G.dtype(out) != G.dtype(x) or G.shape(out) != G.shape(x):
            misses.append(Miss("rms_norm", out, f"output {G.dtype(out)} {G.shape(out)} differs from the input's "
                                                f"{G.dtype(x)} {G.shape(x)} (the library op keeps the input's)"))
            continue

        def apply(g, x=x, weight=weight, eps=float(eps), offset=offset, casting=casting, out=out):
            G.replace(g, out, R.rms_norm, (x, weight, eps, offset, casting))

        matches.append(Match("rms_norm", out, region, {"rows": rows, "cols": cols}, apply,
                             f"casting={casting} offset={offset:g} eps={float(eps):g}"))
    return matches, misses


# ---------------------------------------------------------------- LayerNorm
def layer_norm(graph: fx.Graph) -> Scan:
    matches, misses = [], []
    for n in list(graph.nodes):
        if G.kind(n) != "layer_norm":
            continue
        x = G.arg(n, 0, "input")
        normalized = G.arg(n, 1, "normalized_shape")
        weight = G.arg(n, 2, "weight")
        bias = G.arg(n, 3, "bias")
        eps = G.arg(n, 4, "eps", 1e-5)
        rc = G.rows_cols(x)
        if rc is None:
            continue
        rows, cols = rc
        if not isinstance(normalized, (list, tuple)) or len(normalized) != 1 or normalized[0] != cols:
            misses.append(Miss("layer_norm", n, f"normalized_shape {normalized} is not the last dimension alone"))
            continue
        if not isinstance(weight, fx.Node):
            misses.append(Miss("layer_norm", n, "no weight (elementwise_affine=False)"))
            continue
        if bias is not None and not isinstance(bias, fx.Node):
            continue
        if G.dtype(n) != G.dtype(x):
            misses.append(Miss("layer_norm", n, "output dtype differs from the input's"))
            continue

        def apply(g, n=n, x=x, weight=weight, bias=bias, eps=float(eps)):
            G.replace(g, n, R.layer_norm, (x, weight, bias, eps))

        matches.append(Match("layer_norm", n, [n], {"rows": rows, "cols": cols}, apply, f"eps={float(eps):g}"))
    return matches, misses


# ---------------------------------------------------------------- gated MLP activations
def _activation(node) -> Optional[Tuple[str, fx.Node, List[fx.Node], str]]:
    """(op, gate, nodes, why-not) for silu(g), g * sigmoid(g), gelu(g, approximate='tanh')."""
    k = G.kind(node)
    if k == "silu":
        return "swiglu", node.args[0], [node], ""
    if k == "gelu":
        approximate = G.arg(node, 1, "approximate", "none")
        if approximate == "tanh":
            return "geglu", node.args[0], [node], ""
        return None, node.args[0], [node], "exact (erf) GELU: the library's GeGLU is the tanh approximation"
    if k == "mul":
        a, b = G.operands(node)
        for g, s in ((a, b), (b, a)):
            if G.kind(s) == "sigmoid" and s.args[0] is g:
                return "swiglu", g, [node, s], ""
    return None


def glu(graph: fx.Graph) -> Scan:
    matches, misses = [], []
    for m in list(graph.nodes):
        if G.kind(m) != "mul":
            continue
        a, b = G.operands(m)
        for act, up in ((a, b), (b, a)):
            found = _activation(act)
            if found is None or not isinstance(up, fx.Node):
                continue
            op, gate, nodes, why = found
            if op is None:
                misses.append(Miss("geglu", m, why))
                break
            if _single_user(act) is not m:
                misses.append(Miss(op, m, "the activation's output is used elsewhere"))
                break
            if G.shape(gate) is None or G.shape(gate) != G.shape(up) or G.shape(m) != G.shape(gate):
                misses.append(Miss(op, m, f"gate {G.shape(gate)} and up {G.shape(up)} shapes differ (broadcast)"))
                break
            if not (G.dtype(gate) == G.dtype(up) == G.dtype(m)):
                misses.append(Miss(op, m, "gate, up and output dtypes differ"))
                break
            rows, cols = G.rows_cols(gate)
            fn = R.swiglu if op == "swiglu" else R.geglu

            def apply(g, m=m, gate=gate, up=up, fn=fn):
                G.replace(g, m, fn, (gate, up))

            matches.append(Match(op, m, nodes + [m], {"rows": rows, "cols": cols}, apply))
            break
    return matches, misses


# ---------------------------------------------------------------- rotate-half RoPE
def _half(node, source: fx.Node, upper: bool, head_dim: int) -> bool:
    """node is source[..., :D/2] (upper=False) or source[..., D/2:] (upper=True)."""
    if G.kind(node) != "getitem" or node.args[0] is not source:
        return False
    index = node.args[1]
    if not isinstance(index, tuple) or len(index) < 1 or not isinstance(index[-1], slice):
        return False
    if any(i is not Ellipsis and i != slice(None) for i in index[:-1]):
        return False
    sl = index[-1]
    half = head_dim // 2
    if sl.step not in (None, 1):
        return False
    if upper:
        return sl.start in (half, half - head_dim) and sl.stop in (None, head_dim)
    return sl.start in (None, 0) and sl.stop in (half, half - head_dim)


def _rotate_half_of(node) -> Optional[fx.Node]:
    """x for cat((-x[..., D/2:], x[..., :D/2]), dim=-1)."""
    if G.kind(node) not in ("cat",):
        return None
    parts = G.arg(node, 0, "tensors")
    dim = G.arg(node, 1, "dim", 0)
    if not isinstance(parts, (list, tuple)) or len(parts) != 2:
        return None
    neg, lower = parts
    if G.kind(neg) != "neg":
        return None
    upper = neg.args[0]
    if not isinstance(upper, fx.Node) or not isinstance(lower, fx.Node) or G.kind(upper) != "getitem":
        return None
    x = upper.args[0]
    s = G.shape(x)
    if s is None or not (dim == -1 or dim == len(s) - 1):
        return None
    d = int(s[-1])
    if _half(upper, x, True, d) and _half(lower, x, False, d):
        return x
    return None


def _unsqueezed(node) -> Optional[Tuple[fx.Node, int]]:
    if G.kind(node) != "unsqueeze":
        return None
    dim = G.arg(node, 1, "dim")
    return (node.args[0], dim) if isinstance(dim, int) and isinstance(node.args[0], fx.Node) else None


def _rotation(add: fx.Node):
    """(x, cos, sin, unsqueeze_dim, region) for x * cos.unsqueeze(d) + rotate_half(x) * sin.unsqueeze(d)."""
    if G.kind(add) != "add":
        return None
    terms = G.operands(add)
    if not all(G.kind(t) == "mul" for t in terms):
        return None
    for t_cos, t_sin in ((terms[0], terms[1]), (terms[1], terms[0])):
        for rot, s_u in (tuple(G.operands(t_sin)), tuple(reversed(G.operands(t_sin)))):
            x = _rotate_half_of(rot)
            if x is None:
                continue
            c_ops = G.operands(t_cos)
            if x not in c_ops:
                continue
            c_u = c_ops[1] if c_ops[0] is x else c_ops[0]
            cu, su = _unsqueezed(c_u), _unsqueezed(s_u)
            if cu is None or su is None or cu[1] != su[1]:
                continue
            region = [add, t_cos, t_sin, rot, rot.args[0][0], rot.args[0][1], rot.args[0][0].args[0]]
            return x, cu[0], su[0], cu[1], region
    return None


def rope(graph: fx.Graph) -> Scan:
    matches, misses = [], []
    order = G.position(graph)
    groups: Dict[tuple, list] = {}
    for n in list(graph.nodes):
        found = _rotation(n)
        if found is None:
            continue
        x, cos, sin, dim, region = found
        s = G.shape(x)
        if s is None or len(s) != 4 or dim not in (1, 2):
            misses.append(Miss("rope", n, f"q/k of shape {s} with cos.unsqueeze({dim}): the library takes "
                                          "[B, H, T, D] (unsqueeze 1) or [B, T, H, D] (unsqueeze 2)"))
            continue
        if G.shape(cos) is None or G.shape(cos)[-1] != s[-1] or G.dtype(n) != G.dtype(x):
            misses.append(Miss("rope", n, "cos/sin width or the output dtype differ from q/k's"))
            continue
        groups.setdefault((cos, sin, dim), []).append((n, x, region))
    for (cos, sin, dim), rots in groups.items():
        while len(rots) >= 2:
            (qa, q, qr), (ka, k, kr) = rots[0], rots[1]
            rots = rots[2:]
            if G.dtype(q) != G.dtype(k) or G.shape(q)[0] != G.shape(k)[0] or G.shape(q)[-1] != G.shape(k)[-1]:
                misses.append(Miss("rope", qa, "the two rotations sharing cos/sin differ in batch, width or dtype"))
                continue
            latest = max((q, k, cos, sin), key=lambda v: order[v])

            def apply(g, qa=qa, ka=ka, q=q, k=k, cos=cos, sin=sin, dim=dim, latest=latest):
                import operator

                with g.inserting_after(latest):
                    pair = g.call_function(R.rope, (q, k, cos, sin, dim))
                with g.inserting_after(pair):
                    q_out = g.call_function(operator.getitem, (pair, 0))
                with g.inserting_after(q_out):
                    k_out = g.call_function(operator.getitem, (pair, 1))
                q_out.meta.update(qa.meta)
                k_out.meta.update(ka.meta)
                qa.replace_all_uses_with(q_out)
                ka.replace_all_uses_with(k_out)

            rows, cols = G.rows_cols(q)
            matches.append(Match("rope", qa, qr + kr, {"rows": rows, "cols": cols, "head_dim": int(G.shape(q)[-1])},
                                 apply, f"unsqueeze_dim={dim}"))
        for lone, _, _ in rots:
            misses.append(Miss("rope", lone, "a rotation with no partner sharing its cos/sin (the op rotates q and k together)"))
    return matches, misses


# ---------------------------------------------------------------- cross-entropy, linear + cross-entropy
_CE_CHAIN = G.VIEWS | G.CASTS


def _softcap(node) -> Tuple[fx.Node, Optional[float], List[fx.Node]]:
    """(logits, cap, nodes) for tanh(logits / cap) * cap; (node, None, []) otherwise."""
    if G.kind(node) != "mul":
        return node, None, []
    a, b = G.operands(node)
    th, cap = (a, b) if G.literal(b) else (b, a)
    if not G.literal(cap) or G.kind(th) != "tanh":
        return node, None, []
    div = th.args[0]
    if G.kind(div) != "div":
        return node, None, []
    inner, cap2 = G.operands(div)
    if not G.literal(cap2) or float(cap2) != float(cap) or not isinstance(inner, fx.Node):
        return node, None, []
    return inner, float(cap), [node, th, div]


def cross_entropy(graph: fx.Graph) -> Scan:
    matches, misses = [], []
    for n in list(graph.nodes):
        if G.kind(n) != "cross_entropy":
            continue
        src = G.arg(n, 0, "input")
        target = G.arg(n, 1, "target")
        class_weight = G.arg(n, 2, "weight")
        ignore_index = G.arg(n, 4, "ignore_index", -100)
        reduction = G.arg(n, 6, "reduction", "mean")
        label_smoothing = G.arg(n, 7, "label_smoothing", 0.0)
        if G.arg(n, 3, "size_average") is not None or G.arg(n, 5, "reduce") is not None:
            misses.append(Miss("cross_entropy", n, "legacy size_average/reduce arguments"))
            continue
        if not isinstance(src, fx.Node) or not isinstance(target, fx.Node) or len(G.shape(src) or ()) != 2:
            misses.append(Miss("cross_entropy", n, "logits are not [tokens, vocab] class scores"))
            continue
        if not isinstance(ignore_index, int) or reduction not in ("mean", "sum", "none") or not G.literal(label_smoothing):
            misses.append(Miss("cross_entropy", n, "an ignore_index, reduction or label_smoothing the op does not take"))
            continue
        if class_weight is not None and not isinstance(class_weight, fx.Node):
            continue
        vocab = int(G.shape(src)[-1])
        # Walk up through views and casts that only this loss uses: the library reads the logits in
        # their own dtype (fp32 math inside), so the [tokens, vocab] fp32 copy is never made.
        chain, logits = [], src
        while G.kind(logits) in _CE_CHAIN and len(logits.users) == 1 and isinstance(logits.args[0], fx.Node):
            chain.append(logits)
            logits = logits.args[0]
        if G.shape(logits) is None or G.shape(logits)[-1] != vocab or G.dtype(logits) not in (
                torch.float32, torch.float16, torch.bfloat16):
            logits = src
            chain = []
        inner, cap, cap_nodes = _softcap(logits)
        if cap is not None and len(logits.users) == 1:
            pre = inner
        else:
            pre, cap, cap_nodes = logits, None, []
        out_dtype = G.dtype(n)
        rows = G.rows_cols(src)[0]
        common = dict(target=target, class_weight=class_weight, ignore_index=ignore_index,
                      label_smoothing=float(label_smoothing), reduction=reduction, softcap=cap, out_dtype=out_dtype)
        detail = f"reduction={reduction} ignore_index={ignore_index}" + (f" softcap={cap:g}" if cap else "")
        # Between lm_head and the loss a model may view, cast or scale the logits by a constant
        # (granite divides by logits_scaling). A scale folds into the hidden states,
        # linear(h, W, b) / s == linear(h / s, W, b / s), so the fused loss still applies.
        lin, scale, lin_chain = pre, 1.0, []
        while isinstance(lin, fx.Node) and len(lin.users) == 1:
            k = G.kind(lin)
            if k in _CE_CHAIN and isinstance(lin.args[0], fx.Node):
                lin_chain.append(lin)
                lin = lin.args[0]
                continue
            if k in ("div", "mul"):
                a, b = G.operands(lin)
                if k == "mul" and G.literal(a) and isinstance(b, fx.Node):
                    a, b = b, a
                if isinstance(a, fx.Node) and G.literal(b) and float(b) != 0.0:
                    scale *= 1.0 / float(b) if k == "div" else float(b)
                    lin_chain.append(lin)
                    lin = a
                    continue
            break
        if G.kind(lin) == "linear" and len(lin.users) == 1:
            hidden = G.arg(lin, 0, "input")
            weight = G.arg(lin, 1, "weight")
            bias = G.arg(lin, 2, "bias")
            if isinstance(hidden, fx.Node) and isinstance(weight, fx.Node) and (bias is None or isinstance(bias, fx.Node)):

                def apply(g, n=n, hidden=hidden, weight=weight, bias=bias, common=common, scale=scale):
                    c = common
                    G.replace(g, n, R.fused_linear_cross_entropy,
                              (hidden, weight, c["target"], bias, c["class_weight"], c["ignore_index"],
                               c["label_smoothing"], c["reduction"], c["softcap"], c["out_dtype"], scale))

                hidden_size = int(G.shape(hidden)[-1]) if G.shape(hidden) else 0
                matches.append(Match("fused_linear_cross_entropy", n, [n, lin] + chain + cap_nodes + lin_chain,
                                     {"rows": rows, "cols": vocab, "hidden": hidden_size}, apply,
                                     detail + (f" logit_scale={scale:g}" if scale != 1.0 else "")))
                continue
        elif G.kind(lin) == "linear":
            misses.append(Miss("fused_linear_cross_entropy", n,
                               "the logits are used outside the loss (returned or read again), so they must exist"))

        def apply(g, n=n, pre=pre, common=common):
            c = common
            G.replace(g, n, R.cross_entropy,
                      (pre, c["target"], c["class_weight"], c["ignore_index"], c["label_smoothing"], c["reduction"],
                       c["softcap"], c["out_dtype"]))

        matches.append(Match("cross_entropy", n, [n] + chain + cap_nodes, {"rows": rows, "cols": vocab}, apply, detail))
    return matches, misses


# Order matters only for overlap: a region claimed first wins.
BUILTIN_RULES = [
    ("cross_entropy", cross_entropy),   # also yields fused_linear_cross_entropy
    ("rope", rope),
    ("rms_norm", rms_norm),
    ("layer_norm", layer_norm),
    ("glu", glu),
]
