import torch
import torch.nn.functional as F


def squared_softplus(x):
    s = F.softplus(x)
    return s * s
