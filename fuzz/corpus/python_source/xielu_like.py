import torch
import torch.nn as nn


class ScaledLeaky(nn.Module):
    def __init__(self, slope=0.1):
        super().__init__()
        self.slope = slope

    def forward(self, x):
        return torch.where(x > 0, 1.5 * x, self.slope * x)
