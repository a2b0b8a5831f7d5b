#!/usr/bin/env python3
"""A generated op whose argument is cut (`a, b = x.chunk(2, dim=-1)`) under torch.compile, on a GPU.

    python3 scripts/gpu/split_compile_check.py --tree TREE --op OP --source FILE.py --entry NAME

TREE is a checkout where `liger-agent kernel-dev` applied OP (its package under
kernels/python, the library found through LIGER_KERNELS_LIBRARY); FILE.py holds the PyTorch
function NAME the op was generated from. For bf16 and fp32 it computes
`loss = (fn(linear(x)) ** 2).mean()` -- the op's argument a non-leaf activation, cut inside the op --
with the op in eager, the op under `torch.compile(fullgraph=True)` and the source under
torch.compile, and compares the loss and the gradients of x and of the linear layer with the
source in eager (tolerance 2e-2 bf16, 1e-4 fp32). Then `torch.library.opcheck` on the op's packed
backward and on its forward with row-strided views of one packed tensor. Exit 0 when all pass.
"""
import argparse
import importlib
import importlib.util
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", required=True)
    parser.add_argument("--op", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--entry", required=True)
    parser.add_argument("--features", type=int, default=512)
    parser.add_argument("--part", type=int, default=1024, help="columns of each part")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: this check runs the generated kernels", file=sys.stderr)
        return 1
    sys.path.insert(0, os.path.join(args.tree, "kernels/python"))
    ours = getattr(importlib.import_module(f"liger_kernels.ops.{args.op}"), args.op)
    # A registered module: dynamo imports a traced function's globals by their module's name.
    spec = importlib.util.spec_from_file_location("split_compile_source", args.source)
    source = importlib.util.module_from_spec(spec)
    sys.modules["split_compile_source"] = source
    spec.loader.exec_module(source)
    reference = getattr(source, args.entry)

    torch.manual_seed(0)
    failures = 0
    for dtype, tol in ((torch.bfloat16, 2e-2), (torch.float32, 1e-4)):
        linear = torch.nn.Linear(args.features, 2 * args.part, device="cuda", dtype=dtype)
        x = torch.randn(4, 128, args.features, device="cuda", dtype=dtype, requires_grad=True)

        def loss(fn, x):
            return (fn(linear(x)).float() ** 2).mean()

        def run(fn):
            value = fn(x)
            return value.detach(), torch.autograd.grad(value, [x, linear.weight, linear.bias])

        expected = run(lambda x: loss(reference, x))
        variants = (("ours eager", lambda: (lambda x: loss(ours, x))),
                    ("ours compiled fullgraph", lambda: torch.compile(lambda x: loss(ours, x), fullgraph=True)),
                    ("source compiled", lambda: torch.compile(lambda x: loss(reference, x), fullgraph=True)))
        for label, make in variants:
            torch._dynamo.reset()
            try:
                got = run(make())
            except Exception as error:  # report and go on: one failure should not hide the others
                failures += 1
                print(f"{dtype} {label}: FAIL {type(error).__name__}: {str(error)[:400]}", flush=True)
                continue
            errors = [((got[0] - expected[0]).abs() / expected[0].abs().clamp_min(1e-6)).item()]
            errors += [((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-12)).item()
                       for a, b in zip(got[1], expected[1])]
            ok = max(errors) <= tol
            failures += not ok
            print(f"{dtype} {label}: loss rel {errors[0]:.2e}, grads rel L2 "
                  f"{', '.join(f'{e:.2e}' for e in errors[1:])} -> {'ok' if ok else 'FAIL'}", flush=True)
        packed = linear(x).detach()
        dy = torch.randn(*packed.shape[:-1], args.part, device="cuda", dtype=dtype)
        checks = ((f"{args.op}_packed_bwd", (dy, packed)),
                  (f"{args.op}_fwd", packed.reshape(-1, packed.shape[-1]).chunk(2, -1)))
        for name, op_args in checks:
            try:
                torch.library.opcheck(getattr(torch.ops.liger, name).default, tuple(op_args))
                print(f"{dtype} opcheck liger::{name}: ok", flush=True)
            except Exception as error:
                failures += 1
                print(f"{dtype} opcheck liger::{name}: FAIL {type(error).__name__}: {str(error)[:300]}", flush=True)
    print("split compile check:", "all pass" if failures == 0 else f"{failures} failing")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
