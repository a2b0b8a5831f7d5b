"""benchmarks/kernel_dev_input.py: the kernel-dev input's own PyTorch code as Verify's baseline
(functions, nn.Modules through functional_call, bare snippets), with gradients reaching the op's
leaves, and the reasons it refuses code it cannot call (the comparison then falls back to the
translation and says so)."""
import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks"))

import kernel_dev_input as K  # noqa: E402

DEV = "cuda"


def _write(tmp_path, text):
    path = tmp_path / "input_code.py"
    path.write_text(text)
    return str(path)


def test_function_with_a_weight_and_a_default(tmp_path):
    path = _write(tmp_path, "import torch\n\ndef scaled(x, weight, eps=1e-6):\n"
                            "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight\n")
    fn = K.load(torch, path, "scaled", ["x"], ["weight"], {}, 64)
    x = torch.randn(8, 64, device=DEV, dtype=torch.float64, requires_grad=True)
    w = torch.randn(64, device=DEV, dtype=torch.float64, requires_grad=True)
    y = fn(x, w)
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(y, ref)
    y.sum().backward()
    assert w.grad is not None and x.grad is not None


def test_module_parameters_are_the_ops_tensors(tmp_path):
    path = _write(tmp_path, (
        "import torch\nfrom torch import nn\n\n"
        "class Norm(nn.Module):\n"
        "    def __init__(self, hidden_size, eps=1e-6):\n"
        "        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.ones(hidden_size))\n"
        "        self.eps = eps\n\n"
        "    def forward(self, hidden_states):\n"
        "        var = hidden_states.pow(2).mean(-1, keepdim=True)\n"
        "        return self.weight * hidden_states * torch.rsqrt(var + self.eps)\n"))
    fn = K.load(torch, path, "Norm.forward", ["hidden_states"], ["weight"], {"eps": 1e-5}, 32)
    x = torch.randn(4, 32, device=DEV, dtype=torch.float64, requires_grad=True)
    w = (1 + 0.5 * torch.randn(32, device=DEV, dtype=torch.float64)).requires_grad_()
    y = fn(x, w)
    torch.testing.assert_close(y, w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))
    y.sum().backward()
    assert w.grad is not None and w.grad.abs().sum() > 0  # the gradient reaches the op's leaf


def test_indexed_parameter_elements_are_the_ops_scalars(tmp_path):
    # PolyNorm's self.weight[k] is the op's scalar weight_k: the module's weight is stacked from
    # them, so the gradients reach each one.
    path = _write(tmp_path, (
        "import torch\nfrom torch import nn\n\n"
        "class PolyNorm(nn.Module):\n"
        "    def __init__(self, eps=1e-6):\n"
        "        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.ones(3) / 3)\n"
        "        self.bias = nn.Parameter(torch.zeros(1))\n"
        "        self.eps = eps\n\n"
        "    def _norm(self, x):\n"
        "        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)\n\n"
        "    def forward(self, x):\n"
        "        return self.weight[0] * self._norm(x**3) + self.weight[1] * self._norm(x**2) + "
        "self.weight[2] * self._norm(x) + self.bias\n"))
    names = ["weight_0", "weight_1", "weight_2", "bias"]
    fn = K.load(torch, path, "PolyNorm.forward", ["x"], names, {"eps": 1e-6}, 16)
    x = torch.randn(4, 16, device=DEV, dtype=torch.float64)
    ps = [torch.tensor([v], device=DEV, dtype=torch.float64, requires_grad=True) for v in (0.2, 0.3, 0.4, 0.1)]
    y = fn(x, *ps)

    def norm(t):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(y, ps[0] * norm(x ** 3) + ps[1] * norm(x ** 2) + ps[2] * norm(x) + ps[3])
    y.sum().backward()
    assert all(p.grad is not None for p in ps)
    with pytest.raises(K.InputCodeError, match="elements"):
        K.load(torch, path, "PolyNorm.forward", ["x"], ["weight_0", "weight_2", "bias"], {}, 16)


def test_snippet_last_line_is_the_result(tmp_path):
    path = _write(tmp_path, "n = x.norm(dim=-1, keepdim=True)\nx / n\n")
    fn = K.load(torch, path, "<snippet>", ["x"], [], {}, 16)
    x = torch.randn(3, 16, device=DEV)
    torch.testing.assert_close(fn(x), x / x.norm(dim=-1, keepdim=True))


def test_compiles(tmp_path):
    path = _write(tmp_path, "def f(x):\n    return x * torch.sigmoid(1.702 * x)\n")
    fn = K.load(torch, path, "f", ["x"], [], {}, 64)
    x = torch.randn(16, 64, device=DEV)
    torch.testing.assert_close(torch.compile(fn)(x), x * torch.sigmoid(1.702 * x))


@pytest.mark.parametrize("source,entry,why", [
    ("def f(x):\n    return x\n", "g", "function g is not defined"),
    ("def f(x, y, z):\n    return x\n", "f", "cannot be called"),
    ("class M(torch.nn.Module):\n    def __init__(self, vocab):\n        super().__init__()\n"
     "    def forward(self, x):\n        return x\n", "M.forward", "needs 'vocab'"),
    ("class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "        self.scale = torch.nn.Parameter(torch.ones(1))\n    def forward(self, x):\n        return x * self.scale\n",
     "M.forward", "parameters the op does not take"),
    ("def f(x):\n    return x +\n", "f", "does not run as Python"),
])
def test_refusals_say_why(tmp_path, source, entry, why):
    path = _write(tmp_path, source)
    with pytest.raises(K.InputCodeError, match=why):
        K.load(torch, path, entry, ["x"], [], {}, 8)
