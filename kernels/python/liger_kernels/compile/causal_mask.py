"""A graph pass: an attention mask that is a constant causal mask becomes SDPA's is_causal=True.

Why: transformers decides eagerly that a padding-free causal mask need not exist and calls SDPA with
is_causal=True, which lets SDPA take its flash / cuDNN kernels without a bias. Under torch.compile it
cannot decide that (whether position_ids describe packed sequences, or a padding mask masks nothing,
is a property of the data), so the compiled graph builds a [B, 1, T, T] mask and SDPA takes its
masked kernels. On an H100, that made the compiled Llama step's attention backward about 3x slower
than the eager one (docs/benchmarks/README.md, section 2).

What the pass proves, instead of trusting names: for each scaled_dot_product_attention call whose
attn_mask is computed only from constants (aranges, comparisons, cumsums; no graph input, no
symbolic size), it evaluates that mask once, at compile time, and replaces it with is_causal=True
only if every entry equals SDPA's own causal pattern (key j visible to query i iff j <= i; a bool
mask, or 0 / -inf-like floats). A mask that depends on the input (user positions, a padding mask),
that is not square-causal (sliding windows that reach back, chunks, prefixes), or is too large to
evaluate (MAX_ELEMENTS) is left as it is. A graph with dynamic sizes has symbolic inputs in the mask,
so it is left alone too: the proof holds for the sizes it was evaluated at, and static graphs are
guarded on exactly those.

Used by liger_kernels.compile.Backend before its rewrites, and installed into Inductor's pre-grad
pass slot by every integration's apply function (liger_kernels/transformers/_causal_mask.py), so a
patched model compiled with the default backend gets it too.
"""
from __future__ import annotations

import logging
import os
from typing import Dict, List, Optional, Tuple

import torch
from torch import fx

_LOG = logging.getLogger("liger_kernels.compile")

# Keeps the pass out everywhere (the backend and Inductor's pre-grad slot) when 0 / false / no / off.
ENV = "LIGER_KERNELS_COMPILED_CAUSAL_MASK"


def enabled_by_env() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")

# A mask is evaluated at compile time on its device; beyond this many elements (1 GiB of bool) the
# pass leaves it alone rather than allocate.
MAX_ELEMENTS = 1 << 30

_SDPA_NAMES = ("scaled_dot_product_attention",)
_NONDETERMINISTIC = ("rand", "dropout", "bernoulli", "normal", "multinomial", "uniform", "exponential")


def _is_sdpa(node: fx.Node) -> bool:
    return node.op == "call_function" and any(n in getattr(node.target, "__name__", str(node.target))
                                              for n in _SDPA_NAMES)


def _arg(node: fx.Node, index: int, name: str, default=None):
    if name in node.kwargs:
        return node.kwargs[name]
    return node.args[index] if len(node.args) > index else default


def _set_arg(node: fx.Node, index: int, name: str, value) -> None:
    if len(node.args) > index:
        args = list(node.args)
        args[index] = value
        node.args = tuple(args)
    else:
        kwargs = dict(node.kwargs)
        kwargs[name] = value
        node.kwargs = kwargs


def _meta_value(node) -> Optional[torch.Tensor]:
    if not isinstance(node, fx.Node):
        return None
    v = node.meta.get("example_value", node.meta.get("val"))
    return v if isinstance(v, torch.Tensor) else None


# Ops that return a view of their first argument: an in-place op through one of them writes the
# tensor it came from.
_VIEWS = ("view", "reshape", "getitem", "expand", "unsqueeze", "squeeze", "transpose", "permute", "t",
          "slice", "select", "narrow", "as_strided", "flatten", "unflatten", "view_as", "expand_as", "detach",
          "contiguous", "__getitem__")


def _op_name(n: fx.Node) -> str:
    return n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))


def _mutates(n: fx.Node) -> bool:
    """An in-place op (`masked_fill_`, `add_`, `copy_`, aten `.._`) or an item assignment."""
    name = _op_name(n).split(".")[0]
    return name == "setitem" or (name.endswith("_") and not name.startswith("_"))


def _writes_a_constant(n: fx.Node) -> Optional[str]:
    """The module attribute an in-place op n writes, through views, or None. Evaluating the mask
    at compile time would run that write a second time on the real buffer (the compiled graph
    runs it again), so such a mask is left alone."""
    target = n.args[0] if n.args else None
    while isinstance(target, fx.Node):
        if target.op == "get_attr":
            return str(target.target)
        if target.op in ("call_function", "call_method") and _op_name(target).split(".")[0] in _VIEWS and target.args:
            target = target.args[0]
            continue
        return None
    return None


def _written_attributes(graph: fx.Graph) -> Dict[str, str]:
    """Module attributes some op of the graph writes in place -> that op's name."""
    return {w: _op_name(n) for n in graph.nodes
            if n.op in ("call_function", "call_method") and _mutates(n) and (w := _writes_a_constant(n)) is not None}


def _constant_subgraph(mask: fx.Node, written: Dict[str, str]) -> Tuple[Optional[List[fx.Node]], str]:
    """The mask's ancestors in graph order, or None with the reason when one is an input, or a
    module attribute the graph writes in place (its value at compile time is not the one the mask
    is built from at run time, and evaluating the write would repeat it on the real tensor)."""
    seen: Dict[fx.Node, None] = {}
    stack = [mask]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        if n.op == "placeholder":
            return None, f"depends on the graph input {n.name}"
        if n.op == "get_attr" and str(n.target) in written:
            return None, f"reads the module attribute {n.target}, which the graph writes in place ({written[str(n.target)]})"
        if n.op in ("call_function", "call_method"):
            name = (n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))).lower()
            if any(k in name for k in _NONDETERMINISTIC):
                return None, f"depends on the random op {name}"
        seen[n] = None
        stack.extend(n.all_input_nodes)
    order = {n: i for i, n in enumerate(mask.graph.nodes)}
    return sorted(seen, key=order.__getitem__), ""


def _evaluate(owner: fx.GraphModule, nodes: List[fx.Node], mask: fx.Node) -> torch.Tensor:
    g = fx.Graph()
    env: Dict[fx.Node, fx.Node] = {}
    for n in nodes:
        env[n] = g.node_copy(n, lambda x: env[x])
    g.output(env[mask])
    sub = fx.GraphModule(owner, g)
    try:
        from torch._subclasses.fake_tensor import unset_fake_temporarily
    except ImportError:  # older torch: no ambient fake mode to leave
        import contextlib

        unset_fake_temporarily = contextlib.nullcontext
    with unset_fake_temporarily(), torch.no_grad():
        return sub()


def _is_sdpa_causal(mask: torch.Tensor, q_len: int, kv_len: int) -> bool:
    if mask.dim() < 2 or tuple(mask.shape[-2:]) not in ((q_len, kv_len), (1, kv_len), (q_len, 1), (1, 1)):
        return False
    if mask.dtype == torch.bool:
        visible = mask
    elif mask.is_floating_point():
        finfo_min = torch.finfo(mask.dtype).min
        hidden = mask <= finfo_min / 2  # -inf, or transformers' finfo.min, within bias reach
        if not bool(((mask == 0) | hidden).all()):
            return False  # a finite bias (ALiBi, relative positions): not a pattern
        visible = ~hidden
    else:
        return False
    causal = torch.ones(q_len, kv_len, dtype=torch.bool, device=mask.device).tril()
    return bool((visible == causal).all())


def keep_causal_masks_implicit(gm: fx.GraphModule, log: bool = True) -> List[str]:
    """Rewrites gm in place; returns one line per SDPA call decided ("<node>: <decision>"), which it
    also logs unless the caller reports them itself."""
    decided: Dict[fx.Node, Tuple[bool, str]] = {}
    written = _written_attributes(gm.graph)
    lines: List[str] = []
    changed = False
    for node in list(gm.graph.nodes):
        if not _is_sdpa(node):
            continue
        mask = _arg(node, 3, "attn_mask")
        if not isinstance(mask, fx.Node) or _arg(node, 5, "is_causal", False):
            continue
        q, k = _meta_value(node.args[0]), _meta_value(node.args[1] if len(node.args) > 1 else node.kwargs.get("key"))
        if q is None or k is None:
            lines.append(f"{node.name}: kept the mask (no example shapes for q/k)")
            continue
        q_len, kv_len = q.shape[-2], k.shape[-2]
        if not (isinstance(q_len, int) and isinstance(kv_len, int)):
            lines.append(f"{node.name}: kept the mask (symbolic sequence lengths)")
            continue
        if mask not in decided:
            nodes, why = _constant_subgraph(mask, written)
            if nodes is None:
                decided[mask] = (False, why)
            else:
                meta = _meta_value(mask)
                if meta is not None and meta.numel() > MAX_ELEMENTS:
                    decided[mask] = (False, f"{meta.numel()} elements, above MAX_ELEMENTS")
                else:
                    try:
                        value = _evaluate(gm, nodes, mask)
                    except Exception as exc:  # noqa: BLE001 - an unevaluable mask stays as it is
                        decided[mask] = (False, f"could not be evaluated ({type(exc).__name__}: {exc})"[:200])
                    else:
                        ok = isinstance(value, torch.Tensor) and _is_sdpa_causal(value, q_len, kv_len)
                        decided[mask] = (ok, "a constant causal mask" if ok else "a constant mask that is not causal")
        ok, why = decided[mask]
        if ok:
            _set_arg(node, 3, "attn_mask", None)
            _set_arg(node, 5, "is_causal", True)
            changed = True
            lines.append(f"{node.name}: is_causal=True ({why} {q_len}x{kv_len})")
        else:
            lines.append(f"{node.name}: kept the mask ({why})")
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    for line in lines if log else ():
        _LOG.info("causal mask: %s", line)
    return lines


def graph_pass(graph: fx.Graph) -> None:
    """Inductor's pre-grad pass signature (a Graph, edited in place)."""
    owner = graph.owning_module
    if owner is not None:
        keep_causal_masks_implicit(owner)

