import torch


def silu_tanh(x):
    return x * torch.sigmoid(x) * torch.tanh(x)
