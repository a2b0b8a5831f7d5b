"""A torch.compile backend that places the library's kernels in any model, without monkey patching.

    model = liger_kernels.optimize(model)                        # torch.compile with this backend
    model = torch.compile(model, backend=liger_kernels.compile.backend)
    model = torch.compile(model, backend=liger_kernels.compile.Backend(policy="always", goal="memory"))

Dynamo hands the backend each captured FX graph. The backend scans it with every rule in the
registry (RMSNorm with Llama or Gemma casting, LayerNorm, SwiGLU/GeGLU, rotate-half RoPE,
cross-entropy, lm_head + cross-entropy, and every op kernel-dev generated an entry for), asks the
decision table whether the library beats Inductor for that op on this GPU and shape class,
rewrites the regions where it does into calls of liger_kernels.functional, and hands the graph to
Inductor, which compiles the rest. Each decision is logged (logger "liger_kernels.compile") and kept
in Backend.report. A graph with no match is compiled by Inductor unchanged. See docs/compile.md."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Dict, List, Optional

import torch
from torch import fx

from .causal_mask import enabled_by_env as causal_mask_enabled_by_env
from .causal_mask import keep_causal_masks_implicit
from .registry import GOALS, METRICS, POLICIES, DecisionTable, library_wins, registry, shape_class

_LOG = logging.getLogger("liger_kernels.compile")


@dataclass
class Decision:
    graph: int
    op: str
    node: str
    shape_class: str
    replaced: bool
    reason: str
    detail: str = ""

    def __str__(self) -> str:
        verb = "replaced" if self.replaced else "kept"
        extra = f" [{self.detail}]" if self.detail else ""
        return f"graph {self.graph}: {self.op} at {self.node} ({self.shape_class}) {verb}: {self.reason}{extra}"


def _device_sm(example_inputs) -> Optional[int]:
    for t in example_inputs or ():
        if isinstance(t, torch.Tensor) and t.is_cuda:
            major, minor = torch.cuda.get_device_capability(t.device)
            return major * 10 + minor
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return major * 10 + minor
    return None


class Backend:
    """The backend object. policy: "table" (default: replace where decisions.json says the library
    wins), "always" (replace every match: parity tests), "never" (plain Inductor, decisions still
    logged). goal: "speed" or "memory". metric: "wall" (whole-step time, host work included: the
    default) or "device" (GPU kernel time: for large models whose host runs ahead). inner: the
    compiler the rewritten graph goes to ("inductor", or a callable backend; "eager" runs the
    rewritten graph uncompiled). causal_mask: first turn attention masks that are constant causal
    masks into SDPA's is_causal=True (compile/causal_mask.py; LIGER_KERNELS_COMPILED_CAUSAL_MASK=0
    turns it off)."""

    def __init__(self, policy: Optional[str] = None, goal: Optional[str] = None, inner="inductor",
                 table: Optional[DecisionTable] = None, ops: Optional[List[str]] = None,
                 metric: Optional[str] = None, causal_mask: Optional[bool] = None):
        policy = policy or os.environ.get("LIGER_COMPILE_POLICY", "table")
        goal = goal or os.environ.get("LIGER_COMPILE_GOAL", "speed")
        if policy not in POLICIES:
            raise ValueError(f"liger compile: policy must be one of {POLICIES}, got {policy!r}")
        if goal not in GOALS:
            raise ValueError(f"liger compile: goal must be one of {GOALS}, got {goal!r}")
        metric = metric or os.environ.get("LIGER_COMPILE_METRIC", "wall")
        if metric not in METRICS:
            raise ValueError(f"liger compile: metric must be one of {METRICS}, got {metric!r}")
        self.metric = metric
        self.policy, self.goal, self.inner = policy, goal, inner
        self.table = table if table is not None else DecisionTable()
        self.ops = set(ops) if ops is not None else None
        self.report: List[Decision] = []
        self.graphs = 0
        self.causal_mask = causal_mask_enabled_by_env() if causal_mask is None else causal_mask

    # ------------------------------------------------------------ rewriting (no compiling)
    def rewrite(self, gm: fx.GraphModule, example_inputs=None) -> List[Decision]:
        index = self.graphs
        self.graphs += 1
        sm = _device_sm(example_inputs)
        decisions: List[Decision] = []
        if self.causal_mask:
            for line in keep_causal_masks_implicit(gm, log=False):
                name, _, what = line.partition(": ")
                decisions.append(Decision(index, "causal_mask", name, "-", what.startswith("is_causal"), what))
        claimed = set()
        scans = []
        for entry in registry().entries():
            if entry.scan not in scans:
                scans.append(entry.scan)
        for scan in scans:
            # What an earlier rule replaced is dead now: drop it so no later rule matches inside it.
            if any(d.replaced for d in decisions):
                gm.graph.eliminate_dead_code()
            matches, misses = scan(gm.graph)
            for miss in misses:
                decisions.append(Decision(index, miss.op, miss.node.name, "-", False, miss.reason))
            for m in matches:
                if self.ops is not None and m.op not in self.ops:
                    continue
                cls = shape_class(m.op, m.dims)
                if any(n in claimed for n in m.region):
                    decisions.append(Decision(index, m.op, m.anchor.name, cls, False,
                                              "overlaps a region another rule replaced", m.detail))
                    continue
                replace, reason = self._decide(m.op, sm, cls)
                decisions.append(Decision(index, m.op, m.anchor.name, cls, replace, reason, m.detail))
                if replace:
                    m.apply(gm.graph)
                    claimed.update(m.region)
        if any(d.replaced for d in decisions):
            gm.graph.eliminate_dead_code()
            gm.graph.lint()
            gm.recompile()
        for d in decisions:
            _LOG.info("liger compile: %s", d)
        self.report.extend(decisions)
        return decisions

    def _decide(self, op: str, sm: Optional[int], cls: str):
        if self.policy == "always":
            return True, "policy=always"
        if self.policy == "never":
            return False, "policy=never"
        if sm is None:
            return False, "no CUDA device: nothing to measure against"
        entry = self.table.lookup(op, sm, cls)
        if entry is None:
            return False, (f"decisions.json has no measurement for sm_{sm} {cls}: Inductor keeps it "
                           "(python benchmarks/compile_registry.py measures this GPU)")
        wins, why = library_wins(entry, self.goal, self.metric)
        return wins, ("library wins: " if wins else "Inductor wins: ") + why

    # ------------------------------------------------------------ the torch.compile entry point
    def __call__(self, gm: fx.GraphModule, example_inputs):
        self.rewrite(gm, example_inputs)
        if self.inner == "eager":
            return gm.forward
        if self.inner == "inductor":
            from torch._inductor.compile_fx import compile_fx

            return compile_fx(gm, example_inputs)
        return self.inner(gm, example_inputs)

    def summary(self) -> Dict[str, int]:
        """Replacements per op over every graph compiled so far."""
        out: Dict[str, int] = {}
        for d in self.report:
            if d.replaced:
                out[d.op] = out.get(d.op, 0) + 1
        return out


def backend(gm: fx.GraphModule, example_inputs):
    """torch.compile(model, backend=liger_kernels.compile.backend): the default Backend()."""
    return Backend()(gm, example_inputs)


def optimize(model, policy: Optional[str] = None, goal: Optional[str] = None, metric: Optional[str] = None,
             **compile_kwargs):
    """torch.compile(model) with the liger backend; the Backend is at result._liger_backend."""
    b = Backend(policy=policy, goal=goal, metric=metric)
    compiled = torch.compile(model, backend=b, **compile_kwargs)
    try:
        compiled._liger_backend = b
    except AttributeError:
        pass
    return compiled


__all__ = ["Backend", "Decision", "backend", "optimize"]
