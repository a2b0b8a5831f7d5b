import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


def rotate_half(x):
    # pairs are adjacent elements
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    rot_x = torch.stack([-x2, x1], dim=-1).flatten(-2)
    return rot_x
