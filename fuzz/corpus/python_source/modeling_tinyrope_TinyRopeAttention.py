import math
import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


class TinyRopeAttention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.freqs = nn.Parameter(torch.randn(config.hidden_size // config.num_attention_heads // 2))

    def forward(self, hidden_states, buckets, **kwargs):
        q, k, v = self.qkv(hidden_states).chunk(3, dim=-1)
        q = apply_bucketed_rope(q, self.freqs, buckets)
        k = apply_bucketed_rope(k, self.freqs, buckets)
        return self.out(torch.nn.functional.scaled_dot_product_attention(q, k, v)), None
