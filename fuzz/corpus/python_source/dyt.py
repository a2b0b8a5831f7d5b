import torch
import torch.nn as nn


class DyT(nn.Module):
    """Dynamic Tanh (Zhu et al., 2025): a normalisation-free replacement for LayerNorm."""

    def __init__(self, num_features, alpha_init_value=0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1) * alpha_init_value)
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))

    def forward(self, x):
        x = torch.tanh(self.alpha * x)
        return x * self.weight + self.bias
