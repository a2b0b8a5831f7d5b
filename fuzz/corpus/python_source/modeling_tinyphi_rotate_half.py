import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)
