import torch
from torch import nn
from ...activations import ACT2FN
from ...modeling_utils import PreTrainedModel


class TinyPhiAttention(nn.Module):
    def __init__(self, config, layer_idx=None):
        super().__init__()
        self.head_dim = config.hidden_size // config.num_attention_heads
        op_size = config.num_attention_heads * self.head_dim + 2 * (config.num_key_value_heads * self.head_dim)
        self.o_proj = nn.Linear(config.num_attention_heads * self.head_dim, config.hidden_size, bias=False)
        self.qkv_proj = nn.Linear(config.hidden_size, op_size, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask=None, **kwargs):
        qkv = self.qkv_proj(hidden_states)
        query_states, key_states, value_states = qkv.split(qkv.shape[-1] // 3, dim=-1)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        return self.o_proj(query_states), None
