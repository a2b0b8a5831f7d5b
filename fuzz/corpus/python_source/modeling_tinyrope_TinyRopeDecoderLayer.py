import math
import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


class TinyRopeDecoderLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.ln_1 = TinyRopeRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.attn = TinyRopeAttention(config, layer_idx)
        self.ln_2 = TinyRopeRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp = TinyRopeMLP(config)

    def forward(self, hidden_states, buckets=None):
        attn_out, _ = self.attn(self.ln_1(hidden_states), buckets)
        hidden_states = hidden_states + attn_out
        hidden_states = hidden_states + self.mlp(self.ln_2(hidden_states))
        return hidden_states
