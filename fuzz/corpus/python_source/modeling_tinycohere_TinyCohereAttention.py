import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


class TinyCohereAttention(nn.Module):
    def __init__(self, config, layer_idx=None):
        super().__init__()
        self.q_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.o_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)

    def forward(self, hidden_states, position_embeddings, **kwargs):
        q = self.q_proj(hidden_states)
        cos, sin = position_embeddings
        q, k = apply_rotary_pos_emb(q, q, cos, sin)
        return self.o_proj(q), None
