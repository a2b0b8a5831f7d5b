"""The compile backend on unpatched HF models: what it replaces, and that loss and gradients stay the eager model's.

Each architecture is built from its own config class with small sizes (no checkpoint, no network),
in fp32, and trained for one step two ways: eager, and as `loss = model(...).loss` compiled with
the liger backend (policy "always", so every match is replaced whatever the decision table says;
the table's choices are measured by benchmarks/compile_backend.py). The replacements per op are
written to $LIGER_COMPILE_REPORT (JSON) when set, for docs/benchmarks."""
import copy
import json
import os

import pytest
import torch

from helpers import check, mini_model

from liger_kernels.compile import Backend

transformers = pytest.importorskip("transformers")

DEV = "cuda"
ARCHS = ["llama", "mistral", "qwen3", "gemma2", "phi3", "olmo2", "granite", "qwen3_moe", "gemma3_text", "smollm3"]
REPORT = {}


def _grads(model):
    return {n: p.grad.detach().float().clone() for n, p in model.named_parameters() if p.grad is not None}


def expected_ops(cfg):
    """What the rules must find in a decoder of this config: the norm, RoPE, the loss, the GLU by activation."""
    want = {"rope", "fused_linear_cross_entropy"}
    want.add("layer_norm" if "LayerNorm" in str(type(cfg)) else "rms_norm")
    act = getattr(cfg, "hidden_act", None) or getattr(cfg, "hidden_activation", None)
    if act in ("silu", "swish"):
        want.add("swiglu")
    elif act in ("gelu_pytorch_tanh", "gelu_tanh"):
        want.add("geglu")
    return want


@pytest.mark.parametrize("model_type", ARCHS)
def test_backend_replaces_and_matches_eager(model_type):
    torch._dynamo.reset()
    eager = mini_model(model_type)
    model = copy.deepcopy(eager)
    g = torch.Generator(device="cpu").manual_seed(1)
    ids = torch.randint(0, 1024, (2, 64), generator=g).to(DEV)
    labels = ids.clone()
    labels[0, -5:] = -100

    loss_e = eager(input_ids=ids, labels=labels).loss
    loss_e.backward()
    backend = Backend(policy="always")
    step = torch.compile(lambda i, l: model(input_ids=i, labels=l).loss, backend=backend)
    loss_c = step(ids, labels)
    loss_c.backward()

    found = backend.summary()
    REPORT[model_type] = {"replaced": found, "misses": sorted({f"{d.op}: {d.reason}" for d in backend.report if not d.replaced}),
                          "graphs": backend.graphs}
    check(loss_c.detach().float().reshape(1), loss_e.detach().double().reshape(1), torch.float32,
          f"{model_type} loss", atol=1e-4, rtol=1e-4)
    ge, gc = _grads(eager), _grads(model)
    assert set(gc) == set(ge), f"{model_type}: gradients differ in presence: {sorted(set(ge) ^ set(gc))[:5]}"
    for n in ge:
        check(gc[n], ge[n].double(), torch.float32, f"{model_type} grad {n}", atol=1e-4, rtol=1e-3, rel=1e-3)
    missing = expected_ops(eager.config) - set(found)
    assert not missing, f"{model_type}: no replacement for {sorted(missing)}; decisions:\n" + "\n".join(
        str(d) for d in backend.report)
    layers = eager.config.num_hidden_layers
    if backend.graphs == 1:  # with graph breaks (MoE routing) a layer can be compiled more than once
        assert found.get("rope", 0) == layers, f"{model_type}: {found.get('rope', 0)} RoPE pairs for {layers} layers"


def test_model_without_matches_compiles_as_plain_inductor():
    torch._dynamo.reset()
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(DEV)
    x = torch.randn(16, 64, device=DEV)
    backend = Backend(policy="always")
    out = torch.compile(net, backend=backend)(x)
    check(out.detach(), net(x).detach().double(), torch.float32, "plain model", atol=1e-5, rtol=1e-5)
    assert backend.summary() == {} and backend.graphs >= 1


def test_optimize_one_liner_uses_the_table_and_logs_every_decision(caplog):
    import liger_kernels

    torch._dynamo.reset()
    model = mini_model("llama")
    ids = torch.randint(0, 1024, (2, 32), device=DEV)
    compiled = liger_kernels.optimize(model)
    with caplog.at_level("INFO", logger="liger_kernels.compile"):
        loss = compiled(input_ids=ids, labels=ids).loss
    loss.backward()
    decisions = compiled._liger_backend.report
    assert decisions, "the backend saw no match in llama"
    logged = [r.getMessage() for r in caplog.records if r.name == "liger_kernels.compile"]
    assert len(logged) == len(decisions)


def teardown_module(module):
    path = os.environ.get("LIGER_COMPILE_REPORT")
    if path and REPORT:
        with open(path, "w") as f:
            json.dump(REPORT, f, indent=1, sort_keys=True)
