"""The registry: every op the backend can place, its rule, and the measured choice per GPU and shape class.

An op is registered with a rule (built-in, see rules.py, or a traced PyTorch pattern, see
pattern.py) and representative shapes per shape class for the benchmark that fills the decision
table (benchmarks/compile_registry.py). The table, decisions.json next to this file, records per
(op, sm, shape class) the forward+backward time and peak memory of the library op and of Inductor's
own code for the same PyTorch; the backend replaces a region only where the table says the library
wins for the goal asked ("speed": faster; "memory": less peak memory at no more than 10% more time).
A class the table has not measured stays with Inductor, and the log says which command measures it."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "decisions.json")
ROW_SPLIT = 4096
COL_BOUNDS = (1024, 4096, 16384)
VOCAB_BOUNDS = (32768, 131072)
HEAD_BOUNDS = (64, 128)
POLICIES = ("table", "always", "never")
GOALS = ("speed", "memory")
# wall: CUDA-event time of whole steps, host work included (what bounds small models);
# device: GPU kernel time only (what bounds large-model training, where the host runs ahead).
METRICS = ("wall", "device")


@dataclass
class OpEntry:
    name: str
    scan: Callable                       # graph -> (matches, misses)
    source: str = "builtin"              # builtin | kernel-dev
    # Shapes the table generator measures, one per class: {"rows": .., "cols": .., ...}.
    bench_dims: List[Dict[str, int]] = field(default_factory=list)
    bench: Optional[Callable] = None     # (dims, dtype, device) -> (library_fn, reference_fn, inputs)


def _bucket(value: int, bounds: Tuple[int, ...], unit: str) -> str:
    for b in bounds:
        if value <= b:
            return f"{unit}<={b}"
    return f"{unit}>{bounds[-1]}"


def shape_class(op: str, dims: Dict[str, int]) -> str:
    rows = "rows<%d" % ROW_SPLIT if dims.get("rows", 0) < ROW_SPLIT else "rows>=%d" % ROW_SPLIT
    if op in ("cross_entropy", "fused_linear_cross_entropy"):
        return f"{rows},{_bucket(dims.get('cols', 0), VOCAB_BOUNDS, 'vocab')}"
    if op == "rope":
        return f"{rows},{_bucket(dims.get('head_dim', 0), HEAD_BOUNDS, 'head_dim')}"
    return f"{rows},{_bucket(dims.get('cols', 0), COL_BOUNDS, 'cols')}"


class DecisionTable:
    """decisions.json: {"device", "date", "commit", "entries": [{op, sm, class, library_ms, inductor_ms,
    library_peak_mib, inductor_peak_mib}]}."""

    def __init__(self, path: str = TABLE_PATH):
        self.path = path
        self.header: Dict = {}
        self.entries: Dict[Tuple[str, int, str], Dict] = {}
        if os.path.exists(path):
            with open(path) as f:
                data = json.load(f)
            self.header = {k: v for k, v in data.items() if k != "entries"}
            for e in data.get("entries", []):
                self.entries[(e["op"], int(e["sm"]), e["class"])] = e

    def lookup(self, op: str, sm: int, cls: str) -> Optional[Dict]:
        return self.entries.get((op, sm, cls))


def library_wins(entry: Dict, goal: str, metric: str = "wall") -> Tuple[bool, str]:
    """Speed: the library's slowest repeat beats Inductor's fastest (medians where no ranges were
    recorded), so a difference inside the run-to-run spread never flips a decision. Memory: less
    peak memory at no more than 10% more time. metric "device" compares GPU kernel time instead
    (no spread: kernel time is stable); a table without it falls back to wall time, and says so."""
    if metric == "device":
        lib_d, ind_d = entry.get("library_device_ms"), entry.get("inductor_device_ms")
        if lib_d is not None and ind_d is not None:
            timing = f"GPU time: library {lib_d:.3f} ms vs Inductor {ind_d:.3f} ms"
            if goal == "memory" and entry.get("library_peak_mib") is not None:
                lm, im = entry["library_peak_mib"], entry["inductor_peak_mib"]
                return lm < im and lib_d <= 1.10 * ind_d, f"{timing}, peak {lm:.0f} vs {im:.0f} MiB"
            return lib_d < ind_d, timing
        wins, why = library_wins(entry, goal, "wall")
        return wins, why + " (no GPU time in the table: wall time decided)"
    lib, ind = entry["library_ms"], entry["inductor_ms"]
    timing = f"library {lib:.3f} ms vs Inductor {ind:.3f} ms"
    if goal == "memory":
        lm, im = entry.get("library_peak_mib"), entry.get("inductor_peak_mib")
        if lm is not None and im is not None:
            wins = lm < im and lib <= 1.10 * ind
            return wins, f"{timing}, peak {lm:.0f} vs {im:.0f} MiB"
    lib_range, ind_range = entry.get("library_ms_range"), entry.get("inductor_ms_range")
    if lib_range and ind_range:
        wins = lib_range[1] < ind_range[0]
        if not wins and lib < ind:
            return False, f"{timing}: faster only inside the spread ({lib_range[1]:.3f} vs {ind_range[0]:.3f} ms)"
        return wins, timing
    return lib < ind, timing


class Registry:
    def __init__(self):
        self.ops: Dict[str, OpEntry] = {}

    def register(self, entry: OpEntry) -> None:
        self.ops[entry.name] = entry

    def entries(self) -> List[OpEntry]:
        return list(self.ops.values())


REGISTRY = Registry()
_LOADED = False


def registry() -> Registry:
    """The registry with the built-in rules and every kernel-dev entry under compile/generated/."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from . import builtin_ops  # noqa: F401  (registers the built-in ops)
        from . import generated

        generated.load_all()
    return REGISTRY


def register_op(name: str, scan: Callable, source: str = "builtin", bench_dims=None, bench=None) -> OpEntry:
    entry = OpEntry(name, scan, source, list(bench_dims or []), bench)
    REGISTRY.register(entry)
    return entry
