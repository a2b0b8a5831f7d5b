import torch
from torch import nn


class MyRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class ScaledBlockNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = MyRMSNorm(d)

    def forward(self, x):
        return self.norm(x) * 2
