#!/usr/bin/env python3
"""A kernel-dev op against PyTorch eager, through the generated Python binding.

    python3 benchmarks/kernel_dev_compare.py --op relu_squared --eager "torch.relu(x).square()" \
        --inputs x --dtype bf16 --json out.json

`--eager` is a Python expression over the inputs (and `--params`), evaluated with `torch`, `F`
(torch.nn.functional) and kernel-dev's expression functions (relu, sigmoid, step, where, max, ...;
`^` is a power). Measures forward, backward and forward+backward ("full") times and the peak
memory of forward+backward above the inputs, eager and torch.compile of the same expression vs ours.
Agreement is not judged here but by --check-only, against the fp64 PyTorch result (bf16 eager rounds
at every op, so comparing two bf16 results says little about either). Exit 0 measured; 3 not run (the last line says why: no torch, no GPU); 1 error.

Two timings per mode: per call from Python (below; "speedup" in the JSON), and the device time
of the same call replayed from a CUDA graph ("speedup_device"): on a slow host a 0.1 ms kernel
behind a Python autograd Function can wait on the CPU, which the graph replay takes out for both
sides alike.

Timing as benchmarks/compare_torch.py's Timer (and Triton's do_bench, which Liger-Kernel's
benchmarks use): before each timed repetition an L2 flush (a 256 MiB memset) is enqueued, then a
CUDA event pair is recorded around the call; the median over the repetitions is reported. The flush
keeps inputs out of L2 and gives the host time to queue the call while the GPU is busy, so eager and
ours are measured alike (device time, host overhead hidden where the GPU is the bottleneck). The
"backward" repetitions run an untimed forward first (a fresh graph each time, no retain_graph).
"""
import argparse
import json
import math
import sys

from compare_common import flushed_median_us, import_op, import_torch, not_run, torch_dtype
import kernel_dev_input


# Library defaults when the profile gives none: one rounding of the result in the storage type, with
# room for a second (see tests/python/helpers.py).
DEFAULT_TOL = {"fp32": (1e-5, 1e-5, 1e-5), "fp16": (2e-3, 2e-3, 1e-3), "bf16": (1.6e-2, 1.6e-2, 8e-3)}


def draw_input(torch, a, name, shape, device, dtype):
    """A standard-normal draw mapped onto the input's domain (--samples), in the op's dtype."""
    z = torch.randn(shape, device=device, dtype=torch.float32)
    return kernel_dev_input.sample(torch, kernel_dev_input.parse_samples(a.samples), name, z).to(dtype)


def parse_splits(text):
    """--splits "x=a,b;...": argument -> its parts (inputs), part 0 first."""
    out = {}
    for spec in [s for s in text.split(";") if s.strip()]:
        arg, _, parts = spec.partition("=")
        out[arg.strip()] = [p.strip() for p in parts.split(",") if p.strip()]
    return out


def call_arguments(names, splits):
    """The op's arguments: each input, or in place of an argument's first part, the argument cut into parts."""
    part_of = {p: arg for arg, parts in splits.items() for p in parts}
    args = []
    for n in names:
        arg = part_of.get(n, n)
        if arg not in args:
            args.append(arg)
    return args


def draw_arguments(torch, a, args, splits, rows, cols, device, dtype):
    """Each argument drawn as its inputs are (--samples): a cut argument is its parts drawn one by one and
    laid side by side, [rows, parts * cols]."""
    return {n: torch.cat([draw_input(torch, a, p, (rows, cols), device, dtype) for p in splits[n]], dim=-1)
            if n in splits else draw_input(torch, a, n, (rows, cols), device, dtype) for n in args}


def agreement(torch, a, args, splits, params, eager, ours, cols, dtype):
    """Every output and gradient of the kernel against the PyTorch function evaluated in fp64 on the same
    (already quantised) inputs and the same upstream gradient. Returns {agree, tensors: [...], lines}.

    Per tensor: the elements outside atol + rtol*|ref|, the max abs / rel error and where, and the
    relative L2 error against max_rel_l2. Parameter gradients sum over rows, so their atol grows with
    sqrt(rows) (independent rounding errors add up like a random walk). Elements where the fp64
    reference itself is NaN/Inf and the kernel is finite are not errors of the kernel: PyTorch's
    autograd differentiates both branches of torch.where (0 * inf = nan in the unselected one); they
    are counted, excluded and reported as such."""
    table = {"outputs and input gradients": DEFAULT_TOL[a.dtype], "parameter gradients": DEFAULT_TOL[a.dtype]}
    if a.tolerances:
        for k, v in json.loads(a.tolerances).items():
            table[k] = tuple(float(x) for x in v)
    torch.manual_seed(1)
    rows = a.check_rows
    inp = draw_arguments(torch, a, args, splits, rows, cols, "cuda", dtype)
    prm = {n: v.detach().clone() for n, v in params.items()}
    # The upstream gradient has the output's shape: [rows, cols] for a row-wise op, [rows] for a
    # per-row output (logsumexp, a row loss).
    with torch.no_grad():
        out_shape = eager({n: v.double() for n, v in inp.items()}, {n: v.double() for n, v in prm.items()}).shape
    dy = torch.randn(out_shape, device="cuda", dtype=dtype)

    def run(impl, to):
        t = {n: v.detach().to(to).requires_grad_(True) for n, v in inp.items()}
        p = {n: v.detach().to(to).requires_grad_(True) for n, v in prm.items()}
        y = impl(t, p)
        leaves = list(t.values()) + list(p.values())
        g = torch.autograd.grad(y, leaves, dy.to(to), allow_unused=True)
        named = [("output y", y.detach(), "outputs and input gradients")]
        named += [(f"d{n}", gi, "outputs and input gradients") for n, gi in zip(t, g[:len(t)])]
        named += [(f"d{n} (parameter)", gi, "parameter gradients") for n, gi in zip(p, g[len(t):])]
        return named

    ours_t = run(ours, dtype)
    ref_t = run(eager, torch.float64)
    tensors, lines, agree = [], [], True
    for (name, o, kind), (_, r, _) in zip(ours_t, ref_t):
        entry = {"tensor": name, "tolerance": kind}
        if r is None:
            r = torch.zeros_like(o, dtype=torch.float64) if o is not None else None
        if o is None:
            o = torch.zeros_like(r, dtype=dtype)
        o = o.double().reshape(r.shape) if o.numel() == r.numel() else o.double()
        if o.shape != r.shape:
            entry.update(agree=False, why=f"shape {tuple(o.shape)} != reference {tuple(r.shape)}")
            tensors.append(entry)
            agree = False
            lines.append(f"DISAGREE {name}: shape {tuple(o.shape)} vs PyTorch {tuple(r.shape)}")
            continue
        atol, rtol, l2 = table.get(kind, DEFAULT_TOL[a.dtype])
        if kind == "parameter gradients":
            atol *= max(1.0, rows ** 0.5)
        ref_bad = ~torch.isfinite(r)
        ours_bad = ~torch.isfinite(o)
        ref_only = ref_bad & ~ours_bad
        if int(ref_only.sum()):
            idx = tuple(int(i) for i in torch.nonzero(ref_only)[0])
            entry["reference_nonfinite"] = int(ref_only.sum())
            lines.append(f"note {name}: PyTorch's fp64 result is NaN/Inf at {int(ref_only.sum())} element(s) (first at "
                         f"{idx}) where the kernel is finite; PyTorch differentiates both branches of where(), and "
                         "0 * inf = nan in the unselected one. Those elements are excluded from the comparison.")
        keep = ~ref_bad
        diff = (o - r).abs()
        bad = (ours_bad & ~ref_bad) | (keep & (diff > atol + rtol * r.abs()))
        dk = torch.where(keep, diff, torch.zeros_like(diff))
        worst = int(torch.argmax(torch.nan_to_num(dk, nan=float("inf"))))
        where = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), r.shape)) if r.dim() else ()
        rk = torch.where(keep, r, torch.zeros_like(r))
        ok_k = torch.where(keep, o, torch.zeros_like(o))
        denom = float(rk.norm())
        rel_l2 = float((ok_k - rk).norm()) / denom if denom > 0 else float((ok_k - rk).norm())
        max_abs = float(dk.flatten()[worst]) if dk.numel() else 0.0
        max_rel = max_abs / max(abs(float(r.flatten()[worst])), 1e-30) if dk.numel() else 0.0
        n_bad = int(bad.sum())
        # As in the C++ tests' all_close: a reference below atol (root mean square) is zero up to
        # rounding and has no relative scale, so there the L2 error is judged by atol alone; and
        # the bound grows by twice what storing the exact result in the dtype alone costs (fp16
        # gradients of a fused linear loss sit in fp16's subnormal range).
        abs_l2 = float((ok_k - rk).norm())
        atol_l2 = atol * math.sqrt(max(int(keep.sum()), 1))
        if denom > 0:
            l2 += 2.0 * float((rk.to(dtype).double() - rk).norm()) / denom
        good = n_bad == 0 and math.isfinite(rel_l2) and (rel_l2 <= l2 or (denom <= atol_l2 and abs_l2 <= atol_l2))
        entry.update(agree=good, elements_outside=n_bad, elements=int(r.numel()), max_abs_error=max_abs,
                     max_rel_error=max_rel, at=list(where), rel_l2=rel_l2, atol=atol, rtol=rtol, max_rel_l2=l2)
        tensors.append(entry)
        agree = agree and good
        lines.append(f"{'agree' if good else 'DISAGREE'} {name}: max abs error {max_abs:.3e} at {where} (rel "
                     f"{max_rel:.3e}), relative L2 {rel_l2:.3e} (bound {l2:.1e}), {n_bad}/{r.numel()} elements outside "
                     f"atol {atol:.1e} + rtol {rtol:.1e}*|ref|")
    lines.append(f"{a.op} vs the PyTorch function in fp64 ({getattr(a, 'baseline_label', a.eager)}), {a.dtype} {rows}x{cols}: "
                 f"{'all outputs and gradients agree' if agree else 'DISAGREEMENT: the kernel fails Verify'}")
    return {"op": a.op, "eager": a.eager, "dtype": a.dtype, "rows": rows, "cols": cols, "agree": agree,
            "tensors": tensors, "lines": lines}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--op", required=True)
    ap.add_argument("--eager", required=True, help="PyTorch eager forward expression")
    ap.add_argument("--inputs", default="x", help="comma-separated input names")
    ap.add_argument("--splits", default="",
                    help="arguments cut into inputs along the last dimension: ARG=PART,PART;... (the profile's "
                         "inputs[].split, part 0 first): the op's entry and the input's code take ARG, the expression "
                         "its parts")
    ap.add_argument("--params", default="", help="learnable parameters name:scalar|channel:init, comma-separated")
    ap.add_argument("--samples", default="",
                    help="where inputs are drawn from: name=EXPR;... with EXPR a PyTorch expression of a standard-normal "
                         "tensor z (the profile's inputs[].sample, e.g. x=(0.1 + z.abs()) for an op defined on x > 0); "
                         "unnamed inputs are z itself")
    ap.add_argument("--module-params", default="",
                    help="fixed module parameters name=value, comma-separated: the values the op runs with "
                         "(its defaults), bound in the expression (softplus's beta and threshold)")
    ap.add_argument("--eager-source", default="",
                    help="a file holding the input's own PyTorch code: the baseline instead of --eager, which stays "
                         "the fallback when that code cannot be called with the op's inputs")
    ap.add_argument("--eager-entry", default="",
                    help="with --eager-source: the function, Class.forward or <snippet> the op was translated from")
    ap.add_argument("--dtype", default="bf16", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=0, help="default 4096 (one input) / 14336 (gated)")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--json", default="")
    ap.add_argument("--check-only", action="store_true",
                    help="only the agreement check against the PyTorch function in fp64 (Verify's hard gate); no timing")
    ap.add_argument("--check-rows", type=int, default=2048, help="rows of the agreement check's inputs")
    ap.add_argument("--tolerances", default="",
                    help='JSON {"outputs and input gradients": [atol, rtol, max_rel_l2], "parameter gradients": [...]} '
                         "for --dtype (the profile's tolerance table); default: the library's table")
    a = ap.parse_args()

    torch = import_torch()
    try:
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001
        not_run(f"torch not importable ({e.__class__.__name__})")
    mod = import_op(a.op, a.op)
    if mod is None:
        return 1
    ours_fn = getattr(mod, a.op)
    if hasattr(mod, "FUSED_LINEAR"):  # a fused linear + loss: its own shapes, the GEMMs-alone baseline, memory
        import fused_linear_compare
        return fused_linear_compare.run(a, torch, mod)
    if hasattr(mod, "SEGMENT"):  # a segment reduction: jagged inputs and its own PyTorch versions
        import segment_compare
        return segment_compare.run(a, torch, mod)

    dtype = torch_dtype(torch, a.dtype)
    names = [n for n in a.inputs.split(",") if n]
    splits = parse_splits(a.splits)
    args = call_arguments(names, splits)  # what the op's entry and the input's code take
    cols = a.cols or (14336 if len(names) > 1 else 4096)
    dev = "cuda"
    torch.manual_seed(0)
    inputs = draw_arguments(torch, a, args, splits, a.rows, cols, dev, dtype)
    params = {}
    for spec in [p for p in a.params.split(",") if p]:
        n, shape, init = spec.split(":")
        size = (1,) if shape == "scalar" else (cols,)
        params[n] = torch.full(size, float(init), device=dev, dtype=dtype)
        if shape == "channel":
            # A per-column weight away from its init value (ones, zeros): a kernel that drops the
            # weight, or applies it to the wrong column, must disagree.
            params[n] += 0.5 * torch.randn(size, device=dev, dtype=dtype)

    def step(v):
        return (v > 0).to(v.dtype)

    env = {"torch": torch, "F": F, "math": math, "pi": math.pi, "e": math.e,
           "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "exp": torch.exp, "log": torch.log,
           "log1p": torch.log1p, "expm1": torch.expm1, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "erf": torch.erf,
           "abs": torch.abs, "sign": torch.sign, "sin": torch.sin, "cos": torch.cos, "atan": torch.atan,
           "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc,
           "detach": lambda v: v.detach(),
           "softplus": F.softplus,
           "step": step, "where": torch.where, "max": torch.maximum, "min": torch.minimum, "clamp": torch.clamp,
           "pow": torch.pow, "square": torch.square}
    for spec in [m for m in a.module_params.split(",") if m]:
        name, _, value = spec.partition("=")
        env[name.strip()] = float(value)
    for k in ("negative_slope", "alpha", "beta", "threshold", "min_val", "max_val", "lambd"):
        env.setdefault(k, None)
    expr = a.eager.replace("^", "**")
    if "=" in expr.split("(")[0] and "==" not in expr:
        expr = expr.split("=", 1)[1]

    def leaves():
        t = {n: v.detach().clone().requires_grad_(True) for n, v in inputs.items()}
        p = {n: v.detach().clone().requires_grad_(True) for n, v in params.items()}
        return t, p

    # The expression as a real Python function of its inputs and parameters (not an eval() inside
    # a function): torch.compile traces this one; an eval() would be a graph break and leave
    # "torch.compile" timing eager PyTorch.
    arg_names = names + [n for n in params if n not in names]
    source = f"def _pytorch_function({', '.join(arg_names)}):\n    return {expr}\n"
    scope = dict(env)
    try:
        exec(compile(source, "<kernel-dev expression>", "exec"), scope)  # noqa: S102 - the approved profile's expression
        function = scope["_pytorch_function"]
    except SyntaxError:
        # an input named like a Python keyword: evaluate the expression in a scope instead
        def function(*values):
            local = dict(env)
            local.update(zip(arg_names, values))
            return eval(expr, local)  # noqa: S307 - the approved profile's expression

    if splits:
        # The expression reads the parts; it is called with the arguments, cut here as the op's code cuts them.
        over_parts = function

        def function(*values):
            given = dict(zip(args, values[:len(args)]))
            for arg, parts in splits.items():
                given.update(zip(parts, given[arg].chunk(len(parts), -1)))
            return over_parts(*[given[n] for n in names], *values[len(args):])

    # The input's own code, when Verify passes it: what the user wrote, not its translation.
    baseline = "expression"
    if a.eager_source:
        module_values = {}
        for spec in [m for m in a.module_params.split(",") if m]:
            name, _, value = spec.partition("=")
            module_values[name.strip()] = float(value)
        try:
            function = kernel_dev_input.load(torch, a.eager_source, a.eager_entry or "<snippet>", args, list(params),
                                             module_values, cols)
            baseline = "input"
            a.baseline_label = f"the input's {a.eager_entry or 'code'}"
        except (kernel_dev_input.InputCodeError, SyntaxError) as exc:
            baseline = f"translation (the input's code could not be called: {exc})"
            print(f"note: compared with the {baseline}", flush=True)

    def call_with(fn):
        return lambda t, p: fn(*[t[n] for n in args], *[p[n] for n in params if n not in args])

    eager = call_with(function)

    def ours(t, p):
        return ours_fn(*[t[n] for n in args], *[p[n] for n in params])

    if a.check_only:
        report = agreement(torch, a, args, splits, params, eager, ours, cols, dtype)
        report["baseline"] = baseline
        if baseline == "input":
            report["lines"].insert(0, f"baseline: the input's own code ({a.eager_entry or '<snippet>'} in {a.eager_source})")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(report, f, indent=2)
        for line in report["lines"]:
            print(line)
        return 0 if report["agree"] else 1

    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)

    def timed(setup, fn, runs, warmup=5):
        for _ in range(warmup):
            fn(setup())
        torch.cuda.synchronize()
        return flushed_median_us(torch, flush, setup, fn, runs)

    def graph_timed(fn, runs, side):
        """Median microseconds of one replay of fn captured in a CUDA graph, with the same L2 flush
        before each replay: device time with the host's per-call work (Python, autograd engine,
        launch) taken out, for both implementations alike. (None, why) when fn cannot be captured.
        Warm-up and capture run on `side`, the stream the forward that a captured backward
        differentiates ran on: autograd launches a backward op on its forward op's stream, and a
        launch on any stream but the capturing one invalidates the capture."""
        try:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    fn()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=side):
                fn()
        except Exception as exc:  # noqa: BLE001 - reported, the per-call timings still stand
            torch.cuda.synchronize()
            return None, f"not capturable: {exc.__class__.__name__}: {exc}"
        median = flushed_median_us(torch, flush, lambda: None, lambda _: graph.replay(), runs)
        del graph
        return median, ""

    # One upstream gradient for both implementations: their gradients are compared afterwards.
    with torch.no_grad():
        out_shape = eager(inputs, params).shape  # [rows] for a per-row output
    dy = torch.randn(out_shape, device=dev, dtype=dtype)

    def measure_graphs(impl):
        t, p = leaves()
        grads = list(t.values()) + list(p.values())

        def forward():
            with torch.no_grad():
                return impl(t, p)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = impl(t, p)
        res, notes = {}, []
        for mode, fn in (("forward", forward),
                         ("backward", lambda: torch.autograd.grad(y, grads, dy, retain_graph=True)),
                         ("full", lambda: torch.autograd.grad(impl(t, p), grads, dy))):
            us, why = graph_timed(fn, a.runs, side)
            if us is not None:
                res[f"{mode}_us"] = us
            else:
                notes.append(f"{mode}: {why}")
        del y
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        return res, notes

    def measure(impl):
        t, p = leaves()
        grads = list(t.values()) + list(p.values())
        with torch.no_grad():
            fwd = timed(lambda: None, lambda _: impl(t, p), a.runs)
        bwd = timed(lambda: impl(t, p), lambda y: torch.autograd.grad(y, grads, dy), a.runs)
        full = timed(lambda: None, lambda _: torch.autograd.grad(impl(t, p), grads, dy), a.runs)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = impl(t, p)
        g = torch.autograd.grad(out, grads, dy)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        return {"forward_us": fwd, "backward_us": bwd, "full_us": full, "peak_bytes": peak}, out.detach(), [x.detach() for x in g]

    e_res, _, _ = measure(eager)
    o_res, _, _ = measure(ours)
    try:
        # the same function compiled (inductor): what a user gets without a custom kernel
        c_res, _, _ = measure(call_with(torch.compile(function)))
        c_why = ""
    except Exception as exc:  # noqa: BLE001 - a failing compile is reported, the rest stands
        c_res, c_why = {}, f"{exc.__class__.__name__}: {str(exc).splitlines()[0][:200]}"
    try:
        e_graph, e_notes = measure_graphs(eager)
        o_graph, o_notes = measure_graphs(ours)
    except Exception as exc:  # noqa: BLE001 - the per-call results above stand on their own
        e_graph, o_graph, e_notes, o_notes = {}, {}, [f"not measured: {exc.__class__.__name__}: {exc}"], []
    result = {
        "baseline": baseline,
        "op": a.op, "eager": a.eager, "dtype": a.dtype, "shape": f"{a.rows}x{cols}", "device": torch.cuda.get_device_name(),
        "timing": f"median of {a.runs} CUDA-event timings per mode, 256 MiB L2 flush enqueued before each, 5 warm-ups",
        "eager_results": e_res, "ours": o_res,
        "speedup": {m: e_res[f"{m}_us"] / o_res[f"{m}_us"] for m in ("forward", "backward", "full")},
        "memory_saving": 1.0 - o_res["peak_bytes"] / e_res["peak_bytes"] if e_res["peak_bytes"] else 0.0,
        "torch_compile": c_res, "torch_compile_error": c_why,
        "speedup_vs_compile": {m: c_res[f"{m}_us"] / o_res[f"{m}_us"] for m in ("forward", "backward", "full")
                               if f"{m}_us" in c_res},
        # The same three modes replayed from CUDA graphs: what the GPU spends, without the host.
        "device_timing": "median of CUDA-graph replays per mode, same L2 flush before each",
        "eager_graph": e_graph, "ours_graph": o_graph,
        "speedup_device": {m: e_graph[f"{m}_us"] / o_graph[f"{m}_us"] for m in ("forward", "backward", "full")
                           if f"{m}_us" in e_graph and f"{m}_us" in o_graph},
        "graph_notes": e_notes + [f"ours {n}" for n in o_notes],
    }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)
    s = result["speedup"]
    print(f"{a.op} vs eager ({a.eager}), {a.dtype} {a.rows}x{cols}: forward {s['forward']:.2f}x, backward "
          f"{s['backward']:.2f}x, full {s['full']:.2f}x, peak memory {result['memory_saving'] * 100:.1f}% less, "
          "(agreement: --check-only)")
    sc = result["speedup_vs_compile"]
    print("vs torch.compile of the same expression: " + (", ".join(f"{m} {v:.2f}x" for m, v in sc.items()) if sc
                                                          else f"not measured ({c_why})"))
    sd = result["speedup_device"]
    if sd:
        print("device time (CUDA graphs, host taken out): " + ", ".join(f"{m} {v:.2f}x" for m, v in sd.items()))
    for note in result["graph_notes"]:
        print(f"CUDA-graph timing {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
