import math
import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


# Synthetic test fixture for liger-agent's autopatch analysis (not HuggingFace source).
# A model whose parts do not match the library kernels: a rotary embedding computed with a
# bucketed einsum (not rotate-half), an ungated GELU MLP (fc1 -> act -> fc2), and an RMS norm
# that adds a bias after the weight.
class TinyRopeRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype) + self.bias
