import math
import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


def apply_bucketed_rope(x, freqs, buckets):
    """Rotation by bucketed angles; pairs (even, odd) are mixed with an einsum."""
    angles = torch.einsum("bt,d->btd", buckets.float(), freqs)
    rot = torch.stack([angles.cos(), -angles.sin(), angles.sin(), angles.cos()], dim=-1)
    rot = rot.view(*angles.shape, 2, 2)
    pairs = x.float().unflatten(-1, (-1, 2))
    return torch.einsum("bhtdij,btdj->bhtdi", pairs.unsqueeze(-2), rot).flatten(-2).type_as(x)
